package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/helpdesk-dev/helpdesk/jobs"
	"github.com/helpdesk-dev/helpdesk/jobs/jobstest"
	"github.com/helpdesk-dev/helpdesk/mail/smtptest"
)

func TestHelpGoesToStdoutAndExits0(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--help"}, {"help"},
		{"migrate", "--help"}, {"serve", "--help"}, {"serve", "-h"}, {"jobs", "--help"}, {"jobs", "show", "--help"},
		{"jobs", "retry", "-help"}, {"jobs", "dead", "--help"}, {"apikey", "create", "--help"}, {"load", "--help"},
		{"agent", "add", "--help"}, {"agent", "list", "--help"}, {"customer", "add", "--help"}, {"demo", "--help"},
		{"simulator", "--help"}, {"provider", "--help"}, {"suppressions", "--help"}, {"mail", "reparse", "--help"},
		{"burst", "--help"}, {"version", "--help"},
	} {
		t.Run(strings.Join(args, "_"), func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runCmd(t, map[string]string{}, args...)
			if code != 0 || !strings.Contains(stdout, "usage") || stderr != "" {
				t.Errorf("exit %d, stdout %.60q, stderr %q; want the usage on stdout and exit 0", code, stdout, stderr)
			}
		})
	}
}

func TestHelpNeverShowsSecrets(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"DATABASE_URL":                   "postgres://helpdesk:db-password-1@db.example.com/helpdesk",
		"HELPDESK_SMTP_URL":              "smtp://mailer:smtp-password-2@smtp.example.com:587",
		"HELPDESK_PROVIDER_KEY":          "sk-provider-key-3",
		"HELPDESK_REPLY_SECRET":          "reply-secret-value-4",
		"HELPDESK_PROVIDER_URL":          "https://user:provider-url-password-5@ai.example.com",
		"HELPDESK_REPLY_SECRET_PREVIOUS": "previous-secret-6",
	}
	code, stdout, _ := runCmd(t, env, "serve", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, secret := range []string{"db-password-1", "smtp-password-2", "sk-provider-key-3", "reply-secret-value-4", "provider-url-password-5", "previous-secret-6"} {
		if strings.Contains(stdout, secret) {
			t.Errorf("serve --help shows %q", secret)
		}
	}
	if !strings.Contains(stdout, "postgres://helpdesk:xxxxx@db.example.com/helpdesk") {
		t.Errorf("the database URL is not shown with its password masked:\n%s", stdout)
	}
	_, stdout, _ = runCmd(t, map[string]string{"DATABASE_URL": "host=db user=helpdesk password='dsn password 8' dbname=x"}, "migrate", "--help")
	if strings.Contains(stdout, "dsn password 8") || !strings.Contains(stdout, "password=xxxxx") {
		t.Errorf("a key=value DATABASE_URL shows its password:\n%s", stdout)
	}
	// A refused value is named without its secret too.
	_, _, stderr := runCmd(t, map[string]string{"DATABASE_URL": "mysql://root:db-password-7@db/x"}, "migrate")
	if strings.Contains(stderr, "db-password-7") || !strings.Contains(stderr, "DATABASE_URL") {
		t.Errorf("stderr %q", stderr)
	}
}

func TestEverySettingIsCheckedAtStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"UnknownLogLevel", map[string]string{"HELPDESK_LOG_LEVEL": "verbose"}, []string{"jobs", "dead"}, "HELPDESK_LOG_LEVEL = \"verbose\": want debug, info, warn or error"},
		{"UnknownLogFormat", map[string]string{"HELPDESK_LOG_FORMAT": "xml"}, []string{"migrate"}, "HELPDESK_LOG_FORMAT = \"xml\": want text or json"},
		{"DatabaseURLOfAnotherScheme", map[string]string{"DATABASE_URL": "mysql://db/x"}, []string{"migrate"}, "DATABASE_URL (-database-url)"},
		{"ProviderURLOfAnotherScheme", map[string]string{"DATABASE_URL": "postgres://db/x", "HELPDESK_PROVIDER_URL": "ftp://ai.example.com"}, []string{"serve"}, "HELPDESK_PROVIDER_URL (-provider-url)"},
		{"UnknownRole", map[string]string{"DATABASE_URL": "postgres://db/x", "HELPDESK_ROLE": "scheduler"}, []string{"serve"}, "HELPDESK_ROLE (-role) = \"scheduler\": want all, api or worker"},
		{"NegativeDuration", map[string]string{"DATABASE_URL": "postgres://db/x", "HELPDESK_EMAIL_TIMEOUT": "-5s"}, []string{"serve"}, "HELPDESK_EMAIL_TIMEOUT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if code, _, stderr := runCmd(t, tc.env, tc.args...); code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit 2 naming %q", code, stderr, tc.want)
			}
		})
	}
}

func TestVersionNamesTheBuild(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCmd(t, map[string]string{}, "version")
	// A test binary has build info; its revision depends on how it was built.
	if code != 0 || !strings.HasPrefix(stdout, "helpdesk ") || !strings.Contains(stdout, "revision ") || !strings.Contains(stdout, "built with go") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestEmailJobsShowTheirTicketAndRetryWithTheConfiguredBudget(t *testing.T) {
	t.Parallel()
	dbURL := migratedURL(t)
	b := jobstest.SetupOn(t, openPool(t, dbURL))
	srv := b.WithSMTP(t)
	// The first mail's first attempt is refused for a while (its second
	// passes), the second mail's recipient for good.
	srv.Script(smtptest.Fault{DataErr: smtptest.ErrTryAgainLater}, smtptest.Fault{},
		smtptest.Fault{RcptErr: map[string]*smtp.SMTPError{"c1@example.com": smtptest.ErrNoSuchUser}})
	q := b.StartQueue(t)
	ticketID, _ := b.OpenTicket(t, q, "Hello", "Hi.")
	_, passed := b.Reply(t, q, ticketID, "First answer.")
	jobstest.WaitFor(t, q, passed, jobs.StateSucceeded, 10*time.Second)
	_, failed := b.Reply(t, q, ticketID, "Second answer.")
	jobstest.WaitFor(t, q, failed, jobs.StateFailed, 10*time.Second)

	t.Run("ASucceededJobsErrorsAreHistory", func(t *testing.T) {
		s, err := q.Get(b.Ctx, passed)
		if err != nil || s.TicketID != ticketID || s.LastError != nil || len(s.Errors) != 1 || !strings.Contains(s.Errors[0].Error, "451") {
			t.Errorf("status %+v (%v): want the ticket, no last error and one earlier error", s, err)
		}
		code, out, _ := runCmd(t, map[string]string{"DATABASE_URL": dbURL}, "jobs", "show", strconv.FormatInt(passed, 10))
		if code != 0 || !strings.Contains(out, "of "+ticketID+")") || !strings.Contains(out, "last error: none (1 earlier error)") {
			t.Errorf("jobs show: %q", out)
		}
	})

	t.Run("RetryGivesTheEmailBudgetOfThisProcess", func(t *testing.T) {
		env := map[string]string{"DATABASE_URL": dbURL, "HELPDESK_EMAIL_MAX_ATTEMPTS": "3"}
		code, out, stderr := runCmd(t, env, "jobs", "retry", strconv.FormatInt(failed, 10))
		if code != 0 || !strings.Contains(out, "attempt 0 of 3") || !strings.Contains(out, ticketID) {
			t.Errorf("exit %d, %q %q", code, out, stderr)
		}
	})
}

func TestLogFormats(t *testing.T) {
	t.Parallel()
	for format, want := range map[string]string{"json": `{"time":`, "text": "time=", "": "time="} {
		var buf strings.Builder
		logger, err := newLogger("debug", format, &buf)
		if err != nil {
			t.Fatal(err)
		}
		logger.Debug("hello", "n", 1)
		if !strings.HasPrefix(buf.String(), want) || !strings.Contains(buf.String(), "hello") {
			t.Errorf("format %q wrote %q", format, buf.String())
		}
	}
}

func TestMetricsOnAListenerOfTheirOwn(t *testing.T) {
	t.Parallel()
	dbURL := migratedURL(t)
	var metricsAddr string
	addr, _ := startServeWith(t, map[string]string{"DATABASE_URL": dbURL, "HELPDESK_HTTP_ADDR": "127.0.0.1:0", "HELPDESK_METRICS_ADDR": "127.0.0.1:0"},
		func(c *serveConfig) {
			c.listening = func(what, a string) {
				if what == "HELPDESK_METRICS_ADDR" {
					metricsAddr = a // before serve reports ready: no race
				}
			}
		})
	for url, want := range map[string]int{"http://" + metricsAddr + "/metrics": 200, "http://" + addr + "/metrics": 404, "http://" + addr + "/healthz": 200} {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", url, resp.StatusCode, want)
		}
		if want == 200 && strings.HasSuffix(url, "/metrics") && !strings.Contains(string(body), "go_goroutines") {
			t.Errorf("%s is not the exposition", url)
		}
	}
}

func TestProfilesOnlyWhenAskedAndOnLoopback(t *testing.T) {
	t.Parallel()
	if code, _, stderr := runCmd(t, map[string]string{"DATABASE_URL": "postgres://db/x", "HELPDESK_PPROF_ADDR": "0.0.0.0:6060"}, "serve"); code != 2 ||
		!strings.Contains(stderr, "HELPDESK_PPROF_ADDR") {
		t.Errorf("a public pprof address: exit %d, %q", code, stderr)
	}
	dbURL := migratedURL(t)
	var pprofAddr string
	addr, _ := startServeWith(t, map[string]string{"DATABASE_URL": dbURL, "HELPDESK_HTTP_ADDR": "127.0.0.1:0", "HELPDESK_PPROF_ADDR": "127.0.0.1:0"},
		func(c *serveConfig) {
			c.listening = func(what, a string) {
				if what == "HELPDESK_PPROF_ADDR" {
					pprofAddr = a
				}
			}
		})
	for url, want := range map[string]int{"http://" + pprofAddr + "/debug/pprof/": 200, "http://" + pprofAddr + "/debug/pprof/goroutine?debug=1": 200,
		"http://" + addr + "/debug/pprof/": 404} {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", url, resp.StatusCode, want)
		}
	}
}

func TestNoSecretInAnyOutput(t *testing.T) {
	t.Parallel()
	for _, setting := range []struct{ env, url string }{
		{"DATABASE_URL", "postgres://helpdesk:%s@127.0.0.1:1/helpdesk"},
		{"HELPDESK_SMTP_URL", "smtp://mailer:%s@127.0.0.1:1"},
		{"HELPDESK_PROVIDER_URL", "https://user:%s@127.0.0.1:1/v1"},
	} {
		for _, password := range []string{"S3cretPw%zz", "S3cret#Pw", "S3cret@Pw", "S3cret%40Pw"} {
			t.Run(setting.env+"/"+password, func(t *testing.T) {
				t.Parallel()
				env := map[string]string{"DATABASE_URL": "postgres://nobody@127.0.0.1:1/none", "HELPDESK_DB_CONNECT_TIMEOUT": "2s",
					setting.env: fmt.Sprintf(setting.url, password)}
				for _, args := range [][]string{{"serve"}, {"serve", "--help"}, {"migrate"}, {"jobs"}} {
					for _, format := range []string{"text", "json"} {
						env["HELPDESK_LOG_FORMAT"] = format
						_, stdout, stderr := runCmd(t, env, args...)
						if out := stdout + stderr; strings.Contains(out, "S3cret") {
							t.Errorf("%s (%s logs) shows the password:\n%s", strings.Join(args, " "), format, out)
						}
					}
				}
				// Given as a flag, too.
				flag := "-" + strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(setting.env, "HELPDESK_"), "_", "-"))
				if setting.env == "DATABASE_URL" {
					flag = "-database-url"
				}
				_, stdout, stderr := runCmd(t, map[string]string{"DATABASE_URL": env["DATABASE_URL"]}, "serve", flag, fmt.Sprintf(setting.url, password))
				if strings.Contains(stdout+stderr, "S3cret") {
					t.Errorf("serve %s …: %s", flag, stdout+stderr)
				}
			})
		}
	}
}
