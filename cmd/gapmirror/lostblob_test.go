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

// TestMirrorLostARecordedBlob: the mirror lost a blob since the run that
// pushed it (restored from a backup, cleaned), and the workspace's records
// still place it in the repository. The next mirror-to-mirror run pushes a
// new tag there that shares the blob: it takes the records' word, the
// registry refuses the manifest, and the run sends the blob again and
// pushes the manifest, ending with the image whole at the mirror and the
// loss in its log.
func TestMirrorLostARecordedBlob(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(1, 32<<10)
	first := w.images[0] // apps/app-00:v1, on the fleet's base layer
	ws := "file://" + filepath.Join(w.dir, "ws")
	dst := "docker://" + w.dst.Host() + "/m"
	if code, _, _ := w.gapmirror("mirror", "-c", w.iscOf("one.yaml", entry{name: first.Ref}), "--workspace", ws, dst); code != 0 {
		t.Fatalf("first mirror-to-mirror: exit %d", code)
	}
	next, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(1, 32<<10), imagebuilder.RandomLayer(77, 8<<10)}})
	must(t, err)
	base := next.Layers[0].Digest
	if has, err := w.dst.HasBlob("m/"+first.Repo, base); err != nil || !has {
		t.Fatalf("the first run did not put the fleet's base layer %s in m/%s: %v", base, first.Repo, err)
	}
	must(t, w.dst.DeleteBlob("m/"+first.Repo, base))
	must(t, imagebuilder.Push(context.Background(), imagebuilder.Target{URL: w.up.URL()}, first.Repo, "v2", next))

	nextRef := w.up.Host() + "/" + first.Repo + ":v2"
	code, stdout, _ := w.gapmirror("mirror", "-c", w.iscOf("two.yaml", entry{name: first.Ref}, entry{name: nextRef}), "--workspace", ws, dst)
	if code != 0 || !strings.Contains(stdout, "1 copied") {
		t.Fatalf("mirror-to-mirror after the mirror lost a recorded blob: exit %d\n%s", code, stdout)
	}
	if d, err := w.dst.ManifestDigest("m/"+first.Repo, "v2"); err != nil || d != next.Digest {
		t.Fatalf("%s:v2 at the mirror: %s, %v", first.Repo, d, err)
	}
	w.assertComplete(w.dst, "m/"+first.Repo, next.Digest)
	logs, _ := filepath.Glob(filepath.Join(w.dir, "ws", "working-dir", "logs", "*.log"))
	var logged bool
	for _, l := range logs {
		data, err := os.ReadFile(l)
		must(t, err)
		logged = logged || strings.Contains(string(data), "the mirror lost a blob the workspace records place there") && strings.Contains(string(data), base.String())
	}
	if !logged {
		t.Errorf("no run log (%v) tells of the lost blob %s", logs, base)
	}
}
