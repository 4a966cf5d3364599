//go:build linux

package main

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// tmpfs mounts a tmpfs of size (e.g. "256k") on a new directory, or skips
// the test where mounting is not allowed. resize changes its size, as an
// admin freeing space would.
func tmpfs(t *testing.T, size string) (dir string, resize func(size string)) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "small")
	return dir, tmpfsAt(t, dir, size)
}

// tmpfsAt is tmpfs on dir, created if needed.
func tmpfsAt(t *testing.T, dir, size string) (resize func(size string)) {
	t.Helper()
	must(t, os.MkdirAll(dir, 0o755))
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill up (%v): this test needs root (CAP_SYS_ADMIN)", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return func(size string) {
		must(t, syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, "size="+size))
	}
}

// TestFullDisk: real full disks (small tmpfs mounts; root only, skipped
// otherwise; TestNoSpaceInjected covers the same without root) during
// mirror-to-disk through the CLI. The store's disk has room for its
// metadata and the catalog's manifests and small blobs, not for the
// catalog's base layer, so the store's blob write runs out mid-blob; then
// the archive directory's disk fills while blobs stream into the chunks;
// then the workspace's archives/ record does not fit. Each run fails naming
// the path and the bytes still needed there, leaves no half-written blob,
// chunk or record, and the run after the space is freed completes an
// archive that mirrors every image by digest.
func TestFullDisk(t *testing.T) {
	w, isc := newDiskWorld(t)
	verified := func(out, prefix string) {
		t.Helper()
		if code, _, _ := w.gapmirror("mirror", "--from", "file://"+out, "docker://"+w.dst.Host()+"/"+prefix); code != 0 {
			t.Fatalf("disk-to-mirror of %s failed", out)
		}
		verifySet(w, prefix, archiveOf(t, out).Set)
	}

	// The store: 512 KiB, less than the catalog's base layer alone.
	cache, grow := tmpfs(t, "512k")
	store := filepath.Join(cache, ".gapmirror", "store")
	out := filepath.Join(w.dir, "out")
	code, _, stderr := w.gapmirror("mirror", "--cache-dir", cache, "-c", isc, "file://"+out)
	m := storeBlobFull.FindStringSubmatch(stderr)
	if code != 1 || m == nil || !strings.HasPrefix(m[1], store) {
		t.Fatalf("store disk full: exit %d, want an error naming a blob of %s and the bytes it needs:\n%s", code, store, stderr)
	}
	if blob, err := w.up.Blob("redhat/redhat-operator-index", digest.NewDigestFromEncoded(digest.SHA256, m[2])); err != nil || len(blob) < catalogBaseLayer {
		t.Errorf("the blob that did not fit is not the catalog's base layer (%d bytes, %v)", len(blob), err)
	}
	if _, err := os.Stat(m[1]); err == nil {
		t.Errorf("the blob that did not fit is in the store: %s", m[1])
	}
	if left := leftovers(t, filepath.Join(store, "ingest"), ""); len(left) > 0 {
		t.Errorf("half-written files left in the store: %v", left)
	}
	if chunks := leftovers(t, out, "mirror_"); len(chunks) > 0 {
		t.Errorf("an archive was written although the store was full: %v", chunks)
	}
	grow("64m")
	if code, _, _ := w.gapmirror("mirror", "--cache-dir", cache, "-c", isc, "file://"+out); code != 0 {
		t.Fatal("m2d after freeing space failed")
	}
	verified(out, "store")

	// The archive's disk is too small for the blobs streaming into it (a
	// new store: nothing is linked from the first archive).
	small, growOut := tmpfs(t, "400k")
	cache2 := filepath.Join(w.dir, "cache2")
	code, _, stderr = w.gapmirror("mirror", "--cache-dir", cache2, "-c", isc, "file://"+small)
	if code != 1 || !strings.Contains(stderr, "no space left on the device of "+small+": at least ") || !strings.Contains(stderr, "still needed") {
		t.Fatalf("archive disk full: exit %d, stderr:\n%s", code, stderr)
	}
	if left := leftovers(t, small, "mirror_"); len(left) > 0 {
		t.Errorf("chunks (or staged chunks) left by the failed archive: %v", left)
	}
	if recs := leftovers(t, filepath.Join(small, "working-dir", "archives"), ".json"); len(recs) > 0 {
		t.Errorf("the failed archive was recorded as written: %v", recs)
	}
	growOut("64m")
	if code, _, _ := w.gapmirror("mirror", "--cache-dir", cache2, "-c", isc, "file://"+small); code != 0 {
		t.Fatal("m2d to the archive disk after freeing space failed")
	}
	verified(small, "archive")

	// The workspace's records: a one-page tmpfs on working-dir/archives,
	// filled up; the archive's record does not fit.
	out = filepath.Join(w.dir, "records")
	records := filepath.Join(out, "working-dir", "archives")
	tmpfsAt(t, records, "4k")
	filler := filepath.Join(records, "filler")
	must(t, os.WriteFile(filler, make([]byte, 4096), 0o644))
	code, _, stderr = w.gapmirror("mirror", "--cache-dir", cache2, "-c", isc, "file://"+out)
	if code != 1 || !regexp.MustCompile(`no space left on the device of `+regexp.QuoteMeta(records)+`/\S+\.json: \d+(\.\d)? (B|KiB) is still needed there`).MatchString(stderr) {
		t.Fatalf("workspace disk full: exit %d, want an error naming the record and its size:\n%s", code, stderr)
	}
	if left := leftovers(t, records, ".json"); len(left) > 0 {
		t.Errorf("records (or temporary ones) left: %v", left)
	}
	if chunks := leftovers(t, out, "mirror_"); len(chunks) > 0 {
		t.Errorf("chunks of an archive the workspace does not know of were left: %v", chunks)
	}
	must(t, os.Remove(filler))
	if code, _, _ := w.gapmirror("mirror", "--cache-dir", cache2, "-c", isc, "file://"+out); code != 0 {
		t.Fatal("m2d after freeing the workspace's space failed")
	}
	verified(out, "records")
}

// TestReadOnlyMedia: disk-to-mirror from a directory on a read-only file
// system (a write-protected stick, a DVD) is refused before anything is
// pushed, saying why (its records and log go into DIR/working-dir) and to
// copy the chunks to a writable directory, which then works; describe
// reads the read-only media as it is.
func TestReadOnlyMedia(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(2, 16<<10)
	out, media := filepath.Join(w.dir, "out"), filepath.Join(w.dir, "dvd")
	if code, _, _ := w.gapmirror("mirror", "-c", w.isc(""), "file://"+out); code != 0 {
		t.Fatal("m2d failed")
	}
	copyChunksTo(t, out, media, "mirror_*.tar")
	if err := syscall.Mount(media, media, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("cannot bind-mount %s (%v): this test needs root (CAP_SYS_ADMIN)", media, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(media, syscall.MNT_DETACH) })
	if err := syscall.Mount(media, media, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Skipf("cannot make the bind mount of %s read-only (%v)", media, err)
	}
	if err := os.WriteFile(filepath.Join(media, "probe"), nil, 0o644); err == nil {
		t.Fatal("the read-only mount is writable: the test proves nothing")
	}
	var requests atomic.Int64
	w.dst.SetWrap(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			next.ServeHTTP(rw, r)
		})
	})
	code, _, stderr := w.gapmirror("mirror", "--from", "file://"+media, "docker://"+w.dst.Host()+"/m")
	w.dst.SetWrap(nil)
	want := "--from file://" + media + ": " + media + " cannot be written (read-only file system): disk-to-mirror keeps its records of the archives applied and its log in " + filepath.Join(media, "working-dir") + "; copy the archive (mirror_*: the chunks and any signature) to a writable directory"
	if code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("read-only --from: exit %d, want 1 and %q:\n%s", code, want, stderr)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("the mirror got %d requests before the read-only media was refused", n)
	}
	if code, stdout, _ := w.gapmirror("describe", "file://"+media); code != 0 || !strings.Contains(stdout, "intact") {
		t.Errorf("describe of read-only media: exit %d:\n%s", code, stdout)
	}
	copied := filepath.Join(w.dir, "copied")
	copyChunksTo(t, media, copied, "mirror_*.tar")
	if code, _, _ := w.gapmirror("mirror", "--from", "file://"+copied, "docker://"+w.dst.Host()+"/m"); code != 0 {
		t.Fatal("disk-to-mirror from the writable copy failed")
	}
	w.assertMirrored(w.dst, "m")
}
