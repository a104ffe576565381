package api

import (
	_ "embed"
	"net/http"
	"slices"
)

// OpenAPI is the API's description (OpenAPI 3.1), served at
// /openapi.json. The API tests check every request and answer they make
// against it, so it cannot drift from the code.
//
//go:embed openapi.json
var OpenAPI []byte

func (s *Server) serveOpenAPI() {
	s.routes = append(s.routes, "GET /openapi.json")
	s.handle("/openapi.json", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			s.writeError(w, r, &Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed", Message: r.Method + " is not allowed on " + r.URL.Path})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		_, _ = w.Write(OpenAPI)
	})
}

// Routes lists the API's operations as "METHOD /pattern", sorted.
func (s *Server) Routes() []string {
	out := slices.Clone(s.routes)
	slices.Sort(out)
	return out
}
