package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// orphanWorld writes two archives of a small fleet into out (the second
// after a late image arrived) and returns the world and a mirror-to-disk
// runner.
func orphanWorld(t *testing.T, seed uint64) (*world, string, func(args ...string) (int, string, string)) {
	t.Helper()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(3, 32<<10)
	out := filepath.Join(w.dir, "archive")
	mirrorDisk := func(args ...string) (int, string, string) {
		t.Helper()
		return w.gapmirror(append(append([]string{"mirror", "-c", w.isc(""), "--archive-size", "128KiB"}, args...), "file://"+out)...)
	}
	if code, _, _ := mirrorDisk(); code != 0 {
		t.Fatal("first mirror-to-disk failed")
	}
	w.addLate(seed)
	if code, _, _ := mirrorDisk(); code != 0 {
		t.Fatal("second mirror-to-disk failed")
	}
	return w, out, mirrorDisk
}

// addLate pushes one more image upstream and adds it to the world.
func (w *world) addLate(seed uint64) {
	w.t.Helper()
	repo := "apps/late-" + string(rune('a'+seed%26))
	img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(seed, 150<<10), imagebuilder.RandomLayer(seed+1, 150<<10)}})
	must(w.t, err)
	must(w.t, imagebuilder.Push(context.Background(), w.upTarget(), repo, "v1", img))
	w.images = append(w.images, example{Ref: w.up.Host() + "/" + repo + ":v1", Repo: repo, Tag: "v1", Digest: img.Digest})
}

func forgetRecord(t *testing.T, out string, seq int) {
	t.Helper()
	rec := recordOfSeq(t, filepath.Join(out, "working-dir", "archives"), seq)
	if rec == "" {
		t.Fatalf("no record of archive %d", seq)
	}
	must(t, os.Remove(rec))
}

// TestOrphanQATruncatedFirstChunk: an orphan whose first chunk was cut
// short is not whole: the next run must not adopt it (its index, at the
// start of chunk 1, still reads).
func TestOrphanQATruncatedFirstChunk(t *testing.T) {
	t.Parallel()
	_, out, mirrorDisk := orphanWorld(t, 701)
	forgetRecord(t, out, 2)
	first := filepath.Join(out, "mirror_0002_000001.tar")
	fi, err := os.Stat(first)
	must(t, err)
	must(t, os.Truncate(first, fi.Size()/2))
	code, stdout, stderr := mirrorDisk()
	if code == 0 || strings.Contains(stdout+stderr, "now recorded") {
		t.Errorf("a stopped run's archive with chunk 1 cut short was adopted: exit %d\n%s", code, stderr)
	}
	if fi2, err := os.Stat(first); err != nil || fi2.Size() != fi.Size()/2 {
		t.Errorf("the damaged chunk was replaced or removed")
	}
}

// TestOrphanQATwoInARow: the records of the last two archives are gone.
func TestOrphanQATwoInARow(t *testing.T) {
	t.Parallel()
	w, out, mirrorDisk := orphanWorld(t, 711)
	w.addLate(721)
	if code, _, _ := mirrorDisk(); code != 0 {
		t.Fatal("third mirror-to-disk failed")
	}
	forgetRecord(t, out, 2)
	forgetRecord(t, out, 3)
	w.addLate(731)
	code, _, stderr := mirrorDisk()
	if code != 0 {
		t.Fatalf("two orphans in a row: exit %d\n%s", code, stderr)
	}
	w.applyArchive(out)
}

// TestOrphanQASince: an orphan, then a run with --since that leaves every
// earlier archive out of the baseline.
func TestOrphanQASince(t *testing.T) {
	t.Parallel()
	w, out, mirrorDisk := orphanWorld(t, 741)
	forgetRecord(t, out, 2)
	code, stdout, stderr := mirrorDisk("--since", "2001-01-01")
	if code != 0 || !strings.Contains(stdout+stderr, "now recorded") {
		t.Fatalf("orphan then --since: exit %d\n%s", code, stderr)
	}
	if recordOfSeq(t, filepath.Join(out, "working-dir", "archives"), 3) == "" {
		t.Fatal("no record of archive 3")
	}
	w.applyArchive(out)
}

// TestOrphanQAForeign: another workspace's archive copied in under the
// next sequence name is refused, saying whose it is, and left alone,
// never adopted.
func TestOrphanQAForeign(t *testing.T) {
	t.Parallel()
	_, out, mirrorDisk := orphanWorld(t, 751)
	other, otherOut, otherDisk := orphanWorld(t, 761)
	other.addLate(781)
	if code, _, _ := otherDisk(); code != 0 {
		t.Fatal("other's third mirror-to-disk failed")
	}
	chunks, _ := filepath.Glob(filepath.Join(otherOut, "mirror_0003_*.tar"))
	if len(chunks) == 0 {
		t.Fatal("no chunks")
	}
	sizes := map[string]int64{}
	for _, c := range chunks {
		data, err := os.ReadFile(c)
		must(t, err)
		name := filepath.Join(out, filepath.Base(c))
		must(t, os.WriteFile(name, data, 0o644))
		sizes[name] = int64(len(data))
	}
	code, stdout, stderr := mirrorDisk()
	if code == 0 || strings.Contains(stdout+stderr, "now recorded") || strings.Contains(stderr, "this workspace wrote") || !strings.Contains(stderr, "written by another mirror-to-disk workspace") {
		t.Errorf("a foreign archive under the next name: exit %d\n%s", code, stderr)
	}
	for name, n := range sizes {
		if fi, err := os.Stat(name); err != nil || fi.Size() != n {
			t.Errorf("%s replaced or removed", name)
		}
	}
	if recordOfSeq(t, filepath.Join(out, "working-dir", "archives"), 3) != "" {
		t.Error("a record of archive 3 was written")
	}
}
