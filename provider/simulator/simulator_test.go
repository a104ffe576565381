package simulator_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/provider"
	"github.com/helpdesk-dev/helpdesk/provider/simulator"
)

func start(t *testing.T, settings simulator.Settings) (*simulator.Running, *provider.Client) {
	t.Helper()
	sim, err := simulator.Listen("127.0.0.1:0", settings)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	c, err := provider.New(provider.Config{BaseURL: sim.URL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return sim, c
}

var ticket = provider.Ticket{ID: "T-500001", Subject: "Charged twice", Messages: []string{"My card was charged twice, please refund."}}

func TestSimulator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("AnswersAreDeterministic", func(t *testing.T) {
		t.Parallel()
		_, c := start(t, simulator.DefaultSettings())
		c1, _, err := c.Classify(ctx, ticket)
		if err != nil {
			t.Fatal(err)
		}
		if c1.Team != "billing" || c1.Priority != 3 {
			t.Errorf("classified %+v, want billing/3", c1)
		}
		v1, _, err := c.Embed(ctx, ticket)
		if err != nil {
			t.Fatal(err)
		}
		v2, _, _ := c.Embed(ctx, ticket)
		if len(v1) != simulator.EmbeddingDims || !slices.Equal(v1, v2) {
			t.Errorf("embeddings differ or have %d dimensions", len(v1))
		}
		d1, _, _ := c.DraftReply(ctx, ticket)
		d2, _, _ := c.DraftReply(ctx, ticket)
		if d1 != d2 || !strings.Contains(d1, "My card was charged twice") {
			t.Errorf("drafts %q and %q", d1, d2)
		}
	})

	t.Run("QuotaRefusesPastNCallsPerWindowWithRetryAfter", func(t *testing.T) {
		t.Parallel()
		settings := simulator.DefaultSettings()
		settings.Mode, settings.QuotaCalls, settings.QuotaWindow = simulator.ModeQuota, 2, simulator.Duration(30*time.Second)
		sim, c := start(t, settings)
		for i := range 2 {
			if _, _, err := c.Classify(ctx, ticket); err != nil {
				t.Fatalf("call %d: %v", i+1, err)
			}
		}
		_, _, err := c.Classify(ctx, ticket)
		var perr *provider.Error
		if !errors.As(err, &perr) || perr.Kind != provider.KindRateLimited || perr.RetryAfter < 29*time.Second || perr.RetryAfter > 30*time.Second {
			t.Errorf("third call: %v (retry after %v), want 429 with Retry-After about 30s", err, perr)
		}
		if got := sim.Calls(ticket.ID)["classify"]; got != 3 {
			t.Errorf("counted %d calls, want 3: refused calls count too", got)
		}
	})

	t.Run("ModesSwitchOverTheAdminEndpoint", func(t *testing.T) {
		t.Parallel()
		sim, c := start(t, simulator.DefaultSettings())
		put := func(body string) int {
			req, _ := http.NewRequest(http.MethodPut, sim.URL+"/admin/mode", strings.NewReader(body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		if code := put(`{"mode":"outage"}`); code != 200 {
			t.Fatalf("PUT outage: %d", code)
		}
		_, _, err := c.Classify(ctx, ticket)
		var perr *provider.Error
		if !errors.As(err, &perr) || perr.Kind != provider.KindUnavailable {
			t.Errorf("in outage: %v, want 503", err)
		}
		if code := put(`{"mode":"sleepy"}`); code != 422 {
			t.Errorf("PUT an unknown mode: %d, want 422", code)
		}
		if code := put(`{"mode":"normal","extra":1}`); code != 400 {
			t.Errorf("PUT an unknown field: %d, want 400", code)
		}
		if sim.Settings().Mode != simulator.ModeOutage {
			t.Errorf("a refused change changed the mode to %s", sim.Settings().Mode)
		}
	})

	t.Run("SlowAnswersAfterTheClientsTimeout", func(t *testing.T) {
		t.Parallel()
		settings := simulator.DefaultSettings()
		settings.Mode, settings.SlowDelay = simulator.ModeSlow, simulator.Duration(time.Hour)
		sim, _ := start(t, settings)
		c, err := provider.New(provider.Config{BaseURL: sim.URL, Timeout: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = c.Classify(ctx, ticket)
		var perr *provider.Error
		if !errors.As(err, &perr) || perr.Kind != provider.KindTimeout {
			t.Errorf("slow: %v, want ProviderTimeout", err)
		}
	})

	t.Run("ACallHeldSlowAnswersOnceTheModeChanges", func(t *testing.T) {
		t.Parallel()
		settings := simulator.DefaultSettings()
		settings.Mode, settings.SlowDelay = simulator.ModeSlow, simulator.Duration(time.Hour)
		sim, c := start(t, settings)
		answered := make(chan error, 1)
		go func() {
			_, _, err := c.Classify(ctx, ticket)
			answered <- err
		}()
		for sim.Calls(ticket.ID)["classify"] == 0 { // held from here on
			time.Sleep(5 * time.Millisecond)
		}
		if err := sim.SetMode(simulator.ModeNormal); err != nil {
			t.Fatal(err)
		}
		if err := <-answered; err != nil {
			t.Errorf("the held call: %v, want its answer once the mode is normal again (not the client's timeout)", err)
		}
	})

	t.Run("InvalidGivesUnusableAnswersToEveryStep", func(t *testing.T) {
		t.Parallel()
		settings := simulator.DefaultSettings()
		settings.Mode = simulator.ModeInvalid
		_, c := start(t, settings)
		_, _, e1 := c.Classify(ctx, ticket)
		_, _, e2 := c.DraftReply(ctx, ticket)
		_, _, e3 := c.Embed(ctx, ticket)
		for i, err := range []error{e1, e2, e3} {
			var perr *provider.Error
			if !errors.As(err, &perr) || perr.Kind != provider.KindInvalidAnswer {
				t.Errorf("step %d: %v, want ProviderInvalidAnswer", i+1, err)
			}
		}
	})
}
