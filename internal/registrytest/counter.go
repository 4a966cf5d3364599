package registrytest

import (
	"net/http"
	"strings"
	"sync"
)

// RequestCounter counts the requests a registry serves, by "METHOD kind"
// where kind is ping, manifest, blob, tags, referrers, catalog or other. Wrap it
// around a registry with Registry.SetWrap; read N once the requests are
// over, or under its lock (Wrap holds it while a request counts).
type RequestCounter struct {
	sync.Mutex
	N map[string]int
}

// NewRequestCounter returns a counter with nothing counted.
func NewRequestCounter() *RequestCounter { return &RequestCounter{N: map[string]int{}} }

// Wrap counts each request next serves.
func (c *RequestCounter) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind := "other"
		switch {
		case r.URL.Path == "/v2/" || r.URL.Path == "/v2":
			kind = "ping"
		case ContainsSegment(r.URL.Path, "referrers"):
			kind = "referrers"
		case ContainsSegment(r.URL.Path, "manifests"):
			kind = "manifest"
		case ContainsSegment(r.URL.Path, "blobs"):
			kind = "blob"
		case ContainsSegment(r.URL.Path, "tags"):
			kind = "tags"
		case r.URL.Path == "/v2/_catalog":
			kind = "catalog"
		}
		c.Lock()
		c.N[r.Method+" "+kind]++
		c.Unlock()
		next.ServeHTTP(w, r)
	})
}

// ContainsSegment reports whether path has seg as one of its segments.
func ContainsSegment(path, seg string) bool {
	return strings.Contains(path+"/", "/"+seg+"/")
}

// Total is the number of requests counted.
func (c *RequestCounter) Total() int {
	c.Lock()
	defer c.Unlock()
	n := 0
	for _, v := range c.N {
		n += v
	}
	return n
}
