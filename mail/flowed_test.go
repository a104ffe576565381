package mail_test

import (
	"testing"

	"github.com/helpdesk-dev/helpdesk/mail"
)

func TestUnflowReadsFormatFlowed(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		in    string
		delSp bool
		want  string
	}{
		"AWrappedParagraphIsOneLineAgain": {in: "The second charge is refunded. It will show on your \r\nstatement within three to five \r\nbusiness days.\r\n\r\nDana\r\n",
			want: "The second charge is refunded. It will show on your statement within three to five business days.\n\nDana\n"},
		"DelSpDropsTheWrappersSpace": {in: "Rück \r\nerstattung.", delSp: true, want: "Rückerstattung."},
		"AQuoteIsJoinedAtItsDepth": {in: "> My card was charged \r\n> twice.\r\n>> Older \r\n>> text.\r\nYes.",
			want: "> My card was charged twice.\n>> Older text.\nYes."},
		"AFlowedLineBeforeAnotherDepthEndsItsParagraph": {in: "> quoted \r\nnew", want: "> quoted \nnew"},
		"AStuffedSpaceGoes":                             {in: " From the start.\r\n >not a quote", want: "From the start.\n>not a quote"},
		"TheSignatureSeparatorStays":                    {in: "Thanks.\r\n-- \r\nDana", want: "Thanks.\n-- \nDana"},
		"FixedLinesStayAsTheyAre":                       {in: "one\r\ntwo\r\n\r\nthree", want: "one\ntwo\n\nthree"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := mail.Unflow(tc.in, tc.delSp); got != tc.want {
				t.Errorf("Unflow(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
