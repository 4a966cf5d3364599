package registryapi

import (
	"bytes"
	"context"
	"errors"
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
// registry still checks the digest. For the digests in decline it reads
// the body and leaves it, answering with the session it opened (202 and
// its Location), as a registry that takes the form only for some blobs
// does. It counts the requests it is sent.
type singlePost struct {
	mu      sync.Mutex
	count   map[string]int
	decline map[string]bool
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

// TestSinglePostDeclined: a registry that took the single POST may answer
// a later one with an upload session (202) instead. A small blob is then
// PUT into that session at once; a large one, whose body the registry
// read, is refused with an error asking for a retry, and the retry sends
// it in two requests. Either way the client uses the two-step form from
// then on, and every blob is there, whole, under its digest.
func TestSinglePostDeclined(t *testing.T) {
	front := &singlePost{count: map[string]int{}, decline: map[string]bool{}}
	reg := registrytest.Start(t, registrytest.Options{Wrap: front.wrap})
	ctx := context.Background()
	newClient := func() *Client {
		c, err := NewClient(reg.Host(), &types.SystemContext{AuthFilePath: t.TempDir() + "/none.json", DockerInsecureSkipTLSVerify: types.OptionalBoolTrue})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	counted := func(f func()) (posts, puts int) {
		t.Helper()
		front.mu.Lock()
		p0, u0 := front.count[http.MethodPost], front.count[http.MethodPut]
		front.mu.Unlock()
		f()
		front.mu.Lock()
		defer front.mu.Unlock()
		return front.count[http.MethodPost] - p0, front.count[http.MethodPut] - u0
	}
	put := func(c *Client, b []byte) error {
		return c.PutBlob(ctx, "ns/app", digest.FromBytes(b), int64(len(b)), bytes.NewReader(b), "")
	}
	readBack := func(c *Client, b []byte) {
		t.Helper()
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

	// A small blob declined: the session's PUT carries it, no error.
	c := newClient()
	taken, declined, after := []byte("taken in one request"), bytes.Repeat([]byte("declined "), 500), []byte("after the decline")
	front.decline[digest.FromBytes(declined).String()] = true
	if posts, puts := counted(func() {
		if err := put(c, taken); err != nil {
			t.Fatalf("the first upload: %v", err)
		}
	}); posts != 1 || puts != 0 {
		t.Fatalf("the first upload took %d POST, %d PUT; want the single POST", posts, puts)
	}
	if posts, puts := counted(func() {
		if err := put(c, declined); err != nil {
			t.Fatalf("a small upload the registry declined: %v", err)
		}
	}); posts != 1 || puts != 1 {
		t.Errorf("a small declined upload took %d POST, %d PUT; want the POST answered 202 and the PUT into its session", posts, puts)
	}
	if posts, puts := counted(func() {
		if err := put(c, after); err != nil {
			t.Fatalf("the upload after a decline: %v", err)
		}
	}); posts != 1 || puts != 1 {
		t.Errorf("the upload after a decline took %d POST, %d PUT; want the two-step form", posts, puts)
	}
	for _, b := range [][]byte{taken, declined, after} {
		readBack(c, b)
	}

	// A large blob declined after the registry read it: a retry is asked
	// for (the body is spent), and the retry sends it in two requests.
	c = newClient()
	large := bytes.Repeat([]byte{9}, 3<<20)
	front.decline[digest.FromBytes(large).String()] = true
	if err := put(c, []byte("first of the second client")); err != nil {
		t.Fatal(err)
	}
	err := put(c, large)
	var e *Error
	if !errors.As(err, &e) || !e.Retry || e.Status != http.StatusAccepted || !strings.Contains(err.Error(), "sent again") {
		t.Fatalf("a large upload the registry declined after reading it: %v; want an error asking for a retry", err)
	}
	if posts, puts := counted(func() {
		if err := put(c, large); err != nil {
			t.Fatalf("the retry of the large upload: %v", err)
		}
	}); posts != 1 || puts != 1 {
		t.Errorf("the retry took %d POST, %d PUT; want the two-step form", posts, puts)
	}
	readBack(c, large)
}
