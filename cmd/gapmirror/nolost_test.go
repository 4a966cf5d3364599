package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// chunkSums maps the chunk files of dir to their SHA-256.
func chunkSums(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	entries, err := os.ReadDir(dir)
	must(t, err)
	for _, e := range entries {
		if archive.IsChunkName(e.Name()) {
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			must(t, err)
			out[e.Name()] = sha256.Sum256(data)
		}
	}
	return out
}

// TestRerunKeepsUncarriedArchive: mirror-to-disk run again into the same
// directory before the archive was carried away never replaces it; each
// archive carries its sequence; disk-to-mirror of the directory applies
// every archive in order; describe lists them all; a run that would
// replace chunks (the workspace records were removed) is refused unless
// --force; a missing predecessor is named with how to make it again.
func TestRerunKeepsUncarriedArchive(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(6, 32<<10)
	all := w.images
	out := filepath.Join(w.dir, "out")
	w.images = all[:4]
	isc1 := w.isc("")
	for i := 0; i < 2; i++ { // the admin runs it twice before carrying
		if code, _, _ := w.gapmirror("mirror", "-c", isc1, "file://"+out); code != 0 {
			t.Fatalf("m2d %d failed", i+1)
		}
	}
	first := chunkSums(t, out)
	// The first archive's blobs are in its chunk 2 (streamed there as they
	// arrived); the second carries nothing new: its chunk 1 alone.
	if _, ok := first["mirror_000001.tar"]; !ok || len(first) != 3 || first["mirror_0002_000001.tar"] == [32]byte{} || first["mirror_000002.tar"] == [32]byte{} {
		t.Fatalf("after two runs the directory holds %v, want mirror_000001.tar, mirror_000002.tar and mirror_0002_000001.tar", keys(first))
	}
	w.images = all
	isc2 := w.isc("")
	if code, _, _ := w.gapmirror("mirror", "-c", isc2, "file://"+out); code != 0 {
		t.Fatal("m2d 3 failed")
	}
	now := chunkSums(t, out)
	for name, sum := range first {
		if now[name] != sum {
			t.Errorf("%s was changed by a later run", name)
		}
	}
	if _, ok := now["mirror_0003_000001.tar"]; !ok {
		t.Errorf("third archive not named by its sequence: %v", keys(now))
	}
	found, err := archive.List(out)
	must(t, err)
	if len(found) != 3 || found[1].Index.BasedOn != found[0].Index.ID || found[2].Index.BasedOn != found[1].Index.ID {
		t.Fatalf("archives in %s: %+v, want a chain of three", out, found)
	}
	code, stdout, _ := w.gapmirror("describe", "--quick", "file://"+out)
	if code != 0 || !strings.Contains(stdout, "3 archives in") {
		t.Errorf("describe (exit %d) does not list three archives:\n%s", code, stdout)
	}
	for _, a := range found {
		if !strings.Contains(stdout, a.Index.ID) || !strings.Contains(stdout, a.First) {
			t.Errorf("describe does not list %s (%s)", a.Index.ID, a.First)
		}
	}

	// The last archive alone, elsewhere: refused, saying how to remake its predecessor.
	alone := filepath.Join(w.dir, "alone")
	must(t, os.MkdirAll(alone, 0o755))
	copyChunks := func(pattern string) {
		names, err := filepath.Glob(filepath.Join(out, pattern))
		must(t, err)
		for _, name := range names {
			data, err := os.ReadFile(name)
			must(t, err)
			must(t, os.WriteFile(filepath.Join(alone, filepath.Base(name)), data, 0o644))
		}
	}
	copyChunks("mirror_0003_*.tar")
	code, _, stderr := w.gapmirror("mirror", "--from", "file://"+alone, "docker://"+w.dst.Host()+"/d2m")
	if code != 1 || !strings.Contains(stderr, found[1].Index.ID) || !strings.Contains(stderr, "--since") {
		t.Errorf("lone incremental archive: exit %d, stderr:\n%s", code, stderr)
	}
	// The whole directory: every archive, in order, in one run.
	if code, _, _ := w.gapmirror("mirror", "--from", "file://"+out, "docker://"+w.dst.Host()+"/d2m"); code != 0 {
		t.Fatal("d2m of the directory failed")
	}
	w.assertMirrored(w.dst, "d2m")
	applied, _ := filepath.Glob(filepath.Join(out, "working-dir", "applied", "*.json"))
	if len(applied) != 3 {
		t.Errorf("%d archives recorded as applied, want 3", len(applied))
	}
	if code, _, _ := w.gapmirror("mirror", "--from", "file://"+out, "docker://"+w.dst.Host()+"/d2m"); code != 0 {
		t.Error("d2m again (nothing left to apply) failed")
	}
	// The same directory feeds a second enclave's mirror: every archive is
	// applied there too, in order (applied is per mirror).
	code, stdout, stderr = w.gapmirror("mirror", "--from", "file://"+out, "docker://"+w.dst.Host()+"/enclave-b")
	if code != 0 || !strings.Contains(stderr, "applying archives in the order they were made") {
		t.Fatalf("d2m of the directory to a second mirror: exit %d\n%s\n%s", code, stdout, stderr)
	}
	w.assertMirrored(w.dst, "enclave-b")
	if applied, _ := filepath.Glob(filepath.Join(out, "working-dir", "applied", "*.json")); len(applied) != 6 {
		t.Errorf("%d applications recorded for two mirrors of 3 archives, want 6", len(applied))
	}

	// The last archive applied alone to a mirror that has the others'
	// blobs; the older archives arriving later are not applied after it:
	// they would move tags back.
	if code, _, _ := w.gapmirror("mirror", "--skip-predecessor-check", "--from", "file://"+alone, "docker://"+w.dst.Host()+"/d2m"); code != 0 {
		t.Fatal("d2m --skip-predecessor-check failed")
	}
	copyChunks("mirror_00000?.tar")
	copyChunks("mirror_0002_*.tar")
	code, _, stderr = w.gapmirror("mirror", "--from", "file://"+alone, "docker://"+w.dst.Host()+"/d2m")
	if applied, _ := filepath.Glob(filepath.Join(alone, "working-dir", "applied", "*.json")); code != 0 || len(applied) != 1 || !strings.Contains(stderr, "older than one already applied") {
		t.Errorf("older archives after a newer one: exit %d, %d applied, stderr:\n%s", code, len(applied), stderr)
	}

	// The workspace's records of the archives are lost: the numbers start
	// again, and the run that would reuse mirror_0002_* is refused.
	must(t, os.RemoveAll(filepath.Join(out, "working-dir", "archives")))
	if code, _, _ := w.gapmirror("mirror", "-c", isc2, "file://"+out); code != 0 {
		t.Fatal("m2d after losing the records failed")
	}
	before := chunkSums(t, out)
	code, _, stderr = w.gapmirror("mirror", "-c", isc2, "file://"+out)
	if code != 1 || !strings.Contains(stderr, "mirror_0002_000001.tar") || !strings.Contains(stderr, "--force") {
		t.Errorf("replacing archive 2: exit %d, stderr:\n%s", code, stderr)
	}
	if after := chunkSums(t, out); len(after) != len(before) || after["mirror_0002_000001.tar"] != before["mirror_0002_000001.tar"] {
		t.Errorf("the refused run changed the chunks: %v", keys(after))
	}
	if code, _, _ := w.gapmirror("mirror", "--force", "-c", isc2, "file://"+out); code != 0 {
		t.Error("m2d --force failed")
	}
	if after := chunkSums(t, out); after["mirror_0002_000001.tar"] == before["mirror_0002_000001.tar"] {
		t.Error("--force did not replace mirror_0002_000001.tar")
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestConcurrentRuns: a second run on a workspace in use is refused at
// once, naming the holder's pid and start time; two workspaces sharing one
// store (--cache-dir) at the same time both complete, and their archives
// mirror every image by digest.
func TestConcurrentRuns(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(6, 64<<10)
	slow := &blobLog{served: map[digest.Digest]int{}, delay: 150 * time.Millisecond}
	w.up.SetWrap(slow.wrap)
	isc := w.isc("")
	outA, outB := filepath.Join(w.dir, "a"), filepath.Join(w.dir, "b")
	codes := make(chan int, 2)
	m2d := func(out string) {
		code, _, _ := w.gapmirror("mirror", "--parallel-images", "1", "-c", isc, "file://"+out)
		codes <- code
	}
	go m2d(outA)
	lock := filepath.Join(outA, "working-dir", ".gapmirror.lock")
	deadline := time.Now().Add(20 * time.Second)
	for {
		if data, _ := os.ReadFile(lock); len(data) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first run never took the workspace lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	go m2d(outB) // same store, another workspace: waits its turn
	start := time.Now()
	code, _, stderr := w.gapmirror("mirror", "-c", isc, "file://"+outA)
	if code != 1 || !strings.Contains(stderr, fmt.Sprintf("pid %d", os.Getpid())) || !strings.Contains(stderr, "started 20") || !strings.Contains(stderr, "in use") {
		t.Errorf("second run on a workspace in use: exit %d, stderr:\n%s", code, stderr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the refusal took %v; it should come at once", d)
	}
	for i := 0; i < 2; i++ {
		if code := <-codes; code != 0 {
			t.Fatalf("a concurrent run failed with exit %d", code)
		}
	}
	slow.mu.Lock()
	slow.delay = 0
	slow.mu.Unlock()
	for _, dir := range []string{outA, outB} {
		w.applyArchive(dir)
	}
}
