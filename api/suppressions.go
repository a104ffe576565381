package api

import (
	"net/http"

	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

// listSuppressions answers GET /v1/suppressions (agents): the addresses
// that bounced for good, which replies skip until they expire or are cleared.
func (s *Server) listSuppressions(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAgent(who, "list suppressions"); err != nil {
		return err
	}
	list, err := store.New(s.pool).ListSuppressions(r.Context())
	if err != nil {
		return err
	}
	if list == nil {
		list = []*store.Suppression{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"suppressions": list})
	return nil
}

// clearSuppression answers DELETE /v1/suppressions/{address} (admins).
func (s *Server) clearSuppression(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAdmin(r, "clear suppressions"); err != nil {
		return err
	}
	a, err := mail.ParseAddress(r.PathValue("address"))
	if err != nil {
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: "no such suppressed address"}
	}
	if err := store.New(s.pool).ClearSuppression(r.Context(), a.Address); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
