package api

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAWrongTypeIsNamedInJSONsTerms: a client that sends a value of the
// wrong type is told what JSON value to send, not the Go type behind it.
func TestAWrongTypeIsNamedInJSONsTerms(t *testing.T) {
	t.Parallel()
	type request struct {
		Name        string  `json:"name"`
		Priority    *int16  `json:"priority"`
		Attachments []int64 `json:"attachments"`
		Urgent      bool    `json:"urgent"`
		Score       float64 `json:"score"`
		Meta        struct {
			Source string `json:"source"`
		} `json:"meta"`
	}
	for _, tc := range []struct{ name, body, message string }{
		{"AnArrayForTheBody", `[1,2]`, "the body must be a JSON object"},
		{"AStringForTheBody", `"hello"`, "the body must be a JSON object"},
		{"ANumberForAString", `{"name":5}`, `field "name" must be a string`},
		{"AStringForAWholeNumber", `{"priority":"high"}`, `field "priority" must be a whole number in range`},
		{"AWholeNumberOutOfRange", `{"priority":70000}`, `field "priority" must be a whole number in range`},
		{"AFractionForAWholeNumber", `{"priority":1.5}`, `field "priority" must be a whole number in range`},
		{"AStringForAnArray", `{"attachments":"a"}`, `field "attachments" must be an array`},
		{"AStringForABoolean", `{"urgent":"yes"}`, `field "urgent" must be true or false`},
		{"AStringForANumber", `{"score":"high"}`, `field "score" must be a number`},
		{"AnArrayForAnObject", `{"meta":[]}`, `field "meta" must be an object`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("POST", "/v1/things", strings.NewReader(tc.body))
			r.Header.Set("Content-Type", "application/json")
			var v request
			err := decodeJSON(httptest.NewRecorder(), r, &v)
			var e *Error
			if !errors.As(err, &e) || e.Status != 400 || e.Code != "invalid_json" || e.Message != tc.message {
				t.Fatalf("got %#v, want 400 invalid_json %q", err, tc.message)
			}
			if strings.Contains(e.Message, "int") || strings.Contains(e.Message, "api.") {
				t.Errorf("the message names a Go type: %q", e.Message)
			}
		})
	}
}
