package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/imageset/catalog"
	"github.com/gapmirror/gapmirror/imageset/catalogimage"
	"github.com/gapmirror/gapmirror/imageset/fbc"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
	"github.com/gapmirror/gapmirror/internal/releasetest"
)

// Scenario E is the issue's own workload, a mixed image set: operator
// bundle and related images selected from real catalogs, release payloads
// with their components, update graph and signatures, and additional
// images, through the five trips. mixed.go builds its upstream; mixedrun.go
// runs and prints it.

// mixedSpec sizes scenario E's upstream.
type mixedSpec struct {
	// OperatorImages bounds the bundle and related images the catalog
	// selection needs: packages are added, those needing most images first,
	// while the total stays at most this.
	OperatorImages int
	// Releases are the payloads of the channel, each with Components
	// component images.
	Releases, Components int
	// Additional images, each of AdditionalLayers random layers of LayerSize.
	Additional, AdditionalLayers int
	LayerSize                    int64
}

// fullMixed is the workload: 735 images (392 operator bundle and
// related images, 3 release payloads with their components, 100 additional
// images of 4 × 512 KiB), 2,288 blobs, 220 MiB.
var fullMixed = mixedSpec{OperatorImages: 392, Releases: 3, Components: 80, Additional: 100, AdditionalLayers: 4, LayerSize: 512 << 10}

// tinyMixed is the same shape with a few images of each kind (the smoke test).
var tinyMixed = mixedSpec{OperatorImages: 24, Releases: 2, Components: 3, Additional: 3, AdditionalLayers: 2, LayerSize: 8 << 10}

// The catalog, the channel and the graph base image of scenario E, upstream.
const (
	mixedCatalogRepo = "redhat/community-operator-index"
	mixedCatalogTag  = "v4.18"
	mixedChannel     = "stable-4.18"
	mixedGraphBase   = "ubi9/ubi:latest"
	mixedKeyFile     = "release-key.asc"
)

// mixedUpstream is scenario E's upstream content and what mirroring it must
// give.
type mixedUpstream struct {
	// source says where the catalogs came from (real or generated).
	source string
	// packages are the selected packages (dependencies included), bundles
	// the bundles the selection keeps.
	packages []string
	bundles  int
	// images are every image pushed upstream, by group (the catalog, one
	// group per package, the release payloads, the additional images).
	images [][]imagebuilder.FleetImage
	// refs are the upstream references of every image gapmirror copies (not
	// the ones it builds), each once: what a skopeo script copies.
	refs []string
	// kinds counts the images gapmirror mirrors by kind: bundle, related
	// (and multi-arch among them), catalog, release, component (per payload;
	// unique components in componentsUnique), graph, additional.
	kinds            map[string]int
	componentsUnique int
	// want is the number of images gapmirror's summary must count.
	want int
	// blobs and bytes are the distinct blobs of every image pushed.
	blobs int
	bytes int64
	// largest is the largest blob and a repository holding it (floors).
	largest     imagebuilder.Blob
	largestRepo string
	// config is the ImageSetConfiguration, flags the release flags of the
	// runs that read upstream (the graph and signature services, the key).
	config string
	flags  []string
	// services serve the update graph, signatures and graph data.
	services *releasetest.Services
}

// close stops the release services.
func (m *mixedUpstream) close() {
	if m != nil && m.services != nil {
		m.services.Close()
	}
}

// buildMixed builds scenario E's upstream in up: it selects packages of the
// catalogs in catalogsDir (or of a generated catalog of the same shape when
// the directory is absent), builds an image for every bundle and related
// image the selection needs under its own repository path, rewrites the
// catalog to name them, pushes it as a catalog image, publishes the signed
// release payloads and pushes the additional images. dir receives the
// release key. The same spec and catalogs give the same digests.
func buildMixed(ctx context.Context, up *registrytest.Registry, dir, catalogsDir string, spec mixedSpec) (*mixedUpstream, error) {
	host := up.Host()
	target := imagebuilder.Target{URL: up.URL(), Client: up.Client()}
	m := &mixedUpstream{kinds: map[string]int{}}

	src, source, err := mixedSourceCatalog(catalogsDir)
	if err != nil {
		return nil, err
	}
	m.source = source
	sel, err := selectPackages(src, spec.OperatorImages)
	if err != nil {
		return nil, err
	}
	cat, ops, err := operatorImages(src, sel, host)
	if err != nil {
		return nil, err
	}
	m.packages, m.bundles = ops.packages, ops.bundles
	catImage, err := catalogImage(cat)
	if err != nil {
		return nil, err
	}
	m.images = append(m.images, []imagebuilder.FleetImage{catImage})
	m.images = append(m.images, ops.groups...)
	m.refs = append(m.refs, catImage.Ref(host))
	m.refs = append(m.refs, ops.refs...)
	m.kinds["catalog"] = 1
	m.kinds["bundle"], m.kinds["related"], m.kinds["multi-arch related"] = ops.kinds["bundle"], ops.kinds["related"], ops.kinds["multi-arch related"]

	additional, err := additionalImages(spec)
	if err != nil {
		return nil, err
	}
	for i := 0; i < len(additional); i += 10 {
		m.images = append(m.images, additional[i:min(i+10, len(additional))])
	}
	for _, fi := range additional {
		m.refs = append(m.refs, fi.Ref(host))
	}
	m.kinds["additional"] = len(additional)
	if err := pushGroups(ctx, target, m.images); err != nil {
		return nil, err
	}

	// Releases: signed payloads, an update service serving their graph,
	// the graph data and the graph image's base.
	if err := m.publishReleases(ctx, target, host, dir, spec); err != nil {
		m.close()
		return nil, err
	}

	m.want = m.kinds["catalog"] + m.kinds["bundle"] + m.kinds["related"] + m.kinds["additional"] +
		m.kinds["release"] + m.kinds["component"] + m.kinds["graph"]
	m.countBlobs()
	m.config = mixedConfig(catImage.Ref(host), m.packages, m.releaseVersions(spec), additional, host)
	return m, nil
}

// mixedSourceCatalog loads the real catalogs, or generates a catalog of
// their shape (35 packages of 21 bundles in 3 channels) when they are absent.
func mixedSourceCatalog(dir string) (*fbc.Catalog, string, error) {
	if _, err := os.Stat(dir); err == nil {
		c, err := fbc.LoadFS(os.DirFS(dir), ".")
		if err != nil {
			return nil, "", fmt.Errorf("loading the real catalogs in %s: %w", dir, err)
		}
		return c, fmt.Sprintf("real catalogs of %s (%d packages, %d bundles)", dir, len(c.PackageNames()), c.BundleCount()), nil
	}
	c, err := catalog.Generate(catalog.GenSpec{Seed: 13, Packages: 35, Bundles: 21, Channels: 3, RelatedImages: 10})
	if err != nil {
		return nil, "", err
	}
	return c, fmt.Sprintf("a generated catalog (%d packages, %d bundles): the real catalogs are not at %s", len(c.PackageNames()), c.BundleCount(), dir), nil
}

// selection is the packages the configuration lists and the catalog that
// selection keeps (heads of every channel, dependencies pulled in).
type selection struct {
	names []string
	kept  *fbc.Catalog
}

// filterSpec is the configuration's selection: each package by name.
func (s selection) filterSpec() catalog.FilterSpec {
	var spec catalog.FilterSpec
	for _, n := range s.names {
		spec.Packages = append(spec.Packages, catalog.PackageSpec{Name: n})
	}
	return spec
}

// selectPackages picks packages of c, those whose channel heads need most
// images first, adding each while the images the whole selection needs
// stay at most limit. The configuration then lists them (and the packages
// their dependencies pull in) by name.
func selectPackages(c *fbc.Catalog, limit int) (selection, error) {
	type candidate struct {
		name   string
		images int
	}
	var cands []candidate
	for _, name := range c.PackageNames() {
		kept, _, err := catalog.Filter(c, catalog.FilterSpec{Packages: []catalog.PackageSpec{{Name: name}}})
		if err != nil {
			continue // a package the filter cannot select is left out
		}
		cands = append(cands, candidate{name, len(kept.RelatedImages())})
	}
	slices.SortFunc(cands, func(a, b candidate) int { return cmp.Or(cmp.Compare(b.images, a.images), cmp.Compare(a.name, b.name)) })
	var sel selection
	for _, cand := range cands {
		if cand.images > limit || slices.Contains(sel.names, cand.name) {
			continue
		}
		try := selection{names: append(slices.Clone(sel.names), cand.name)}
		kept, _, err := catalog.Filter(c, try.filterSpec())
		if err != nil || len(kept.RelatedImages()) > limit {
			continue
		}
		// Dependencies pulled in are listed too, so that the catalog image
		// (these packages whole) resolves the same way.
		for _, p := range kept.PackageNames() {
			if !slices.Contains(try.names, p) {
				try.names = append(try.names, p)
			}
		}
		slices.Sort(try.names)
		try.kept = kept
		sel = try
	}
	if sel.kept == nil {
		return sel, fmt.Errorf("no package of the catalog needs at most %d images", limit)
	}
	return sel, nil
}

// operatorSet is the operator part of scenario E.
type operatorSet struct {
	packages []string
	bundles  int
	// groups are the images, one group per package.
	groups [][]imagebuilder.FleetImage
	refs   []string
	kinds  map[string]int
}

// operatorImages builds an image for every bundle and related image the
// selection needs, at its repository path on host, by digest, and returns
// the catalog of the selected packages (whole: every bundle of every
// channel) naming them: the images the selection needs by their new
// digests, the others on host with their old tag or digest.
func operatorImages(src *fbc.Catalog, sel selection, host string) (*fbc.Catalog, *operatorSet, error) {
	whole, _, err := catalog.Filter(src, catalog.FilterSpec{Full: true, Packages: sel.filterSpec().Packages})
	if err != nil {
		return nil, nil, fmt.Errorf("the selected packages: %w", err)
	}
	need := sel.kept.RelatedImages()
	ops := &operatorSet{packages: sel.names, bundles: sel.kept.BundleCount(), kinds: map[string]int{}}
	byPkg := map[string][]imagebuilder.FleetImage{}
	newRef := map[string]string{}
	related := 0
	for _, ref := range need {
		named, err := reference.ParseNormalizedNamed(ref.Image)
		if err != nil {
			return nil, nil, fmt.Errorf("image %s, needed by bundle %s: %w", ref.Image, ref.Users[0].Bundle, err)
		}
		pkg := ref.Users[0].Package
		var fi imagebuilder.FleetImage
		if ref.Bundle {
			fi, err = bundleImage(reference.Path(named), ref.Image, pkg)
			ops.kinds["bundle"]++
		} else {
			// Every fourth operand is a multi-arch index, as many are.
			multi := related%4 == 3
			related++
			fi, err = relatedImage(reference.Path(named), ref.Image, pkg, multi)
			ops.kinds["related"]++
			if multi {
				ops.kinds["multi-arch related"]++
			}
		}
		if err != nil {
			return nil, nil, fmt.Errorf("building %s: %w", ref.Image, err)
		}
		byPkg[pkg] = append(byPkg[pkg], fi)
		r := host + "/" + fi.Repo + "@" + fi.Digest().String()
		newRef[ref.Image] = r
		ops.refs = append(ops.refs, r)
	}
	for _, p := range slices.Sorted(maps.Keys(byPkg)) {
		ops.groups = append(ops.groups, byPkg[p])
	}
	for _, name := range whole.PackageNames() {
		for _, b := range whole.Package(name).Bundles {
			b.Image = rewriteRef(b.Image, host, newRef)
			for k := range b.RelatedImages {
				b.RelatedImages[k].Image = rewriteRef(b.RelatedImages[k].Image, host, newRef)
			}
		}
	}
	// What gapmirror will select from the catalog image must be exactly the
	// images built.
	kept, _, err := catalog.Filter(whole, sel.filterSpec())
	if err != nil {
		return nil, nil, fmt.Errorf("filtering the rewritten catalog: %w", err)
	}
	got := kept.RelatedImages()
	if len(got) != len(need) {
		return nil, nil, fmt.Errorf("the rewritten catalog needs %d images, %d were built", len(got), len(need))
	}
	for _, ref := range got {
		if !slices.Contains(ops.refs, ref.Image) {
			return nil, nil, fmt.Errorf("the rewritten catalog needs %s, which was not built", ref.Image)
		}
	}
	return whole, ops, nil
}

// rewriteRef names ref on host, keeping its repository path: by the digest
// of the image built for it, else by its own tag or digest.
func rewriteRef(ref, host string, built map[string]string) string {
	if r, ok := built[ref]; ok {
		return r
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return ref
	}
	out := host + "/" + reference.Path(named)
	if c, ok := named.(reference.Canonical); ok {
		return out + "@" + c.Digest().String()
	}
	if t, ok := named.(reference.NamedTagged); ok {
		return out + ":" + t.Tag()
	}
	return out
}

var (
	amd64 = imagebuilder.Platform{OS: "linux", Architecture: "amd64"}
	arm64 = imagebuilder.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}
)

// bundleImage is a bundle image as operator-sdk builds them, FROM scratch:
// a layer of manifests (8–40 KiB), one of metadata and the scorecard
// tests, the same in every bundle of the package.
func bundleImage(repo, ref, pkg string) (imagebuilder.FleetImage, error) {
	h := hashString(ref)
	img, err := imagebuilder.Build(imagebuilder.ImageSpec{
		Platform: amd64,
		Layers: []imagebuilder.LayerSpec{
			imagebuilder.RandomLayer(h, int64(8+h%33)<<10),
			imagebuilder.RandomLayer(hashString("metadata/"+ref), 1<<10),
			imagebuilder.RandomLayer(hashString("scorecard/"+pkg), 2<<10),
		},
		Labels: map[string]string{"operators.operatorframework.io.bundle.package.v1": pkg, "org.opencontainers.image.source": ref},
	})
	return imagebuilder.FleetImage{Repo: repo, Image: img}, err
}

// relatedImage is an operand or operator image: the package's base layer
// (256 KiB per platform, shared by all its images, as a common base image
// is), a layer of its own of 8–44 KiB and one of 1–4 KiB; multi makes it an
// index of amd64 and arm64.
func relatedImage(repo, ref, pkg string, multi bool) (imagebuilder.FleetImage, error) {
	spec := func(p imagebuilder.Platform) imagebuilder.ImageSpec {
		h := hashString(ref + "/" + p.String())
		return imagebuilder.ImageSpec{
			Platform: p,
			Layers: []imagebuilder.LayerSpec{
				imagebuilder.RandomLayer(hashString("base/"+pkg+"/"+p.String()), 256<<10),
				imagebuilder.RandomLayer(h, int64(8+h%37)<<10),
				imagebuilder.RandomLayer(h+1, int64(1+h%4)<<10),
			},
			Labels: map[string]string{"org.opencontainers.image.source": ref},
		}
	}
	if !multi {
		img, err := imagebuilder.Build(spec(amd64))
		return imagebuilder.FleetImage{Repo: repo, Image: img}, err
	}
	idx, err := imagebuilder.BuildIndex(imagebuilder.IndexSpec{Images: []imagebuilder.ImageSpec{spec(amd64), spec(arm64)}})
	return imagebuilder.FleetImage{Repo: repo, Index: idx}, err
}

// catalogImage is an opm-style catalog image of cat for the four OpenShift
// platforms: a base layer, the FBC under /configs.
func catalogImage(cat *fbc.Catalog) (imagebuilder.FleetImage, error) {
	files := map[string][]byte{}
	if err := cat.WriteFiles(func(name string, data []byte) error {
		files["configs/"+name] = data
		return nil
	}); err != nil {
		return imagebuilder.FleetImage{}, err
	}
	var specs []imagebuilder.ImageSpec
	for _, p := range imagebuilder.OpenShiftPlatforms {
		specs = append(specs, imagebuilder.ImageSpec{
			Platform:   p,
			Layers:     []imagebuilder.LayerSpec{imagebuilder.RandomLayer(hashString("catalog base/"+p.String()), 256<<10), imagebuilder.FileLayer(files)},
			Labels:     map[string]string{catalogimage.ConfigsLabel: "/configs"},
			Entrypoint: []string{"/bin/opm"},
			Cmd:        []string{"serve", "/configs", "--cache-dir=/tmp/cache"},
		})
	}
	idx, err := imagebuilder.BuildIndex(imagebuilder.IndexSpec{Images: specs})
	if err != nil {
		return imagebuilder.FleetImage{}, fmt.Errorf("building the catalog image: %w", err)
	}
	return imagebuilder.FleetImage{Repo: mixedCatalogRepo, Tag: mixedCatalogTag, Index: idx}, nil
}

// additionalImages are spec.Additional single-platform images of
// spec.AdditionalLayers random layers each, in ten repositories.
func additionalImages(spec mixedSpec) ([]imagebuilder.FleetImage, error) {
	out := make([]imagebuilder.FleetImage, spec.Additional)
	for i := range out {
		repo := fmt.Sprintf("apps/team-%d/service-%03d", i%10, i)
		var layers []imagebuilder.LayerSpec
		for l := range spec.AdditionalLayers {
			layers = append(layers, imagebuilder.RandomLayer(hashString(fmt.Sprintf("%s/layer-%d", repo, l)), spec.LayerSize))
		}
		img, err := imagebuilder.Build(imagebuilder.ImageSpec{Platform: amd64, Layers: layers, Cmd: []string{"/usr/bin/" + filepath.Base(repo)}})
		if err != nil {
			return nil, fmt.Errorf("building additional image %s: %w", repo, err)
		}
		out[i] = imagebuilder.FleetImage{Repo: repo, Tag: "1.0." + fmt.Sprint(i%7), Image: img}
	}
	return out, nil
}

// releaseVersions are the versions of the channel, oldest first.
func (m *mixedUpstream) releaseVersions(spec mixedSpec) []string {
	var out []string
	for i := range spec.Releases {
		out = append(out, fmt.Sprintf("4.18.%d", i+1))
	}
	return out
}

// publishReleases starts the update service and signature store, pushes
// the payloads signed with a throwaway key (its public half into dir) and
// the graph image's base.
func (m *mixedUpstream) publishReleases(ctx context.Context, t imagebuilder.Target, host, dir string, spec mixedSpec) error {
	// RSA as Red Hat's keys are: oc-mirror (-oc-mirror) refuses Ed25519.
	key, err := releasetest.NewRSAKey("gapmirror bench")
	if err != nil {
		return err
	}
	keyFile := filepath.Join(dir, mixedKeyFile)
	if err := os.WriteFile(keyFile, key.PublicKey(), 0o644); err != nil {
		return err
	}
	versions := m.releaseVersions(spec)
	tgz, err := releasetest.GraphDataTarball(map[string][]string{mixedChannel: versions})
	if err != nil {
		return err
	}
	m.services = releasetest.StartServices(tgz)
	ch, err := m.services.PublishChannel(ctx, t, key, mixedChannel, releasetest.PayloadSpec{Host: host, Components: spec.Components}, versions...)
	if err != nil {
		return fmt.Errorf("publishing the releases: %w", err)
	}
	var payloads []imagebuilder.FleetImage
	components := map[digest.Digest]bool{}
	for _, v := range versions {
		p := ch.Payloads[v]
		payloads = append(payloads, p.Images...)
		m.refs = append(m.refs, p.Ref())
		for _, c := range p.Components {
			if !components[c.Digest] {
				components[c.Digest] = true
				m.refs = append(m.refs, c.Image)
			}
		}
		m.kinds["component"] += len(p.Components)
	}
	m.kinds["release"], m.componentsUnique, m.kinds["graph"] = len(versions), len(components), 1
	repo, tag, _ := strings.Cut(mixedGraphBase, ":")
	base, err := imagebuilder.Build(imagebuilder.ImageSpec{Platform: amd64, Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(hashString("graph base"), 8<<10)},
		Cmd: []string{"/bin/bash"}})
	if err == nil {
		err = imagebuilder.Push(ctx, t, repo, tag, base)
	}
	if err != nil {
		return fmt.Errorf("pushing the graph image's base: %w", err)
	}
	m.images = append(m.images, payloads, []imagebuilder.FleetImage{{Repo: repo, Tag: tag, Image: base}})
	m.flags = []string{"--graph-url", m.services.GraphURL(), "--release-signature-url", m.services.SignatureURL(),
		"--release-signature-key", keyFile, "--graph-data-url", m.services.GraphDataURL(), "--graph-base-image", host + "/" + mixedGraphBase}
	return nil
}

// countBlobs counts the distinct blobs of every image pushed and finds the
// largest.
func (m *mixedUpstream) countBlobs() {
	seen := map[digest.Digest]bool{}
	for _, group := range m.images {
		for _, fi := range group {
			for _, b := range fi.Blobs() {
				if seen[b.Digest] {
					continue
				}
				seen[b.Digest] = true
				m.blobs++
				m.bytes += b.Size
				if b.Size > m.largest.Size {
					m.largest, m.largestRepo = b, fi.Repo
				}
			}
		}
	}
}

// pushGroups pushes the groups four at a time, each group's images in
// order with one pusher (blobs shared within a group are mounted).
func pushGroups(ctx context.Context, t imagebuilder.Target, groups [][]imagebuilder.FleetImage) error {
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	work := make(chan []imagebuilder.FleetImage)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for g := range work {
				if err := imagebuilder.PushFleet(ctx, t, g); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
				}
			}
		}()
	}
	for _, g := range groups {
		if ctx.Err() != nil {
			break
		}
		work <- g
	}
	close(work)
	wg.Wait()
	return cmp.Or(first, ctx.Err())
}

// mixedConfig is scenario E's ImageSetConfiguration: the release channel
// with the update graph, the operator packages by name (the head of every
// channel), the additional images.
func mixedConfig(catalogRef string, packages, versions []string, additional []imagebuilder.FleetImage, host string) string {
	var b strings.Builder
	b.WriteString("kind: ImageSetConfiguration\napiVersion: mirror.openshift.io/v2alpha1\nmirror:\n")
	fmt.Fprintf(&b, "  platform:\n    graph: true\n    channels:\n    - name: %s\n      minVersion: %s\n      maxVersion: %s\n",
		mixedChannel, versions[0], versions[len(versions)-1])
	fmt.Fprintf(&b, "  operators:\n  - catalog: %s\n    packages:\n", catalogRef)
	for _, p := range packages {
		fmt.Fprintf(&b, "    - name: %s\n", p)
	}
	b.WriteString("  additionalImages:\n")
	for _, fi := range additional {
		fmt.Fprintf(&b, "  - name: %s\n", fi.Ref(host))
	}
	return b.String()
}

// describe says what was built, by kind.
func (m *mixedUpstream) describe(took time.Duration) string {
	plural := func(n int, what string) string {
		if n == 1 {
			return "1 " + what
		}
		return fmt.Sprintf("%d %ss", n, what)
	}
	return fmt.Sprintf("%d images: %d operator bundle and %d related images (%d of them multi-arch indexes) of %s (%s kept), the catalog image, "+
		"%d release payloads with %d components each (%d distinct), the graph image (built by gapmirror), %d additional images; "+
		"%d distinct blobs, %s upstream; built and pushed in %.1fs",
		m.want, m.kinds["bundle"], m.kinds["related"], m.kinds["multi-arch related"], plural(len(m.packages), "package"), plural(m.bundles, "bundle"),
		m.kinds["release"], m.kinds["component"]/max(m.kinds["release"], 1), m.componentsUnique, m.kinds["additional"],
		m.blobs, humanBytes(m.bytes), took.Seconds())
}
