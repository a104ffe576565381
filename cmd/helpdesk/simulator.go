package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/helpdesk-dev/helpdesk/provider/simulator"
	"github.com/helpdesk-dev/helpdesk/settings"
)

func cmdSimulator(ctx context.Context, args []string, getenv func(string) string, logger *slog.Logger, stdout, stderr io.Writer) error {
	fs := newFlagSet("simulator", "simulator [flags]",
		"Serves the AI provider's OpenAI-compatible API (POST /v1/chat/completions, POST /v1/embeddings)\n"+
			"with deterministic answers. GET and PUT /admin/mode read and switch the fault mode at run time,\n"+
			"e.g. curl -X PUT localhost:8090/admin/mode -d '{\"mode\":\"outage\"}'; GET /admin/calls?ticket=T-500001\n"+
			"counts the calls per ticket and task.", getenv, stdout, stderr)
	var listenAddr string
	fs.declare(simulatorSettings(&listenAddr)...)
	mode := fs.setting("mode", "", "normal", "normal, outage (503), quota (429 past -quota-calls per -quota-window), slow (answers after -slow-delay) or invalid")
	quotaCalls := fs.setting("quota-calls", "", "50", "quota mode: calls allowed per window")
	quotaWindow := fs.setting("quota-window", "", "1m", "quota mode: the window")
	slowDelay := fs.setting("slow-delay", "", "30s", "slow mode: how long each answer takes")
	if err := fs.parse(args); err != nil {
		return err
	}
	var e errs
	settings := simulator.Settings{
		Mode:        simulator.Mode(mode.val),
		QuotaCalls:  positiveInt(&e, quotaCalls),
		QuotaWindow: simulator.Duration(duration(&e, quotaWindow)),
		SlowDelay:   simulator.Duration(duration(&e, slowDelay)),
	}
	if e.err != nil {
		return e.err
	}
	sim, err := simulator.Listen(listenAddr, settings)
	if err != nil {
		return usageErrorf("%v", err)
	}
	logger.Info("simulated provider is serving", slog.String("url", sim.URL), slog.String("mode", mode.val))
	<-ctx.Done()
	return sim.Close()
}

// simulatorSettings are `helpdesk simulator`'s settings: where it listens.
func simulatorSettings(addr *string) []settings.Setting {
	s := settings.LoopbackHostPort(addr, "HELPDESK_SIMULATOR_ADDR", "addr", "`helpdesk simulator`'s address: loopback only, it has no authentication")
	s.Default = "127.0.0.1:8090"
	return []settings.Setting{s}
}
