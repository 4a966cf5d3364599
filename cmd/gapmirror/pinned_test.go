package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/catalog"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// TestPinnedConfiguration: a run writes the configuration with every
// catalog and additional image it resolved by tag pinned to the digest it
// used (tags kept as targetTag) and the matching delete configuration.
// After the upstream tags move, mirroring the pinned file into a fresh
// registry gives exactly the first run's destinations and digests.
func TestPinnedConfiguration(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(4, 8<<10)
	oc := w.pushCatalog("catalogs/index", "v1", catalogOptions{Spec: catalog.GenSpec{Seed: 3, Packages: 2, Bundles: 2, RelatedImages: 1, DependencyRatio: -1}})
	var ai strings.Builder
	for _, ex := range w.images {
		ai.WriteString("  - name: " + ex.Ref + "\n")
	}
	isc := w.writeISC("isc.yaml", "  operators:\n  - catalog: "+oc.Ref+"\n  additionalImages:\n"+ai.String())
	ws := filepath.Join(w.dir, "ws")
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/first"); code != 0 {
		t.Fatalf("mirror-to-mirror exit %d", code)
	}
	iscs, _ := filepath.Glob(filepath.Join(ws, "working-dir", "isc_pinned_*.yaml"))
	discs, _ := filepath.Glob(filepath.Join(ws, "working-dir", "disc_pinned_*.yaml"))
	if len(iscs) != 1 || len(discs) != 1 {
		t.Fatalf("pinned files: %v %v, want one of each", iscs, discs)
	}
	pinned, err := imageset.LoadImageSetConfiguration(iscs[0])
	if err != nil {
		t.Fatalf("the pinned configuration does not load: %v", err)
	}
	if _, err := imageset.LoadDeleteImageSetConfiguration(discs[0]); err != nil {
		t.Fatalf("the pinned delete configuration does not load: %v", err)
	}
	if c := pinned.Mirror.Operators[0]; c.Catalog != w.up.Host()+"/catalogs/index@"+oc.Digest.String() || c.TargetTag != "v1" {
		t.Errorf("pinned catalog = %s (targetTag %q), want it by digest %s with targetTag v1", c.Catalog, c.TargetTag, oc.Digest)
	}
	for i, a := range pinned.Mirror.AdditionalImages {
		if !strings.Contains(a.Name, "@"+w.images[i].Digest.String()) || a.TargetTag != w.images[i].Tag && !strings.HasPrefix(w.images[i].Tag, "sha256-") {
			t.Errorf("pinned additional image %d = %s (targetTag %q), want %s by digest, tag %s", i, a.Name, a.TargetTag, w.images[i].Ref, w.images[i].Tag)
		}
	}
	record, err := os.ReadFile(newestRun(t, ws))
	must(t, err)
	if !strings.Contains(string(record), `"pinnedConfig": "`+iscs[0]+`"`) {
		t.Errorf("the run record does not name the pinned configuration:\n%s", record)
	}

	// Upstream moves every tag; the pinned file still names the first set.
	w.pushFleet(4, 4<<10)
	if code, _, _ := w.gapmirror("mirror", "-c", iscs[0], "--workspace", "file://"+filepath.Join(w.dir, "ws2"), "docker://"+w.dst.Host()+"/second"); code != 0 {
		t.Fatalf("mirror-to-mirror of the pinned configuration exit %d", code)
	}
	var first, second []string
	for _, e := range registryContent(t, w.dst) {
		if rest, ok := strings.CutPrefix(e, "first/"); ok {
			first = append(first, rest)
		} else if rest, ok := strings.CutPrefix(e, "second/"); ok {
			second = append(second, rest)
		}
	}
	if len(first) == 0 || !slices.Equal(first, second) {
		t.Errorf("the pinned run mirrored something else:\nfirst:  %v\nsecond: %v", first, second)
	}
}

// newestRun is the path of the newest run record of a workspace.
func newestRun(t *testing.T, ws string) string {
	runs, _ := filepath.Glob(filepath.Join(ws, "working-dir", "runs", "*.json"))
	if len(runs) == 0 {
		t.Fatal("no run record")
	}
	return runs[len(runs)-1]
}
