package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// TestBlockedListedImageSkipped: an additional image the configuration
// lists and also blocks in mirror.blockedImages is skipped, as oc-mirror
// skips it, not refused: configurations written for oc-mirror rely on
// that. The run warns once per such entry, naming the file and line of the
// entry and of the rule, succeeds, and neither mirrors the image nor
// names it in the cluster resources, in mirror-to-mirror, mirror-to-disk
// and disk-to-mirror. An OCI layout image blocked by its destination is
// skipped the same way, without reading its layout.
func TestBlockedListedImageSkipped(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(3, 16<<10)
	blocked := w.images[0] // apps/app-00:v1
	w.images = w.images[1:]
	toolDir := filepath.Join(w.dir, "layouts", "tool") // never written: a skipped layout is not read
	// Lines: 4 additionalImages, 5-8 its entries (9 targetRepo of the
	// layout), 10 blockedImages, 11-12 its rules.
	isc := w.writeISC("blocked.yaml", fmt.Sprintf(`  additionalImages:
  - name: %s
  - name: %s
  - name: %s
  - name: oci://%s
    targetRepo: internal/tool
  blockedImages:
  - name: apps/app-00
  - name: ^internal/
`, blocked.Ref, w.images[0].Ref, w.images[1].Ref, toolDir))
	warnings := []struct{ entry, at, rule, ruleAt string }{
		{"mirror.additionalImages[0].name: " + blocked.Ref, isc + ":5:", "mirror.blockedImages[0].name", isc + ":11"},
		{"mirror.additionalImages[3].name: oci://" + toolDir, isc + ":8:", "mirror.blockedImages[1].name", isc + ":12"},
	}
	// checkRun: exit 0, each warning once on one line with both places,
	// the rest mirrored and nothing of the blocked images anywhere.
	checkRun := func(trip string, code int, stderr, prefix, resources string) {
		t.Helper()
		if code != 0 {
			t.Errorf("%s: exit %d, want 0 (a listed and blocked image is skipped, not refused)", trip, code)
		}
		if trip != "disk-to-mirror" {
			for _, wn := range warnings {
				var lines []string
				for _, l := range strings.Split(stderr, "\n") {
					if strings.Contains(l, wn.entry) {
						lines = append(lines, l)
					}
				}
				if len(lines) != 1 || !strings.Contains(lines[0], "WARN") || !strings.Contains(lines[0], wn.at) || !strings.Contains(lines[0], wn.rule) || !strings.Contains(lines[0], wn.ruleAt) {
					t.Errorf("%s: want one warning for %s naming %s and %s (%s), got %d lines:\n%s", trip, wn.entry, wn.at, wn.rule, wn.ruleAt, len(lines), strings.Join(lines, "\n"))
				}
			}
		}
		if prefix != "" {
			w.assertMirrored(w.dst, prefix)
			for _, repo := range []string{blocked.Repo, "internal/tool"} {
				if _, err := w.dst.ManifestDigest(prefix+"/"+repo, "v1"); err == nil {
					t.Errorf("%s: the blocked image %s was mirrored", trip, repo)
				}
			}
		}
		if resources == "" {
			return
		}
		files, _ := filepath.Glob(filepath.Join(resources, "*"))
		if len(files) == 0 {
			t.Errorf("%s: no cluster resources in %s", trip, resources)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			must(t, err)
			if strings.Contains(string(data), blocked.Repo) || strings.Contains(string(data), "internal/tool") || strings.Contains(string(data), "layouts") {
				t.Errorf("%s: %s names a blocked image:\n%s", trip, f, data)
			}
		}
	}

	ws := filepath.Join(w.dir, "ws")
	code, _, stderr := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m2m")
	checkRun("mirror-to-mirror", code, stderr, "m2m", filepath.Join(ws, "working-dir", "cluster-resources"))
	// The pinned delete configuration names what was mirrored: planning a
	// delete with it as it is works.
	discs, _ := filepath.Glob(filepath.Join(ws, "working-dir", "disc_pinned_*.yaml"))
	if len(discs) != 1 {
		t.Fatalf("pinned delete configurations: %v", discs)
	}
	if disc := readFile(t, discs[0]); strings.Contains(disc, blocked.Repo) || strings.Contains(disc, toolDir) {
		t.Errorf("the pinned delete configuration names a blocked image:\n%s", disc)
	}
	if code, _, _ := w.gapmirror("delete", "-c", discs[0], "--generate", "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m2m"); code != 0 {
		t.Errorf("delete --generate with the pinned delete configuration: exit %d", code)
	}

	archiveDir := filepath.Join(w.dir, "archive")
	code, _, stderr = w.gapmirror("mirror", "-c", isc, "file://"+archiveDir)
	checkRun("mirror-to-disk", code, stderr, "", "")
	for _, img := range archiveOf(t, archiveDir).Set.Images {
		if strings.Contains(img.Origin, blocked.Repo) || strings.Contains(img.Destination, "internal/tool") {
			t.Errorf("mirror-to-disk: the archive holds the blocked image %s", img.Origin)
		}
	}
	code, stdout, stderr := w.gapmirror("mirror", "--from", "file://"+archiveDir, "docker://"+w.dst.Host()+"/d2m")
	checkRun("disk-to-mirror", code, stderr, "d2m", filepath.Join(archiveDir, "working-dir", "cluster-resources"))
	if !strings.Contains(stdout, "2 images left out by mirror.blockedImages (not mirrored, not in IDMS/ITMS)") {
		t.Errorf("disk-to-mirror does not say what the archive's mirror.blockedImages kept out:\n%s", stdout)
	}
}
