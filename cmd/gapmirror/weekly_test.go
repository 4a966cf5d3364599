package main

import (
	"encoding/json"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	"sigs.k8s.io/yaml"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/catalog"
	"github.com/gapmirror/gapmirror/imageset/fbc"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// monthSpec is the operator catalog of the month: two packages with one
// "stable" channel of four bundles, each bundle with one operand image
// (shared within a minor).
var monthSpec = catalog.GenSpec{Seed: 21, Packages: 2, Bundles: 4, Channels: 1, RelatedImages: 1,
	SkipRatio: -1, SkipRangeRatio: -1, PrereleaseRatio: -1, DependencyRatio: -1}

// withoutNewest drops the newest bundle of a package from the catalog: the
// catalog as it was before upstream shipped that bundle.
func withoutNewest(pkg string) func(c *fbc.Catalog) {
	return func(c *fbc.Catalog) {
		p := c.Package(pkg)
		newest := p.Bundles[0]
		for _, b := range p.Bundles {
			if b.Version().GreaterThan(newest.Version()) {
				newest = b
			}
		}
		p.Bundles = slices.DeleteFunc(p.Bundles, func(b *fbc.Bundle) bool { return b == newest })
		for _, ch := range p.Channels {
			ch.Entries = slices.DeleteFunc(ch.Entries, func(e fbc.ChannelEntry) bool { return e.Name == newest.Name })
		}
	}
}

// TestAMonthOfMirroring plays a disconnected-cluster admin's month with one
// ImageSetConfiguration holding additional images, a filtered operator
// catalog and signed release payloads with the update graph. Week 1: a full
// archive carried to a fresh directory and pushed. Week 2: upstream ships a
// bundle and a release, one additional image is replaced by another; the
// archive carries only the new blobs, and disk-to-mirror with --prune adds
// the new, deletes what left the set and keeps what is still referenced.
// Week 3: nothing changed; an index-only archive, a no-op push. The mirror
// then holds exactly what mirror-to-mirror of the same config gives.
func TestAMonthOfMirroring(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, []string{"4.18.1", "4.18.2"}, 4, false)
	w.pushFleet(4, 16<<10)
	fleet := w.images
	oc := w.pushCatalog("redhat/redhat-operator-index", "v4.18", catalogOptions{Spec: monthSpec, Mutate: withoutNewest("operator-000")})
	filter := catalog.FilterSpec{Packages: []catalog.PackageSpec{{Name: "operator-000", Channels: []catalog.ChannelSpec{{Name: "stable"}}}}}
	head1, _, err := catalog.Filter(oc.Cat, filter)
	must(t, err)
	// The operand of the week-1 head, also listed as an additional image:
	// one destination, needed for two reasons.
	var shared string
	for _, ri := range head1.Package("operator-000").Bundles[0].RelatedImages {
		if ri.Name == "operand-0" {
			shared = ri.Image
		}
	}
	isc := func(name string, images ...example) string {
		var b strings.Builder
		b.WriteString("  additionalImages:\n")
		for _, ex := range images {
			fmt.Fprintf(&b, "  - name: %s\n", ex.Ref)
		}
		fmt.Fprintf(&b, "  - name: %s\n", shared)
		fmt.Fprintf(&b, "  operators:\n  - catalog: %s\n    packages:\n    - name: operator-000\n      channels:\n      - name: stable\n", oc.Ref)
		b.WriteString("  platform:\n    graph: true\n    channels:\n    - name: stable-4.18\n      minVersion: 4.18.1\n")
		return w.writeISC(name, b.String())
	}
	out, airgap := filepath.Join(w.dir, "out"), filepath.Join(w.dir, "airgap")
	root := w.dst.Host() + "/mirror"

	// Week 1.
	isc1 := isc("isc-week1.yaml", fleet[0], fleet[1], fleet[2])
	if code, _, _ := w.run("mirror", "-c", isc1, "file://"+out); code != 0 {
		t.Fatalf("week 1: mirror-to-disk exit %d", code)
	}
	moveChunks(t, out, airgap)
	idx1 := archiveOf(t, airgap)
	w.describes(airgap, "week 1", idx1, "builds on: nothing (a full archive)", "operator catalog ", "additional images (")
	if code, _, _ := w.run("mirror", "--from", "file://"+airgap, "docker://"+root); code != 0 {
		t.Fatalf("week 1: disk-to-mirror exit %d", code)
	}
	w.checkMonth(airgap, root, idx1.Set, []string{"4.18.1", "4.18.2"}, fleet[:3], head1)
	sharedImg := findImage(t, idx1.Set, shared)
	if len(sharedImg.Why) < 2 || !strings.Contains(strings.Join(sharedImg.Why, " "), "additionalImages") || !strings.Contains(strings.Join(sharedImg.Why, " "), "operator-000") {
		t.Errorf("image %s is needed by the catalog and as an additional image, the set says only %v", shared, sharedImg.Why)
	}
	if !slices.Contains(sharedImg.Groups(), "operator") || !slices.Contains(sharedImg.Groups(), "additional") {
		t.Errorf("image %s is needed by the catalog and as an additional image, its groups are %v", shared, sharedImg.Groups())
	}
	week1Blobs := w.setBlobs("mirror", idx1.Set)
	catalog1, err := w.dst.ManifestDigest("mirror/redhat/redhat-operator-index", "v4.18")
	must(t, err)

	// Week 2: upstream ships operator-000's next bundle and 4.18.3; the
	// admin swaps one additional image for another.
	oc2 := w.pushCatalog("redhat/redhat-operator-index", "v4.18", catalogOptions{Spec: monthSpec})
	head2, _, err := catalog.Filter(oc2.Cat, filter)
	must(t, err)
	if slices.Equal(bundleNames(head1), bundleNames(head2)) {
		t.Fatalf("the channel head did not move: %v", bundleNames(head2))
	}
	w.publish("4.18.3")
	isc2 := isc("isc-week2.yaml", fleet[0], fleet[2], fleet[3])
	// The dry run lists what is new upstream as missing from the store.
	if code, _, _ := w.run("mirror", "-c", isc2, "--dry-run", "file://"+out); code != 0 {
		t.Fatalf("week 2: mirror-to-disk --dry-run exit %d", code)
	}
	missing := readFile(t, filepath.Join(out, "working-dir", "dry-run", "missing.txt"))
	for _, want := range []string{"=" + fleet[3].Repo + ":" + fleet[3].Tag + "\n", "=openshift/release-images:" + w.payloads["4.18.3"].Tag + "\n", "operator-000/bundle@"} {
		if !strings.Contains(missing, want) {
			t.Errorf("week 2: the dry run's missing.txt lacks %q:\n%s", want, missing)
		}
	}
	if strings.Contains(missing, fleet[0].Repo) {
		t.Errorf("week 2: the dry run lists %s as missing, the store has it:\n%s", fleet[0].Repo, missing)
	}
	if code, _, _ := w.run("mirror", "-c", isc2, "file://"+out); code != 0 {
		t.Fatalf("week 2: mirror-to-disk exit %d", code)
	}
	moveChunks(t, out, airgap)
	idx2 := archiveOf(t, airgap)
	w.describes(airgap, "week 2", idx2, "builds on: "+idx1.ID+", applied here", "changes since "+idx1.ID+": ")
	var bundles2 []string
	for _, b := range bundleNames(head2) {
		bundles2 = append(bundles2, path.Base(b)) // package/bundle
	}
	w.describesJSON(airgap, idx2, idx1.ID, root, bundles2, fleet[1], fleet[3])
	// The preview lists the deletes, the old catalog's included: it is
	// worked out as the registry will be once the copy moved the tag.
	code, dry, _ := w.run("mirror", "--from", "file://"+airgap, "--dry-run", "--prune", "docker://"+root)
	_, dryPlan := deletionFile(t, filepath.Join(airgap, "working-dir", "dry-run", "prune-preview.json"))
	for _, want := range []string{"delete manifest mirror/" + fleet[1].Repo + "@" + fleet[1].Digest.String(),
		"delete manifest mirror/redhat/redhat-operator-index@" + catalog1.String() + " (untagged)"} {
		if code != 0 || !strings.Contains(dry, want) {
			t.Errorf("week 2: disk-to-mirror --dry-run --prune (exit %d) does not say %q:\n%s", code, want, dry)
		}
	}
	w.present(w.dst, "mirror/"+fleet[1].Repo, fleet[1].Tag, fleet[1].Digest)
	// The same config given again with -c is the archive's: accepted.
	code, stdout, _ := w.run("mirror", "-c", isc2, "--from", "file://"+airgap, "--prune", "docker://"+root)
	if code != 0 {
		t.Fatalf("week 2: disk-to-mirror --prune exit %d", code)
	}
	w.checkMonth(airgap, root, idx2.Set, []string{"4.18.1", "4.18.2", "4.18.3"}, []example{fleet[0], fleet[2], fleet[3]}, head2)
	_, pruned := deletionFile(t, filepath.Join(airgap, "working-dir", "prune", "*-pruned.json"))
	if a, b := actionKeys(dryPlan.Plan.Actions), actionKeys(pruned.Outcome.Done); strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Errorf("week 2: the dry run's preview listed\n%s\nbut --prune deleted\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}

	// The archive carried exactly the blobs week 1 did not have.
	week2Blobs := w.setBlobs("mirror", idx2.Set)
	var want, got int64
	for d, size := range week2Blobs {
		if _, ok := week1Blobs[d]; !ok {
			want += size
		}
	}
	for _, b := range idx2.Blobs {
		got += b.Size
		if _, ok := week1Blobs[b.Digest]; ok {
			t.Errorf("week 2: blob %s carried again", b.Digest)
		}
	}
	if got != want || got == 0 {
		t.Errorf("week 2: archive carries %d blob bytes, want exactly the %d new ones", got, want)
	}

	// Pruned: the replaced additional image, the old head's own images, the
	// old catalog manifest; kept: the shared operand (still an additional image).
	w.gone(w.dst, "mirror/"+fleet[1].Repo, fleet[1].Tag, fleet[1].Digest)
	for _, ri := range head1.RelatedImages() {
		if ri.Image == shared || slices.ContainsFunc(head2.RelatedImages(), func(r fbc.ImageRef) bool { return r.Image == ri.Image }) {
			continue
		}
		named, err := reference.ParseNormalizedNamed(ri.Image)
		must(t, err)
		d := named.(reference.Canonical).Digest()
		w.gone(w.dst, "mirror/"+reference.Path(named), imageset.DigestTag(d), d)
	}
	if _, err := w.dst.ManifestDigest("mirror/redhat/redhat-operator-index", catalog1.String()); err == nil {
		t.Errorf("week 2: the week-1 catalog manifest %s is still at the mirror", catalog1)
	}
	if !strings.Contains(stdout, "pruned") && !strings.Contains(stdout, "deleted") {
		t.Errorf("week 2: the summary does not say what --prune deleted:\n%s", stdout)
	}

	// Week 3: nothing changed.
	start := time.Now()
	if code, _, _ := w.run("mirror", "-c", isc2, "file://"+out); code != 0 {
		t.Fatalf("week 3: mirror-to-disk exit %d", code)
	}
	m2dTook := time.Since(start)
	moveChunks(t, out, airgap)
	idx3 := archiveOf(t, airgap)
	if len(idx3.Blobs) != 0 || idx3.BasedOn != idx2.ID {
		t.Errorf("week 3: a no-change archive carries %d blobs and builds on %q, want 0 and %s", len(idx3.Blobs), idx3.BasedOn, idx2.ID)
	}
	w.describes(airgap, "week 3", idx3, "; 0 blobs, 0 B", "changes since "+idx2.ID+": 0 images added, 0 removed; releases unchanged; bundles unchanged")
	start = time.Now()
	code, stdout, _ = w.run("mirror", "--from", "file://"+airgap, "--prune", "docker://"+root)
	d2mTook := time.Since(start)
	if code != 0 {
		t.Fatalf("week 3: disk-to-mirror exit %d", code)
	}
	var images, copied, there, built, failed int
	fmt.Sscanf(stdout[strings.Index(stdout, "disk-to-mirror: "):], "disk-to-mirror: %d images: %d copied, %d already at the destination, %d built by gapmirror, %d failed", &images, &copied, &there, &built, &failed)
	if copied != 0 || failed != 0 || there+built != images || images == 0 {
		t.Errorf("week 3: disk-to-mirror was not a no-op:\n%s", stdout)
	}
	if m2dTook > 10*time.Second || d2mTook > 10*time.Second {
		t.Errorf("week 3: nothing changed, yet mirror-to-disk took %s and disk-to-mirror %s", m2dTook, d2mTook)
	}

	w.checkRecords(out, airgap, idx3.Set)

	// The month's mirror equals mirror-to-mirror of the final config.
	fresh := registrytest.Start(t, registrytest.Options{})
	if code, _, _ := w.run("mirror", "-c", isc2, "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+fresh.Host()+"/mirror"); code != 0 {
		t.Fatalf("mirror-to-mirror exit %d", code)
	}
	if a, b := registryContent(t, w.dst), registryContent(t, fresh); !slices.Equal(a, b) || len(a) < len(idx3.Set.Images) {
		t.Errorf("after a month of disk-to-mirror the mirror holds\n%s\nmirror-to-mirror of the final config gives\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
}

// checkRecords checks the workspaces after the month: three archives
// written and applied, one prune that deleted all it planned, and the
// mirror record holding exactly the final set (pruned images forgotten).
func (w *releaseWorld) checkRecords(out, airgap string, set *imageset.Set) {
	t := w.t
	t.Helper()
	for _, dir := range []string{filepath.Join(out, "working-dir", "archives"), filepath.Join(airgap, "working-dir", "applied")} {
		if files, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(files) != 3 {
			t.Errorf("%s holds %d records, want one per archive (3)", dir, len(files))
		}
	}
	file, rec := deletionFile(t, filepath.Join(airgap, "working-dir", "prune", "*-pruned.json"))
	if rec.Outcome == nil || len(rec.Outcome.Done) != len(rec.Plan.Actions) || len(rec.Outcome.Failed) != 0 || len(rec.Plan.Actions) == 0 {
		t.Errorf("%s: %d actions planned, outcome %+v", file, len(rec.Plan.Actions), rec.Outcome)
	}
	files, _ := filepath.Glob(filepath.Join(airgap, "working-dir", "mirrors", "*.json"))
	if len(files) != 1 {
		t.Fatalf("mirror records %v, want one for the one mirror", files)
	}
	var mirrored struct {
		Images []struct {
			Destination string `json:"destination"`
			Digest      string `json:"digest"`
		} `json:"images"`
	}
	must(t, json.Unmarshal([]byte(readFile(t, files[0])), &mirrored))
	var got, want []string
	for _, m := range mirrored.Images {
		got = append(got, m.Destination+"@"+m.Digest)
	}
	for _, img := range set.Images {
		want = append(want, img.Destination+"@"+img.Digest)
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s records\n%s\nwant the final set\n%s", files[0], strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// describes checks what describe says about the archive in dir.
func (w *releaseWorld) describes(dir, when string, idx *archive.Index, lines ...string) {
	t := w.t
	t.Helper()
	code, stdout, _ := w.gapmirror("describe", "--images", "file://"+dir)
	lines = append(lines, "archive "+idx.ID, fmt.Sprintf("  %d images", len(idx.Set.Images)-idx.Set.Signatures()), "intact")
	for _, img := range idx.Set.Images {
		lines = append(lines, img.Destination+"@"+img.Digest)
	}
	for _, want := range lines {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("%s: describe (exit %d) does not say %q:\n%s", when, code, want, stdout)
		}
	}
}

// findImage is the image of set whose origin is ref.
func findImage(t *testing.T, set *imageset.Set, ref string) imageset.Image {
	t.Helper()
	var found []imageset.Image
	for _, img := range set.Images {
		if img.Origin == ref || img.Source == ref {
			found = append(found, img)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s is %d times in the set, want once: %v", ref, len(found), found)
	}
	return found[0]
}

// setBlobs are the blobs (manifests included) of every image of set at the
// mirror under prefix.
func (w *releaseWorld) setBlobs(prefix string, set *imageset.Set) map[digest.Digest]int64 {
	into := map[digest.Digest]int64{}
	for _, img := range set.Images {
		w.blobsIn(w.dst, prefix+"/"+img.DestinationRepo(), digest.Digest(img.Digest), into)
	}
	return into
}

// mirrorSet is an ImageDigestMirrorSet or ImageTagMirrorSet.
type mirrorSet struct {
	Spec struct {
		Digest []mirrorEntry `json:"imageDigestMirrors"`
		Tag    []mirrorEntry `json:"imageTagMirrors"`
	} `json:"spec"`
}

type mirrorEntry struct {
	Source  string   `json:"source"`
	Mirrors []string `json:"mirrors"`
}

// checkMonth checks the mirror and the cluster resources of one week: every
// image of the set at the mirror by digest, the releases, the additional
// images and the catalog; IDMS/ITMS entries each covering a mirrored image
// and every mirrored upstream image covered; the CatalogSource and
// ClusterCatalog serving the mirrored catalog; signatures of every release.
func (w *releaseWorld) checkMonth(dir, root string, set *imageset.Set, versions []string, fleet []example, want *fbc.Catalog) {
	t := w.t
	t.Helper()
	prefix := strings.TrimPrefix(root, w.dst.Host()+"/")
	for _, img := range set.Images {
		repo := prefix + "/" + img.DestinationRepo()
		got, err := w.dst.ManifestDigest(repo, img.DestinationTag())
		if err != nil || got.String() != img.Digest {
			t.Errorf("%s (%s): mirror has %s:%s at %s (%v), want %s", img.Origin, img.Kind, repo, img.DestinationTag(), got, err, img.Digest)
			continue
		}
		w.assertComplete(w.dst, repo, got)
	}
	for _, v := range versions {
		w.assertRelease(prefix, w.payloads[v], false)
	}
	saved := w.images
	w.images = fleet
	w.assertMirrored(w.dst, prefix)
	w.images = saved
	catalogDigest, err := w.dst.ManifestDigest(prefix+"/redhat/redhat-operator-index", "v4.18")
	if err != nil {
		t.Fatalf("catalog not mirrored: %v", err)
	}
	if got := bundleNames(mirroredCatalog(t, w.dst, prefix+"/redhat/redhat-operator-index", catalogDigest)); !slices.Equal(got, bundleNames(want)) {
		t.Errorf("mirrored catalog holds %v, want %v", got, bundleNames(want))
	}
	w.checkImages(w.dst, prefix, want)

	res := filepath.Join(dir, "working-dir", "cluster-resources")
	for _, kind := range []string{"idms", "itms"} {
		// One document per kind of content (release, operator, generic).
		data := readFile(t, filepath.Join(res, kind+"-gapmirror.yaml"))
		var entries []mirrorEntry
		for _, doc := range strings.Split(data, "\n---\n") {
			var ms mirrorSet
			must(t, yaml.Unmarshal([]byte(doc), &ms))
			entries = append(entries, append(ms.Spec.Digest, ms.Spec.Tag...)...)
		}
		if len(entries) == 0 {
			t.Errorf("%s: no mirror entries:\n%s", kind, data)
		}
		for _, e := range entries {
			if !slices.ContainsFunc(set.Images, func(img imageset.Image) bool { return covers(e, img, root) }) {
				t.Errorf("%s entry %s → %v covers no mirrored image", kind, e.Source, e.Mirrors)
			}
		}
		for _, img := range set.Images {
			if img.Built || img.ByDigest() != (kind == "idms") || img.Kind == imageset.KindOperatorCatalog {
				continue
			}
			if !slices.ContainsFunc(entries, func(e mirrorEntry) bool { return covers(e, img, root) }) {
				t.Errorf("%s: no entry sends %s to %s/%s:\n%s", kind, img.Origin, root, img.DestinationRepo(), data)
			}
		}
	}
	cs, _ := filepath.Glob(filepath.Join(res, "cs-*.yaml"))
	cc, _ := filepath.Glob(filepath.Join(res, "cc-*.yaml"))
	if len(cs) != 1 || len(cc) != 1 {
		t.Fatalf("want one CatalogSource and one ClusterCatalog, have %v and %v", cs, cc)
	}
	if s := readFile(t, cs[0]); !strings.Contains(s, "image: "+root+"/redhat/redhat-operator-index:v4.18") {
		t.Errorf("CatalogSource does not serve the mirrored catalog:\n%s", s)
	}
	if s := readFile(t, cc[0]); !strings.Contains(s, "ref: "+root+"/redhat/redhat-operator-index@"+catalogDigest.String()) {
		t.Errorf("ClusterCatalog does not pin the mirrored catalog %s:\n%s", catalogDigest, s)
	}
	w.assertSignatureConfigMaps(filepath.Join(res, "signature-configmap.yaml"), versions)
	us := readFile(t, filepath.Join(res, "updateService.yaml"))
	if !strings.Contains(us, "releases: "+root+"/openshift/release-images") || !strings.Contains(us, "graphDataImage: "+root+"/openshift/graph-image") {
		t.Errorf("UpdateService does not point at the mirror:\n%s", us)
	}
}

// covers reports whether a mirror-set entry sends img's origin to where it
// was mirrored under root.
func covers(e mirrorEntry, img imageset.Image, root string) bool {
	named, err := reference.ParseNormalizedNamed(img.Origin)
	if err != nil {
		return false
	}
	name := named.Name()
	if name != e.Source && !strings.HasPrefix(name, e.Source+"/") {
		return false
	}
	rest := strings.TrimPrefix(name, e.Source)
	return slices.ContainsFunc(e.Mirrors, func(m string) bool { return m+rest == root+"/"+img.DestinationRepo() })
}

// registryContent lists every repository:tag@digest of reg, sorted, with
// the registry host left out.
func registryContent(t *testing.T, reg *registrytest.Registry) []string {
	t.Helper()
	repos, err := reg.Catalog()
	must(t, err)
	var out []string
	for _, repo := range repos {
		tags, err := reg.Tags(repo)
		must(t, err)
		for _, tag := range tags {
			d, err := reg.ManifestDigest(repo, tag)
			must(t, err)
			out = append(out, repo+":"+tag+"@"+d.String())
		}
	}
	sort.Strings(out)
	return out
}

// describesJSON checks describe -o json of the week-2 archive in dir: the
// releases with version, arch and channel, the catalog's bundles, the
// additional images, its predecessor applied here, what changed (4.18.3
// and the new bundle added, one additional image swapped for another),
// every image, and the check.
func (w *releaseWorld) describesJSON(dir string, idx *archive.Index, prev, root string, bundles []string, removed, added example) {
	t := w.t
	t.Helper()
	code, stdout, _ := w.gapmirror("describe", "-o", "json", "file://"+dir)
	var d struct {
		ID       string
		Images   int
		Releases []struct {
			Version, Arch string
			Channels      []string
		}
		OperatorCatalogs []struct {
			Catalog  string
			Packages map[string][]string
		}
		AdditionalImages []string
		BasedOn          struct {
			ID      string
			Applied bool
			Mirror  string
		}
		Changes *struct {
			AddedImages, RemovedImages, AddedReleases, AddedBundles, RemovedBundles []string
		}
		ImageList []struct{ Destination, Digest string }
		Check     struct{ Intact bool }
	}
	if code != 0 {
		t.Fatalf("describe -o json: exit %d", code)
	}
	must(t, json.Unmarshal([]byte(stdout), &d))
	if d.ID != idx.ID || d.Images != len(idx.Set.Images)-idx.Set.Signatures() || len(d.ImageList) != d.Images || !d.Check.Intact {
		t.Errorf("describe -o json: id %s, %d images, %d listed, intact %v; want %s and %d", d.ID, d.Images, len(d.ImageList), d.Check.Intact, idx.ID, len(idx.Set.Images)-idx.Set.Signatures())
	}
	var rels []string
	for _, r := range d.Releases {
		rels = append(rels, r.Version+" "+r.Arch+" "+strings.Join(r.Channels, ","))
	}
	if !slices.Equal(rels, []string{"4.18.1 x86_64 stable-4.18", "4.18.2 x86_64 stable-4.18", "4.18.3 x86_64 stable-4.18"}) {
		t.Errorf("describe -o json: releases %v", rels)
	}
	if len(d.OperatorCatalogs) != 1 || !slices.Equal(d.OperatorCatalogs[0].Packages["operator-000"], bundles) {
		t.Errorf("describe -o json: catalogs %+v, want operator-000 with %v", d.OperatorCatalogs, bundles)
	}
	if !slices.Contains(d.AdditionalImages, added.Ref) || slices.Contains(d.AdditionalImages, removed.Ref) {
		t.Errorf("describe -o json: additional images %v, want %s and not %s", d.AdditionalImages, added.Ref, removed.Ref)
	}
	if d.BasedOn.ID != prev || !d.BasedOn.Applied || d.BasedOn.Mirror != root {
		t.Errorf("describe -o json: based on %+v, want %s applied here to %s", d.BasedOn, prev, root)
	}
	if c := d.Changes; c == nil || !slices.Contains(c.AddedReleases, "4.18.3-x86_64") || !slices.Contains(c.AddedBundles, bundles[len(bundles)-1]) ||
		len(c.RemovedBundles) != 1 || !slices.ContainsFunc(c.RemovedImages, func(s string) bool { return strings.Contains(s, removed.Repo) }) ||
		!slices.ContainsFunc(c.AddedImages, func(s string) bool { return strings.Contains(s, added.Repo) }) {
		t.Errorf("describe -o json: changes %+v", d.Changes)
	}
}
