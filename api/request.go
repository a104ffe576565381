package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/helpdesk-dev/helpdesk/desk"
	"github.com/helpdesk-dev/helpdesk/store"
)

// maxRequestBytes bounds every request body.
const maxRequestBytes = 1 << 20

// decodeKeyed is decodeJSON for a request that createOnce answers: a bad
// Idempotency-Key is refused first, before anything of the body is read.
func decodeKeyed(w http.ResponseWriter, r *http.Request, v any) error {
	if _, err := idempotencyKey(r); err != nil {
		return err
	}
	return decodeJSON(w, r, v)
}

// decodeJSON reads exactly one JSON object into v, refusing another
// Content-Type, unknown fields, trailing data, bodies over maxRequestBytes,
// and text that is not UTF-8: encoding/json would store invalid bytes and
// lone surrogates silently as U+FFFD.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	if err := requireJSONContentType(r); err != nil {
		return err
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: "request_too_large",
			Message: fmt.Sprintf("the body is over %d bytes", maxRequestBytes)}
	}
	if err != nil {
		return badRequest("invalid_body", "the body could not be read: "+err.Error())
	}
	if !utf8.Valid(body) {
		return badRequest("invalid_utf8", "the body is not valid UTF-8")
	}
	if loneSurrogate(body) {
		return badRequest("invalid_utf8", "the body escapes a lone UTF-16 surrogate (\\uD800–\\uDFFF), which is no character")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	if err == nil {
		if _, extra := dec.Token(); extra != io.EOF {
			return badRequest("invalid_json", "the body must hold one JSON object and nothing after it")
		}
		return readNulls(body, v)
	}
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return badRequest("invalid_json", "the body is empty; send a JSON object")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest("unknown_field", strings.TrimPrefix(err.Error(), "json: ")+" is not accepted")
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("invalid_json", "the body is not valid JSON: "+err.Error())
	case errors.As(err, &typeErr) && typeErr.Field == "":
		return badRequest("invalid_json", "the body must be a JSON object")
	case errors.As(err, &typeErr):
		return badRequest("invalid_json", fmt.Sprintf("field %q must be %s", typeErr.Field, jsonKind(typeErr.Type)))
	}
	return badRequest("invalid_json", err.Error())
}

// readNulls gives each null among the body's own fields (not those of an
// object inside it) its meaning, which encoding/json does not: it leaves
// the field as it was, so a null would read as "absent". A null list is an empty one (Go's own clients send a list they
// never filled). A field tagged null:"empty" takes its empty value, as a
// JSON merge patch's null removes what it names (RFC 7396): "assignee":
// null is nobody. A field tagged null:"absent" reads null as left out,
// where absent and null mean the same ("import_since": null is no limit).
// Any other field refuses null, where a client that meant
// "clear it" would otherwise see its request succeed and change nothing.
func readNulls(body []byte, v any) error {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct || !bytes.Contains(body, []byte("null")) {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return nil
	}
	for name, raw := range fields {
		if string(raw) != "null" {
			continue
		}
		for _, f := range reflect.VisibleFields(rv.Type()) {
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if tag == "" {
				tag = f.Name
			}
			// encoding/json matches a key to a field without regard to case.
			if f.Anonymous || !strings.EqualFold(tag, name) {
				continue
			}
			switch field := rv.FieldByIndex(f.Index); {
			case f.Type.Kind() == reflect.Slice || f.Type.Kind() == reflect.Map:
			case f.Tag.Get("null") == "absent":
				field.SetZero()
			case f.Tag.Get("null") == "empty" && f.Type.Kind() == reflect.Pointer:
				field.Set(reflect.New(f.Type.Elem()))
			case f.Tag.Get("null") == "empty":
				field.SetZero()
			default:
				return badRequest("invalid_json", fmt.Sprintf("field %q must be %s, not null; leave it out instead", tag, jsonKind(f.Type)))
			}
		}
	}
	return nil
}

// jsonKind names what JSON value a field of Go type t takes, in the
// caller's terms (RFC 8259's), not Go's: "a whole number", not "int16".
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "an object"
	}
}

// requireJSONContentType refuses a body declared as anything but JSON; a
// request without a Content-Type is read as JSON.
func requireJSONContentType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	mediaType, _, err := mime.ParseMediaType(ct)
	if err == nil && (mediaType == "application/json" || (strings.HasPrefix(mediaType, "application/") && strings.HasSuffix(mediaType, "+json"))) {
		return nil
	}
	return &Error{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
		Message: fmt.Sprintf("Content-Type %q: send application/json", ct)}
}

// loneSurrogate reports whether a JSON text escapes half of a UTF-16
// surrogate pair without the other half (RFC 8259 §8.2 leaves such strings
// undefined; we refuse them rather than guess).
func loneSurrogate(b []byte) bool {
	inString := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString && i+1 < len(b):
			if b[i+1] != 'u' {
				i++ // an escaped character, such as \" or \\
				continue
			}
			u, ok := hex4(b, i+2)
			switch {
			case !ok:
				return false // a syntax error, which the decoder reports
			case u >= 0xD800 && u <= 0xDBFF:
				low, ok := uint16(0), false
				if i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
					low, ok = hex4(b, i+8)
				}
				if !ok || low < 0xDC00 || low > 0xDFFF {
					return true
				}
				i += 11
			case u >= 0xDC00 && u <= 0xDFFF:
				return true
			default:
				i += 5
			}
		}
	}
	return false
}

func hex4(b []byte, at int) (uint16, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[at:at+4]), 16, 16)
	return uint16(n), err == nil
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }

// validateName checks a person's name (desk.CheckName).
func validateName(s string) error {
	if err := desk.CheckName(s); err != nil {
		return unprocessable("invalid_name", "%v", err)
	}
	return nil
}

func unprocessable(code, format string, args ...any) *Error {
	return &Error{Status: http.StatusUnprocessableEntity, Code: code, Message: fmt.Sprintf(format, args...)}
}

// validateText checks a message body (desk.CheckText), in the API's words.
func validateText(field, s string) error {
	if err := desk.CheckText(s); err != nil {
		return unprocessable("invalid_"+field, "%s: %v", field, err)
	}
	return nil
}
