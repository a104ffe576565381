package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"
)

// maxRequestBytes bounds every request body.
const maxRequestBytes = 1 << 20

// decodeJSON reads exactly one JSON object into v, refusing unknown fields,
// trailing data and bodies over maxRequestBytes.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, extra := dec.Token(); extra != io.EOF {
			return badRequest("invalid_json", "the body must hold one JSON object and nothing after it")
		}
		return nil
	}
	var tooLarge *http.MaxBytesError
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooLarge):
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: "request_too_large",
			Message: fmt.Sprintf("the body is over %d bytes", maxRequestBytes)}
	case errors.Is(err, io.EOF):
		return badRequest("invalid_json", "the body is empty; send a JSON object")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest("unknown_field", strings.TrimPrefix(err.Error(), "json: ")+" is not accepted")
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("invalid_json", "the body is not valid JSON: "+err.Error())
	case errors.As(err, &typeErr):
		return badRequest("invalid_json", fmt.Sprintf("field %q must be a %s", typeErr.Field, typeErr.Type))
	}
	return badRequest("invalid_json", err.Error())
}

func unprocessable(code, format string, args ...any) *Error {
	return &Error{Status: http.StatusUnprocessableEntity, Code: code, Message: fmt.Sprintf(format, args...)}
}

// validateText checks a message body: 1 byte to 64 KiB of UTF-8, no NUL.
func validateText(field, s string) error {
	switch {
	case s == "":
		return unprocessable("invalid_"+field, "%s must not be empty", field)
	case len(s) > maxBodyBytes:
		return unprocessable("invalid_"+field, "%s has %d bytes; at most %d", field, len(s), maxBodyBytes)
	case !utf8.ValidString(s):
		return unprocessable("invalid_"+field, "%s must be UTF-8", field)
	case strings.ContainsRune(s, 0):
		return unprocessable("invalid_"+field, "%s must not contain NUL characters", field)
	}
	return nil
}
