package main

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// procWritten is the number of bytes this process has passed to write
// system calls so far (Linux /proc/self/io wchar), or skips the test.
func procWritten(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/io")
	if err != nil {
		t.Skipf("cannot count the bytes this process writes (%v): this test needs Linux /proc/self/io", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "wchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			must(t, err)
			return n
		}
	}
	t.Skip("/proc/self/io has no wchar line")
	return 0
}

// treeBytes is the size of the regular files under dir whose names match.
func treeBytes(t *testing.T, dir, pattern string) (n int64) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if ok, _ := filepath.Match(pattern, d.Name()); err == nil && d.Type().IsRegular() && ok {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// TestMirrorToDiskWritesEachByteOnce: mirror-to-disk streams every blob
// straight into the archive, so the run writes about the archive's size
// (writing into the store and then the archive was twice that), and the
// store keeps manifests only. A second workspace on the same machine reads
// the blobs from the first archive instead of fetching them again; once
// that archive is gone, a third fetches them again. Every archive pushes a
// complete mirror.
func TestMirrorToDiskWritesEachByteOnce(t *testing.T) {
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(6, 512<<10)
	isc := w.isc("")
	store := filepath.Join(w.dir, "cache", ".gapmirror", "store")

	// The upstream registry runs in this process: the bytes it sends are
	// written too (to its sockets), and are not the run's.
	var served atomic.Int64
	w.up.SetWrap(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(&countingResponse{ResponseWriter: rw, n: &served}, r)
		})
	})
	first := filepath.Join(w.dir, "first")
	before := procWritten(t)
	code, stdout, _ := w.gapmirror("mirror", "-c", isc, "file://"+first)
	written := procWritten(t) - before - served.Load()
	w.up.SetWrap(nil)
	if code != 0 || !strings.Contains(stdout, "6 copied, 0 already at the destination") {
		t.Fatalf("first mirror-to-disk: exit %d\n%s", code, stdout)
	}
	archived := treeBytes(t, first, "mirror_*.tar")
	if archived < 1<<20 {
		t.Fatalf("the archive holds %d bytes, less than the images' layers", archived)
	}
	t.Logf("mirror-to-disk wrote %d bytes for an archive of %d (%.2f×)", written, archived, float64(written)/float64(archived))
	if written > archived*13/10 {
		t.Errorf("mirror-to-disk wrote %d bytes for an archive of %d (%.2f×): bytes are written more than once", written, archived, float64(written)/float64(archived))
	}
	if stored := treeBytes(t, filepath.Join(store, "blobs"), "*"); stored > archived/20 {
		t.Errorf("the store holds %d bytes of blobs for an archive of %d: it should keep manifests only", stored, archived)
	}

	// Another workspace: every blob is read from the first archive.
	second := filepath.Join(w.dir, "second")
	code, stdout, _ = w.gapmirror("mirror", "-c", isc, "file://"+second)
	if code != 0 || !strings.Contains(stdout, "0 copied, 6 already at the destination") {
		t.Fatalf("second workspace: exit %d, want every image found through the first archive\n%s", code, stdout)
	}

	// The first archive carried away: a third workspace fetches again.
	for _, c := range chunkFiles(t, first) {
		must(t, os.Remove(c))
	}
	third := filepath.Join(w.dir, "third")
	code, stdout, _ = w.gapmirror("mirror", "-c", isc, "file://"+third)
	if code != 0 || !strings.Contains(stdout, "6 copied, 0 already at the destination") {
		t.Fatalf("third workspace, first archive gone: exit %d\n%s", code, stdout)
	}

	for _, dir := range []string{second, third} {
		w.applyArchive(dir)
	}
}

// chunkFiles lists the chunk files of the archives in dir.
func chunkFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "mirror_*.tar"))
	must(t, err)
	if len(names) == 0 {
		t.Fatalf("no chunk in %s", dir)
	}
	return names
}

// countingResponse counts the body bytes a handler writes.
type countingResponse struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countingResponse) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// TestStrictArchiveSizeFailsFast: a blob larger than a strict archive size
// ends mirror-to-disk at once, saying so once with the size to set, and
// leaves no archive; without --strict-archive the blob gets a chunk of its
// own and the archive mirrors every image.
func TestStrictArchiveSizeFailsFast(t *testing.T) {
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(3, 256<<10)
	isc := w.isc("")
	out := filepath.Join(w.dir, "out")
	code, _, stderr := w.gapmirror("mirror", "-c", isc, "--archive-size", "64KiB", "--strict-archive", "file://"+out)
	if code == 0 || strings.Count(stderr, "set the archive size to at least") != 1 || !strings.Contains(stderr, "nothing was archived") {
		t.Fatalf("strict archive size: exit %d, want one error naming the size to set\n%s", code, stderr)
	}
	if left := leftovers(t, out, "mirror_"); len(left) > 0 {
		t.Errorf("files left by the refused archive: %v", left)
	}
	code, _, stderr = w.gapmirror("mirror", "-c", isc, "--archive-size", "64KiB", "file://"+out)
	if code != 0 || !strings.Contains(stderr, "is larger than the archive size limit") {
		t.Fatalf("oversized chunks allowed: exit %d\n%s", code, stderr)
	}
	if code, _, _ := w.gapmirror("mirror", "--from", "file://"+out, "docker://"+w.dst.Host()+"/big"); code != 0 {
		t.Fatal("disk-to-mirror failed")
	}
	w.assertMirrored(w.dst, "big")
}

// TestInterruptedMirrorToDiskKeepsItsBlobs: mirror-to-disk stopped by a
// signal (its context cancelled) writes no archive but keeps the blobs it
// downloaded whole, in the workspace, linked from the store; the next run
// downloads only the others, and the archive it writes is whole.
func TestInterruptedMirrorToDiskKeepsItsBlobs(t *testing.T) {
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(8, 256<<10)
	isc := w.isc("")
	var gets atomic.Int64
	var cancelAt atomic.Int64
	var active, lastStart atomic.Int64
	w.up.SetWrap(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			active.Add(1)
			defer active.Add(-1)
			lastStart.Store(time.Now().UnixNano())
			if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
				// Counted as they start; past the cut they are held
				// until the run gives up on them, so the run stops with
				// only the blobs served before the cut downloaded.
				if n := gets.Add(1); cancelAt.Load() > 0 && n > cancelAt.Load() {
					<-r.Context().Done()
					return
				}
			}
			next.ServeHTTP(rw, r)
		})
	})
	// How many blobs the set has: a whole run, with a cache of its own.
	code, _, _ := w.gapmirror("mirror", "--cache-dir", filepath.Join(w.dir, "cache-ref"), "-c", isc, "file://"+filepath.Join(w.dir, "ref"))
	total := gets.Load()
	if code != 0 || total < 8 {
		t.Fatalf("reference run: exit %d, %d blobs", code, total)
	}

	out := filepath.Join(w.dir, "out")
	cache := filepath.Join(w.dir, "cache-2")
	gets.Store(0)
	cancelAt.Store(total / 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The signal comes once some blob is staged whole (its journal line
	// written): served is not yet received, and a blob still arriving
	// when the signal comes is rightly dropped.
	go func() {
		defer cancel()
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			journals, _ := filepath.Glob(filepath.Join(out, "mirror_*.journal.partial"))
			for _, j := range journals {
				if data, _ := os.ReadFile(j); strings.Contains(string(data), "\n") {
					return
				}
			}
			if ctx.Err() != nil {
				return
			}
		}
	}()
	code, _, stderr := w.gapmirrorCtx(ctx, "mirror", "--cache-dir", cache, "-c", isc, "file://"+out)
	m := regexp.MustCompile(`interrupted: .*run again to resume: (\d+) blobs already downloaded are kept`).FindStringSubmatch(stderr)
	if code == 0 || m == nil {
		t.Fatalf("interrupted run: exit %d\n%s", code, stderr)
	}
	kept, _ := strconv.ParseInt(m[1], 10, 64)
	if kept == 0 {
		t.Fatalf("the interrupted run kept nothing of %d blobs downloaded", gets.Load())
	}
	if chunks, _ := filepath.Glob(filepath.Join(out, "mirror_*")); len(chunks) > 0 {
		t.Errorf("an interrupted run left archive files: %v", chunks)
	}

	// A request the cancelled run sent as it stopped may reach the
	// registry later still: wait for quiet before counting the next run's.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if active.Load() == 0 && time.Since(time.Unix(0, lastStart.Load())) > 300*time.Millisecond {
			break
		}
	}
	gets.Store(0)
	cancelAt.Store(0)
	code, stdout, _ := w.gapmirror("mirror", "--cache-dir", cache, "-c", isc, "file://"+out)
	if code != 0 {
		t.Fatalf("the run after the interruption: exit %d\n%s", code, stdout)
	}
	if got := gets.Load(); got != total-kept {
		t.Errorf("the run after the interruption downloaded %d blobs, want %d (%d of %d were kept)", got, total-kept, kept, total)
	}
	if left, _ := os.ReadDir(filepath.Join(out, "working-dir", "salvage")); len(left) > 0 {
		t.Errorf("kept blobs left behind once archived: %d files", len(left))
	}
	w.applyArchive(out)
}
