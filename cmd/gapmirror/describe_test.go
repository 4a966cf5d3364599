package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"

	"github.com/gapmirror/gapmirror/imageset/catalog"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// TestDescribeOrder: describe lists an operator's bundles in semver order
// (v1.0.2 before v1.0.10, a release candidate before its release) and
// images in natural order (app-2 before app-10), in the text and in the
// JSON lists, not in string order.
func TestDescribeOrder(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	// Seed 29: 2.0.0-rc.1, 2.0.0, 2.0.1 … 2.0.11, whose string order is not
	// their version order.
	oc := w.pushCatalog("catalogs/sorted", "v1", catalogOptions{Spec: catalog.GenSpec{Seed: 29, Packages: 1, Bundles: 14, RelatedImages: -1, DependencyRatio: -1}, Single: true})
	apps := []string{"app-10", "app-2", "app-1"}
	for i, name := range apps {
		w.pushApp(name, "v1", uint64(390+i))
	}
	up := w.up.Host()
	isc := w.writeISC("order.yaml", fmt.Sprintf(`  operators:
  - catalog: %[1]s
    full: true
  additionalImages:
  - name: %[2]s/apps/app-10:v1
  - name: %[2]s/apps/app-2:v1
  - name: %[2]s/apps/app-1:v1
`, oc.Ref, up))
	out := filepath.Join(w.dir, "a")
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "file://"+out); code != 0 {
		t.Fatalf("mirror-to-disk: exit %d", code)
	}

	const pkg = "operator-000"
	var bundles []string
	for _, b := range oc.Cat.Package(pkg).Bundles {
		bundles = append(bundles, b.Name)
	}
	byVersion := slices.Clone(bundles)
	sort.SliceStable(byVersion, func(a, b int) bool {
		return semver.MustParse(strings.TrimPrefix(byVersion[a], pkg+".")).LessThan(semver.MustParse(strings.TrimPrefix(byVersion[b], pkg+".")))
	})
	byString := slices.Clone(bundles)
	sort.Strings(byString)
	if slices.Equal(byVersion, byString) || !slices.Contains(bundles, pkg+".v2.0.10") || !slices.Contains(bundles, pkg+".v2.0.0-rc.1") {
		t.Fatalf("the fixture's bundles %v do not tell version order from string order", bundles)
	}
	wantImages := []string{up + "/apps/app-1:v1", up + "/apps/app-2:v1", up + "/apps/app-10:v1"}

	code, stdout, _ := w.gapmirror("describe", "--images", "file://"+out)
	if code != 0 {
		t.Fatalf("describe: exit %d", code)
	}
	if want := "  " + pkg + ": " + strings.Join(byVersion, ", ") + "\n"; !strings.Contains(stdout, want) {
		t.Errorf("describe does not list the bundles in version order, %q:\n%s", want, stdout)
	}
	inOrder := func(what string, text string, subs []string) {
		t.Helper()
		last := -1
		for _, s := range subs {
			i := strings.Index(text, s)
			if i < 0 || i < last {
				t.Errorf("%s: %v not in this order:\n%s", what, subs, text)
				return
			}
			last = i
		}
	}
	_, additional, _ := strings.Cut(stdout, "additional images (3):\n")
	inOrder("additional images", additional, []string{"  " + wantImages[0] + "\n", "  " + wantImages[1] + "\n", "  " + wantImages[2] + "\n"})
	_, list, _ := strings.Cut(stdout, "images:\n")
	inOrder("every image", list, []string{" apps/app-1:v1@", " apps/app-2:v1@", " apps/app-10:v1@"})

	code, stdout, _ = w.gapmirror("describe", "-o", "json", "--quick", "file://"+out)
	if code != 0 {
		t.Fatalf("describe -o json: exit %d", code)
	}
	var doc struct {
		Catalogs []struct {
			Packages map[string][]string `json:"packages"`
		} `json:"operatorCatalogs"`
		Additional []string `json:"additionalImages"`
		ImageList  []struct {
			Kind        string `json:"kind"`
			Destination string `json:"destination"`
		} `json:"imageList"`
	}
	must(t, json.Unmarshal([]byte(stdout), &doc))
	if len(doc.Catalogs) != 1 || !slices.Equal(doc.Catalogs[0].Packages[pkg], byVersion) {
		t.Errorf("JSON operatorCatalogs: %+v, want %s: %v", doc.Catalogs, pkg, byVersion)
	}
	if !slices.Equal(doc.Additional, wantImages) {
		t.Errorf("JSON additionalImages: %v, want %v", doc.Additional, wantImages)
	}
	var dests []string
	for _, img := range doc.ImageList {
		if strings.HasPrefix(img.Destination, "apps/") {
			dests = append(dests, img.Destination)
		}
	}
	if want := []string{"apps/app-1:v1", "apps/app-2:v1", "apps/app-10:v1"}; !slices.Equal(dests, want) {
		t.Errorf("JSON imageList: %v, want %v", dests, want)
	}
}
