// Package console is the agents' console in the browser: server-rendered pages at /ui/ over the use cases of desk.
//
// It is an edge of its own, beside api/ and inbound/, because pages are
// another way in with their own rules: HTML forms that work without
// JavaScript, a session cookie instead of a bearer key, a strict Content
// Security Policy, no framing, and every request that changes something
// checked to come from this site (net/http's CrossOriginProtection, as
// River UI's). Sessions are the API's (Auth); templates and assets are
// embedded, so there is no build step.
package console

import (
	"context"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helpdesk-dev/helpdesk/api"
	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// Prefix is where the console is served.
const Prefix = "/ui"

// cookieName holds the session's id (the store keeps its hash).
const cookieName = "helpdesk_console"

// maxForm bounds a form's body; a reply with attachments may be larger
// (the desk's attachment limit, per file).
const maxForm = 64 << 10

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Auth is the API's sign-in and sessions, shared with River UI.
type Auth interface {
	SignIn(r *http.Request, key string) (session string, c *store.Caller, err error)
	SessionCaller(r *http.Request, session string) (*store.Caller, error)
	SignOut(ctx context.Context, session string) error
	SessionTTL() int
	Secure(r *http.Request) bool
}

// Console serves the pages.
type Console struct {
	desk   *desk.Desk
	pool   *pgxpool.Pool
	auth   Auth
	log    *slog.Logger
	pages  *template.Template
	mux    *http.ServeMux
	cop    *http.CrossOriginProtection
	static http.Handler
}

// New returns the console over the use cases; its handler expects paths
// under Prefix.
func New(d *desk.Desk, pool *pgxpool.Pool, auth Auth, logger *slog.Logger) (*Console, error) {
	if logger == nil {
		logger = slog.Default()
	}
	pages, err := template.New("").Funcs(funcs).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	c := &Console{desk: d, pool: pool, auth: auth, log: logger, pages: pages, mux: http.NewServeMux(),
		cop: http.NewCrossOriginProtection(), static: http.StripPrefix(Prefix+"/static/", http.FileServerFS(sub))}
	c.routes()
	return c, nil
}

func (c *Console) routes() {
	c.mux.HandleFunc("GET "+Prefix+"/static/", func(w http.ResponseWriter, r *http.Request) {
		// A name no file can have (not UTF-8, say) is no file: the file
		// server would answer 500 for the error the FS gives it.
		if name := strings.TrimPrefix(r.URL.Path, Prefix+"/static/"); name != "" && !fs.ValidPath(name) {
			c.fail(w, r, http.StatusNotFound, "There is no such page.")
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=3600")
		c.static.ServeHTTP(w, r)
	})
	c.mux.HandleFunc("GET "+Prefix+"/login", c.loginPage)
	c.mux.HandleFunc("POST "+Prefix+"/login", c.login)
	c.mux.HandleFunc("POST "+Prefix+"/logout", c.logout)
	c.mux.HandleFunc("GET "+Prefix+"/{$}", c.signedIn(c.queue))
	c.mux.HandleFunc("GET "+Prefix+"/tickets/{id}", c.onTicket(c.ticket))
	c.mux.HandleFunc("POST "+Prefix+"/tickets/{id}/reply", c.onTicket(c.reply))
	c.mux.HandleFunc("POST "+Prefix+"/tickets/{id}/note", c.onTicket(c.note))
	c.mux.HandleFunc("POST "+Prefix+"/tickets/{id}/change", c.onTicket(c.change))
	c.mux.HandleFunc("POST "+Prefix+"/tickets/{id}/take", c.onTicket(c.take))
	c.mux.HandleFunc("POST "+Prefix+"/tickets/{id}/held/{message}/accept", c.onTicket(c.acceptHeld))
	c.mux.HandleFunc("POST "+Prefix+"/tickets/{id}/presence", c.onTicket(c.presence))
	c.mux.HandleFunc("GET "+Prefix+"/tickets/{id}/attachments/{attachment}", c.onTicket(c.attachment))
	c.mux.HandleFunc("GET "+Prefix+"/saved-replies", c.signedIn(c.savedReplies))
	c.mux.HandleFunc("POST "+Prefix+"/saved-replies", c.signedIn(c.addSavedReply))
	c.mux.HandleFunc("POST "+Prefix+"/saved-replies/{id}/delete", c.signedIn(c.deleteSavedReply))
	c.mux.HandleFunc(Prefix+"/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, http.StatusNotFound, "There is no such page.")
	})
}

// csp keeps every script and style to the console's own files: no inline
// script runs, whatever a customer's message holds.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// ServeHTTP answers a console request.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	if err := c.cop.Check(r); err != nil {
		c.fail(w, r, http.StatusForbidden, "A request from another site may not change anything here.")
		return
	}
	c.mux.ServeHTTP(w, r)
}

// agent is who a request comes from.
type agent struct {
	*store.Agent
}

// signedIn runs h for an agent with a session, and sends anyone else to
// the sign-in page.
func (c *Console) signedIn(h func(w http.ResponseWriter, r *http.Request, a *agent)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		cookie, err := r.Cookie(cookieName)
		if err != nil || cookie.Value == "" {
			c.toLogin(w, r)
			return
		}
		caller, err := c.auth.SessionCaller(r, cookie.Value)
		if err != nil {
			if !errors.Is(err, api.ErrNotAnAgent) {
				c.log.WarnContext(r.Context(), "console: session", slog.Any("error", err))
			}
			c.toLogin(w, r)
			return
		}
		a, err := store.New(c.pool).GetAgent(r.Context(), caller.Actor.ID())
		if err != nil || !a.Active() {
			c.toLogin(w, r)
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxForm+c.desk.AttachmentMaxBytes()*4)
		}
		h(w, r, &agent{Agent: a})
	}
}

// onTicket is signedIn for the pages of ticket {id}: an id that no ticket
// has is answered 404 before anything reads it (a NUL or a byte that is
// no UTF-8, which PostgreSQL refuses, among them).
func (c *Console) onTicket(h func(w http.ResponseWriter, r *http.Request, a *agent)) http.HandlerFunc {
	return c.signedIn(func(w http.ResponseWriter, r *http.Request, a *agent) {
		if !vocab.TicketIDPattern.MatchString(r.PathValue("id")) {
			c.fail(w, r, http.StatusNotFound, "There is no such ticket.")
			return
		}
		h(w, r, a)
	})
}

func (c *Console) toLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		c.fail(w, r, http.StatusUnauthorized, "Your session is over: sign in again.")
		return
	}
	http.Redirect(w, r, Prefix+"/login", http.StatusSeeOther)
}

// page is what every page's layout needs.
type page struct {
	Title   string
	Agent   *store.Agent
	Problem string
	Notice  string
	Data    any
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, p *page) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	var b strings.Builder
	if err := c.pages.ExecuteTemplate(&b, name, p); err != nil {
		c.log.ErrorContext(r.Context(), "console: template", slog.String("page", name), slog.Any("error", err))
		http.Error(w, "the page could not be drawn; see the server log", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// fail shows a problem on a page of its own.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, problem string) {
	c.render(w, r, status, "problem", &page{Title: "Problem", Problem: problem})
}

var funcs = template.FuncMap{
	// count shows a view's count, which stops past store.CountCap.
	"count": func(n int) string {
		if n > store.CountCap {
			return strconv.Itoa(store.CountCap) + "+"
		}
		return strconv.Itoa(n)
	},
	"when": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			return v.UTC().Format("2006-01-02 15:04 MST")
		case *time.Time:
			if v == nil {
				return ""
			}
			return v.UTC().Format("2006-01-02 15:04 MST")
		}
		return ""
	},
	"deref":      deref,
	"list4":      func() []int { return []int{1, 2, 3, 4} },
	"priorityIs": func(p *int16, n int) bool { return p != nil && int(*p) == n },
	"presence":   presenceLine,
	"kindName": func(kind string) string {
		return map[string]string{"customer": "Customer", "reply": "Reply", "note": "Note", "acknowledgement": "Acknowledgement",
			"held": "Held mail"}[kind]
	},
}
