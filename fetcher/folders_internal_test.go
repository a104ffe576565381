package fetcher

import "testing"

func TestUnderPrefixMindsINBOXsCaseOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, prefix string
		want         bool
	}{
		{"INBOX.Processed", "INBOX.", true},
		{"inbox.Processed", "INBOX.", true}, // INBOX is INBOX however written (RFC 9051 §5.1)
		{"Processed", "INBOX.", false},
		{"INBOX", "INBOX.", false},
		{"Shared/Team", "Shared/", true},
		{"shared/Team", "Shared/", false}, // other names are as they are written
	} {
		if got := underPrefix(tc.name, tc.prefix); got != tc.want {
			t.Errorf("underPrefix(%q, %q) = %v, want %v", tc.name, tc.prefix, got, tc.want)
		}
	}
}
