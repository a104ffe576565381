package api_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/helpdesk-dev/helpdesk/api"
)

var (
	specOnce   sync.Once
	spec       *openapi3.T
	specRouter routers.Router
	specErr    error
)

// loadSpec reads and checks api/openapi.json once for the package's tests.
func loadSpec(tb testing.TB) (*openapi3.T, routers.Router) {
	tb.Helper()
	specOnce.Do(func() {
		loader := openapi3.NewLoader()
		if spec, specErr = loader.LoadFromData(api.OpenAPI); specErr != nil {
			return
		}
		if specErr = spec.Validate(context.Background()); specErr != nil {
			return
		}
		// The document's server is "/": its routes match on any host and
		// port, the tests' random ones included.
		specRouter, specErr = gorillamux.NewRouter(spec)
	})
	if specErr != nil {
		tb.Fatalf("api/openapi.json: %v", specErr)
	}
	return spec, specRouter
}

// validated checks, against api/openapi.json, every answer h gives and
// every request it accepts (a 2xx: a refused request is bad on purpose).
// A mismatch fails the test, so the document cannot drift from the code.
func validated(t *testing.T, h http.Handler) http.Handler {
	_, router := loadSpec(t)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())

		check := r.Clone(context.Background())
		check.Body = io.NopCloser(bytes.NewReader(body))
		// The API takes a body without Content-Type, or of any +json type,
		// as JSON; the document names application/json.
		if ct := check.Header.Get("Content-Type"); len(body) > 0 && (ct == "" || strings.HasSuffix(strings.Split(ct, ";")[0], "+json")) {
			check.Header.Set("Content-Type", "application/json")
		}
		if strings.HasPrefix(check.URL.Path, api.UIPrefix) {
			return // River UI's own API is not ours to describe
		}
		route, params, err := router.FindRoute(check)
		if err != nil {
			if rec.Code != http.StatusNotFound && rec.Code != http.StatusMethodNotAllowed {
				t.Errorf("openapi: %s %s answered %d but is not in the document: %v", r.Method, r.URL.Path, rec.Code, err)
			}
			return
		}
		opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}
		in := &openapi3filter.RequestValidationInput{Request: check, PathParams: params, Route: route, Options: opts}
		if rec.Code >= 200 && rec.Code < 300 {
			if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
				t.Errorf("openapi: the request %s %s (answered %d) does not match the document: %v", r.Method, r.URL.Path, rec.Code, err)
			}
		}
		if r.Method == http.MethodHead {
			return
		}
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: rec.Code, Header: rec.Header(),
			Body: io.NopCloser(bytes.NewReader(rec.Body.Bytes())), Options: opts}
		if strings.HasSuffix(route.Path, "/attachments/{attachment_id}") && rec.Code == http.StatusOK {
			out.Options = &openapi3filter.Options{ExcludeResponseBody: true, IncludeResponseStatus: true}
		}
		if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
			t.Errorf("openapi: the answer %d to %s %s does not match the document: %v\n%s", rec.Code, r.Method, r.URL.Path, err, rec.Body.Bytes())
		}
	})
}

func TestTheOpenAPIDocumentDescribesEveryRoute(t *testing.T) {
	t.Parallel()
	doc, _ := loadSpec(t)
	var described []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			described = append(described, method+" "+path)
		}
	}
	slices.Sort(described)
	srv := api.New(api.Config{Metrics: true})
	routes := srv.Routes()
	for _, r := range routes {
		if !slices.Contains(described, r) {
			t.Errorf("%s is served but not described in api/openapi.json", r)
		}
	}
	for _, d := range described {
		if !slices.Contains(routes, d) && !strings.HasPrefix(d, "HEAD ") {
			t.Errorf("%s is described but not served", d)
		}
	}

	ts := httptest.NewServer(srv)
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	served, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !bytes.Equal(served, api.OpenAPI) || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("/openapi.json: %d %s, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(served))
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
}
