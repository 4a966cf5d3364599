package releasetest

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// GraphServer is an http.Handler that answers like the update service's
// graph endpoint: GET ?channel=<c>&arch=<a> with Accept: application/json.
type GraphServer struct {
	// MissingStatus is the answer for a channel it does not know: 0 means
	// 200 with an empty graph (what the update service does), else that
	// HTTP status.
	MissingStatus int

	mu       sync.Mutex
	graphs   map[[2]string][]byte
	requests int
}

// NewGraphServer returns a server that knows no channel yet.
func NewGraphServer() *GraphServer {
	return &GraphServer{graphs: map[[2]string][]byte{}}
}

// Put serves g as channel's graph for g.Arch.
func (s *GraphServer) Put(channel string, g *Graph) error {
	data, err := g.JSON()
	if err != nil {
		return fmt.Errorf("graph of channel %s: %w", channel, err)
	}
	s.putJSON(channel, g.Arch, data)
	return nil
}

// putJSON serves data as channel's graph for arch.
func (s *GraphServer) putJSON(channel, arch string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.graphs[[2]string{channel, arch}] = data
}

// Requests returns how many requests the server answered.
func (s *GraphServer) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// ServeHTTP answers graph requests.
func (s *GraphServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests++
	data, ok := s.graphs[[2]string{r.URL.Query().Get("channel"), r.URL.Query().Get("arch")}]
	missing := s.MissingStatus
	s.mu.Unlock()

	switch {
	case r.Method != http.MethodGet:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	case !strings.Contains(r.Header.Get("Accept"), "application/json"):
		http.Error(w, "only application/json is served", http.StatusNotAcceptable)
		return
	case r.URL.Query().Get("channel") == "" || r.URL.Query().Get("arch") == "":
		http.Error(w, "channel and arch are required", http.StatusBadRequest)
		return
	}
	if !ok {
		if missing != 0 {
			http.Error(w, "channel not found", missing)
			return
		}
		data = []byte(`{"version":1,"nodes":[],"edges":[],"conditionalEdges":[]}`)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
}

// SignatureServer is an http.Handler laid out like the release signature
// store: <any prefix>/sha256=<hex>/signature-<N>.
type SignatureServer struct {
	mu       sync.Mutex
	sigs     map[string][][]byte
	requests int
}

// NewSignatureServer returns a store with no signatures.
func NewSignatureServer() *SignatureServer {
	return &SignatureServer{sigs: map[string][][]byte{}}
}

// Put stores sigs as signature-1, signature-2, … of digest (sha256:<hex>).
func (s *SignatureServer) Put(digest string, sigs ...[]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sigs[digest] = sigs
}

// Requests returns how many requests the store answered.
func (s *SignatureServer) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// ServeHTTP answers signature requests; a missing signature is a 404.
func (s *SignatureServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if r.Method != http.MethodGet || len(parts) < 2 {
		http.NotFound(w, r)
		return
	}
	digest := strings.Replace(parts[len(parts)-2], "=", ":", 1)
	var n int
	if _, err := fmt.Sscanf(parts[len(parts)-1], "signature-%d", &n); err != nil || n < 1 {
		http.NotFound(w, r)
		return
	}
	sigs := s.sigs[digest]
	if n > len(sigs) {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(sigs[n-1])
}
