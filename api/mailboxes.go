package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/fetcher"
	"github.com/helpdesk-dev/helpdesk/mail"
	"github.com/helpdesk-dev/helpdesk/store"
	"github.com/helpdesk-dev/helpdesk/vocab"
)

type createMailboxRequest struct {
	Name            string `json:"name"`
	IMAPURL         string `json:"imap_url"` // with the password; never shown again
	Address         string `json:"address"`
	Team            string `json:"team"`
	From            string `json:"from"`
	ProcessedFolder string `json:"processed_folder"`
	AfterImport     string `json:"after_import"`
	AuthservID      string `json:"authserv_id"`
	// ImportSince: only mail its server took from then on; null is none.
	ImportSince *time.Time `json:"import_since" null:"absent"`
}

// listMailboxes answers GET /v1/mailboxes (admins): every mailbox and
// where its fetching stands, without passwords or tokens.
func (s *Server) listMailboxes(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAdmin(r, "see mailboxes"); err != nil {
		return err
	}
	list, err := s.desk.Mailboxes(r.Context())
	if err != nil {
		return err
	}
	if list == nil {
		list = []*store.Mailbox{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"mailboxes": list})
	return nil
}

// getMailbox answers GET /v1/mailboxes/{name} (admins).
func (s *Server) getMailbox(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAdmin(r, "see mailboxes"); err != nil {
		return err
	}
	m, err := s.desk.Mailbox(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

// createMailbox answers POST /v1/mailboxes (admins): a mailbox the
// workers fetch, or a change to one (its checkpoint stays);
// Idempotency-Key honoured.
func (s *Server) createMailbox(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAdmin(r, "add mailboxes"); err != nil {
		return err
	}
	var req createMailboxRequest
	if err := decodeKeyed(w, r, &req); err != nil {
		return err
	}
	ep, err := fetcher.ParseURL(req.IMAPURL)
	if err != nil {
		return unprocessable("invalid_imap_url", "imap_url: %s", err.Error())
	}
	p := &desk.MailboxParams{Name: req.Name, IMAPURL: ep.String(), Password: ep.Password, Address: req.Address, Team: req.Team,
		Folder: ep.Folder, ProcessedFolder: req.ProcessedFolder, AfterImport: req.AfterImport, AuthservID: req.AuthservID,
		ImportSince: req.ImportSince}
	if req.From != "" {
		if p.From, err = mail.ParseAddress(req.From); err != nil {
			return unprocessable("invalid_from", "from must be a name and an address, such as \"Example Support <support@example.com>\"")
		}
	}
	// The password is not part of what a replay compares.
	req.IMAPURL = ep.String()
	return s.createOnce(w, r, who, req, func(ctx context.Context, tx *store.Tx) (int, any, error) {
		m, err := s.desk.AddMailbox(ctx, p)
		if errors.Is(err, desk.ErrInvalidMailbox) {
			return 0, nil, unprocessable("invalid_mailbox", "%s", err.Error())
		}
		if err != nil {
			return 0, nil, err
		}
		return http.StatusCreated, m, nil
	})
}

type patchMailboxRequest struct {
	Disabled *bool `json:"disabled"`
}

// patchMailbox answers PATCH /v1/mailboxes/{name} (admins): disabled true
// stops fetching it; adding it again goes on where it stopped.
func (s *Server) patchMailbox(w http.ResponseWriter, r *http.Request, who vocab.Actor) error {
	if err := requireAdmin(r, "change mailboxes"); err != nil {
		return err
	}
	var req patchMailboxRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Disabled == nil || !*req.Disabled {
		return unprocessable("nothing_to_change", "send disabled: true; a mailbox is enabled again by adding it (POST /v1/mailboxes)")
	}
	if err := s.desk.DisableMailbox(r.Context(), r.PathValue("name")); err != nil {
		return err
	}
	return s.getMailbox(w, r, who)
}
