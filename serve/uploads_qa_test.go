package serve

import (
	"bytes"
	"context"
	"io"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
)

// TestServerUploadsQA: without resumable hash state, uploads in parts
// through gapmirror serve: one resumed after asking its status (GET) and
// closed by a PUT carrying the last part; a large blob in many PATCHes,
// right and wrong digest; a PATCH at the wrong offset refused; a cancelled
// upload (DELETE) leaves nothing in _uploads; a blob mounted from another
// repository; serve gc afterwards keeps every committed blob.
func TestServerUploadsQA(t *testing.T) {
	root := t.TempDir()
	srv, err := New(context.Background(), Options{Root: root, Address: "127.0.0.1:0", PlainHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(stop)
	do := func(method, url string, body []byte, header map[string]string) (*http.Response, []byte) {
		t.Helper()
		if strings.HasPrefix(url, "/") {
			url = srv.URL() + url
		}
		req, err := http.NewRequest(method, url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(pushUser, srv.pushPassword)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, data
	}
	loc := func(resp *http.Response) string {
		t.Helper()
		l := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusNoContent || l == "" {
			t.Fatalf("upload answered %s, Location %q", resp.Status, l)
		}
		return l
	}
	withDigest := func(l string, d digest.Digest) string {
		if strings.Contains(l, "?") {
			return l + "&digest=" + d.String()
		}
		return l + "?digest=" + d.String()
	}
	octet := func(from, to int) map[string]string {
		return map[string]string{"Content-Type": "application/octet-stream", "Content-Range": itoa(from) + "-" + itoa(to)}
	}
	post := func(repo string) string {
		r, _ := do(http.MethodPost, "/v2/"+repo+"/blobs/uploads/", nil, nil)
		return loc(r)
	}

	// Resumed: PATCH, GET status, PATCH, PUT with the last part.
	blob := make([]byte, 9000)
	rand.New(rand.NewSource(1)).Read(blob)
	d := digest.FromBytes(blob)
	l := post("apps/resumed")
	r, _ := do(http.MethodPatch, l, blob[:4000], octet(0, 3999))
	l = loc(r)
	r, _ = do(http.MethodGet, l, nil, nil)
	if r.StatusCode != http.StatusNoContent || r.Header.Get("Range") != "0-3999" {
		t.Errorf("upload status: %s, Range %q", r.Status, r.Header.Get("Range"))
	}
	l = loc(r)
	if r, _ := do(http.MethodPatch, l, blob[6000:7000], octet(6000, 6999)); r.StatusCode != http.StatusRequestedRangeNotSatisfiable {
		t.Errorf("a PATCH at the wrong offset: %s, want 416", r.Status)
	}
	r, _ = do(http.MethodPatch, l, blob[4000:7000], octet(4000, 6999))
	l = loc(r)
	if r, _ := do(http.MethodPut, withDigest(l, d), blob[7000:], map[string]string{"Content-Type": "application/octet-stream"}); r.StatusCode != http.StatusCreated {
		t.Fatalf("closing the resumed upload with its last part: %s", r.Status)
	}
	if _, got := do(http.MethodGet, "/v2/apps/resumed/blobs/"+d.String(), nil, nil); !bytes.Equal(got, blob) {
		t.Error("the resumed upload's blob reads back otherwise")
	}

	// Large, in eight PATCHes; the wrong digest is refused.
	big := make([]byte, 8<<20)
	rand.New(rand.NewSource(2)).Read(big)
	bd := digest.FromBytes(big)
	for _, c := range []struct {
		d    digest.Digest
		want int
	}{{digest.FromString("other"), http.StatusBadRequest}, {bd, http.StatusCreated}} {
		l := post("apps/big")
		part := len(big) / 8
		for i := 0; i < 8; i++ {
			r, _ := do(http.MethodPatch, l, big[i*part:(i+1)*part], octet(i*part, (i+1)*part-1))
			l = loc(r)
		}
		if r, body := do(http.MethodPut, withDigest(l, c.d), nil, nil); r.StatusCode != c.want {
			t.Errorf("large upload closed with %s: %s %s, want %d", c.d, r.Status, body, c.want)
		}
	}

	// Cancelled.
	l = post("apps/cancelled")
	r, _ = do(http.MethodPatch, l, []byte("some bytes"), octet(0, 9))
	l = loc(r)
	if r, _ := do(http.MethodDelete, l, nil, nil); r.StatusCode != http.StatusNoContent {
		t.Errorf("cancelling an upload: %s", r.Status)
	}
	if r, _ := do(http.MethodGet, l, nil, nil); r.StatusCode != http.StatusNotFound {
		t.Errorf("a cancelled upload's status: %s, want 404", r.Status)
	}

	// Mounted.
	if r, _ := do(http.MethodPost, "/v2/apps/mounted/blobs/uploads/?mount="+bd.String()+"&from=apps/big", nil, nil); r.StatusCode != http.StatusCreated {
		t.Errorf("mounting a blob: %s", r.Status)
	}
	if r, _ := do(http.MethodHead, "/v2/apps/mounted/blobs/"+bd.String(), nil, nil); r.StatusCode != http.StatusOK {
		t.Errorf("the mounted blob: HEAD %s", r.Status)
	}

	// A committed or cancelled upload leaves nothing in _uploads. (The
	// upload closed with a wrong digest does: distribution's Commit closes
	// the file writer before checking the digest, so its Cancel fails with
	// "already closed" and the upload's data stays until the upload purger
	// removes it, a week later by default. distribution's, with or without
	// resumable hash state.)
	var left []string
	filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() && strings.Contains(p, "/_uploads/") && !strings.Contains(p, "/apps/big/") {
			left = append(left, strings.TrimPrefix(p, root))
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("left in _uploads after every upload was closed or cancelled: %v", left)
	}

	stop()
	res, err := CollectGarbage(context.Background(), GCOptions{Root: root})
	if err != nil {
		t.Fatalf("serve gc after uploads in parts: %v", err)
	}
	// No manifest references the blobs: gc deletes them all.
	if res.BlobsBefore != 2 || res.BlobsAfter != 0 {
		t.Errorf("gc: %+v, want the 2 unreferenced blobs deleted", res)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
