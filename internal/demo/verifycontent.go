package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	"sigs.k8s.io/yaml"

	"github.com/gapmirror/gapmirror/internal/fixtures"
)

// Kinds of content, as the summary names them.
const (
	kindAdditional = "additional images"
	kindOperator   = "operator catalog"
	kindRelease    = "releases"
)

// wanted is one image that must be at the mirror under each prefix.
type wanted struct {
	kind      string
	repo, tag string // under the prefix
	// digest is what the tag must point at; empty for the images gapmirror
	// builds (the rebuilt catalog, the graph image): then any complete image.
	digest digest.Digest
	// show prints the image on a line of its own; the others are counted.
	show bool
}

// wantedImages lists every image the configuration selects, where it must
// land under a mirror prefix.
func (d *demo) wantedImages() []wanted {
	var out []wanted
	for _, ex := range d.images {
		repo, tag := ex.destination("")
		out = append(out, wanted{kind: kindAdditional, repo: repo, tag: tag, digest: ex.Digest, show: true})
	}
	out = append(out, wanted{kind: kindOperator, repo: catalogRepo, tag: catalogTag, show: true})
	for _, ref := range d.ops.want.RelatedImages() {
		// Bundle and related images land at their path, tagged with their digest.
		named, err := reference.ParseNormalizedNamed(ref.Image)
		if c, ok := named.(reference.Canonical); err == nil && ok {
			out = append(out, wanted{kind: kindOperator, repo: reference.Path(named), tag: "sha256-" + c.Digest().Encoded(), digest: c.Digest()})
		}
	}
	for _, v := range shortestPath {
		p := d.rel.channel.Payloads[v]
		out = append(out, wanted{kind: kindRelease, repo: "openshift/release-images", tag: p.Tag, digest: p.Digest, show: true})
		for _, c := range p.Components {
			out = append(out, wanted{kind: kindRelease, repo: "openshift/release", tag: p.Tag + "-" + c.Name, digest: c.Digest})
		}
	}
	return append(out, wanted{kind: kindRelease, repo: "openshift/graph-image", tag: "latest", show: true})
}

// resourcesOf is the directory of the cluster resources the trip to prefix
// wrote, relative to the demo directory.
func resourcesOf(prefix string) string {
	if prefix == fromDiskPrefix {
		return filepath.Join(archiveDir, "working-dir", "cluster-resources")
	}
	return filepath.Join(workspaceDir, "working-dir", "cluster-resources")
}

// verifyOperators checks the rebuilt catalog at prefix, whose digest is
// got: it is not the source image, it holds exactly the selected bundles,
// and the CatalogSource and ClusterCatalog of the trip serve it.
func (d *demo) verifyOperators(ctx context.Context, c *checker, prefix string, got digest.Digest) bool {
	repo := prefix + "/" + catalogRepo
	ok := true
	if got == d.ops.src.Digest {
		d.check(false, "%s:%s is the source catalog unchanged: a filtered catalog must be rebuilt", repo, catalogTag)
		ok = false
	}
	dir, err := os.MkdirTemp("", "gapmirror-demo-fbc-")
	if err != nil {
		d.check(false, "reading the mirrored catalog: %v", err)
		return false
	}
	defer os.RemoveAll(dir)
	blobs := fixtures.ReadOnlyBlobs(func(dg digest.Digest) ([]byte, error) { return c.content(ctx, repo, dg) })
	cat, err := fixtures.LoadCatalogImage(blobs, got, dir)
	if err != nil {
		d.check(false, "reading the catalog %s@%s: %v", repo, got, err)
		return false
	}
	have, want := fixtures.BundleNames(cat), fixtures.BundleNames(d.ops.want)
	if !slices.Equal(have, want) {
		d.check(false, "%s:%s holds bundles %v, want exactly the selected %v", repo, catalogTag, have, want)
		ok = false
	}

	at := d.mirrorHost + "/" + repo
	var names []string
	for _, r := range []struct{ glob, kind, want string }{
		{"cs-*.yaml", "CatalogSource", "image: " + at + ":" + catalogTag},
		{"cc-*.yaml", "ClusterCatalog", "ref: " + at + "@" + got.String()},
	} {
		name, data, err := d.resource(prefix, r.glob)
		if err == nil && !strings.Contains(data, r.want) {
			err = fmt.Errorf("it does not say %q", r.want)
		}
		if err != nil {
			d.check(false, "%s %s: %v", r.kind, name, err)
			ok = false
		}
		names = append(names, filepath.Base(name))
	}
	if ok {
		d.out.good("%-54s %s  rebuilt: exactly the %d selected bundles (%s)", repo+":"+catalogTag, shortDigest(got), len(have), perPackage(have))
		d.out.good("%-54s %s serve it from the mirror", resourcesOf(prefix)+"/", strings.Join(names, ", "))
	}
	return ok
}

// verifyReleases checks what the releases need besides their images: the
// release off the path is not mirrored, the signature ConfigMaps hold the
// signatures the store served, and the UpdateService names the mirror.
func (d *demo) verifyReleases(ctx context.Context, c *checker, prefix string) bool {
	ok := true
	for _, v := range skipped {
		if tag := d.rel.channel.Payloads[v].Tag; !c.missing(ctx, prefix+"/openshift/release-images", tag) {
			d.check(false, "%s/openshift/release-images:%s is at the mirror, but %s is not on the shortest path", prefix, tag, v)
			ok = false
		}
	}
	n, err := d.checkSignatures(prefix)
	if err != nil {
		d.check(false, "signature ConfigMaps of %s: %v", prefix, err)
		ok = false
	}
	at := d.mirrorHost + "/" + prefix + "/openshift/"
	name, data, err := d.resource(prefix, "updateService.yaml")
	for _, want := range []string{"releases: " + at + "release-images", "graphDataImage: " + at + "graph-image:latest"} {
		if err == nil && !strings.Contains(data, want) {
			err = fmt.Errorf("it does not say %q", want)
		}
	}
	if err != nil {
		d.check(false, "UpdateService %s: %v", name, err)
		ok = false
	}
	if ok {
		d.out.good("%-54s signature-configmap.yaml: %d ConfigMaps holding the served signatures; %s names the mirror",
			resourcesOf(prefix)+"/", n, filepath.Base(name))
		d.out.good("%-54s %s not mirrored: off the shortest path", prefix+"/openshift/release-images", strings.Join(skipped, ", "))
	}
	return ok
}

// checkSignatures checks signature-configmap.yaml of prefix's trip: one
// ConfigMap per mirrored release, in openshift-config-managed, whose
// binaryData is the signature the demo's store served.
func (d *demo) checkSignatures(prefix string) (int, error) {
	_, data, err := d.resource(prefix, "signature-configmap.yaml")
	if err != nil {
		return 0, err
	}
	got := map[string][]byte{}
	n := 0
	for _, doc := range strings.Split(data, "---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var cm struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Namespace string `json:"namespace"`
			} `json:"metadata"`
			BinaryData map[string][]byte `json:"binaryData"`
		}
		if err := yaml.Unmarshal([]byte(doc), &cm); err != nil {
			return n, err
		}
		if cm.Kind != "ConfigMap" || cm.Metadata.Namespace != "openshift-config-managed" {
			return n, fmt.Errorf("a %s in namespace %q, want ConfigMaps in openshift-config-managed", cm.Kind, cm.Metadata.Namespace)
		}
		n++
		for k, v := range cm.BinaryData {
			got[k] = v
		}
	}
	if n != len(shortestPath) {
		return n, fmt.Errorf("%d ConfigMaps, want one per mirrored release (%d)", n, len(shortestPath))
	}
	for _, v := range shortestPath {
		key := "sha256-" + d.rel.channel.Payloads[v].Digest.Encoded() + "-1"
		if !bytes.Equal(got[key], d.rel.channel.Signatures[v]) {
			return n, fmt.Errorf("release %s: binaryData[%s] is not the signature the store served", v, key)
		}
	}
	return n, nil
}

// resource reads the one cluster resource matching glob that the trip to
// prefix wrote, and returns its path relative to the demo directory.
func (d *demo) resource(prefix, glob string) (string, string, error) {
	dir := resourcesOf(prefix)
	matches, err := filepath.Glob(filepath.Join(d.dir, dir, glob))
	if err != nil || len(matches) != 1 {
		return filepath.Join(dir, glob), "", fmt.Errorf("want one file, found %d", len(matches))
	}
	data, err := os.ReadFile(matches[0])
	return filepath.Join(dir, filepath.Base(matches[0])), string(data), err
}

// perPackage counts package/bundle names by package: "a: 1, b: 3".
func perPackage(bundles []string) string {
	var pkgs []string
	n := map[string]int{}
	for _, b := range bundles {
		p, _, _ := strings.Cut(b, "/")
		if n[p] == 0 {
			pkgs = append(pkgs, p)
		}
		n[p]++
	}
	var parts []string
	for _, p := range pkgs {
		parts = append(parts, fmt.Sprintf("%s: %d", p, n[p]))
	}
	return strings.Join(parts, ", ")
}
