package registrytest

import (
	"net/http"
	"strings"
	"sync"

	"github.com/opencontainers/go-digest"
)

// Uploads counts blob uploads and cross-repository mounts that the
// registry accepted (201), per digest. Use its Wrap as Options.Wrap or
// with SetWrap.
type Uploads struct {
	mu      sync.Mutex
	put     map[digest.Digest]int
	mounted map[digest.Digest]int
}

// NewUploads returns an empty counter.
func NewUploads() *Uploads {
	return &Uploads{put: map[digest.Digest]int{}, mounted: map[digest.Digest]int{}}
}

// Wrap counts the requests next accepts.
func (u *Uploads) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var count map[digest.Digest]int
		var d digest.Digest
		switch {
		case r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/blobs/uploads/") && q.Get("digest") != "":
			count, d = u.put, digest.Digest(q.Get("digest"))
		case r.Method == http.MethodPost && q.Get("mount") != "":
			count, d = u.mounted, digest.Digest(q.Get("mount"))
		default:
			next.ServeHTTP(w, r)
			return
		}
		rec := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if rec.status == http.StatusCreated {
			u.mu.Lock()
			count[d]++
			u.mu.Unlock()
		}
	})
}

// Put is how many times blob d was uploaded.
func (u *Uploads) Put(d digest.Digest) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.put[d]
}

// Mounted is how many times blob d was mounted from another repository.
func (u *Uploads) Mounted(d digest.Digest) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.mounted[d]
}

// MaxPut is the most times any one blob was uploaded.
func (u *Uploads) MaxPut() (digest.Digest, int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	var top digest.Digest
	for d, n := range u.put {
		if n > u.put[top] {
			top = d
		}
	}
	return top, u.put[top]
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(status int) {
	if s.status == 0 {
		s.status = status
	}
	s.ResponseWriter.WriteHeader(status)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
