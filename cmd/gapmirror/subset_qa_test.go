package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// additional is a mirror section body listing the images of w at indexes.
func (w *world) additional(indexes ...int) string {
	var b strings.Builder
	b.WriteString("  additionalImages:\n")
	for _, i := range indexes {
		fmt.Fprintf(&b, "  - name: %s\n", w.images[i].Ref)
	}
	return b.String()
}

// TestDiskToMirrorSubsetTwoArchives: a fresh enclave given a subset and a
// directory of two archives (the first never pushed there) gets the subset
// of each, not the whole first archive; the first archive may lack entries
// the second added; an entry the latest archive lacks is refused before
// anything is pushed.
func TestDiskToMirrorSubsetTwoArchives(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(5, 8<<10)
	archiveDir := filepath.Join(w.dir, "archive")
	// Week 2 adds image 3.
	for week, body := range []string{w.additional(0, 1, 2, 4), w.additional(0, 1, 2, 3, 4)} {
		isc := w.writeISC(fmt.Sprintf("week%d.yaml", week+1), body)
		if code, _, _ := w.gapmirror("mirror", "-c", isc, "file://"+archiveDir); code != 0 {
			t.Fatalf("mirror-to-disk week %d failed", week+1)
		}
	}
	lacking := w.writeISC("lacking.yaml", w.additional(0)+"  - name: "+w.up.Host()+"/not/in-archive:v1\n")
	code, _, errOut := w.gapmirror("mirror", "-c", lacking, "--from", "file://"+archiveDir, "docker://"+w.dst.Host()+"/refused")
	if code != 1 || !strings.Contains(errOut, "mirror.additionalImages[1] "+w.up.Host()+"/not/in-archive:v1: not an additional image of the archive") {
		t.Errorf("a subset the latest archive lacks: exit %d: %s", code, errOut)
	}
	if repos, _ := w.dst.Catalog(); len(repos) > 0 {
		t.Errorf("a refused subset pushed: %v", repos)
	}

	subset := w.writeISC("subset.yaml", w.additional(1, 3))
	if code, _, _ := w.gapmirror("mirror", "-c", subset, "--from", "file://"+archiveDir, "docker://"+w.dst.Host()+"/enclave"); code != 0 {
		t.Fatal("disk-to-mirror of the subset failed")
	}
	repos, _ := w.dst.Catalog()
	for i, ex := range w.images {
		in := slices.Contains(repos, "enclave/"+ex.Repo)
		if want := i == 1 || i == 3; in != want {
			t.Errorf("image %d (%s) at the mirror: %v, want %v (%v)", i, ex.Ref, in, want, repos)
		}
	}
	for _, i := range []int{1, 3} {
		d, err := w.dst.ManifestDigest("enclave/"+w.images[i].Repo, w.images[i].Tag)
		if err != nil || d != w.images[i].Digest {
			t.Errorf("image %d at the mirror: %s, %v; want %s", i, d, err, w.images[i].Digest)
			continue
		}
		w.assertComplete(w.dst, "enclave/"+w.images[i].Repo, d)
	}
}
