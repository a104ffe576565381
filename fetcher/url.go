package fetcher

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// TLS modes of an imap:// URL, as the relay's smtp:// has them.
const (
	TLSWhenOffered = ""         // STARTTLS when the server offers it
	TLSRequired    = "required" // STARTTLS or nothing
	TLSNone        = "none"     // never: for a server on the same machine
	TLSImplicit    = "implicit" // imaps://
)

// Endpoint is where a mailbox is: a server, a user, a folder.
type Endpoint struct {
	Address  string // host:port
	User     string
	Password string // from the URL; "" with OAuth
	Folder   string // INBOX unless the URL's path names another
	TLS      string
}

// ParseURL reads imaps://USER:PASS@HOST[:PORT]/FOLDER (TLS from the
// start, port 993) or imap://… (port 143, STARTTLS when offered,
// ?tls=required to insist, ?tls=none never). The user and the folder may
// be percent-encoded; a password with reserved characters must be.
func ParseURL(raw string) (*Endpoint, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Fragment != "" {
		// A # in a password would otherwise cut the URL short, silently
		// where what follows still reads as a URL.
		return nil, errors.New("want a URL such as imaps://support%40example.com:PASSWORD@imap.example.com/INBOX, " +
			"with each @ : / ? # % or space of the user, password or folder percent-encoded (# as %23)")
	}
	e := &Endpoint{}
	port := ""
	switch u.Scheme {
	case "imaps":
		e.TLS, port = TLSImplicit, "993"
	case "imap":
		port = "143"
		switch t := u.Query().Get("tls"); t {
		case "", TLSRequired, TLSNone:
			e.TLS = t
		default:
			return nil, fmt.Errorf("?tls=%s: want required or none", t)
		}
	default:
		return nil, fmt.Errorf("scheme %q: want imaps:// or imap://", u.Scheme)
	}
	if u.Hostname() == "" || u.User == nil || u.User.Username() == "" {
		return nil, errors.New("want a user and a host, such as imaps://support%40example.com@imap.example.com/INBOX")
	}
	if u.Port() != "" {
		port = u.Port()
	}
	e.Address = net.JoinHostPort(u.Hostname(), port)
	e.User = u.User.Username()
	e.Password, _ = u.User.Password()
	e.Folder = strings.TrimPrefix(u.Path, "/")
	if e.Folder == "" {
		e.Folder = "INBOX"
	}
	for k := range u.Query() {
		if k != "tls" {
			return nil, fmt.Errorf("unknown parameter ?%s", k)
		}
	}
	return e, nil
}

// String is the URL without its password: what is stored and shown.
func (e *Endpoint) String() string {
	u := url.URL{Scheme: "imap", Host: e.Address, User: url.User(e.User), Path: "/" + e.Folder}
	switch e.TLS {
	case TLSImplicit:
		u.Scheme = "imaps"
	case TLSRequired, TLSNone:
		u.RawQuery = "tls=" + e.TLS
	}
	return u.String()
}
