package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// catalogBaseLayer is the size of the disk world's catalog base layer:
// the biggest blob of its runs, and one the store holds (gapmirror reads
// catalogs itself), where the other images' blobs stream into the archive.
const catalogBaseLayer = 768 << 10

// newDiskWorld is a world of 6 images (256 KiB layers) and an operator
// catalog whose image has a catalogBaseLayer base layer, with an ISC naming
// the images and one package of the catalog.
func newDiskWorld(t *testing.T) (w *world, isc string) {
	w = newWorld(t, registrytest.Options{})
	w.pushFleet(6, 256<<10)
	oc := w.pushCatalog("redhat/redhat-operator-index", "v4.18", catalogOptions{Spec: monthSpec, Single: true, BaseLayer: catalogBaseLayer})
	var b strings.Builder
	b.WriteString("  additionalImages:\n")
	for _, ex := range w.images {
		fmt.Fprintf(&b, "  - name: %s\n", ex.Ref)
	}
	fmt.Fprintf(&b, "  operators:\n  - catalog: %s\n    packages:\n    - name: operator-000\n      channels:\n      - name: stable\n", oc.Ref)
	return w, w.writeISC("disk.yaml", b.String())
}

// fillAfter gives the disk under dir room for budget more bytes: a write
// of a store blob, archive chunk or workspace record under dir that does
// not fit in what is left fails with ENOSPC, as on a full disk (a smaller
// one may still fit; nothing is freed), until the returned function frees
// the space.
func fillAfter(dir string, budget int64) (free func()) {
	var left atomic.Int64
	left.Store(budget)
	return archive.SetWriteFault(func(path string, n int) error {
		if !strings.HasPrefix(path, dir+string(filepath.Separator)) {
			return nil
		}
		for {
			l := left.Load()
			if int64(n) > l {
				return syscall.ENOSPC
			}
			if left.CompareAndSwap(l, l-int64(n)) {
				return nil
			}
		}
	})
}

// storeBlobFull matches the error of a store blob that did not fit.
var storeBlobFull = regexp.MustCompile(`no space left on the device of (\S+/blobs/sha256/([0-9a-f]{64})): at least (\S+ \S+) is still needed there`)

// TestNoSpaceInjected: without root, a write fault (ENOSPC from the file
// writes gapmirror makes, see archive.SetWriteFault) fills in turn the
// store while it takes in the catalog image (a blob write cut mid-blob),
// the archive directory while blobs stream into it, and the workspace when
// the archive's record is written, each during mirror-to-disk through the
// CLI. Each run fails naming the path and the bytes still needed there and
// leaves nothing partial behind (no ingest file, no blob under the digest
// it did not finish, no chunk, no record); the next run after freeing the
// space fetches again only what was not stored whole, completes, and its
// archive mirrors every image by digest.
func TestNoSpaceInjected(t *testing.T) {
	w, isc := newDiskWorld(t)
	log := &blobLog{served: map[digest.Digest]int{}}
	w.up.SetWrap(log.wrap)
	store := filepath.Join(w.dir, "cache", ".gapmirror", "store") // the world's --cache-dir
	mirrorDisk := func(out string, more ...string) (int, string) {
		t.Helper()
		code, _, stderr := w.gapmirror(append([]string{"mirror", "-c", isc, "file://" + out}, more...)...)
		return code, stderr
	}
	nothingLeft := func(what string, dir string, parts ...string) {
		t.Helper()
		if left := leftovers(t, dir, parts...); len(left) > 0 {
			t.Errorf("%s: partly written files left: %v", what, left)
		}
	}
	verified := func(out, prefix string) {
		t.Helper()
		if code, _, _ := w.gapmirror("mirror", "--from", "file://"+out, "docker://"+w.dst.Host()+"/"+prefix); code != 0 {
			t.Fatalf("disk-to-mirror of %s: exit %d", out, code)
		}
		verifySet(w, prefix, archiveOf(t, out).Set)
	}

	// The store: room for the catalog's manifests and small blobs, not for
	// its base layer.
	out := filepath.Join(w.dir, "store-full")
	free := fillAfter(store, 256<<10)
	code, stderr := mirrorDisk(out)
	free()
	m := storeBlobFull.FindStringSubmatch(stderr)
	if code == 0 || m == nil || !strings.HasPrefix(m[1], store) {
		t.Fatalf("store full: exit %d, want an error naming a blob of %s and the bytes it needs:\n%s", code, store, stderr)
	}
	if blob, err := w.up.Blob("redhat/redhat-operator-index", digest.NewDigestFromEncoded(digest.SHA256, m[2])); err != nil || len(blob) < catalogBaseLayer {
		t.Errorf("the blob that did not fit is not the catalog's base layer (%d bytes, %v)", len(blob), err)
	}
	if _, err := os.Stat(m[1]); err == nil {
		t.Errorf("the blob that did not fit is in the store: %s", m[1])
	}
	nothingLeft("store", filepath.Join(store, "ingest"), "")
	nothingLeft("store run's archive", out, "mirror_")
	stored := storeBlobs(t, store)
	if len(stored) == 0 {
		t.Fatal("the store took in no blob before it filled: the budget is too small to show reuse")
	}
	log.reset()
	if code, _ := mirrorDisk(out); code != 0 {
		t.Fatal("mirror-to-disk after freeing the store's space failed")
	}
	for d := range stored {
		if log.count(d) > 0 {
			t.Errorf("blob %s was stored whole before the disk filled, but fetched again", d)
		}
	}
	verified(out, "store")

	// The store again, during the copy: the images' manifests go into the
	// store while their blobs stream into the archive (a new store; its
	// disk fills when the first manifest of an image is written).
	out = filepath.Join(w.dir, "store-full-copy")
	cache3 := filepath.Join(w.dir, "cache3")
	store3 := filepath.Join(cache3, ".gapmirror", "store")
	manifests := map[string]bool{}
	for _, ex := range w.images {
		manifests[ex.Digest.Encoded()] = true
	}
	restore := archive.SetWriteFault(func(path string, n int) error {
		hex, _, _ := strings.Cut(filepath.Base(path), "-")
		if strings.HasPrefix(path, store3+string(filepath.Separator)) && manifests[hex] {
			return syscall.ENOSPC
		}
		return nil
	})
	code, stderr = mirrorDisk(out, "--cache-dir", cache3)
	restore()
	if code == 0 || !regexp.MustCompile(`no space left on the device of `+regexp.QuoteMeta(store3)+`\S*: at least \d+(\.\d)? (B|KiB) is still needed there`).MatchString(stderr) {
		t.Fatalf("store full during the copy: exit %d, want an error naming %s and the bytes still needed:\n%s", code, store3, stderr)
	}
	nothingLeft("store during the copy", filepath.Join(store3, "ingest"), "")
	nothingLeft("store during the copy", out, "mirror_")
	if code, _ := mirrorDisk(out, "--cache-dir", cache3); code != 0 {
		t.Fatal("mirror-to-disk after freeing the store's space failed")
	}
	verified(out, "store-copy")

	// The archive directory: it fills while blobs stream into the staged
	// chunks (a new store, so that they are fetched, not read from the
	// first archive the store links to), then while the chunks are written
	// from the store's links at the end.
	for _, c := range []struct {
		name, flag string
		atLeast    string
	}{
		{"streaming", filepath.Join(w.dir, "cache2"), "at least "},
		{"from links", filepath.Join(w.dir, "cache"), ""},
	} {
		out = filepath.Join(w.dir, "archive-full-"+strings.ReplaceAll(c.name, " ", "-"))
		free = fillAfter(out, 512<<10)
		code, stderr = mirrorDisk(out, "--cache-dir", c.flag)
		free()
		if code == 0 || !regexp.MustCompile(`no space left on the device of `+regexp.QuoteMeta(out)+`: `+c.atLeast+`\d+(\.\d)? (KiB|MiB) is still needed there`).MatchString(stderr) {
			t.Fatalf("archive full, %s: exit %d, want an error naming %s and the bytes still needed:\n%s", c.name, code, out, stderr)
		}
		nothingLeft("archive "+c.name, out, "mirror_")
		nothingLeft("archive "+c.name, filepath.Join(out, "working-dir", "archives"), "")
		if code, _ := mirrorDisk(out, "--cache-dir", c.flag); code != 0 {
			t.Fatalf("archive full, %s: mirror-to-disk after freeing the space failed", c.name)
		}
		verified(out, "archive-"+strings.ReplaceAll(c.name, " ", "-"))
	}

	// The workspace: the chunks are written, the archive's record does not
	// fit; the chunks are taken back (an archive the workspace does not
	// know would clash with the next one).
	out = filepath.Join(w.dir, "record-full")
	records := filepath.Join(out, "working-dir", "archives")
	free = fillAfter(records, 0)
	code, stderr = mirrorDisk(out)
	free()
	if code == 0 || !regexp.MustCompile(`no space left on the device of `+regexp.QuoteMeta(records)+`/\S+\.json: \d+(\.\d)? (B|KiB) is still needed there`).MatchString(stderr) {
		t.Fatalf("workspace full: exit %d, want an error naming the record and its size:\n%s", code, stderr)
	}
	nothingLeft("record", records, "")
	nothingLeft("record", out, "mirror_")
	if code, _ := mirrorDisk(out); code != 0 {
		t.Fatal("mirror-to-disk after freeing the workspace's space failed")
	}
	verified(out, "record")
}

// storeBlobs lists the blobs stored whole in the store (not links).
func storeBlobs(t *testing.T, store string) map[digest.Digest]bool {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(store, "blobs", "sha256"))
	must(t, err)
	out := map[digest.Digest]bool{}
	for _, e := range entries {
		out[digest.NewDigestFromEncoded(digest.SHA256, e.Name())] = true
	}
	return out
}

// leftovers lists files under dir whose names contain any of parts.
func leftovers(t *testing.T, dir string, parts ...string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		for _, s := range parts {
			if err == nil && !d.IsDir() && strings.Contains(filepath.Base(p), s) {
				out = append(out, p)
			}
		}
		return nil
	})
	return out
}
