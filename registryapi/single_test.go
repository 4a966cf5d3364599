package registryapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/types"

	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// singlePost gives the real registry behind it the spec's single-request
// upload (POST ?digest= with the body, 201), which distribution does not
// offer: it opens a session and PUTs the body there itself, so the
// registry still checks the digest. It counts the requests it is sent.
type singlePost struct {
	mu    sync.Mutex
	count map[string]int
}

func (s *singlePost) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
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
		next.ServeHTTP(open, httptest.NewRequest(http.MethodPost, r.URL.Path, nil))
		loc, err := url.Parse(open.Header().Get("Location"))
		if open.Code != http.StatusAccepted || err != nil {
			http.Error(w, "opening the session: "+open.Body.String(), http.StatusInternalServerError)
			return
		}
		q := loc.Query()
		q.Set("digest", d)
		put := httptest.NewRequest(http.MethodPut, loc.Path+"?"+q.Encode(), bytes.NewReader(body))
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

// TestSinglePostUpload: where a registry stores a blob from one POST with
// its digest, every upload is that one request; the blobs are there, whole,
// under their digests. (distribution itself opens a session instead, and
// every other test covers that fallback: POST, then PUT.)
func TestSinglePostUpload(t *testing.T) {
	front := &singlePost{count: map[string]int{}}
	reg := registrytest.Start(t, registrytest.Options{Wrap: front.wrap})
	ctx := context.Background()
	c, err := NewClient(reg.Host(), &types.SystemContext{AuthFilePath: t.TempDir() + "/none.json", DockerInsecureSkipTLSVerify: types.OptionalBoolTrue})
	if err != nil {
		t.Fatal(err)
	}
	blobs := [][]byte{[]byte("the first blob"), bytes.Repeat([]byte("second "), 1000), bytes.Repeat([]byte{7}, 3<<20)}
	before := map[string]int{}
	front.mu.Lock()
	for k, v := range front.count {
		before[k] = v
	}
	front.mu.Unlock()
	for _, b := range blobs {
		if err := c.PutBlob(ctx, "ns/app", digest.FromBytes(b), int64(len(b)), bytes.NewReader(b), ""); err != nil {
			t.Fatalf("upload of %d bytes: %v", len(b), err)
		}
	}
	front.mu.Lock()
	posts, puts, patches := front.count[http.MethodPost]-before[http.MethodPost], front.count[http.MethodPut]-before[http.MethodPut], front.count[http.MethodPatch]
	front.mu.Unlock()
	if posts != len(blobs) || puts != 0 || patches != 0 {
		t.Errorf("%d uploads took %d POST, %d PUT, %d PATCH; want one POST each", len(blobs), posts, puts, patches)
	}
	for _, b := range blobs {
		d := digest.FromBytes(b)
		rc, err := c.Blob(ctx, "ns/app", d, int64(len(b)))
		if err != nil {
			t.Fatalf("reading %s back: %v", d, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("blob %s read back: %d bytes, %v; want %d bytes", d, len(got), err, len(b))
		}
	}
	// The registry checks the digest of a single POST as of a PUT.
	wrong := []byte("not what the digest says")
	if err := c.PutBlob(ctx, "ns/app", digest.FromString("something else"), int64(len(wrong)), bytes.NewReader(wrong), ""); err == nil {
		t.Error("an upload whose body does not match its digest succeeded")
	} else if !strings.Contains(err.Error(), "digest") {
		t.Errorf("an upload whose body does not match its digest: %v, want the registry's digest error", err)
	}
}
