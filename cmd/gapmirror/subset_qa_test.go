package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/fbc"
	"github.com/gapmirror/gapmirror/internal/registrytest"
	"github.com/gapmirror/gapmirror/internal/releasetest"
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

// operatorsBody is a mirror section body filtering the catalog at
// catalogRef to the named packages.
func operatorsBody(catalogRef string, pkgs ...string) string {
	var b strings.Builder
	b.WriteString("  operators:\n  - catalog: " + catalogRef + "\n    packages:\n")
	for _, p := range pkgs {
		fmt.Fprintf(&b, "    - name: %s\n", p)
	}
	return b.String()
}

// newSubsetCatalogWorld is a world with two images upstream and the small
// single-image catalog at redhat/redhat-operator-index:v4.18.
func newSubsetCatalogWorld(t *testing.T) (*world, *opCatalog) {
	t.Helper()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(2, 8<<10)
	return w, w.pushCatalog("redhat/redhat-operator-index", "v4.18", catalogOptions{Spec: smallSpec, Single: true})
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
	w.refusedSubset(lacking, archiveDir, "refused", "mirror.additionalImages[1] "+w.up.Host()+"/not/in-archive:v1: not an additional image of the archive")
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

// TestDiskToMirrorSubsetSwitch: an enclave switched from subset A to subset
// B with --prune loses what only A held, gets what B adds and keeps what
// both hold; a catalog entry keeping a package that requires another keeps
// that one too, as mirror-to-disk's filtering does; a dry run of B shows
// the prune and pushes and deletes nothing.
func TestDiskToMirrorSubsetSwitch(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(3, 8<<10)
	oc := w.pushCatalog("redhat/redhat-operator-index", "v4.18", catalogOptions{Spec: smallSpec, Single: true, Mutate: func(c *fbc.Catalog) {
		for _, b := range c.Package("operator-002").Bundles {
			b.Properties = append(b.Properties, fbc.Property{Type: fbc.PropertyPackageRequired, Value: json.RawMessage(`{"packageName":"operator-000","versionRange":">=0.0.0"}`)})
		}
	}})
	archiveDir := filepath.Join(w.dir, "archive")
	if code, _, _ := w.gapmirror("mirror", "-c", w.writeISC("isc.yaml", w.additional(0, 1, 2)+operatorsBody(oc.Ref, "operator-000", "operator-001", "operator-002")), "file://"+archiveDir); code != 0 {
		t.Fatal("mirror-to-disk failed")
	}
	root := w.dst.Host() + "/enclave"
	catRepo := "enclave/redhat/redhat-operator-index"
	pushed := func(c *fbc.Catalog) map[string]bool {
		out := map[string]bool{}
		for _, ref := range c.RelatedImages() {
			named, err := reference.ParseNormalizedNamed(ref.Image)
			must(t, err)
			out["enclave/"+reference.Path(named)+":"+imageset.DigestTag(named.(reference.Canonical).Digest())] = true
		}
		return out
	}
	at := func(ref string) bool {
		repo, tag, _ := strings.Cut(ref, ":")
		_, err := w.dst.ManifestDigest(repo, tag)
		return err == nil
	}

	// A: images 0 and 1, operator-002 (which requires operator-000).
	a := w.writeISC("a.yaml", w.additional(0, 1)+operatorsBody(oc.Ref, "operator-002"))
	if code, _, _ := w.gapmirror("mirror", "-c", a, "--from", "file://"+archiveDir, "docker://"+root); code != 0 {
		t.Fatal("disk-to-mirror of subset A failed")
	}
	catA := mirroredCatalog(t, w.dst, catRepo, mustDigest(t, w.dst, catRepo, "v4.18"))
	if got := catA.PackageNames(); !slices.Equal(got, []string{"operator-000", "operator-002"}) {
		t.Errorf("subset A's catalog holds %v, want operator-002 and the operator-000 it requires", got)
	}
	imagesA := pushed(catA)
	for ref := range imagesA {
		if !at(ref) {
			t.Errorf("%s of subset A's catalog is not at the mirror", ref)
		}
	}

	// B: images 1 and 2, operator-001. A dry run first.
	b := w.writeISC("b.yaml", w.additional(1, 2)+operatorsBody(oc.Ref, "operator-001"))
	before, _ := w.dst.Catalog()
	code, out, _ := w.gapmirror("mirror", "-c", b, "--from", "file://"+archiveDir, "--prune", "--dry-run", "docker://"+root)
	if code != 0 {
		t.Fatal("dry run of subset B failed")
	}
	if after, _ := w.dst.Catalog(); !slices.Equal(before, after) || !at("enclave/"+w.images[0].Repo+":"+w.images[0].Tag) {
		t.Errorf("the dry run changed the mirror: %v → %v", before, after)
	}
	preview := readFile(t, filepath.Join(archiveDir, "working-dir", "dry-run", "prune-preview.json"))
	if !strings.Contains(preview, w.images[0].Repo) || strings.Contains(preview, w.images[1].Repo) {
		t.Errorf("the dry run's prune preview should list image 0 and not image 1:\n%s\n%s", preview, out)
	}

	if code, _, _ := w.gapmirror("mirror", "-c", b, "--from", "file://"+archiveDir, "--prune", "docker://"+root); code != 0 {
		t.Fatal("disk-to-mirror of subset B with --prune failed")
	}
	for i, want := range []bool{false, true, true} {
		d, err := w.dst.ManifestDigest("enclave/"+w.images[i].Repo, w.images[i].Tag)
		if got := err == nil; got != want {
			t.Errorf("image %d at the mirror after switching to B: %v, want %v", i, got, want)
		} else if want && d != w.images[i].Digest {
			t.Errorf("image %d at the mirror is %s, want %s", i, d, w.images[i].Digest)
		}
	}
	catB := mirroredCatalog(t, w.dst, catRepo, mustDigest(t, w.dst, catRepo, "v4.18"))
	if got := catB.PackageNames(); !slices.Equal(got, []string{"operator-001"}) {
		t.Errorf("subset B's catalog holds %v, want operator-001", got)
	}
	imagesB := pushed(catB)
	for ref := range imagesB {
		if !at(ref) {
			t.Errorf("%s of subset B's catalog is not at the mirror", ref)
		}
	}
	for ref := range imagesA {
		if !imagesB[ref] && at(ref) {
			t.Errorf("%s of subset A's catalog only was not pruned", ref)
		}
	}
	idms := readFile(t, filepath.Join(archiveDir, "working-dir", "cluster-resources", "idms-gapmirror.yaml"))
	if strings.Contains(idms, w.images[0].Repo) {
		t.Errorf("the IDMS of subset B names image 0:\n%s", idms)
	}
}

// TestDiskToMirrorSubsetWeekly: a subset narrowing a catalog, pushed from
// week 1's archive, then from week 2's incremental archive (nothing
// changed upstream) with the same subset.
func TestDiskToMirrorSubsetWeekly(t *testing.T) {
	t.Parallel()
	w, oc := newSubsetCatalogWorld(t)
	isc := w.writeISC("isc.yaml", w.additional(0, 1)+operatorsBody(oc.Ref, "operator-000", "operator-001"))
	subset := w.writeISC("subset.yaml", w.additional(0)+operatorsBody(oc.Ref, "operator-001"))
	archiveDir := filepath.Join(w.dir, "archive")
	root := w.dst.Host() + "/enclave"
	catRepo := "enclave/redhat/redhat-operator-index"
	var week1 digest.Digest
	for week := 1; week <= 2; week++ {
		if code, _, _ := w.gapmirror("mirror", "-c", isc, "file://"+archiveDir); code != 0 {
			t.Fatalf("mirror-to-disk week %d failed", week)
		}
		code, out, _ := w.gapmirror("mirror", "-c", subset, "--from", "file://"+archiveDir, "--prune", "docker://"+root)
		if code != 0 {
			t.Fatalf("disk-to-mirror of the subset, week %d: exit %d", week, code)
		}
		d := mustDigest(t, w.dst, catRepo, "v4.18")
		if got := mirroredCatalog(t, w.dst, catRepo, d).PackageNames(); !slices.Equal(got, []string{"operator-001"}) {
			t.Errorf("week %d: the catalog holds %v", week, got)
		}
		if week == 1 {
			week1 = d
		} else if d != week1 {
			t.Errorf("week 2 rebuilt the same catalog to %s, week 1 to %s", d, week1)
		}
		if week == 2 && !strings.Contains(out, "0 copied") {
			t.Errorf("week 2 copied something though nothing changed:\n%s", out)
		}
		if _, err := w.dst.ManifestDigest("enclave/"+w.images[1].Repo, w.images[1].Tag); err == nil {
			t.Errorf("week %d: image 1 is not in the subset but is at the mirror", week)
		}
	}
	// Week 3: the catalog changed upstream (same base layer, new FBC): the
	// incremental archive carries only what changed.
	w.pushCatalog("redhat/redhat-operator-index", "v4.18", catalogOptions{Spec: smallSpec, Single: true, Mutate: func(c *fbc.Catalog) {
		for _, b := range c.Package("operator-001").Bundles {
			b.Properties = append(b.Properties, fbc.Property{Type: "example.week", Value: json.RawMessage(`"3"`)})
		}
	}})
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "file://"+archiveDir); code != 0 {
		t.Fatal("mirror-to-disk week 3 failed")
	}
	if code, _, _ := w.gapmirror("mirror", "-c", subset, "--from", "file://"+archiveDir, "--prune", "docker://"+root); code != 0 {
		t.Fatal("disk-to-mirror of the subset, week 3, failed")
	}
	d := mustDigest(t, w.dst, catRepo, "v4.18")
	c := mirroredCatalog(t, w.dst, catRepo, d)
	if got := c.PackageNames(); !slices.Equal(got, []string{"operator-001"}) || len(c.Package("operator-001").Bundles[0].PropertyValues("example.week")) != 1 {
		t.Errorf("week 3: the catalog (%s) holds %v, without week 3's change or with other packages", d, got)
	}
	if _, err := w.dst.ManifestDigest(catRepo, week1.String()); err == nil {
		t.Errorf("week 3 --prune left week 1's catalog %s", week1)
	}
}

// TestDiskToMirrorSubsetPinnedCatalog: a subset whose catalog entry is the
// pinned configuration's, with fewer packages, and which keeps the
// archive's blockedImages rule.
func TestDiskToMirrorSubsetPinnedCatalog(t *testing.T) {
	t.Parallel()
	w, oc := newSubsetCatalogWorld(t)
	blocked := "  blockedImages:\n  - name: operator-000/operator@\n"
	isc := w.writeISC("isc.yaml", w.additional(0, 1)+operatorsBody(oc.Ref, "operator-000", "operator-001")+blocked)
	archiveDir := filepath.Join(w.dir, "archive")
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "file://"+archiveDir); code != 0 {
		t.Fatal("mirror-to-disk failed")
	}
	pinned := pinnedConfig(t, archiveDir)
	entry := pinned.Mirror.Operators[0]
	entry.Packages = entry.Packages[1:]
	data, err := imageset.MarshalYAML(&imageset.ImageSetConfiguration{Mirror: imageset.Mirror{Operators: []imageset.OperatorCatalog{entry}, AdditionalImages: pinned.Mirror.AdditionalImages[:1], BlockedImages: pinned.Mirror.BlockedImages}})
	must(t, err)
	subset := w.writeFile("subset.yaml", strings.Replace(string(data), "apiVersion: \"\"\nkind: \"\"\n", "kind: ImageSetConfiguration\napiVersion: mirror.openshift.io/v2alpha1\n", 1))
	root := w.dst.Host() + "/enclave"
	code, stdout, _ := w.gapmirror("mirror", "-c", subset, "--from", "file://"+archiveDir, "docker://"+root)
	if code != 0 {
		t.Fatal("disk-to-mirror of the pinned subset failed")
	}
	// The blocked images are the whole archive's: operator-000's, a
	// package this subset leaves out; the summary says whose they are.
	if !strings.Contains(stdout, "left out by the archive's mirror.blockedImages, in the whole archive (this -c subset may not name them)") {
		t.Errorf("the summary counts the archive's blocked images as the subset's:\n%s", stdout)
	}
	catRepo := "enclave/redhat/redhat-operator-index"
	if got := mirroredCatalog(t, w.dst, catRepo, mustDigest(t, w.dst, catRepo, "v4.18")).PackageNames(); !slices.Equal(got, []string{"operator-001"}) {
		t.Errorf("the catalog holds %v, want operator-001", got)
	}
	repos, _ := w.dst.Catalog()
	if !slices.Contains(repos, "enclave/"+w.images[0].Repo) || slices.Contains(repos, "enclave/"+w.images[1].Repo) {
		t.Errorf("want image 0 and not image 1: %v", repos)
	}

	// Refused, every entry named: the catalog under another targetTag, a
	// catalog the archive lacks, a package the archive's catalog lacks.
	other := w.writeISC("other.yaml", "  operators:\n  - catalog: "+oc.Ref+"\n    targetTag: v9\n  - catalog: "+w.up.Host()+"/other/index:v1\n  - catalog: "+oc.Ref+"\n    packages:\n    - name: operator-002\n")
	w.refusedSubset(other, archiveDir, "refused",
		"mirror.operators[0] "+oc.Ref+": the archive holds this catalog with another destination",
		"mirror.operators[1] "+w.up.Host()+"/other/index:v1: not a catalog of the archive",
		"mirror.operators[2] "+oc.Ref+": ",
		"operator-002")
}

// refusedSubset pushes the archive in archiveDir with the subset isc into
// prefix at the world's mirror and checks that it is refused (exit 1),
// naming each of wants, and that nothing reached prefix.
func (w *world) refusedSubset(isc, archiveDir, prefix string, wants ...string) {
	t := w.t
	t.Helper()
	code, _, errOut := w.gapmirror("mirror", "-c", isc, "--from", "file://"+archiveDir, "docker://"+w.dst.Host()+"/"+prefix)
	for _, want := range wants {
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("refusal: want exit 1 and %q, got exit %d: %s", want, code, errOut)
		}
	}
	if repos, _ := w.dst.Catalog(); slices.ContainsFunc(repos, func(r string) bool { return strings.HasPrefix(r, prefix+"/") }) {
		t.Errorf("a refused subset pushed: %v", repos)
	}
}

// TestDiskToMirrorSubsetGraph: a subset with fewer channels and graph: true
// pushes the archive's graph image and writes the UpdateService; with
// graph left out, neither.
func TestDiskToMirrorSubsetGraph(t *testing.T) {
	t.Parallel()
	versions := []string{"4.18.1", "4.18.2"}
	w := newReleaseWorld(t, versions, 2, false)
	g := releasetest.NewGraph("amd64", versions...)
	for _, v := range versions {
		g.SetPayload(v, w.payloads[v].PullSpec())
	}
	must(t, w.graphs.Put("fast-4.18", g.GenerateEdges()))
	one := "    - name: stable-4.18\n      minVersion: 4.18.1\n      maxVersion: 4.18.1\n"
	two := "    - name: fast-4.18\n      minVersion: 4.18.2\n      maxVersion: 4.18.2\n"
	archiveDir := filepath.Join(w.dir, "archive")
	if code, _, _ := w.run("mirror", "-c", w.releaseISC("isc", "    graph: true\n    channels:\n"+one+two), "file://"+archiveDir); code != 0 {
		t.Fatal("mirror-to-disk failed")
	}
	resources := filepath.Join(archiveDir, "working-dir", "cluster-resources")
	if code, _, _ := w.run("mirror", "-c", w.releaseISC("graph", "    graph: true\n    channels:\n"+two), "--from", "file://"+archiveDir, "docker://"+w.dst.Host()+"/graph"); code != 0 {
		t.Fatal("disk-to-mirror of the subset with the graph failed")
	}
	w.assertRelease("graph", w.payloads["4.18.2"], false)
	if _, err := w.dst.ManifestDigest("graph/openshift/release-images", w.payloads["4.18.1"].Tag); err == nil {
		t.Error("release 4.18.1 is not in the subset but was pushed")
	}
	gd, err := w.dst.ManifestDigest("graph/openshift/graph-image", "latest")
	if err != nil {
		t.Fatalf("the graph image is not at the mirror: %v", err)
	}
	w.assertGraphImage("graph/openshift/graph-image", gd)
	if us := readFile(t, filepath.Join(resources, "updateService.yaml")); !strings.Contains(us, w.dst.Host()+"/graph/openshift/graph-image") {
		t.Errorf("the UpdateService does not name the graph image:\n%s", us)
	}
	w.assertSignatureConfigMaps(filepath.Join(resources, "signature-configmap.yaml"), []string{"4.18.2"})

	if code, _, _ := w.run("mirror", "-c", w.releaseISC("nograph", "    channels:\n"+two), "--from", "file://"+archiveDir, "docker://"+w.dst.Host()+"/nograph"); code != 0 {
		t.Fatal("disk-to-mirror of the subset without the graph failed")
	}
	w.assertRelease("nograph", w.payloads["4.18.2"], false)
	if _, err := w.dst.ManifestDigest("nograph/openshift/graph-image", "latest"); err == nil {
		t.Error("the graph image was pushed for a subset without graph: true")
	}
	if _, err := os.Stat(filepath.Join(resources, "updateService.yaml")); err == nil {
		t.Errorf("an UpdateService was written for a subset without graph: true:\n%s", readFile(t, filepath.Join(resources, "updateService.yaml")))
	}
}

// TestDiskToMirrorSubsetDryRunTwoEnclaves: one archive pushed whole to
// enclave 1 and as a subset to enclave 2. A dry run of the subset plans
// and writes the cluster resources of the subset alone, pushing nothing,
// and plans the very catalog the real run then pushes; each mirror keeps
// its own record, so --prune on either deletes nothing of the other's.
func TestDiskToMirrorSubsetDryRunTwoEnclaves(t *testing.T) {
	t.Parallel()
	w, oc := newSubsetCatalogWorld(t)
	isc := w.writeISC("isc.yaml", w.additional(0, 1)+operatorsBody(oc.Ref, "operator-000", "operator-001"))
	subset := w.writeISC("subset.yaml", w.additional(0)+operatorsBody(oc.Ref, "operator-001"))
	archiveDir := filepath.Join(w.dir, "archive")
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "file://"+archiveDir); code != 0 {
		t.Fatal("mirror-to-disk failed")
	}
	one, two := w.dst.Host()+"/one", w.dst.Host()+"/two"
	if code, _, _ := w.gapmirror("mirror", "--from", "file://"+archiveDir, "docker://"+one); code != 0 {
		t.Fatal("disk-to-mirror of the whole archive to enclave 1 failed")
	}
	before, _ := w.dst.Catalog()
	if code, _, _ := w.gapmirror("mirror", "-c", subset, "--from", "file://"+archiveDir, "--dry-run", "--prune", "docker://"+two); code != 0 {
		t.Fatal("dry run of the subset failed")
	}
	if after, _ := w.dst.Catalog(); !slices.Equal(before, after) {
		t.Errorf("the dry run pushed: %v → %v", before, after)
	}
	dry := filepath.Join(archiveDir, "working-dir", "dry-run")
	mapping := readFile(t, filepath.Join(dry, "mapping.txt"))
	if !strings.Contains(mapping, "two/"+w.images[0].Repo) || strings.Contains(mapping, w.images[1].Repo) || strings.Contains(mapping, "operator-000") || !strings.Contains(mapping, "operator-001") {
		t.Errorf("the dry run's plan is not the subset's:\n%s", mapping)
	}
	if cs := readFile(t, filepath.Join(dry, "cluster-resources", "cs-redhat-operator-index-v4-18.yaml")); !strings.Contains(cs, w.dst.Host()+"/two/redhat/redhat-operator-index") {
		t.Errorf("the dry run's CatalogSource:\n%s", cs)
	}
	if idms := readFile(t, filepath.Join(dry, "cluster-resources", "idms-gapmirror.yaml")); strings.Contains(idms, w.images[1].Repo) || strings.Contains(idms, "operator-000") {
		t.Errorf("the dry run's IDMS names what the subset leaves out:\n%s", idms)
	}

	if code, _, _ := w.gapmirror("mirror", "-c", subset, "--from", "file://"+archiveDir, "--prune", "docker://"+two); code != 0 {
		t.Fatal("disk-to-mirror of the subset to enclave 2 failed")
	}
	d := mustDigest(t, w.dst, "two/redhat/redhat-operator-index", "v4.18")
	if !strings.Contains(mapping, d.String()) {
		t.Errorf("the dry run planned another catalog than the run pushed (%s):\n%s", d, mapping)
	}
	if code, _, _ := w.gapmirror("mirror", "--from", "file://"+archiveDir, "--prune", "docker://"+one); code != 0 {
		t.Fatal("disk-to-mirror of the whole archive to enclave 1 again failed")
	}
	repos, _ := w.dst.Catalog()
	for i := range 2 {
		if _, err := w.dst.ManifestDigest("one/"+w.images[i].Repo, w.images[i].Tag); err != nil {
			t.Errorf("image %d is gone from enclave 1: %v", i, err)
		}
	}
	if !slices.Contains(repos, "one/operator-000/operator") || slices.Contains(repos, "two/operator-000/operator") || slices.Contains(repos, "two/"+w.images[1].Repo) {
		t.Errorf("enclave 1 should hold the whole archive, enclave 2 the subset: %v", repos)
	}
	rec := readFile(t, filepath.Join(archiveDir, "working-dir", "mirrors", strings.NewReplacer("/", "_", ":", "_").Replace(two)+".json"))
	if strings.Contains(rec, w.images[1].Repo) || strings.Contains(rec, "operator-000") {
		t.Errorf("enclave 2's record names what the subset leaves out:\n%s", rec)
	}
}

// TestDiskToMirrorSubsetNarrowsReleases: a subset whose release channel is
// the archive's with a narrower version range pushes the archive's
// releases of that channel within it, with their components and their
// signature ConfigMaps, and nothing of the others; a range reaching
// outside the archive's is refused, naming both ranges, and pushes nothing.
func TestDiskToMirrorSubsetNarrowsReleases(t *testing.T) {
	t.Parallel()
	versions := []string{"4.18.1", "4.18.2", "4.18.3"}
	w := newReleaseWorld(t, versions, 2, false)
	archiveDir := filepath.Join(w.dir, "archive")
	channel := func(min, max string) string {
		return "    channels:\n    - name: stable-4.18\n      minVersion: " + min + "\n      maxVersion: " + max + "\n"
	}
	if code, _, _ := w.run("mirror", "-c", w.releaseISC("isc", channel("4.18.1", "4.18.3")), "file://"+archiveDir); code != 0 {
		t.Fatal("mirror-to-disk failed")
	}
	if code, _, _ := w.run("mirror", "-c", w.releaseISC("narrow", channel("4.18.2", "4.18.3")), "--from", "file://"+archiveDir, "docker://"+w.dst.Host()+"/narrow"); code != 0 {
		t.Fatal("disk-to-mirror of the narrowed channel failed")
	}
	for _, v := range []string{"4.18.2", "4.18.3"} {
		w.assertRelease("narrow", w.payloads[v], false)
	}
	p1 := w.payloads["4.18.1"]
	if _, err := w.dst.ManifestDigest("narrow/openshift/release-images", p1.Tag); err == nil {
		t.Error("release 4.18.1 is outside the subset's range but was pushed")
	}
	for _, c := range p1.Components {
		if _, err := w.dst.ManifestDigest("narrow/openshift/release", p1.Tag+"-"+c.Name); err == nil {
			t.Errorf("component %s of 4.18.1 was pushed", c.Name)
		}
	}
	w.assertSignatureConfigMaps(filepath.Join(archiveDir, "working-dir", "cluster-resources", "signature-configmap.yaml"), []string{"4.18.2", "4.18.3"})

	w.world.refusedSubset(w.releaseISC("wide", channel("4.18.0", "4.18.2")), archiveDir, "wide",
		"mirror.platform.channels[0] stable-4.18: versions 4.18.0 to 4.18.2 are not within the archive's 4.18.1 to 4.18.3")
	// As mirror-to-disk reads versions: x.y.z, nothing shorter.
	w.world.refusedSubset(w.releaseISC("short", channel("4.18.2", "4.18")), archiveDir, "short",
		`short.yaml:8: mirror.platform.channels[0].maxVersion: "4.18" is not a valid`)
}
