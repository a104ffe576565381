//go:build demo

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/helpdesk-dev/helpdesk/backoff"
	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/provider"
	"github.com/helpdesk-dev/helpdesk/provider/simulator"
	"github.com/helpdesk-dev/helpdesk/store"
)

// burstOptions is the burst: Tickets arriving at Rate a second
// against a provider that allows QuotaCalls per QuotaWindow, all of it
// Speed times faster than life. Times in the result are life's times.
type burstOptions struct {
	Tickets     int
	Rate        float64 // tickets a second
	QuotaCalls  int
	QuotaWindow time.Duration
	Speed       float64
	Sample      time.Duration // one sample of the queue this often
}

func defaultBurst() burstOptions {
	return burstOptions{Tickets: 180, Rate: 6, QuotaCalls: 50, QuotaWindow: time.Minute, Speed: 10, Sample: 2 * time.Second}
}

// burstSample is the queue at one moment.
type burstSample struct {
	At                                        time.Duration // since the first ticket
	Queued, Waiting, Running, Succeeded, Dead int
	Refused                                   int // calls answered 429 since the previous sample
}

type burstResult struct {
	Options     burstOptions
	DeadLetters int
	Calls       int
	Refused     int
	Drain       time.Duration // from the first ticket to the last one triaged
	Floor       time.Duration // the quota's floor: 3 calls a ticket at QuotaCalls per QuotaWindow
	Samples     []burstSample
}

func (r *burstResult) refusedShare() float64 {
	return float64(r.Refused) / math.Max(float64(r.Calls), 1)
}
func (r *burstResult) drainRatio() float64 { return r.Drain.Seconds() / r.Floor.Seconds() }

func init() { demoCommands["burst"] = cmdBurst }

func cmdBurst(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("burst", "burst [-speed 10] [-chart docs/burst.png]",
		"Replays the burst: 180 tickets at 6 a second against a provider quota of 50 calls a\n"+
			"minute, on a scratch database, with the simulated provider and the real queue, -speed times\n"+
			"faster than life. Prints the dead letters, the share of calls answered 429 and the drain time\n"+
			"against the quota's floor, and charts the queue over time.", getenv, stdout, stderr)
	db := databaseSetting(fs)
	speed := fs.setting("speed", "", "10", "how many times faster than life")
	chart := fs.String("chart", "", "write a PNG chart of the queue over time to this file")
	if err := fs.parseNoArgs(args); err != nil {
		return err
	}
	opts := defaultBurst()
	s, err := strconv.ParseFloat(speed.val, 64)
	if err != nil || s < 1 || s > 100 {
		return speed.fail("a factor from 1 to 100")
	}
	opts.Speed = s
	if db.URL == "" {
		return usageErrorf("DATABASE_URL (-database-url) is not set")
	}
	dbURL := db.URL
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	res, err := runBurst(ctx, dbURL, opts, logger)
	if err != nil {
		return err
	}
	printBurst(stdout, res)
	if *chart != "" {
		if err := chartBurst(res, *chart); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "  chart:               %s\n", *chart)
	}
	if res.DeadLetters > 0 {
		return errors.New("the burst left dead letters")
	}
	return nil
}

// scaled turns a time of life into the run's time.
func (o burstOptions) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) / o.Speed)
}

func runBurst(ctx context.Context, serverURL string, opts burstOptions, logger *slog.Logger) (*burstResult, error) {
	pool, drop, err := scratchPool(ctx, serverURL, logger)
	if err != nil {
		return nil, err
	}
	defer drop()
	settings := simulator.DefaultSettings()
	settings.Mode, settings.QuotaCalls, settings.QuotaWindow = simulator.ModeQuota, opts.QuotaCalls, simulator.Duration(opts.scaled(opts.QuotaWindow))
	sim, err := simulator.Listen("127.0.0.1:0", settings)
	if err != nil {
		return nil, err
	}
	defer sim.Close()
	client, err := provider.New(provider.Config{BaseURL: sim.URL, Timeout: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	// serve's defaults, scaled: the backoff and the breaker's probes.
	// Ten workers, as a small first service would: before the first answers
	// tell the quota, every worker may call at once, and that first wave
	// is what a time-scaled window feels most.
	queue, err := jobs.NewQueue(pool, jobs.Config{Logger: logger, Provider: client, TriageWorkers: 10, FetchPollInterval: opts.scaled(time.Second),
		TriageBackoff: backoff.Backoff{Base: opts.scaled(2 * time.Second), Cap: opts.scaled(time.Minute)},
		Breaker:       jobs.BreakerConfig{ProbeMin: opts.scaled(5 * time.Second), ProbeMax: opts.scaled(2 * time.Minute)},
	})
	if err != nil {
		return nil, err
	}
	cases := desk.New(pool, queue, desk.Config{Logger: logger})
	workers, err := jobs.NewWorkers(pool, queue, cases)
	if err != nil {
		return nil, err
	}
	if _, err := store.New(pool).InsertCustomer(ctx, &store.InsertCustomerParams{ID: "C-0001", Email: "burst@example.com", Name: "Burst"}); err != nil {
		return nil, err
	}
	if err := workers.Start(ctx); err != nil {
		return nil, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = workers.Stop(stopCtx)
	}()

	res := &burstResult{Options: opts,
		Floor: time.Duration(float64(3*opts.Tickets) / float64(opts.QuotaCalls) * float64(opts.QuotaWindow))}
	start := time.Now()
	arrivals := make(chan error, 1)
	go func() {
		every := opts.scaled(time.Duration(float64(time.Second) / opts.Rate))
		for i := range opts.Tickets {
			if _, _, err := cases.OpenTicket(ctx, &desk.OpenTicketParams{CustomerID: "C-0001",
				Subject: fmt.Sprintf("Order %d", i+1), Body: "Where is my parcel? Order " + strconv.Itoa(i+1)}); err != nil {
				arrivals <- err
				return
			}
			time.Sleep(time.Until(start.Add(time.Duration(i+1) * every)))
		}
		arrivals <- nil
	}()

	sampleEvery := opts.scaled(opts.Sample)
	refusedBefore := 0
	arrived := false
	for {
		select {
		case err := <-arrivals:
			if err != nil {
				return nil, fmt.Errorf("open a ticket: %w", err)
			}
			arrived = true
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(sampleEvery):
		}
		s, err := sampleQueue(ctx, pool)
		if err != nil {
			return nil, err
		}
		refused := sim.Refused()
		s.At, s.Refused, refusedBefore = time.Duration(float64(time.Since(start))*opts.Speed), refused-refusedBefore, refused
		res.Samples = append(res.Samples, s)
		if arrived && s.Succeeded+s.Dead == opts.Tickets {
			res.Drain = s.At
			break
		}
		if time.Since(start) > opts.scaled(10*res.Floor) {
			return nil, fmt.Errorf("the burst did not drain within ten times the quota's floor (%s)", 10*res.Floor)
		}
	}
	last := res.Samples[len(res.Samples)-1]
	res.DeadLetters, res.Calls, res.Refused = last.Dead, sim.TotalCalls(), sim.Refused()
	return res, nil
}

// sampleQueue counts the triage jobs by what a person would call them:
// queued (not yet tried), waiting (told to wait by the quota or the
// breaker, no attempt spent), running, succeeded, dead (given up).
func sampleQueue(ctx context.Context, pool *pgxpool.Pool) (burstSample, error) {
	var s burstSample
	err := pool.QueryRow(ctx, `SELECT
		count(*) FILTER (WHERE state IN ('available', 'pending', 'scheduled', 'retryable') AND NOT metadata ? 'snoozes'),
		count(*) FILTER (WHERE state IN ('available', 'pending', 'scheduled', 'retryable') AND metadata ? 'snoozes'),
		count(*) FILTER (WHERE state = 'running'),
		count(*) FILTER (WHERE state = 'completed'),
		count(*) FILTER (WHERE state IN ('discarded', 'cancelled'))
		FROM river_job WHERE kind = 'triage'`).Scan(&s.Queued, &s.Waiting, &s.Running, &s.Succeeded, &s.Dead)
	return s, err
}

func printBurst(w io.Writer, r *burstResult) {
	o := r.Options
	fmt.Fprintf(w, "burst: %d tickets at %g a second against a quota of %d calls a %s, %g× faster than life\n",
		o.Tickets, o.Rate, o.QuotaCalls, o.QuotaWindow, o.Speed)
	fmt.Fprintf(w, "  dead letters:        %d (goal 0; without the pace: 99 of 180)\n", r.DeadLetters)
	fmt.Fprintf(w, "  calls answered 429:  %d of %d (%.1f%%; goal at most 10%%)\n", r.Refused, r.Calls, 100*r.refusedShare())
	fmt.Fprintf(w, "  drain time:          %s against the quota's floor of %s (%.2f×; goal at most 1.1×)\n",
		r.Drain.Round(time.Second), r.Floor.Round(time.Second), r.drainRatio())
}

// chartBurst draws the queue over time, in life's seconds.
func chartBurst(r *burstResult, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Burst: %d tickets at %g/s, quota %d calls/min (%g× time-scaled)",
		r.Options.Tickets, r.Options.Rate, r.Options.QuotaCalls, r.Options.Speed)
	p.X.Label.Text = "seconds since the first ticket"
	p.Y.Label.Text = "tickets (429s: calls per interval)"
	series := []struct {
		name string
		get  func(burstSample) int
	}{
		{"queued", func(s burstSample) int { return s.Queued }},
		{"running or waiting", func(s burstSample) int { return s.Waiting + s.Running }},
		{"succeeded", func(s burstSample) int { return s.Succeeded }},
		{"dead", func(s burstSample) int { return s.Dead }},
		{"429s", func(s burstSample) int { return s.Refused }},
	}
	var lines []any
	for _, sr := range series {
		pts := make(plotter.XYs, len(r.Samples))
		for i, s := range r.Samples {
			pts[i].X, pts[i].Y = s.At.Seconds(), float64(sr.get(s))
		}
		lines = append(lines, sr.name, pts)
	}
	if err := plotutil.AddLines(p, lines...); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs = vg.Points(40)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := p.Save(10*vg.Inch, 5*vg.Inch, path); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	return nil
}
