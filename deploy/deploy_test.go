package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-message/mail"
	"github.com/jackc/pgx/v5"
	"go.yaml.in/yaml/v4"

	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

// binary is $HELPDESK_BIN (make test builds it, version stamped), else one
// built here as docs/deploy.md builds it.
func binary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("HELPDESK_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "helpdesk")
	out, err := exec.Command("go", "build", "-ldflags", "-X main.version=v0.0.0-test", "-o", bin, "../cmd/helpdesk").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// newDatabase makes a database and its owner as docs/deploy.md does
// (CREATE ROLE, CREATE DATABASE) and returns its URL; both go at the end.
func newDatabase(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, storetest.URL())
	if err != nil {
		t.Fatalf("this test needs PostgreSQL, as the other tests do (DATABASE_URL, else localhost:5432): %v", err)
	}
	defer admin.Close(ctx)
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	name := "helpdesk_deploy_" + hex.EncodeToString(suffix)
	for _, sql := range []string{
		`CREATE ROLE ` + name + ` LOGIN PASSWORD 'deploy-test-password'`,
		`CREATE DATABASE ` + name + ` OWNER ` + name,
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), storetest.URL())
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`)
		_, _ = c.Exec(context.Background(), `DROP ROLE IF EXISTS `+name)
	})
	u, err := url.Parse(storetest.URL())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(name, "deploy-test-password")
	u.Path = "/" + name
	q := u.Query()
	q.Del("search_path")
	u.RawQuery = q.Encode()
	return u.String()
}

// run runs the binary with env and fails the test unless it exits 0.
func run(t *testing.T, bin string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helpdesk %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// served is a `helpdesk serve` process and what its log said.
type served struct {
	cmd        *exec.Cmd
	done       chan struct{}
	mu         sync.Mutex
	log        bytes.Buffer
	http, smtp string
}

// serve starts `helpdesk serve` and waits until it serves HTTP and mail.
func serve(t *testing.T, bin string, env []string) *served {
	t.Helper()
	s := &served{cmd: exec.Command(bin, "serve"), done: make(chan struct{})}
	s.cmd.Env = append(env, "HELPDESK_LOG_FORMAT=json")
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		signalled := false
		for sc.Scan() {
			var line struct {
				Msg  string `json:"msg"`
				HTTP string `json:"http"`
				Addr string `json:"addr"`
			}
			_ = json.Unmarshal(sc.Bytes(), &line)
			s.mu.Lock()
			s.log.Write(append(sc.Bytes(), '\n'))
			switch line.Msg {
			case "receiving mail":
				s.smtp = line.Addr
			case "helpdesk is serving":
				s.http = line.HTTP
			}
			if s.http != "" && s.smtp != "" && !signalled {
				signalled = true
				close(ready)
			}
			s.mu.Unlock()
		}
		_ = s.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		<-s.done
		if t.Failed() {
			t.Logf("serve's log:\n%s", s.logText())
		}
	})
	select {
	case <-ready:
	case <-s.done:
		t.Fatalf("serve ended before it served:\n%s", s.logText())
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not serve within 60s:\n%s", s.logText())
	}
	return s
}

func (s *served) logText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// stop is what systemd's stop does: SIGTERM, and the process exits 0.
func (s *served) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.done:
	case <-time.After(45 * time.Second): // TimeoutStopSec
		t.Fatal("serve did not stop within 45s of SIGTERM")
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("serve exited %d on SIGTERM, want 0", code)
	}
}

// await returns the first message a source has that matches, once it does.
func await(t *testing.T, what string, source func() [][]byte, match func(*mail.Header) bool) (*mail.Header, []byte) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, raw := range source() {
			r, err := mail.CreateReader(bytes.NewReader(raw))
			if err != nil {
				continue
			}
			if match(&r.Header) {
				return &r.Header, raw
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 60s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func to(address string) func(*mail.Header) bool {
	return func(h *mail.Header) bool {
		list, _ := h.AddressList("To")
		return len(list) > 0 && list[0].Address == address
	}
}

// theLoop is the support loop docs/deploy.md and the README walk through:
// a customer's mail in, the agent notified, the agent's answer by mail,
// the reply out to the customer.
func theLoop(t *testing.T, smtpAddr, support, agent string, mails func() [][]byte) {
	t.Helper()
	customer := "ada.lovelace@example.com"
	in := "From: Ada Lovelace <" + customer + ">\r\nTo: " + support + "\r\nSubject: Late parcel\r\nMessage-ID: <first.1@example.com>\r\n\r\n" +
		"Where is my parcel? Order 4711.\r\n"
	if err := smtptest.Send(smtpAddr, customer, support, []byte(in)); err != nil {
		t.Fatalf("the customer's mail: %v", err)
	}
	await(t, "acknowledgement to the customer", mails, to(customer))
	note, _ := await(t, "notification to the agent", mails, to(agent))
	replyTo, err := note.AddressList("Reply-To")
	if err != nil || len(replyTo) != 1 || !strings.Contains(replyTo[0].Address, "+T-") {
		t.Fatalf("the notification's Reply-To: %v (%v)", replyTo, err)
	}
	answer := "From: Alice <" + agent + ">\r\nTo: " + replyTo[0].Address + "\r\nSubject: Re: Late parcel\r\nMessage-ID: <answer.1@support.example.com>\r\n\r\n" +
		"We sent a new one today.\r\n"
	if err := smtptest.Send(smtpAddr, agent, replyTo[0].Address, []byte(answer)); err != nil {
		t.Fatalf("the agent's answer: %v", err)
	}
	_, raw := await(t, "reply to the customer", mails, func(h *mail.Header) bool {
		subject, _ := h.Subject()
		return to(customer)(h) && strings.HasPrefix(subject, "Re:") && !strings.Contains(h.Get("Auto-Submitted"), "auto")
	})
	if !bytes.Contains(raw, []byte("We sent a new one today.")) || bytes.Contains(raw, []byte(agent)) {
		t.Errorf("the reply to the customer:\n%s", raw)
	}
}

// TestDeployMdOnThisMachine follows docs/deploy.md as far as this machine
// can: install, database and its owner, migrate, an agent, serve with a
// relay and inbound mail, a mail in and a reply out, a stop, a backup and
// its restore.
func TestDeployMdOnThisMachine(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	if out := run(t, bin, nil, "version"); !regexp.MustCompile(`(?m)^helpdesk v\S+\nmodule \S+`).MatchString(out) {
		t.Errorf("helpdesk version says %q, want a version and the module", out)
	}
	dbURL := newDatabase(t)
	env := []string{"DATABASE_URL=" + dbURL, "HOME=" + t.TempDir()}
	run(t, bin, env, "migrate")
	run(t, bin, env, "migrate") // a second run applies nothing: safe in ExecStartPre
	run(t, bin, env, "agent", "add", "alice", "-email", "alice@support.example.com", "-team", "billing,shipping,technical,account,general", "-admin")

	relay := smtptest.Start(t)
	s := serve(t, bin, append(env,
		"HELPDESK_HTTP_ADDR=127.0.0.1:0", "HELPDESK_INBOUND_ADDR=127.0.0.1:0",
		"HELPDESK_SMTP_URL=smtp://"+relay.Addr+"?tls=none",
		"HELPDESK_MAIL_DOMAIN=support.example.com", "HELPDESK_FROM=Example Support <support@support.example.com>",
		"HELPDESK_REPLY_SECRET=a-reply-secret-of-this-test-only",
	))
	theLoop(t, s.smtp, "support@support.example.com", "alice@support.example.com", func() [][]byte {
		var out [][]byte
		for _, d := range relay.Deliveries() {
			out = append(out, d.Raw)
		}
		return out
	})
	s.stop(t)

	t.Run("ABackupRestoresWhole", func(t *testing.T) {
		dump := filepath.Join(t.TempDir(), "helpdesk.dump")
		if out, err := exec.Command("pg_dump", "--format=custom", "--no-owner", "--file="+dump, dbURL).CombinedOutput(); err != nil {
			t.Fatalf("pg_dump (docs/deploy.md, Backups): %v\n%s", err, out)
		}
		restored := newDatabase(t)
		if out, err := exec.Command("pg_restore", "--no-owner", "--exit-on-error", "--dbname="+restored, dump).CombinedOutput(); err != nil {
			t.Fatalf("pg_restore: %v\n%s", err, out)
		}
		run(t, bin, []string{"DATABASE_URL=" + restored, "HOME=" + t.TempDir()}, "migrate") // nothing to apply, and it says so
		count := func(u string) (n int) {
			c, err := pgx.Connect(context.Background(), u)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(context.Background())
			if err := c.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM messages) + (SELECT count(*) FROM river_job)`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if a, b := count(dbURL), count(restored); a != b || a == 0 {
			t.Errorf("%d messages and jobs before, %d restored", a, b)
		}
	})
}

// TestMakeRunIsTheWholeLoop runs serve with make run's settings
// (deploy/dev.env) and walks the README's loop: mail captured in the
// Maildir, the notification answered at its Reply-To.
func TestMakeRunIsTheWholeLoop(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	dbURL := newDatabase(t)
	env := []string{"DATABASE_URL=" + dbURL, "HOME=" + t.TempDir()}
	for _, kv := range envFile(t, "dev.env") {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HELPDESK_HTTP_ADDR", "HELPDESK_INBOUND_ADDR": // this test's own ports, not make run's
			continue
		case "HELPDESK_CAPTURE_DIR":
			kv = k + "=" + filepath.Join(t.TempDir(), "captured-mail")
		}
		env = append(env, kv)
	}
	capture := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "HELPDESK_CAPTURE_DIR="); ok {
			capture = v
		}
	}
	run(t, bin, env, "migrate")
	run(t, bin, env, "load") // the demo's customers and agents, as make run loads them
	s := serve(t, bin, append(env, "HELPDESK_HTTP_ADDR=127.0.0.1:0", "HELPDESK_INBOUND_ADDR=127.0.0.1:0"))
	maildir := func() [][]byte {
		files, _ := filepath.Glob(filepath.Join(capture, "new", "*"))
		var out [][]byte
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil {
				out = append(out, b)
			}
		}
		return out
	}
	// Triage picks the team; the notification goes to its agent: find it.
	agent := ""
	customer := "ada.lovelace@example.com"
	if err := smtptest.Send(s.smtp, customer, "support@helpdesk.localhost", []byte("From: Ada <"+customer+">\r\nTo: support@helpdesk.localhost\r\n"+
		"Subject: Charged twice\r\nMessage-ID: <probe.1@example.com>\r\n\r\nMy card was charged twice for invoice 1042.\r\n")); err != nil {
		t.Fatal(err)
	}
	note, _ := await(t, "notification", maildir, func(h *mail.Header) bool { return h.Get("Auto-Submitted") == "auto-generated" })
	if list, _ := note.AddressList("To"); len(list) == 1 {
		agent = list[0].Address
	}
	replyTo, _ := note.AddressList("Reply-To")
	if agent == "" || len(replyTo) != 1 {
		t.Fatalf("the notification: To %q, Reply-To %v", agent, replyTo)
	}
	answer := "From: " + agent + "\r\nTo: " + replyTo[0].Address + "\r\nSubject: Re: Charged twice\r\nMessage-ID: <answer.2@support.example.com>\r\n\r\n" +
		"We refunded the second charge.\r\n"
	if err := smtptest.Send(s.smtp, agent, replyTo[0].Address, []byte(answer)); err != nil {
		t.Fatal(err)
	}
	_, raw := await(t, "reply in the Maildir", maildir, func(h *mail.Header) bool {
		subject, _ := h.Subject()
		return to(customer)(h) && strings.HasPrefix(subject, "Re:") && !strings.Contains(h.Get("Auto-Submitted"), "auto")
	})
	if !bytes.Contains(raw, []byte("We refunded the second charge.")) {
		t.Errorf("the reply:\n%s", raw)
	}
}

// envFile reads KEY=VALUE lines, comments and blank lines left out, a
// value's quotes taken off as sh and systemd take them off.
func envFile(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			k, v, _ := strings.Cut(line, "=")
			if len(v) >= 2 && (v[0] == '\'' || v[0] == '"') && v[len(v)-1] == v[0] {
				v = v[1 : len(v)-1]
			}
			out = append(out, k+"="+v)
		}
	}
	return out
}

// TestEveryVariableTheFilesSetIsASetting keeps the example files true to
// the configuration reference.
func TestEveryVariableTheFilesSetIsASetting(t *testing.T) {
	t.Parallel()
	reference, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"dev.env", "helpdesk.env.example"} {
		for _, kv := range envFile(t, file) {
			k, _, _ := strings.Cut(strings.TrimPrefix(kv, "#"), "=")
			if !bytes.Contains(reference, []byte("`"+k+"`")) {
				t.Errorf("%s sets %s, which docs/configuration.md does not know", file, k)
			}
		}
	}
}

// TestTheSystemdUnitVerifies runs systemd-analyze verify on the unit,
// with its ExecStart pointed at a built binary, where the machine has it.
func TestTheSystemdUnitVerifies(t *testing.T) {
	t.Parallel()
	unit, err := os.ReadFile("helpdesk.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"DynamicUser=yes", "ProtectSystem=strict", "NoNewPrivileges=yes", "EnvironmentFile=/etc/helpdesk/helpdesk.env"} {
		if !bytes.Contains(unit, []byte("\n"+want+"\n")) {
			t.Errorf("the unit has no %s", want)
		}
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze is not on this machine: the unit is checked by its settings only")
		return
	}
	dir := t.TempDir()
	local := bytes.ReplaceAll(unit, []byte("/usr/local/bin/helpdesk"), []byte(binary(t)))
	path := filepath.Join(dir, "helpdesk.service")
	if err := os.WriteFile(path, local, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
	// verify also reports the host's own broken units; only this unit's
	// lines count.
	var ours []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "helpdesk.service") {
			ours = append(ours, line)
		}
	}
	if len(ours) > 0 || (err != nil && len(bytes.TrimSpace(out)) == 0) {
		t.Errorf("systemd-analyze verify: %v\n%s", err, strings.Join(ours, "\n"))
	}
}

// TestTheContainerFilesParse checks the Containerfile's instructions and
// the compose file's YAML and references (no container engine is needed).
func TestTheContainerFilesParse(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	known := []string{"FROM", "RUN", "COPY", "ADD", "ENV", "ARG", "WORKDIR", "USER", "EXPOSE", "ENTRYPOINT", "CMD", "LABEL", "HEALTHCHECK", "VOLUME"}
	var stages []string
	var user string
	lines := strings.Split(strings.ReplaceAll(string(b), "\\\n", " "), "\n")
	for i, line := range lines {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, args, _ := strings.Cut(line, " ")
		switch {
		case !slices.Contains(known, instr):
			t.Errorf("Containerfile line %d: unknown instruction %q", i+1, instr)
		case instr == "FROM":
			if f := strings.Fields(args); len(f) == 3 && strings.EqualFold(f[1], "AS") {
				stages = append(stages, f[2])
			} else {
				stages = append(stages, "")
			}
		case len(stages) == 0:
			t.Errorf("Containerfile line %d: %s before FROM", i+1, instr)
		case instr == "COPY" && strings.HasPrefix(args, "--from="):
			from, _, _ := strings.Cut(strings.TrimPrefix(args, "--from="), " ")
			if !slices.Contains(stages, from) {
				t.Errorf("Containerfile line %d: COPY --from=%s names no stage", i+1, from)
			}
		case instr == "USER":
			user = args
		case instr == "ENTRYPOINT" || instr == "CMD":
			var exec []string
			if err := json.Unmarshal([]byte(args), &exec); err != nil {
				t.Errorf("Containerfile line %d: %s is not the exec form: %v", i+1, instr, err)
			}
		}
	}
	if user == "" || strings.HasPrefix(user, "root") || strings.HasPrefix(user, "0") {
		t.Errorf("the image runs as %q, want a user that is not root", user)
	}

	c, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Image     string         `yaml:"image"`
			Build     map[string]any `yaml:"build"`
			DependsOn map[string]struct {
				Condition string `yaml:"condition"`
			} `yaml:"depends_on"`
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
		Volumes map[string]any `yaml:"volumes"`
	}
	if err := yaml.Unmarshal(c, &compose); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	for name, svc := range compose.Services {
		if svc.Image == "" && svc.Build == nil {
			t.Errorf("compose.yaml: service %s has neither image nor build", name)
		}
		for dep := range svc.DependsOn {
			if _, ok := compose.Services[dep]; !ok {
				t.Errorf("compose.yaml: %s depends on %s, which is no service", name, dep)
			}
		}
		if df, ok := svc.Build["dockerfile"].(string); ok {
			if _, err := os.Stat(filepath.Join("..", df)); err != nil {
				t.Errorf("compose.yaml: %s builds %s: %v", name, df, err)
			}
		}
	}
	if _, ok := compose.Services["helpdesk"]; !ok || compose.Services["helpdesk"].Environment["DATABASE_URL"] == "" {
		t.Error("compose.yaml: no helpdesk service with a DATABASE_URL")
	}
}
