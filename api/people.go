package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// listAgents answers GET /v1/agents (agents): every agent with its teams.
func (s *Server) listAgents(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAgent(who, "list agents"); err != nil {
		return err
	}
	agents, err := store.New(s.pool).ListAgents(r.Context())
	if err != nil {
		return err
	}
	if agents == nil {
		agents = []*store.Agent{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"agents": agents})
	return nil
}

// getCustomer answers GET /v1/customers/{id}: agents, or the customer itself.
func (s *Server) getCustomer(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	id := r.PathValue("id")
	if !vocab.CustomerIDPattern.MatchString(id) || (!who.IsAgent() && who.ID() != id) {
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: "customer not found"}
	}
	c, err := store.New(s.pool).GetCustomer(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewCustomer(c))
	return nil
}

// listCustomers answers GET /v1/customers[?email=ADDRESS] (agents).
func (s *Server) listCustomers(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAgent(who, "list customers"); err != nil {
		return err
	}
	q := r.URL.Query()
	for name := range q {
		if name != "email" && name != "after" {
			return badRequest("unknown_filter", "unknown query parameter "+name+"; filters are email, after")
		}
	}
	st := store.New(s.pool)
	out := []*customerView{}
	if q.Has("email") {
		a, err := mail.ParseAddress(q.Get("email"))
		if err != nil {
			return badRequest("invalid_email", err.Error())
		}
		c, err := st.CustomerByEmail(r.Context(), a.Address)
		if err != nil && !isNotFound(err) {
			return err
		}
		if c != nil {
			out = append(out, viewCustomer(c))
		}
		writeJSON(w, http.StatusOK, map[string]any{"customers": out})
		return nil
	}
	after := q.Get("after")
	if after != "" && !vocab.CustomerIDPattern.MatchString(after) {
		return badRequest("invalid_after", "after must be a customer id")
	}
	list, err := st.ListCustomers(r.Context(), after, 100)
	if err != nil {
		return err
	}
	for _, c := range list {
		out = append(out, viewCustomer(c))
	}
	body := map[string]any{"customers": out}
	if len(list) == 100 {
		body["next_after"] = list[len(list)-1].ID
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

type createCustomerRequest struct {
	Email string `json:"email"`
	Name  string `json:"name"`
}

// createCustomer answers POST /v1/customers (agents): a customer with the
// next C-number, once per Idempotency-Key; an address already taken is 409.
func (s *Server) createCustomer(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAgent(who, "add customers"); err != nil {
		return err
	}
	var req createCustomerRequest
	if err := decodeKeyed(w, r, &req); err != nil {
		return err
	}
	a, err := mail.ParseAddress(req.Email)
	if err != nil || a.Name != "" {
		return unprocessable("invalid_email", "email must be one address such as ada@example.com")
	}
	if err := validateName(req.Name); err != nil {
		return err
	}
	return s.createOnce(w, r, who, req, func(ctx context.Context, tx *store.Tx) (int, any, error) {
		c, err := s.desk.CreateCustomerTx(ctx, tx, a.Address, req.Name)
		if err != nil {
			return 0, nil, err
		}
		return http.StatusCreated, viewCustomer(c), nil
	})
}

type patchAgentRequest struct {
	Signature *string `json:"signature"`
	// Admins only, of another agent: make it an admin or not, disable it.
	Admin    *bool `json:"admin"`
	Disabled *bool `json:"disabled"`
}

// patchAgent answers PATCH /v1/agents/{name}: an agent sets its own
// signature, which goes below every reply it sends from then on; an admin
// also makes another agent an admin or not, or disables it (its keys and
// sessions stop working at once). An admin does not demote or disable
// itself, so that there is always one.
func (s *Server) patchAgent(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAgent(who, "change agents"); err != nil {
		return err
	}
	name := r.PathValue("name")
	if name == "me" {
		name = who.ID()
	}
	var req patchAgentRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	switch {
	case req.Signature == nil && req.Admin == nil && req.Disabled == nil:
		return unprocessable("nothing_to_change", "send a field to change: signature (your own), admin or disabled (admins)")
	case req.Signature != nil && name != who.ID():
		return &Error{Status: http.StatusForbidden, Code: "forbidden", Message: "an agent may change only its own signature"}
	case req.Admin != nil || req.Disabled != nil:
		if err := requireAdmin(r, "manage agents"); err != nil {
			return err
		}
		if name == who.ID() && ((req.Admin != nil && !*req.Admin) || (req.Disabled != nil && *req.Disabled)) {
			return unprocessable("own_admin", "an admin does not demote or disable itself; another admin may")
		}
		if req.Disabled != nil && !*req.Disabled {
			return unprocessable("invalid_disabled", "an agent once disabled stays disabled; send disabled: true or nothing")
		}
	}
	if req.Signature != nil {
		if err := desk.CheckSignature(*req.Signature); err != nil {
			return unprocessable("invalid_signature", "%v", err)
		}
	}
	st := store.New(s.pool)
	ctx := r.Context()
	if _, err := st.GetAgent(ctx, name); err != nil {
		return err
	}
	if req.Signature != nil {
		if _, err := st.SetSignature(ctx, name, strings.ReplaceAll(*req.Signature, "\r\n", "\n")); err != nil {
			return err
		}
	}
	if req.Admin != nil {
		if err := st.SetAdmin(ctx, name, *req.Admin); err != nil {
			return err
		}
	}
	if req.Disabled != nil {
		if err := st.DisableAgent(ctx, name); err != nil {
			return err
		}
	}
	if req.Admin != nil || req.Disabled != nil {
		s.keys.forget() // here at once; elsewhere within keyCacheTTL
	}
	a, err := st.GetAgent(ctx, name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}
