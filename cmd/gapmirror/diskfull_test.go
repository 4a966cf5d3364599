//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// tmpfs mounts a tmpfs of size (e.g. "256k") on a new directory, or skips
// the test where mounting is not allowed. resize changes its size, as an
// admin freeing space would.
func tmpfs(t *testing.T, size string) (dir string, resize func(size string)) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "small")
	must(t, os.MkdirAll(dir, 0o755))
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill up (%v): this test needs root (CAP_SYS_ADMIN)", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir, func(size string) {
		must(t, syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, "size="+size))
	}
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

// TestFullDisk: the store, then the archive directory, fills up during
// mirror-to-disk: the error names the path and the bytes still needed, no
// half-written blob or chunk is left for the next run, and the run after
// space is freed completes an archive that mirrors every image. Blobs
// stream straight into the archive; the store holds the manifests.
func TestFullDisk(t *testing.T) {
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(6, 256<<10)
	isc := w.isc("")

	// The store's disk is too small even for the manifests.
	cache, grow := tmpfs(t, "4k")
	out := filepath.Join(w.dir, "out")
	code, _, stderr := w.gapmirror("mirror", "--cache-dir", cache, "-c", isc, "file://"+out)
	if code != 1 || !strings.Contains(stderr, "no space left on the device of "+filepath.Join(cache, ".gapmirror", "store")) {
		t.Fatalf("store disk full: exit %d, stderr:\n%s", code, stderr)
	}
	if left := leftovers(t, filepath.Join(cache, ".gapmirror", "store", "ingest"), ""); len(left) > 0 {
		t.Errorf("half-written files left in the store: %v", left)
	}
	if chunks := leftovers(t, out, "mirror_"); len(chunks) > 0 {
		t.Errorf("an archive was written although the store was full: %v", chunks)
	}
	grow("64m")
	if code, _, _ := w.gapmirror("mirror", "--cache-dir", cache, "-c", isc, "file://"+out); code != 0 {
		t.Fatal("m2d after freeing space failed")
	}

	// The archive's disk is too small for the blobs streaming into it (a
	// new workspace: nothing was carried from there yet).
	small, growOut := tmpfs(t, "400k")
	code, _, stderr = w.gapmirror("mirror", "--cache-dir", cache, "-c", isc, "file://"+small)
	if code != 1 || !strings.Contains(stderr, "no space left on the device of "+small) || !strings.Contains(stderr, "still needed") {
		t.Fatalf("archive disk full: exit %d, stderr:\n%s", code, stderr)
	}
	if left := leftovers(t, small, "mirror_"); len(left) > 0 {
		t.Errorf("chunks (or staged chunks) left by the failed archive: %v", left)
	}
	if recs := leftovers(t, filepath.Join(small, "working-dir", "archives"), ".json"); len(recs) > 0 {
		t.Errorf("the failed archive was recorded as written: %v", recs)
	}
	growOut("64m")
	if code, _, _ := w.gapmirror("mirror", "--cache-dir", cache, "-c", isc, "file://"+small); code != 0 {
		t.Fatal("m2d to the archive disk after freeing space failed")
	}
	if code, _, _ := w.gapmirror("mirror", "--from", "file://"+small, "docker://"+w.dst.Host()+"/full"); code != 0 {
		t.Fatal("d2m failed")
	}
	w.assertMirrored(w.dst, "full")
}
