package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// TestStoppedBeforeRecordIsAdopted: a mirror-to-disk stopped after its
// archive's chunks were in place but before the workspace recorded it
// leaves a whole archive the admin may already have carried. The next run
// neither overwrites it nor refuses for good: it records that archive and
// writes its own after it, and disk-to-mirror of the directory applies
// them in order. While the stopped run's archive is not whole (a chunk
// gone), the next run refuses, saying that run was stopped, and touches
// nothing.
func TestStoppedBeforeRecordIsAdopted(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(3, 32<<10)
	out := filepath.Join(w.dir, "archive")
	mirrorDisk := func(isc string) (int, string, string) {
		t.Helper()
		return w.gapmirror("mirror", "-c", isc, "--archive-size", "128KiB", "file://"+out)
	}
	if code, _, _ := mirrorDisk(w.isc("")); code != 0 {
		t.Fatal("first mirror-to-disk failed")
	}
	late, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(901, 200<<10), imagebuilder.RandomLayer(902, 200<<10)}})
	must(t, err)
	must(t, imagebuilder.Push(context.Background(), w.upTarget(), "apps/late", "v1", late))
	w.images = append(w.images, example{Ref: w.up.Host() + "/apps/late:v1", Repo: "apps/late", Tag: "v1", Digest: late.Digest})
	isc := w.isc("")
	if code, _, _ := mirrorDisk(isc); code != 0 {
		t.Fatal("second mirror-to-disk failed")
	}
	// Stopped before recording: the second archive's record never written.
	records := filepath.Join(out, "working-dir", "archives")
	second := recordOfSeq(t, records, 2)
	must(t, os.Remove(second))
	chunks, _ := filepath.Glob(filepath.Join(out, "mirror_0002_*.tar"))
	if len(chunks) < 2 {
		t.Fatalf("the second archive has %d chunks, want several for this test", len(chunks))
	}
	before := map[string]time.Time{}
	for _, c := range chunks {
		fi, err := os.Stat(c)
		must(t, err)
		before[c] = fi.ModTime()
	}

	// Not whole: refused, naming what happened, nothing replaced.
	last := chunks[len(chunks)-1]
	must(t, os.Rename(last, last+".away"))
	code, _, stderr := mirrorDisk(isc)
	if code == 0 || !strings.Contains(stderr, "an earlier run of this workspace wrote but was stopped before recording, and which is not whole") {
		t.Fatalf("a stopped run's partial archive: exit %d, stderr:\n%s", code, stderr)
	}
	must(t, os.Rename(last+".away", last))

	// Whole: recorded, kept as it is, and built on.
	code, stdout, stderr := mirrorDisk(isc)
	if code != 0 || !strings.Contains(stdout+stderr, "stopped after writing an archive and before recording it") {
		t.Fatalf("after a run stopped before recording: exit %d, stderr:\n%s", code, stderr)
	}
	for c, mt := range before {
		if fi, err := os.Stat(c); err != nil || !fi.ModTime().Equal(mt) {
			t.Errorf("%s was replaced or removed: %v", c, err)
		}
	}
	if recordOfSeq(t, records, 2) == "" || recordOfSeq(t, records, 3) == "" {
		t.Fatal("records of archives 2 and 3 missing")
	}
	third, err := archive.Whole(out, 3)
	must(t, err)
	var rec struct {
		ID string `json:"id"`
	}
	must(t, json.Unmarshal([]byte(readFile(t, recordOfSeq(t, records, 2))), &rec))
	if third.BasedOn != rec.ID || len(third.Blobs) > 2 {
		t.Errorf("the third archive is based on %q with %d blobs, want based on the adopted %q and carrying no layer again", third.BasedOn, len(third.Blobs), rec.ID)
	}
	w.applyArchive(out)
}

// recordOfSeq is the path of the workspace's record of the archive with
// sequence seq in dir, "" when there is none.
func recordOfSeq(t *testing.T, dir string, seq int) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, f := range files {
		var r struct {
			Seq int `json:"seq"`
		}
		if json.Unmarshal([]byte(readFile(t, f)), &r) == nil && r.Seq == seq {
			return f
		}
	}
	return ""
}
