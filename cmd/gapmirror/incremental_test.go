package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

func archiveOf(t *testing.T, dir string) *archive.Index {
	t.Helper()
	r, err := archive.Open(dir)
	must(t, err)
	return r.Index()
}

// TestIncrementalArchives: a second mirror-to-disk with a changed image set
// carries only the new blobs; a run with nothing new carries none; applying
// the archives in order gives the mirror an m2m of the final set would.
func TestIncrementalArchives(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(8, 64<<10)
	first := w.images[:5]
	all := w.images
	carry := func(name string) string { return filepath.Join(w.dir, name) }

	w.images = first
	isc1 := w.isc("")
	if code, _, _ := w.gapmirror("mirror", "-c", isc1, "file://"+carry("out")); code != 0 {
		t.Fatal("first m2d failed")
	}
	idx1 := archiveOf(t, carry("out"))
	must(t, os.Rename(carry("out"), carry("trip1")))
	must(t, os.MkdirAll(carry("out"), 0o755))
	must(t, os.Rename(filepath.Join(carry("trip1"), "working-dir"), filepath.Join(carry("out"), "working-dir")))

	// Second run: three more images (new unique layers, shared base).
	w.images = all
	isc2 := w.isc("")
	if code, _, _ := w.gapmirror("mirror", "-c", isc2, "file://"+carry("out")); code != 0 {
		t.Fatal("second m2d failed")
	}
	idx2 := archiveOf(t, carry("out"))
	if idx2.BasedOn != idx1.ID {
		t.Errorf("second archive builds on %q, want %q", idx2.BasedOn, idx1.ID)
	}
	inFirst := map[string]bool{}
	for _, b := range idx1.Blobs {
		inFirst[string(b.Digest)] = true
	}
	var newBytes int64
	for _, b := range idx2.Blobs {
		if inFirst[string(b.Digest)] {
			t.Errorf("blob %s carried again", b.Digest)
		}
		newBytes += b.Size
	}
	// Exactly the blobs of the three new images that the first five lack.
	want := w.uniqueBytes(all[5:], first)
	if newBytes != want {
		t.Errorf("second archive carries %d blob bytes, want exactly the %d new ones", newBytes, want)
	}
	if len(idx2.Set.Images) != 8 {
		t.Errorf("second archive's set has %d images, want all 8", len(idx2.Set.Images))
	}
	must(t, os.Rename(carry("out"), carry("trip2")))
	must(t, os.MkdirAll(carry("out"), 0o755))
	must(t, os.Rename(filepath.Join(carry("trip2"), "working-dir"), filepath.Join(carry("out"), "working-dir")))

	// Third run: nothing changed upstream: an index-only archive.
	if code, _, _ := w.gapmirror("mirror", "-c", isc2, "file://"+carry("out")); code != 0 {
		t.Fatal("third m2d failed")
	}
	idx3 := archiveOf(t, carry("out"))
	if len(idx3.Blobs) != 0 || idx3.BasedOn != idx2.ID {
		t.Errorf("no-change archive has %d blobs, based on %q", len(idx3.Blobs), idx3.BasedOn)
	}
	chunks, _ := filepath.Glob(filepath.Join(carry("out"), "mirror_*.tar"))
	if fi, err := os.Stat(chunks[0]); err != nil || len(chunks) != 1 || fi.Size() > 64<<10 {
		t.Errorf("no-change archive: %v chunks, first %v", chunks, fi)
	}

	// The air-gapped side: archive 2 before archive 1 is refused, naming 1.
	airgap := carry("airgap")
	moveChunks(t, carry("trip2"), airgap)
	code, _, stderr := w.gapmirror("mirror", "--from", "file://"+airgap, "docker://"+w.dst.Host()+"/d2m")
	if code != 1 || !strings.Contains(stderr, idx1.ID) {
		t.Errorf("out-of-order archive: exit %d, stderr:\n%s", code, stderr)
	}
	moveChunks(t, airgap, carry("trip2"))
	// In order, each archive copied over the previous one's chunks.
	for _, trip := range []string{"trip1", "trip2", "out"} {
		moveChunks(t, carry(trip), airgap)
		if code, _, _ := w.gapmirror("mirror", "--from", "file://"+airgap, "docker://"+w.dst.Host()+"/d2m"); code != 0 {
			t.Fatalf("d2m of %s failed", trip)
		}
	}
	w.images = all
	w.assertMirrored(w.dst, "d2m")

	// Same as mirror-to-mirror of the final set.
	if code, _, _ := w.gapmirror("mirror", "-c", isc2, "--workspace", "file://"+carry("ws"), "docker://"+w.dst.Host()+"/m2m"); code != 0 {
		t.Fatal("m2m failed")
	}
	for _, ex := range all {
		a, _ := w.dst.ManifestDigest("d2m/"+ex.Repo, ex.Tag)
		b, _ := w.dst.ManifestDigest("m2m/"+ex.Repo, ex.Tag)
		if a != b || a != ex.Digest {
			t.Errorf("%s: d2m %s, m2m %s, want %s", ex.Ref, a, b, ex.Digest)
		}
	}
	d2m := resourceFile(t, filepath.Join(airgap, "working-dir", "cluster-resources", "idms-gapmirror.yaml"))
	m2m := resourceFile(t, filepath.Join(carry("ws"), "working-dir", "cluster-resources", "idms-gapmirror.yaml"))
	if strings.ReplaceAll(d2m, "/d2m", "/X") != strings.ReplaceAll(m2m, "/m2m", "/X") {
		t.Errorf("IDMS differ:\n%s\n---\n%s", d2m, m2m)
	}
}

// moveChunks moves the archive chunks of one directory into another,
// replacing the chunks there (as a user copying a new archive over).
func moveChunks(t *testing.T, from, to string) {
	t.Helper()
	old, _ := filepath.Glob(filepath.Join(to, "mirror_*.tar"))
	for _, o := range old {
		must(t, os.Remove(o))
	}
	must(t, os.MkdirAll(to, 0o755))
	chunks, _ := filepath.Glob(filepath.Join(from, "mirror_*.tar"))
	for _, c := range chunks {
		must(t, os.Rename(c, filepath.Join(to, filepath.Base(c))))
	}
}

// TestDescribe: describe reports an archive's content and lineage, and
// says when a chunk is damaged.
func TestDescribe(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(4, 64<<10)
	out := filepath.Join(w.dir, "a")
	if code, _, _ := w.gapmirror("mirror", "-c", w.isc(""), "--archive-size", "128KiB", "file://"+out); code != 0 {
		t.Fatal("m2d failed")
	}
	code, stdout, _ := w.gapmirror("describe", "--images", "file://"+out)
	idx := archiveOf(t, out)
	for _, want := range []string{idx.ID, "a full archive", "  4 images", "additional images (4)", "intact", w.images[0].Repo + ":v1"} {
		if !strings.Contains(stdout, want) || code != 0 {
			t.Errorf("describe (exit %d) does not say %q:\n%s", code, want, stdout)
		}
	}
	chunk := filepath.Join(out, "mirror_000002.tar")
	data, err := os.ReadFile(chunk)
	must(t, err)
	data[len(data)-3000] ^= 1
	must(t, os.WriteFile(chunk, data, 0o644))
	code, _, stderr := w.gapmirror("describe", "file://"+out)
	if code != 1 || !strings.Contains(stderr, "mirror_000002.tar") {
		t.Errorf("damaged chunk: exit %d, stderr:\n%s", code, stderr)
	}
}
