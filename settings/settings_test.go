package settings_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/helpdesk-dev/helpdesk/settings"
)

func TestSettings(t *testing.T) {
	t.Parallel()

	t.Run("AValueItCannotTakeIsNamedWithWhatItWants", func(t *testing.T) {
		t.Parallel()
		var d time.Duration
		s := settings.Duration(&d, "HELPDESK_X", "x", "2s", "a wait")
		err := s.Set("soon")
		if err == nil || err.Error() != `HELPDESK_X (-x) = "soon": want a positive duration such as 2s or 1m` || d != 0 {
			t.Errorf("err %v, d %v", err, d)
		}
	})

	t.Run("DefaultsFillOnlyWhatIsZero", func(t *testing.T) {
		t.Parallel()
		var a, b time.Duration = 0, time.Minute
		var n int
		settings.Defaults([]settings.Setting{settings.Duration(&a, "A", "a", "2s", ""), settings.Duration(&b, "B", "b", "3s", ""),
			settings.Int(&n, "N", "n", "5", "")})
		if a != 2*time.Second || b != time.Minute || n != 5 {
			t.Errorf("a %v b %v n %d", a, b, n)
		}
	})

	t.Run("ASecretIsNeverShown", func(t *testing.T) {
		t.Parallel()
		var v string
		s := settings.Secret(&v, "HELPDESK_REPLY_SECRET", "reply-secret", "")
		if got := settings.Mask(&s, "hunter2hunter2"); got != "********" {
			t.Errorf("masked %q", got)
		}
	})

	for _, tc := range []struct{ in, want string }{
		{"smtp://user:S3cretPw@relay.example:587", "smtp://user:xxxxx@relay.example:587"},
		{"smtp://user:S3cretPw%zz@relay.example:587", "smtp://xxxxx@relay.example:587"},
		{"smtp://user:S3cret#Pw@relay.example:587", "smtp://xxxxx@relay.example:587"},
		{"postgres://u:p@ss@db/x", "postgres://u:xxxxx@db/x"},
		{"host=db password='a b' dbname=x", "host=db password=xxxxx dbname=x"},
		{"smtp://relay.example:25", "smtp://relay.example:25"},
	} {
		t.Run("MaskURL/"+tc.in, func(t *testing.T) {
			t.Parallel()
			got := settings.MaskURL(tc.in)
			if got != tc.want {
				t.Errorf("MaskURL(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if strings.Contains(got, "S3cret") || strings.Contains(got, "p@ss") {
				t.Errorf("the password shows in %q", got)
			}
		})
	}
}

func TestScrubberHidesEveryPartOfASecret(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	s := settings.NewScrubber(&out)
	for _, v := range []string{"smtp://user:S3cretPw%zz@relay.example:587", "smtp://user:S3cret#Pw@relay.example:587",
		"postgres://u:S3cret@Pw@db/x", "smtp://u:S3cret%40Enc@h", "host=db password='S3cret dsn' dbname=x"} {
		s.Hide(settings.SecretParts(&settings.Setting{Env: "HELPDESK_SMTP_URL"}, v)...)
	}
	s.Hide(settings.SecretParts(&settings.Setting{Env: "HELPDESK_REPLY_SECRET"}, "S3cret-reply")...)
	fmt.Fprintf(s, "parse %q: invalid; S3cret#Pw; S3cret@Pw; S3cret@Enc; S3cret dsn; S3cret-reply; S3cretPw%%zz\n", "smtp://user:S3cretPw%zz@relay.example:587")
	if strings.Contains(out.String(), "S3cret") {
		t.Errorf("scrubbed: %s", out.String())
	}
}
