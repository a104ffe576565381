package mail

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// Sender is where a delivery goes: a Relay to an SMTP server, or a
// Maildir that keeps the mail for a person to read instead.
type Sender interface {
	// Name identifies the sender for throttling and in logs.
	Name() string
	// Captures reports whether what it takes is only kept, not sent.
	Captures() bool
	// Send makes one delivery attempt.
	Send(ctx context.Context, env Envelope, raw []byte) *Result
}

// Maildir is a Sender that keeps every message in a folder of Maildir
// layout (tmp, new, cur) instead of sending it: the service without a
// relay, so that a person can read in new/ what would have gone out.
type Maildir struct {
	dir  string
	host string
	n    atomic.Int64
}

// NewMaildir makes the folder's tmp, new and cur if they are missing.
func NewMaildir(dir string) (*Maildir, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("maildir %s: %w", dir, err)
	}
	for _, sub := range []string{"tmp", "new", "cur"} {
		if err := os.MkdirAll(filepath.Join(abs, sub), 0o755); err != nil {
			return nil, fmt.Errorf("maildir: %w", err)
		}
	}
	host, _ := os.Hostname()
	// The Maildir specification's unique name: time, process, a counter,
	// host; "/" and ":" cannot be in a name.
	host = strings.NewReplacer("/", `\057`, ":", `\072`).Replace(host)
	return &Maildir{dir: abs, host: host}, nil
}

// Dir is the folder.
func (m *Maildir) Dir() string { return m.dir }

// Name is "maildir:" and the folder.
func (m *Maildir) Name() string { return "maildir:" + m.dir }

// Captures is true: nothing leaves the machine.
func (m *Maildir) Captures() bool { return true }

// Send writes raw into tmp/ and renames it into new/, so that a reader
// never sees half a message; every recipient is accepted.
func (m *Maildir) Send(ctx context.Context, env Envelope, raw []byte) *Result {
	res := &Result{Rcpt: map[string]*SMTPError{}}
	if err := ctx.Err(); err != nil {
		res.Err = &ConnError{Phase: PhaseConnect, Err: err}
		return res
	}
	var salt [4]byte
	_, _ = rand.Read(salt[:])
	now := time.Now()
	name := fmt.Sprintf("%d.M%dP%dQ%dR%s.%s", now.Unix(), now.Nanosecond()/1000, os.Getpid(), m.n.Add(1), hex.EncodeToString(salt[:]), m.host)
	if err := m.write(name, raw); err != nil {
		res.Err = &ConnError{Phase: PhaseData, Err: err}
		return res
	}
	for _, to := range env.To {
		res.Rcpt[to] = nil
	}
	res.BodySent, res.Reply = true, "kept in "+filepath.Join(m.dir, "new", name)
	return res
}

func (m *Maildir) write(name string, raw []byte) error {
	tmp := filepath.Join(m.dir, "tmp", name)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(raw); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, filepath.Join(m.dir, "new", name))
}
