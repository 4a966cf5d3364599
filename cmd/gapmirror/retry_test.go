package main

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/imageset/catalog"
)

// TestRetryWritesWhatACompleteRunWrites: a mirror-to-mirror run of
// releases (signed, with the graph image), a filtered catalog with a
// CatalogSource template and additional images, one of which fails, then
// --retry-failed, leaves the same cluster resources (CatalogSource and
// ClusterCatalog from the template, signature ConfigMaps, UpdateService,
// IDMS/ITMS) as one complete run: the retry starts from the run record's
// plan, not from a resolution it does not do. A dry run beforehand leaves
// nothing but its plan in the workspace.
func TestRetryWritesWhatACompleteRunWrites(t *testing.T) {
	t.Parallel()
	w, isc := retryWorld(t)
	dst := "docker://" + w.dst.Host() + "/m"

	// A dry run resolves everything and writes only its plan.
	ws := filepath.Join(w.dir, "ws")
	if code, _, _ := w.run("mirror", "-c", isc, "--dry-run", "--workspace", "file://"+ws, dst); code != 0 {
		t.Fatalf("dry run: exit %d", code)
	}
	entries, err := os.ReadDir(filepath.Join(ws, "working-dir"))
	must(t, err)
	for _, e := range entries {
		if e.Name() != "dry-run" {
			t.Errorf("the dry run wrote working-dir/%s; it may write only working-dir/dry-run", e.Name())
		}
	}

	w.corrupt(1)
	code, stdout, _ := w.run("mirror", "-c", isc, "--retry-times", "1", "--workspace", "file://"+ws, dst)
	if code != 8 {
		t.Fatalf("first run: exit %d, want 8 (an additional image fails)\n%s", code, stdout)
	}
	failed := retryHint(t, stdout)
	w.up.SetWrap(nil)
	asked := w.graphs.Requests() + w.sigs.Requests()
	code, stdout, _ = w.run("mirror", "--retry-failed", failed, "--workspace", "file://"+ws, dst)
	if code != 0 || !strings.Contains(stdout, "1 copied,") {
		t.Fatalf("retry: exit %d\n%s", code, stdout)
	}
	if n := w.graphs.Requests() + w.sigs.Requests(); n != asked {
		t.Errorf("the retry asked the update service or signature store %d times: it must start from the record", n-asked)
	}

	whole := filepath.Join(w.dir, "whole")
	if code, _, _ := w.run("mirror", "-c", isc, "--workspace", "file://"+whole, dst); code != 0 {
		t.Fatalf("complete run: exit %d", code)
	}
	sameResources(t, filepath.Join(ws, "working-dir", "cluster-resources"), filepath.Join(whole, "working-dir", "cluster-resources"))
}

// retryWorld is a release world with two signed releases, a catalog and
// three additional images, and a configuration mirroring them all (the
// graph image and a filtered catalog with a CatalogSource template too).
func retryWorld(t *testing.T) (*releaseWorld, string) {
	w := newReleaseWorld(t, []string{"4.18.1", "4.18.2"}, 3, false)
	w.pushFleet(3, 16<<10)
	oc := w.pushCatalog("catalogs/index", "v1", catalogOptions{Spec: catalog.GenSpec{Seed: 5, Packages: 2, Bundles: 2, RelatedImages: 1, DependencyRatio: -1}})
	template := w.writeFile("cs-template.yaml", "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: ignored\nspec:\n  displayName: Retried operators\n  publisher: the test\n")
	var b strings.Builder
	b.WriteString("  platform:\n    graph: true\n    channels:\n    - name: stable-4.18\n      minVersion: 4.18.1\n      maxVersion: 4.18.2\n")
	b.WriteString("  operators:\n  - catalog: " + oc.Ref + "\n    targetCatalogSourceTemplate: " + template + "\n    packages:\n    - name: operator-001\n")
	b.WriteString("  additionalImages:\n")
	for _, ex := range w.images {
		b.WriteString("  - name: " + ex.Ref + "\n")
	}
	return w, w.writeISC("isc.yaml", b.String())
}

// retryHint is the failure file a run's summary names.
func retryHint(t *testing.T, stdout string) string {
	t.Helper()
	i := strings.LastIndex(stdout, "--retry-failed ")
	if i < 0 {
		t.Fatalf("no retry hint:\n%s", stdout)
	}
	return strings.TrimSpace(strings.SplitN(stdout[i+len("--retry-failed "):], "\n", 2)[0])
}

// TestRetryFailedArchiveCarriesThePlan: mirror-to-disk with an image
// failing, disk-to-mirror of that partial archive, mirror-to-disk
// --retry-failed and disk-to-mirror of its archive leave the same cluster
// resources as a complete mirror-to-mirror run: the retry's archive carries
// the plan's files (CatalogSource template, release signatures, graphs).
func TestRetryFailedArchiveCarriesThePlan(t *testing.T) {
	t.Parallel()
	w, isc := retryWorld(t)
	dst := "docker://" + w.dst.Host() + "/m"
	m2d, airgap := filepath.Join(w.dir, "m2d"), filepath.Join(w.dir, "airgap")
	w.corrupt(1)
	code, stdout, _ := w.run("mirror", "-c", isc, "--retry-times", "1", "file://"+m2d)
	if code != 8 {
		t.Fatalf("mirror-to-disk: exit %d, want 8\n%s", code, stdout)
	}
	failed := retryHint(t, stdout)
	moveChunks(t, m2d, airgap)
	if code, stdout, _ := w.run("mirror", "--from", "file://"+airgap, dst); code != 0 {
		t.Fatalf("disk-to-mirror of the partial archive: exit %d\n%s", code, stdout)
	}
	w.up.SetWrap(nil)
	if code, stdout, _ := w.run("mirror", "--retry-failed", failed, "file://"+m2d); code != 0 {
		t.Fatalf("mirror-to-disk --retry-failed: exit %d\n%s", code, stdout)
	}
	moveChunks(t, m2d, airgap)
	if code, stdout, _ := w.run("mirror", "--from", "file://"+airgap, dst); code != 0 {
		t.Fatalf("disk-to-mirror of the retry's archive: exit %d\n%s", code, stdout)
	}
	whole := filepath.Join(w.dir, "whole")
	if code, _, _ := w.run("mirror", "-c", isc, "--workspace", "file://"+whole, dst); code != 0 {
		t.Fatalf("complete run: exit %d", code)
	}
	sameResources(t, filepath.Join(airgap, "working-dir", "cluster-resources"), filepath.Join(whole, "working-dir", "cluster-resources"))
}

// sameResources checks that the cluster resources in got are those of a
// complete run in want, and that want has every kind the test is about.
func sameResources(t *testing.T, got, want string) {
	t.Helper()
	retried, complete := clusterResources(t, got), clusterResources(t, want)
	names := slices.Sorted(maps.Keys(complete))
	for _, want := range []string{"cs-", "cc-", "signature-configmap.yaml", "updateService.yaml", "idms-gapmirror.yaml", "itms-gapmirror.yaml"} {
		if !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, want) }) {
			t.Errorf("the complete run wrote no %s… (the test covers nothing there): %v", want, names)
		}
	}
	for _, n := range names {
		if retried[n] != complete[n] {
			t.Errorf("%s after the retry differs from the complete run's:\nretry:\n%s\ncomplete:\n%s", n, retried[n], complete[n])
		}
		if strings.HasPrefix(n, "cs-") && !strings.Contains(complete[n], "Retried operators") {
			t.Errorf("the CatalogSource does not follow the template:\n%s", complete[n])
		}
	}
	for n := range retried {
		if _, ok := complete[n]; !ok {
			t.Errorf("the retry wrote %s, the complete run did not", n)
		}
	}
}

// clusterResources reads every file of a cluster-resources directory.
func clusterResources(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	must(t, err)
	out := map[string]string{}
	for _, e := range entries {
		out[e.Name()] = resourceFile(t, filepath.Join(dir, e.Name()))
	}
	return out
}
