package registrytest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
)

// SinglePost gives the registry behind it the OCI distribution spec's
// single-request upload (POST /blobs/uploads/?digest= with the body,
// answered 201), which distribution does not offer: it opens a session and
// PUTs the body there itself, so the registry still checks the digest. A
// client sees one request per blob uploaded, as with a registry that takes
// the form. Digests given to Decline are read and left, the session it
// opened answered instead (202 and its Location), as by a registry that
// takes the form for some blobs only. Use Wrap as Options.Wrap.
type SinglePost struct {
	mu      sync.Mutex
	count   map[string]int
	decline map[string]bool
}

// Decline makes the upload of digest d answer with a session instead.
func (s *SinglePost) Decline(d string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.decline == nil {
		s.decline = map[string]bool{}
	}
	s.decline[d] = true
}

// Count is how many requests of method the front was sent.
func (s *SinglePost) Count(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count[method]
}

// Wrap puts the front before next.
func (s *SinglePost) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if s.count == nil {
			s.count = map[string]int{}
		}
		s.count[r.Method]++
		s.mu.Unlock()
		d := r.URL.Query().Get("digest")
		if r.Method != http.MethodPost || d == "" || !strings.HasSuffix(r.URL.Path, "/blobs/uploads/") {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		open := httptest.NewRecorder()
		inner := httptest.NewRequest(http.MethodPost, r.URL.Path, nil)
		inner.Header = r.Header.Clone() // the credentials, for a registry that wants them
		next.ServeHTTP(open, inner)
		loc, err := url.Parse(open.Header().Get("Location"))
		if open.Code != http.StatusAccepted || err != nil {
			for k, v := range open.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(open.Code)
			w.Write(open.Body.Bytes())
			return
		}
		s.mu.Lock()
		decline := s.decline[d]
		s.mu.Unlock()
		if decline {
			for k, v := range open.Header() {
				w.Header()[k] = v
			}
			w.Header().Set("Location", loc.RequestURI()) // this host's, not the inner request's
			w.WriteHeader(http.StatusAccepted)
			return
		}
		q := loc.Query()
		q.Set("digest", d)
		put := httptest.NewRequest(http.MethodPut, loc.Path+"?"+q.Encode(), bytes.NewReader(body))
		put.Header = r.Header.Clone()
		put.Header.Set("Content-Type", "application/octet-stream")
		done := httptest.NewRecorder()
		next.ServeHTTP(done, put)
		for k, v := range done.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(done.Code)
		w.Write(done.Body.Bytes())
	})
}
