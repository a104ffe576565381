package settings

import (
	"bytes"
	"io"
	"net/url"
	"sort"
	"strings"
	"sync"
)

// SecretParts are the pieces of a setting's value that must never be
// printed: the whole value of a secret, the password of a URL (between
// its first colon after :// and its last @, whether or not the URL
// parses, raw and decoded), the password of a key=value connection string.
// Pieces shorter than four characters are left out: they would blot out
// ordinary words.
func SecretParts(s *Setting, value string) []string {
	var parts []string
	add := func(p string) {
		if len(p) >= 4 {
			parts = append(parts, p)
		}
	}
	if value == "" {
		return nil
	}
	if s != nil && (s.Secret || secretName.MatchString(s.Env+s.Flag)) {
		add(value)
		return parts
	}
	for _, m := range dsnPassword.FindAllStringSubmatch(value, -1) {
		add(strings.Trim(m[2], "'"))
	}
	if _, rest, ok := strings.Cut(value, "://"); ok {
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if _, pass, ok := strings.Cut(rest[:at], ":"); ok {
				add(pass)
				if dec, err := url.PathUnescape(pass); err == nil && dec != pass {
					add(dec)
				}
			}
		}
	}
	return parts
}

// Scrubber writes to w with every secret it was told of replaced by
// xxxxx: the last line of defence, for text (a driver's error, a log line)
// that quotes a value the code around it did not mask.
type Scrubber struct {
	w       io.Writer
	mu      sync.Mutex
	secrets [][]byte // longest first
}

// NewScrubber returns a Scrubber that writes to w.
func NewScrubber(w io.Writer) *Scrubber { return &Scrubber{w: w} }

// Hide adds secrets to what is scrubbed.
func (s *Scrubber) Hide(secrets ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, secret := range secrets {
		if len(secret) >= 4 {
			s.secrets = append(s.secrets, []byte(secret))
		}
	}
	sort.Slice(s.secrets, func(i, j int) bool { return len(s.secrets[i]) > len(s.secrets[j]) })
}

// Write writes p scrubbed; it reports len(p) written when all of it was.
func (s *Scrubber) Write(p []byte) (int, error) {
	s.mu.Lock()
	out := p
	for _, secret := range s.secrets {
		if bytes.Contains(out, secret) {
			out = bytes.ReplaceAll(out, secret, []byte("xxxxx"))
		}
	}
	s.mu.Unlock()
	if _, err := s.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}
