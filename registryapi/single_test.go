package registryapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/types"

	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// TestSinglePostUpload: where a registry stores a blob from one POST with
// its digest, every upload is that one request; the blobs are there, whole,
// under their digests. (distribution itself opens a session instead, and
// every other test covers that fallback: POST, then PUT.)
func TestSinglePostUpload(t *testing.T) {
	front := &registrytest.SinglePost{}
	reg := registrytest.Start(t, registrytest.Options{Wrap: front.Wrap})
	ctx := context.Background()
	c, err := NewClient(reg.Host(), &types.SystemContext{AuthFilePath: t.TempDir() + "/none.json", DockerInsecureSkipTLSVerify: types.OptionalBoolTrue})
	if err != nil {
		t.Fatal(err)
	}
	blobs := [][]byte{[]byte("the first blob"), bytes.Repeat([]byte("second "), 1000), bytes.Repeat([]byte{7}, 3<<20)}
	before := map[string]int{http.MethodPost: front.Count(http.MethodPost), http.MethodPut: front.Count(http.MethodPut)}
	for _, b := range blobs {
		if err := c.PutBlob(ctx, "ns/app", digest.FromBytes(b), int64(len(b)), bytes.NewReader(b), ""); err != nil {
			t.Fatalf("upload of %d bytes: %v", len(b), err)
		}
	}
	posts, puts, patches := front.Count(http.MethodPost)-before[http.MethodPost], front.Count(http.MethodPut)-before[http.MethodPut], front.Count(http.MethodPatch)
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
	front := &registrytest.SinglePost{}
	reg := registrytest.Start(t, registrytest.Options{Wrap: front.Wrap})
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
		p0, u0 := front.Count(http.MethodPost), front.Count(http.MethodPut)
		f()
		return front.Count(http.MethodPost) - p0, front.Count(http.MethodPut) - u0
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
	front.Decline(digest.FromBytes(declined).String())
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
	front.Decline(digest.FromBytes(large).String())
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
