package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// policyView is a policy with its targets as Go durations ("1h0m0s");
// absent targets are not promised.
type policyView struct {
	ID            int64     `json:"id"`
	Priority      int16     `json:"priority"`
	Team          *string   `json:"team"` // null: every team without its own
	FirstResponse string    `json:"first_response,omitempty"`
	NextResponse  string    `json:"next_response,omitempty"`
	Resolution    string    `json:"resolution,omitempty"`
	WarnBefore    string    `json:"warn_before"` // "20%" when it is a fifth of each target
	Calendar      string    `json:"calendar"`
	UpdatedAt     time.Time `json:"updated_at"`
}

func viewPolicy(p *store.SLAPolicy) policyView {
	v := policyView{ID: p.ID, Priority: p.Priority, Calendar: p.Calendar, UpdatedAt: p.UpdatedAt, WarnBefore: "20%"}
	if p.Team != "" {
		v.Team = &p.Team
	}
	show := func(d time.Duration) string {
		if d == 0 {
			return ""
		}
		return d.String()
	}
	v.FirstResponse, v.NextResponse, v.Resolution = show(p.FirstResponse), show(p.NextResponse), show(p.Resolution)
	if p.WarnBefore > 0 {
		v.WarnBefore = p.WarnBefore.String()
	}
	return v
}

// listSLAPolicies answers GET /v1/sla/policies (agents).
func (s *Server) listSLAPolicies(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAgent(who, "see SLA policies"); err != nil {
		return err
	}
	list, err := s.desk.SLAPolicies(r.Context())
	if err != nil {
		return err
	}
	out := make([]policyView, 0, len(list))
	for _, p := range list {
		out = append(out, viewPolicy(p))
	}
	writeJSON(w, http.StatusOK, map[string]any{"policies": out})
	return nil
}

type putPolicyRequest struct {
	Priority      int16  `json:"priority"`
	Team          string `json:"team"`
	FirstResponse string `json:"first_response"`
	NextResponse  string `json:"next_response"`
	Resolution    string `json:"resolution"`
	WarnBefore    string `json:"warn_before"` // a duration, or "" / "20%" for a fifth of each target
	Calendar      string `json:"calendar"`
}

// putSLAPolicy answers PUT /v1/sla/policies (admins): the policy of the
// body's priority and team, added or replaced; the tickets it times are
// timed again from their start.
func (s *Server) putSLAPolicy(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAdmin(r, "set SLA policies"); err != nil {
		return err
	}
	var req putPolicyRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	p := &store.SLAPolicy{Priority: req.Priority, Team: req.Team, Calendar: req.Calendar}
	for _, f := range []struct {
		name, value string
		into        *time.Duration
	}{{"first_response", req.FirstResponse, &p.FirstResponse}, {"next_response", req.NextResponse, &p.NextResponse},
		{"resolution", req.Resolution, &p.Resolution}, {"warn_before", req.WarnBefore, &p.WarnBefore}} {
		if f.value == "" || (f.name == "warn_before" && f.value == "20%") {
			continue
		}
		d, err := time.ParseDuration(f.value)
		if err != nil {
			return unprocessable("invalid_sla", "%s must be a duration such as 1h or 30m, got %q", f.name, f.value)
		}
		*f.into = d
	}
	saved, err := s.desk.SetSLAPolicy(r.Context(), who, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewPolicy(saved))
	return nil
}

// deleteSLAPolicy answers DELETE /v1/sla/policies/{priority}[?team=]
// (admins).
func (s *Server) deleteSLAPolicy(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAdmin(r, "delete SLA policies"); err != nil {
		return err
	}
	q := r.URL.Query()
	if err := onlyParams(q, []string{"team"}); err != nil {
		return err
	}
	priority, err := strconv.Atoi(r.PathValue("priority"))
	if err != nil || priority < 1 || priority > 4 {
		return badRequest("invalid_priority", "priority must be 1 to 4")
	}
	if err := s.desk.DeleteSLAPolicy(r.Context(), who, int16(priority), q.Get("team")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// getSLADue answers GET /v1/sla/due?from=RFC3339&target=DURATION
// [&calendar=NAME] (agents): when the target falls due in the calendar.
func (s *Server) getSLADue(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAgent(who, "compute due times"); err != nil {
		return err
	}
	q := r.URL.Query()
	if err := onlyParams(q, []string{"from", "target", "calendar"}); err != nil {
		return err
	}
	from, err := time.Parse(time.RFC3339, q.Get("from"))
	if err != nil {
		return badRequest("invalid_from", "from must be an RFC 3339 time such as 2026-01-16T16:30:00+01:00")
	}
	target, err := time.ParseDuration(q.Get("target"))
	if err != nil || target <= 0 {
		return badRequest("invalid_target", "target must be a positive duration such as 1h")
	}
	calendar := q.Get("calendar")
	due, err := s.desk.Due(r.Context(), calendar, from, target)
	if err != nil {
		return err
	}
	if calendar == "" {
		calendar = "24x7"
	}
	writeJSON(w, http.StatusOK, map[string]any{"due": due.Format(time.RFC3339), "calendar": calendar})
	return nil
}

// listCalendars answers GET /v1/calendars (agents); the built-in 24x7 is
// always there and not listed.
func (s *Server) listCalendars(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAgent(who, "see calendars"); err != nil {
		return err
	}
	list, err := s.desk.Calendars(r.Context())
	if err != nil {
		return err
	}
	if list == nil {
		list = []*store.Calendar{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"calendars": list})
	return nil
}

type putCalendarRequest struct {
	TimeZone string   `json:"time_zone"`
	Hours    string   `json:"hours"`
	Holidays []string `json:"holidays"`
}

// putCalendar answers PUT /v1/calendars/{name} (admins).
func (s *Server) putCalendar(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAdmin(r, "set calendars"); err != nil {
		return err
	}
	var req putCalendarRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	c, err := s.desk.SetCalendar(r.Context(), who, &desk.CalendarParams{Name: r.PathValue("name"), TimeZone: req.TimeZone,
		Hours: req.Hours, Holidays: req.Holidays})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}
