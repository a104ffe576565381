package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMailSettings(t *testing.T) {
	t.Parallel()
	base := map[string]string{"DATABASE_URL": "postgres://nobody@127.0.0.1:1/none"}
	with := func(extra map[string]string) map[string]string {
		env := map[string]string{}
		for k, v := range base {
			env[k] = v
		}
		for k, v := range extra {
			env[k] = v
		}
		return env
	}

	t.Run("AcknowledgementsAreOnByDefaultThreeADay", func(t *testing.T) {
		t.Parallel()
		cfg, err := parseServeConfig(nil, envOf(base), io.Discard, io.Discard)
		if err != nil || cfg.Desk.Ack == nil || cfg.Desk.Ack.MaxPerDay != 3 || cfg.Desk.AttachmentMaxBytes != 20<<20 {
			t.Errorf("config %+v, %v", cfg.Desk.Ack, err)
		}
	})

	t.Run("HELPDESK_ACK=0TurnsThemOff", func(t *testing.T) {
		t.Parallel()
		cfg, err := parseServeConfig(nil, envOf(with(map[string]string{"HELPDESK_ACK": "0"})), io.Discard, io.Discard)
		if err != nil || cfg.Desk.Ack != nil {
			t.Errorf("ack %+v, %v", cfg.Desk.Ack, err)
		}
	})

	t.Run("ATemplateFileIsReadAndTried", func(t *testing.T) {
		t.Parallel()
		file := filepath.Join(t.TempDir(), "ack.txt")
		if err := os.WriteFile(file, []byte("Ticket {{.TicketID}} for {{.CustomerName}}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := parseServeConfig(nil, envOf(with(map[string]string{"HELPDESK_ACK_TEMPLATE": file})), io.Discard, io.Discard)
		if err != nil || cfg.Desk.Ack.Template == nil {
			t.Fatalf("ack %+v, %v", cfg.Desk.Ack, err)
		}
		var b strings.Builder
		_ = cfg.Desk.Ack.Template.Execute(&b, map[string]string{"TicketID": "T-1", "CustomerName": "Ada"})
		if b.String() != "Ticket T-1 for Ada\n" {
			t.Errorf("template wrote %q", b.String())
		}
	})

	t.Run("TheTemplateMayBeTheTextItself", func(t *testing.T) {
		t.Parallel()
		cfg, err := parseServeConfig(nil, envOf(with(map[string]string{"HELPDESK_ACK_TEMPLATE": "We got it: {{.TicketID}}."})), io.Discard, io.Discard)
		if err != nil || cfg.Desk.Ack.Template == nil {
			t.Fatalf("ack %+v, %v", cfg.Desk.Ack, err)
		}
		var b strings.Builder
		_ = cfg.Desk.Ack.Template.Execute(&b, map[string]string{"TicketID": "T-1"})
		if b.String() != "We got it: T-1." {
			t.Errorf("template wrote %q", b.String())
		}
	})

	bad := filepath.Join(t.TempDir(), "bad.txt")
	if err := os.WriteFile(bad, []byte("Ticket {{.Ticket}}"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"AckNotABoolean", map[string]string{"HELPDESK_ACK": "yes"}, "HELPDESK_ACK (-ack) = \"yes\": want 1 or 0"},
		{"AckMaxZero", map[string]string{"HELPDESK_ACK_MAX_PER_DAY": "0"}, "HELPDESK_ACK_MAX_PER_DAY"},
		{"TemplateMissing", map[string]string{"HELPDESK_ACK_TEMPLATE": "/nonexistent/ack.txt"}, "HELPDESK_ACK_TEMPLATE"},
		{"TemplateNamesAFieldThatDoesNotExist", map[string]string{"HELPDESK_ACK_TEMPLATE": bad}, "can't evaluate field Ticket"},
		{"AttachmentLimitNotANumber", map[string]string{"HELPDESK_ATTACHMENT_MAX_BYTES": "20MB"}, "HELPDESK_ATTACHMENT_MAX_BYTES"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if code, _, stderr := runCmd(t, with(tc.env), "serve"); code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit 2 naming %q", code, stderr, tc.want)
			}
		})
	}
}
