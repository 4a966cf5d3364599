package serve

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
)

// TestCollectGarbageNothingPushed: a root that does not exist, or that a
// registry served without anything pushed to it, has nothing to collect
// (distribution's mark fails on the missing repositories directory); gc
// creates nothing where there was nothing.
func TestCollectGarbageNothingPushed(t *testing.T) {
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "srv")
	res, err := CollectGarbage(ctx, GCOptions{Root: missing})
	if err != nil || !res.NothingPushed {
		t.Errorf("gc of a root that does not exist: %+v, %v", res, err)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("gc made %s (%v)", missing, err)
	}

	root := t.TempDir()
	srv, err := New(ctx, Options{Root: root, Address: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	res, err = CollectGarbage(ctx, GCOptions{Root: root})
	if err != nil || !res.NothingPushed || res.BlobsBefore != 0 {
		t.Errorf("gc of a root served but never pushed to: %+v, %v", res, err)
	}
}

// TestCollectGarbageNotARoot: gc pointed at a directory a serve did not
// make, or at a file, is refused and leaves no lock file there.
func TestCollectGarbageNotARoot(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := CollectGarbage(context.Background(), GCOptions{Root: dir})
	if err == nil || !strings.Contains(err.Error(), "--root "+dir+" does not look like a gapmirror serve root (it holds notes.txt") {
		t.Errorf("gc of a directory that is no root: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("gc left files in %s: %v", dir, entries)
	}
	file := filepath.Join(dir, "notes.txt")
	if _, err := CollectGarbage(context.Background(), GCOptions{Root: file}); err == nil || !strings.Contains(err.Error(), "--root "+file+" is a file") {
		t.Errorf("gc of a file: %v", err)
	}
}

// deletedImage pushes two images to a registry on a new root, deletes the
// second one's manifest and stops the registry.
func deletedImage(t *testing.T) (root string, kept, gone *imagebuilder.Image) {
	t.Helper()
	ctx := context.Background()
	root = t.TempDir()
	srv, err := New(ctx, Options{Root: root, Address: "127.0.0.1:0", PlainHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	target := imagebuilder.Target{URL: srv.URL(), Username: pushUser, Password: srv.pushPassword}
	var imgs []*imagebuilder.Image
	for i, repo := range []string{"apps/kept", "apps/gone"} {
		img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(uint64(10+i), 64<<10)}})
		if err != nil {
			t.Fatal(err)
		}
		if err := imagebuilder.Push(ctx, target, repo, "v1", img); err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, img)
	}
	req, _ := http.NewRequest(http.MethodDelete, srv.URL()+"/v2/apps/gone/manifests/"+imgs[1].Digest.String(), nil)
	req.SetBasicAuth(pushUser, srv.pushPassword)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	if _, err := CollectGarbage(ctx, GCOptions{Root: root}); err == nil || !strings.Contains(err.Error(), "in use by another gapmirror serve") {
		t.Errorf("gc under a running registry: %v", err)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	return root, imgs[0], imgs[1]
}

// collectLogged is CollectGarbage with the registry's logs captured.
func collectLogged(t *testing.T, opts GCOptions) (GCResult, string) {
	t.Helper()
	var logs bytes.Buffer
	logrus.SetOutput(&logs)
	defer logrus.SetOutput(os.Stderr)
	res, err := CollectGarbage(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return res, logs.String()
}

// TestCollectGarbageAfterDelete: after one of two images is deleted, gc
// deletes exactly its blobs (config, layer and manifest: the bytes pushed),
// keeps the other image whole, and logs a line per blob only in debug.
func TestCollectGarbageAfterDelete(t *testing.T) {
	root, kept, gone := deletedImage(t)
	res, logs := collectLogged(t, GCOptions{Root: root})
	freed := int64(len(gone.Manifest))
	for _, b := range gone.Blobs() {
		freed += b.Size
	}
	if res.NothingPushed || res.BlobsBefore != 6 || res.BlobsAfter != 3 || res.BytesBefore-res.BytesAfter != freed {
		t.Errorf("gc: %+v, want 3 of 6 blobs deleted, %d bytes", res, freed)
	}
	if res.ManifestsBefore != 1 || res.ManifestsAfter != 1 {
		t.Errorf("manifests %d before, %d after: want the kept one, and gc not to touch it", res.ManifestsBefore, res.ManifestsAfter)
	}
	if strings.Contains(logs, "Deleting blob") {
		t.Errorf("gc logged every blob outside debug:\n%s", logs)
	}
	// The kept image is whole: a registry on the root serves all of it.
	srv := startPlain(t, Options{Root: root})
	for _, b := range append(kept.Blobs(), imagebuilder.Blob{Digest: kept.Digest}) {
		kind := "blobs"
		if b.Digest == kept.Digest {
			kind = "manifests"
		}
		req, _ := http.NewRequest(http.MethodHead, srv.URL()+"/v2/apps/kept/"+kind+"/"+b.Digest.String(), nil)
		req.Header.Set("Accept", kept.MediaType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("kept image: HEAD %s %s: %d", kind, b.Digest, resp.StatusCode)
		}
	}

	// In debug, distribution's line per deleted blob shows.
	root, _, gone = deletedImage(t)
	res, logs = collectLogged(t, GCOptions{Root: root, Debug: true})
	if res.BlobsBefore-res.BlobsAfter != 3 || !strings.Contains(logs, "Deleting blob") || !strings.Contains(logs, gone.Layers[0].Digest.Encoded()) {
		t.Errorf("gc in debug: %+v, logs:\n%s", res, logs)
	}
}
