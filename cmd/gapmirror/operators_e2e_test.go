package main

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/catalog"
	"github.com/gapmirror/gapmirror/imageset/fbc"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// opSpec is the generated catalog of the operator tests: 10 packages of 5
// bundles, each bundle with an operator and an operand image.
var opSpec = catalog.GenSpec{Seed: 3, Packages: 10, Bundles: 5, RelatedImages: 1}

// TestOperatorCatalogTrips mirrors a filtered multi-arch catalog (by tag)
// and a second selection of it (by digest, full channels, targetCatalog)
// to disk, from disk into a registry, and registry to registry. Every
// selected bundle and related image must be at the mirror by digest, the
// rebuilt catalogs must hold exactly the selected bundles without the stale
// opm cache, and the cluster resources must point at the mirror.
func TestOperatorCatalogTrips(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	oc := w.pushCatalog("catalogs/test-index", "v1", catalogOptions{Spec: opSpec})
	stable := oc.Cat.Package("operator-004").Channel("stable")
	if stable == nil || len(stable.Entries) < 4 {
		t.Fatalf("generated operator-004 has no stable channel of 4+ entries")
	}
	versions := catalog.Packages(oc.Cat)[4].Channels
	var sv []string
	for _, ch := range versions {
		if ch.Name == "stable" {
			sv = ch.Versions
		}
	}
	template := filepath.Join(w.dir, "cs-template.yaml")
	must(t, os.WriteFile(template, []byte("apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: ignored\nspec:\n  displayName: Mirrored test operators\n  updateStrategy:\n    registryPoll:\n      interval: 30m\n"), 0o644))
	isc := w.writeISC("isc.yaml", `  operators:
  - catalog: `+oc.Ref+`
    targetCatalogSourceTemplate: `+template+`
    packages:
    - name: operator-001
    - name: operator-004
      channels:
      - name: stable
        minVersion: `+sv[1]+`
        maxVersion: `+sv[3]+`
    - name: operator-006
      defaultChannel: fast
      channels:
      - name: fast
  - catalog: `+w.up.Host()+"/"+oc.Repo+"@"+oc.Digest.String()+`
    targetCatalog: mirror/pinned-index
    full: true
    packages:
    - name: operator-002
`)
	want1, _, err := catalog.Filter(oc.Cat, catalog.FilterSpec{Packages: []catalog.PackageSpec{
		{Name: "operator-001"},
		{Name: "operator-004", Channels: []catalog.ChannelSpec{{Name: "stable", MinVersion: sv[1], MaxVersion: sv[3]}}},
		{Name: "operator-006", DefaultChannel: "fast", Channels: []catalog.ChannelSpec{{Name: "fast"}}},
	}})
	must(t, err)
	want2, _, err := catalog.Filter(oc.Cat, catalog.FilterSpec{Full: true, Packages: []catalog.PackageSpec{{Name: "operator-002"}}})
	must(t, err)

	archiveDir := filepath.Join(w.dir, "archive")
	code, out, _ := w.gapmirror("mirror", "-c", isc, "file://"+archiveDir)
	if code != 0 {
		t.Fatalf("mirror-to-disk exit %d", code)
	}
	if !strings.Contains(out, "0 failed") {
		t.Errorf("mirror-to-disk summary:\n%s", out)
	}
	code, _, _ = w.gapmirror("mirror", "--from", "file://"+archiveDir, "docker://"+w.dst.Host()+"/d2m")
	if code != 0 {
		t.Fatalf("disk-to-mirror exit %d", code)
	}
	d1, d2 := w.checkCatalogs(w.dst, "d2m", oc, want1, want2)
	if d1 == "" {
		return
	}

	res := filepath.Join(archiveDir, "working-dir", "cluster-resources")
	cs := readFile(t, filepath.Join(res, "cs-test-index-v1.yaml"))
	if !strings.Contains(cs, "image: "+w.dst.Host()+"/d2m/catalogs/test-index:v1") || !strings.Contains(cs, "sourceType: grpc") ||
		!strings.Contains(cs, "interval: 30m") || !strings.Contains(cs, "name: cs-test-index-v1") {
		t.Errorf("CatalogSource does not serve the mirrored catalog from the template the archive carried:\n%s", cs)
	}
	cc := readFile(t, filepath.Join(res, "cc-test-index-v1.yaml"))
	if !strings.Contains(cc, "ref: "+w.dst.Host()+"/d2m/catalogs/test-index@"+d1.String()) {
		t.Errorf("ClusterCatalog does not pin the mirrored catalog by digest:\n%s", cc)
	}
	pinnedName := "cc-pinned-index-" + strings.TrimSuffix(imageset.DigestTag(d2)[:12], "-") + ".yaml"
	if cc2 := readFile(t, filepath.Join(res, pinnedName)); !strings.Contains(cc2, "d2m/mirror/pinned-index@"+d2.String()) {
		t.Errorf("%s does not pin the second catalog:\n%s", pinnedName, cc2)
	}
	idms := readFile(t, filepath.Join(res, "idms-gapmirror.yaml"))
	for _, want := range []string{"source: " + w.up.Host() + "/operator-001", "- " + w.dst.Host() + "/d2m/operator-001", "source: " + w.up.Host() + "/operator-002"} {
		if !strings.Contains(idms, want) {
			t.Errorf("IDMS lacks %q:\n%s", want, idms)
		}
	}
	if strings.Contains(idms, "catalogs/test-index") || strings.Contains(idms, "pinned-index") {
		t.Errorf("IDMS maps a catalog image (catalogs are served by CatalogSource, not mirrored pulls):\n%s", idms)
	}

	// Mirror-to-mirror: the same catalogs, the rebuilt images bit for bit,
	// and the catalog image is not downloaded again (it is in the store).
	var catalogBlobGets atomic.Int64
	w.up.SetWrap(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if registrytest.MatchBlobGet(r) && strings.Contains(r.URL.Path, "/catalogs/test-index/") {
				catalogBlobGets.Add(1)
			}
			next.ServeHTTP(rw, r)
		})
	})
	ws := filepath.Join(w.dir, "ws")
	code, _, _ = w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m2m")
	if code != 0 {
		t.Fatalf("mirror-to-mirror exit %d", code)
	}
	if n := catalogBlobGets.Load(); n != 0 {
		t.Errorf("mirror-to-mirror downloaded %d blobs of the catalog image the store already held", n)
	}
	m1, m2 := w.checkCatalogs(w.dst, "m2m", oc, want1, want2)
	if m1 != d1 || m2 != d2 {
		t.Errorf("mirror-to-mirror rebuilt %s and %s, mirror-to-disk %s and %s: the rebuild must be deterministic", m1, m2, d1, d2)
	}
	if _, err := os.Stat(filepath.Join(ws, "working-dir", "cluster-resources", "cs-test-index-v1.yaml")); err != nil {
		t.Errorf("mirror-to-mirror wrote no CatalogSource: %v", err)
	}
}

// checkCatalogs checks both catalogs of TestOperatorCatalogTrips and their
// images under prefix and returns the mirrored catalog digests.
func (w *world) checkCatalogs(reg *registrytest.Registry, prefix string, oc *opCatalog, want1, want2 *fbc.Catalog) (digest.Digest, digest.Digest) {
	t := w.t
	t.Helper()
	d1, err := reg.ManifestDigest(prefix+"/catalogs/test-index", "v1")
	if err != nil {
		t.Errorf("filtered catalog not at %s/catalogs/test-index:v1: %v", prefix, err)
		return "", ""
	}
	if d1 == oc.Digest {
		t.Errorf("the filtered catalog was mirrored unchanged (%s): it must be rebuilt", d1)
	}
	w.assertComplete(reg, prefix+"/catalogs/test-index", d1)
	if got, want := bundleNames(mirroredCatalog(t, reg, prefix+"/catalogs/test-index", d1)), bundleNames(want1); !slices.Equal(got, want) {
		t.Errorf("mirrored catalog holds bundles\n%v\nwant\n%v", got, want)
	}
	checkNoOPMCache(t, reg, prefix+"/catalogs/test-index", d1)

	tags, err := reg.Tags(prefix + "/mirror/pinned-index")
	if err != nil || len(tags) != 1 {
		t.Errorf("pinned catalog: tags %v, %v; want one digest tag", tags, err)
		return d1, ""
	}
	d2, err := reg.ManifestDigest(prefix+"/mirror/pinned-index", tags[0])
	must(t, err)
	if tags[0] != imageset.DigestTag(d2) {
		t.Errorf("catalog pinned by digest is tagged %s, want the digest tag of what is mirrored, %s", tags[0], imageset.DigestTag(d2))
	}
	if got, want := bundleNames(mirroredCatalog(t, reg, prefix+"/mirror/pinned-index", d2)), bundleNames(want2); !slices.Equal(got, want) {
		t.Errorf("mirrored pinned catalog holds bundles\n%v\nwant\n%v", got, want)
	}

	n := w.checkImages(reg, prefix, want1) + w.checkImages(reg, prefix, want2)
	if n < 20 {
		t.Errorf("only %d bundle and related images checked: the selection is too small to mean anything", n)
	}
	// A package nobody selected (nor depends on) is not mirrored.
	for _, p := range oc.Cat.PackageNames() {
		if want1.Package(p) != nil || want2.Package(p) != nil {
			continue
		}
		b := oc.Cat.Package(p).Bundles[0]
		named, _ := reference.ParseNormalizedNamed(b.Image)
		d := named.(reference.Canonical).Digest()
		if _, err := reg.ManifestDigest(prefix+"/"+reference.Path(named), imageset.DigestTag(d)); err == nil {
			t.Errorf("bundle %s of unselected package %s was mirrored", b.Name, p)
		}
		break
	}
	return d1, d2
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Errorf("%v", err)
	}
	return string(data)
}

// TestOperatorCatalogWholeAndLayout: full: true without packages mirrors
// the catalog image untouched (same digest) with every image it names; a
// catalog read from an OCI layout on disk is filtered and rebuilt; the dry
// run says which catalog, package and bundle needs each image.
func TestOperatorCatalogWholeAndLayout(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	layout := filepath.Join(w.dir, "layouts", "My-Catalog")
	whole := w.pushCatalog("catalogs/whole", "v4.18", catalogOptions{Spec: smallSpec})
	onDisk := w.pushCatalog("catalogs/ondisk", "v1", catalogOptions{Spec: catalog.GenSpec{Seed: 9, Packages: 3, Bundles: 3, RelatedImages: 1}, Layout: layout})
	isc := w.writeISC("isc.yaml", `  operators:
  - catalog: `+whole.Ref+`
    full: true
  - catalog: oci://`+layout+`
    targetTag: v2
    packages:
    - name: operator-002
  blockedImages:
  - name: operator-001/operator@
`)
	ws := filepath.Join(w.dir, "ws")
	code, out, _ := w.gapmirror("mirror", "-c", isc, "--dry-run", "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m")
	if code != 0 {
		t.Fatalf("dry run exit %d", code)
	}
	b := whole.Cat.Package("operator-001").Bundles[0]
	if want := "operator catalog " + whole.Ref + ": package operator-001 bundle " + b.Name; !strings.Contains(out, want) {
		t.Errorf("dry run does not say who needs the bundle image (%q):\n%s", want, out)
	}
	// The dry run put the catalog images into the store: the run reads
	// them from there, the whole catalog included.
	var catalogBlobGets atomic.Int64
	w.up.SetWrap(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if registrytest.MatchBlobGet(r) && strings.Contains(r.URL.Path, "/catalogs/") {
				catalogBlobGets.Add(1)
			}
			next.ServeHTTP(rw, r)
		})
	})
	code, _, errOut := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if n := catalogBlobGets.Load(); n != 0 {
		t.Errorf("%d catalog blobs downloaded again although the store holds the catalogs", n)
	}
	if !strings.Contains(errOut, "bundle or related images left out by mirror.blockedImages[0]") {
		t.Errorf("the run does not say what mirror.blockedImages kept out:\n%s", errOut)
	}
	if d, err := w.dst.ManifestDigest("m/catalogs/whole", "v4.18"); err != nil || d != whole.Digest {
		t.Errorf("full catalog at the mirror: %s, %v; want the original %s untouched", d, err, whole.Digest)
	}
	blocked := 0
	for _, ref := range whole.Cat.RelatedImages() {
		if strings.Contains(ref.Image, "operator-001/operator@") {
			blocked++
			named, _ := reference.ParseNormalizedNamed(ref.Image)
			if _, err := w.dst.ManifestDigest("m/"+reference.Path(named), imageset.DigestTag(named.(reference.Canonical).Digest())); err == nil {
				t.Errorf("blocked image %s was mirrored", ref.Image)
			}
		}
	}
	if n, all := w.checkImages(w.dst, "m", whole.Cat, "operator-001/operator@"), len(whole.Cat.RelatedImages()); blocked == 0 || n != all-blocked {
		t.Errorf("%d of the %d images of the full catalog mirrored, %d blocked", n, all, blocked)
	}

	want, _, err := catalog.Filter(onDisk.Cat, catalog.FilterSpec{Packages: []catalog.PackageSpec{{Name: "operator-002"}}})
	must(t, err)
	d, err := w.dst.ManifestDigest("m/my-catalog", "v2")
	if err != nil {
		t.Fatalf("catalog from the OCI layout not at m/my-catalog:v2: %v", err)
	}
	if got := bundleNames(mirroredCatalog(t, w.dst, "m/my-catalog", d)); !slices.Equal(got, bundleNames(want)) {
		t.Errorf("catalog from the OCI layout holds %v, want %v", got, bundleNames(want))
	}
	w.checkImages(w.dst, "m", want)
	if _, err := os.Stat(filepath.Join(ws, "working-dir", "cluster-resources", "cs-my-catalog-v2.yaml")); err != nil {
		t.Errorf("no CatalogSource for the layout catalog: %v", err)
	}
}

// TestListOperators lists a catalog's packages, a package's channels and a
// channel's versions from a registry, then offline from an archive made by
// mirror-to-disk and from an OCI layout.
func TestListOperators(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	layout := filepath.Join(w.dir, "layout")
	oc := w.pushCatalog("catalogs/list-index", "v1", catalogOptions{Spec: smallSpec, Layout: layout})
	pkgs := catalog.Packages(oc.Cat)
	p := pkgs[1]
	ch := p.Channels[0]

	var wantPkgs strings.Builder
	for _, ps := range pkgs {
		var chs []string
		for _, c := range ps.Channels {
			chs = append(chs, c.Name)
		}
		wantPkgs.WriteString(ps.Name + "  " + ps.DefaultChannel + "  " + strings.Join(chs, ",") + "\n")
	}
	wantVersions := strings.Join(ch.Versions, "\n") + "\n"

	check := func(where, ref, originInHeader string) {
		t.Helper()
		code, out, _ := w.gapmirror("list", "operators", "--catalog", ref)
		header := "# catalog " + originInHeader + ": 3 packages: package, default channel, channels\n"
		if code != 0 || out != header+wantPkgs.String() {
			t.Errorf("%s: packages: exit %d:\n%s\nwant:\n%s%s", where, code, out, header, wantPkgs.String())
		}
		code, out, _ = w.gapmirror("list", "operators", "--catalog", ref, "--package", p.Name)
		wantLine := strings.Join(append([]string{ch.Name, ch.Head}, ch.Versions...), " ")
		found := false
		for _, line := range strings.Split(out, "\n") {
			found = found || strings.Join(strings.Fields(line), " ") == wantLine
		}
		if code != 0 || !strings.Contains(out, "default channel "+p.DefaultChannel) || !found {
			t.Errorf("%s: channels of %s: exit %d:\n%s", where, p.Name, code, out)
		}
		code, out, _ = w.gapmirror("list", "operators", "--catalog", ref, "--package", p.Name, "--channel", ch.Name)
		if code != 0 || !strings.HasSuffix(out, "head "+ch.Head+"\n"+wantVersions) {
			t.Errorf("%s: versions of %s/%s: exit %d:\n%s\nwant versions:\n%s", where, p.Name, ch.Name, code, out, wantVersions)
		}
	}
	check("registry", oc.Ref, oc.Ref)
	check("OCI layout", "oci://"+layout, "oci://"+layout)

	code, out, _ := w.gapmirror("list", "operators", "--catalog", oc.Ref, "--package", p.Name, "-o", "json")
	if code != 0 || !strings.Contains(out, `"name": "`+p.Name+`"`) || !strings.Contains(out, `"head": "`+ch.Head+`"`) {
		t.Errorf("json: exit %d:\n%s", code, out)
	}
	code, _, errOut := w.gapmirror("list", "operators", "--catalog", oc.Ref, "--package", "nope")
	if code != 1 || !strings.Contains(errOut, `package "nope" is not in catalog `+oc.Ref) {
		t.Errorf("unknown package: exit %d: %s", code, errOut)
	}

	// Offline: the archive of a mirror-to-disk run holding two catalogs.
	isc := w.writeISC("isc.yaml", "  operators:\n  - catalog: "+oc.Ref+"\n    full: true\n  - catalog: "+oc.Ref+"\n    targetCatalog: filtered/list-index\n    packages:\n    - name: "+p.Name+"\n")
	archiveDir := filepath.Join(w.dir, "archive")
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "file://"+archiveDir); code != 0 {
		t.Fatalf("mirror-to-disk exit %d", code)
	}
	check("archive", "file://"+archiveDir+"#catalogs/list-index:v1", "catalogs/list-index:v1 in "+archiveDir)
	code, out, errOut = w.gapmirror("list", "operators", "--catalog", "file://"+archiveDir)
	if code != 1 || !strings.Contains(errOut, "the archive holds 2 catalogs: name one, e.g. file://"+archiveDir+"#catalogs/list-index:v1") {
		t.Errorf("archive with two catalogs and none named: exit %d: %s", code, errOut)
	}
	code, out, _ = w.gapmirror("list", "operators", "--catalog", "file://"+archiveDir+"#filtered/list-index:v1")
	if code != 0 || !strings.Contains(out, ": 1 packages:") || !strings.Contains(out, p.Name) {
		t.Errorf("filtered catalog from the archive: exit %d:\n%s", code, out)
	}
}

// TestOperatorCatalogIncremental: widening the filter makes a second
// archive that carries only what is new (the new configs layer, manifests
// and the new package's images, not the catalog's base layers), and
// applying it updates the mirrored catalog.
func TestOperatorCatalogIncremental(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	oc := w.pushCatalog("catalogs/inc-index", "v1", catalogOptions{Spec: smallSpec})
	out := filepath.Join(w.dir, "out")
	trip := func(name string, pkgs ...string) *fbc.Catalog {
		t.Helper()
		body := "  operators:\n  - catalog: " + oc.Ref + "\n    packages:\n"
		var spec catalog.FilterSpec
		for _, p := range pkgs {
			body += "    - name: " + p + "\n"
			spec.Packages = append(spec.Packages, catalog.PackageSpec{Name: p})
		}
		isc := w.writeISC(name, body)
		if code, _, _ := w.gapmirror("mirror", "-c", isc, "file://"+out); code != 0 {
			t.Fatalf("%s: mirror-to-disk exit %d", name, code)
		}
		if code, _, _ := w.gapmirror("mirror", "--from", "file://"+out, "docker://"+w.dst.Host()+"/inc"); code != 0 {
			t.Fatalf("%s: disk-to-mirror exit %d", name, code)
		}
		want, _, err := catalog.Filter(oc.Cat, spec)
		must(t, err)
		return want
	}
	trip("isc1.yaml", "operator-000")
	idx1 := archiveOf(t, out)
	want := trip("isc2.yaml", "operator-000", "operator-001")
	idx2 := archiveOf(t, out)
	if idx2.BasedOn != idx1.ID {
		t.Errorf("second archive builds on %q, want %q", idx2.BasedOn, idx1.ID)
	}
	carried := map[digest.Digest]bool{}
	for _, b := range idx1.Blobs {
		carried[b.Digest] = true
	}
	for _, b := range idx2.Blobs {
		if carried[b.Digest] {
			t.Errorf("blob %s carried again", b.Digest)
		}
	}
	// Listing the catalog offline from the incremental archive alone cannot
	// work (its base layers came earlier): the error says where to look.
	code, _, errOut := w.gapmirror("list", "operators", "--catalog", "file://"+out)
	if code != 1 || !strings.Contains(errOut, "this archive is incremental (it builds on archive "+idx1.ID+")") {
		t.Errorf("list operators from an incremental archive: exit %d:\n%s", code, errOut)
	}
	d, err := w.dst.ManifestDigest("inc/catalogs/inc-index", "v1")
	must(t, err)
	if got := bundleNames(mirroredCatalog(t, w.dst, "inc/catalogs/inc-index", d)); !slices.Equal(got, bundleNames(want)) {
		t.Errorf("mirrored catalog after the second archive holds %v, want %v", got, bundleNames(want))
	}
	w.checkImages(w.dst, "inc", want)
}
