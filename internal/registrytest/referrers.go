package registrytest

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
)

// APIRegistry is go-containerregistry's in-memory registry serving the OCI
// 1.1 referrers API (GET /v2/<name>/referrers/<digest>), which distribution
// does not implement yet: tests that need a registry with the API use it,
// and Registry for one without it (the referrers tag schema). Plain HTTP,
// no authentication.
type APIRegistry struct {
	srv     *httptest.Server
	handler atomic.Pointer[http.Handler]
	base    http.Handler
}

// StartReferrersAPI starts an APIRegistry on 127.0.0.1, closed with t.
func StartReferrersAPI(t testing.TB) *APIRegistry {
	r := &APIRegistry{base: registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0)))}
	r.SetWrap(nil)
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { (*r.handler.Load()).ServeHTTP(w, req) }))
	t.Cleanup(r.srv.Close)
	return r
}

// SetWrap wraps the registry's handler (a RequestCounter's Wrap); nil removes the wrapper.
func (r *APIRegistry) SetWrap(wrap func(http.Handler) http.Handler) {
	h := r.base
	if wrap != nil {
		h = wrap(h)
	}
	r.handler.Store(&h)
}

// Host is "127.0.0.1:port".
func (r *APIRegistry) Host() string { return strings.TrimPrefix(r.srv.URL, "http://") }

// URL is "http://127.0.0.1:port".
func (r *APIRegistry) URL() string { return r.srv.URL }
