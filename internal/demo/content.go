package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/gapmirror/gapmirror/imageset/catalog"
	"github.com/gapmirror/gapmirror/imageset/fbc"
	"github.com/gapmirror/gapmirror/internal/fixtures"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/releasetest"
)

// The operator catalog of the demo: a generated opm-style catalog image
// upstream whose bundle and related images are real images there too.
const (
	catalogRepo = "redhat/redhat-operator-index"
	catalogTag  = "v4.18"
)

// catalogSpec is small (5 packages of 5 bundles in 3 channels, one
// operand image each) so that the demo stays fast, but has what real
// catalogs have: several channels, skips, release candidates.
var catalogSpec = catalog.GenSpec{Seed: 42, Packages: 5, Bundles: 5, Channels: 3, RelatedImages: 1, DependencyRatio: -1}

// operators is the catalog pushed upstream and what the configuration
// selects from it.
type operators struct {
	src *fixtures.Catalog
	// filter is the selection the configuration spells out; want is the
	// catalog it leaves, which the mirrored catalog must hold exactly.
	filter catalog.FilterSpec
	want   *fbc.Catalog
	// rangePkg, rangeChannel are the package and channel selected by a
	// version range, for the configuration's comments.
	rangePkg, rangeChannel string
}

// pushOperators pushes the catalog and its images and decides the
// selection: one package with every channel's head, and one channel of
// another package cut to a version range.
func pushOperators(ctx context.Context, t imagebuilder.Target, host string) (*operators, error) {
	src, err := fixtures.PushCatalog(ctx, t, host, catalogRepo, catalogTag, fixtures.CatalogOptions{Spec: catalogSpec})
	if err != nil {
		return nil, fmt.Errorf("pushing the operator catalog: %w", err)
	}
	ops := &operators{src: src}
	pkgs := catalog.Packages(src.Cat)
	ranged := pkgs[3]
	ch := ranged.Channels[0]
	for _, c := range ranged.Channels {
		if c.Name == ranged.DefaultChannel {
			ch = c
		}
	}
	if len(ch.Versions) < 3 {
		return nil, fmt.Errorf("generated package %s channel %s has %d versions, the demo needs 3", ranged.Name, ch.Name, len(ch.Versions))
	}
	ops.rangePkg, ops.rangeChannel = ranged.Name, ch.Name
	ops.filter = catalog.FilterSpec{Packages: []catalog.PackageSpec{
		{Name: pkgs[1].Name},
		{Name: ranged.Name, Channels: []catalog.ChannelSpec{{Name: ch.Name, MinVersion: ch.Versions[1], MaxVersion: ch.Versions[len(ch.Versions)-2]}}},
	}}
	if ops.want, _, err = catalog.Filter(src.Cat, ops.filter); err != nil {
		return nil, fmt.Errorf("filtering the demo catalog: %w", err)
	}
	return ops, nil
}

// images is how many images the selection mirrors: the rebuilt catalog and
// every bundle and related image of the kept bundles.
func (o *operators) images() int { return 1 + len(o.want.RelatedImages()) }

// config is the mirror.operators section.
func (o *operators) config() string {
	var b strings.Builder
	b.WriteString("  # an operator catalog, filtered: the mirror gets a rebuilt catalog image with only these\n")
	b.WriteString("  operators:\n")
	fmt.Fprintf(&b, "  - catalog: %s\n", o.src.Ref)
	b.WriteString("    packages:\n")
	for i, p := range o.filter.Packages {
		fmt.Fprintf(&b, "    - name: %s\n", p.Name)
		if i == 0 {
			b.WriteString("      # no channels: the head of every channel\n")
		}
		if len(p.Channels) > 0 {
			b.WriteString("      channels:\n")
		}
		for _, c := range p.Channels {
			fmt.Fprintf(&b, "      - name: %s\n", c.Name)
			fmt.Fprintf(&b, "        minVersion: %s\n", c.MinVersion)
			fmt.Fprintf(&b, "        maxVersion: %s\n", c.MaxVersion)
		}
	}
	return b.String()
}

// The releases of the demo: three signed payloads of a channel, of which the
// configuration takes the shortest upgrade path from the first to the last.
const (
	releaseChannel    = "stable-4.18"
	releaseComponents = 4
	releaseKeyFile    = "release-key.asc"
	// graphBase is the image the graph data image is built on.
	graphBaseRepo = "ubi9/ubi"
	graphBaseTag  = "latest"
)

var (
	releaseVersions = []string{"4.18.1", "4.18.2", "4.18.3"}
	// shortestPath is what the configuration must mirror: the generated
	// graph updates 4.18.1 straight to 4.18.3, so 4.18.2 is left out.
	shortestPath = []string{"4.18.1", "4.18.3"}
	skipped      = []string{"4.18.2"}
)

// releases are the payloads upstream and the services that publish them.
type releases struct {
	services *releasetest.Services
	key      *releasetest.Key
	channel  *releasetest.Channel
	graphRef string // the graph image's base upstream
}

// publishReleases starts the update service and signature store, pushes and
// signs the payloads with a throwaway key, and pushes the graph image's base.
func publishReleases(ctx context.Context, t imagebuilder.Target, host string) (*releases, error) {
	r := &releases{graphRef: host + "/" + graphBaseRepo + ":" + graphBaseTag}
	var err error
	if r.key, err = releasetest.NewKey("gapmirror demo"); err != nil {
		return nil, err
	}
	tgz, err := releasetest.GraphDataTarball(map[string][]string{releaseChannel: releaseVersions})
	if err != nil {
		return nil, err
	}
	r.services = releasetest.StartServices(tgz)
	r.channel, err = r.services.PublishChannel(ctx, t, r.key, releaseChannel,
		releasetest.PayloadSpec{Host: host, Components: releaseComponents}, releaseVersions...)
	if err != nil {
		r.close()
		return nil, fmt.Errorf("publishing the releases: %w", err)
	}
	base, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(seedOf("graph base"), 8<<10)},
		Cmd: []string{"/bin/bash"}})
	if err == nil {
		err = imagebuilder.Push(ctx, t, graphBaseRepo, graphBaseTag, base)
	}
	if err != nil {
		r.close()
		return nil, fmt.Errorf("pushing the graph image's base: %w", err)
	}
	return r, nil
}

func (r *releases) close() {
	if r != nil && r.services != nil {
		r.services.Close()
	}
}

// images is how many images the selection mirrors: each release image and
// its components, and the graph data image.
func (r *releases) images() int { return len(shortestPath)*(releaseComponents+1) + 1 }

// flags are what a user passes to reach the update service, the signature
// store and the graph data of an enclave instead of Red Hat's, one group a
// line.
func (r *releases) flags() [][]string {
	return [][]string{
		{"--graph-url", r.services.GraphURL(), "--release-signature-url", r.services.SignatureURL()},
		{"--release-signature-key", releaseKeyFile},
		{"--graph-data-url", r.services.GraphDataURL(), "--graph-base-image", r.graphRef},
	}
}

// config is the mirror.platform section.
func (r *releases) config() string {
	return fmt.Sprintf(`  # OpenShift release payloads: the shortest upgrade path from %s to %s,
  # with the update graph data image for an in-cluster update service
  platform:
    graph: true
    channels:
    - name: %s
      minVersion: %s
      maxVersion: %s
      shortestPath: true
`, shortestPath[0], shortestPath[len(shortestPath)-1], releaseChannel, shortestPath[0], shortestPath[len(shortestPath)-1])
}

func (d *demo) pushOperators(ctx context.Context) error {
	d.out.step("Pushing an operator catalog upstream (mirror.operators)")
	var err error
	if d.ops, err = pushOperators(ctx, imagebuilder.Target{URL: d.up.URL(), Client: d.up.Client()}, d.up.Host()); err != nil {
		return err
	}
	src := d.ops.src
	d.out.info("%-42s %-26s %s", src.Repo+":"+src.Tag, "opm catalog, 2 platforms", shortDigest(src.Digest))
	for _, p := range catalog.Packages(src.Cat) {
		var chs []string
		for _, c := range p.Channels {
			chs = append(chs, fmt.Sprintf("%s (%d)", c.Name, len(c.Versions)))
		}
		d.out.info("  package %-14s %d bundles; channels %s", p.Name, len(src.Cat.Package(p.Name).Bundles), strings.Join(chs, ", "))
	}
	d.out.info("%d bundle and operand images pushed with it", src.Images)
	return nil
}

func (d *demo) publishReleases(ctx context.Context) error {
	d.out.step("Publishing %d release payloads (mirror.platform)", len(releaseVersions))
	var err error
	if d.rel, err = publishReleases(ctx, imagebuilder.Target{URL: d.up.URL(), Client: d.up.Client()}, d.up.Host()); err != nil {
		return err
	}
	d.out.info("%s, components by digest in %s:", releasetest.ReleaseRepo, releasetest.ComponentRepo)
	for _, v := range releaseVersions {
		p := d.rel.channel.Payloads[v]
		d.out.info("  %-40s %-26s %s", "ocp-release:"+p.Tag, fmt.Sprintf("release, %d components", len(p.Components)), shortDigest(p.Digest))
	}
	d.out.info("update service  %s  channel %s, edges generated", d.rel.services.GraphURL(), releaseChannel)
	d.out.info("signature store %s  every payload signed with a throwaway key (%s)", d.rel.services.SignatureURL(), releaseKeyFile)
	d.out.info("graph data      %s", d.rel.services.GraphDataURL())
	d.out.info("The commands below point gapmirror at them with --graph-url, --release-signature-url and")
	d.out.info("--release-signature-key (or UPDATE_URL_OVERRIDE, OCP_SIGNATURE_URL, OCP_SIGNATURE_VERIFICATION_PK).")
	return nil
}
