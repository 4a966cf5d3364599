package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	"github.com/spf13/cobra"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/catalog"
	"github.com/gapmirror/gapmirror/imageset/release"
	"github.com/gapmirror/gapmirror/ocistore"
	"github.com/gapmirror/gapmirror/sections"
	"github.com/gapmirror/gapmirror/transfer"
)

// listOperatorsFlags are the flags of `gapmirror list operators`.
type listOperatorsFlags struct {
	catalog  string
	pkg      string
	channel  string
	output   string
	catalogs bool
	version  string
	registry string
}

func newListOperatorsCommand(g *globalFlags) *cobra.Command {
	f := &listOperatorsFlags{}
	cmd := &cobra.Command{
		Use:   "operators --catalog REF [--package P [--channel C]]",
		Short: "List the packages of an operator catalog, the channels of a package, or the versions of a channel",
		Long: `List what an operator catalog offers, to write mirror.operators.

  gapmirror list operators --catalog REF                              packages, default channels, channels
  gapmirror list operators --catalog REF --package P                  channels of P with head and versions
  gapmirror list operators --catalog REF --package P --channel C      versions of channel C, oldest first
  gapmirror list operators --catalogs --version 4.18                  the Red Hat catalogs of OpenShift 4.18

REF is a catalog image (registry.redhat.io/redhat/redhat-operator-index:v4.18, by tag or
digest), an OCI layout (oci:///path/to/layout), or, offline on the air-gapped side, an archive
made by mirror-to-disk (file:///media/mirror; add #DESTINATION, e.g.
file:///media/mirror#redhat/redhat-operator-index:v4.18, when it holds several catalogs). A
catalog image read from a registry is kept in the local store (--cache-dir), so listing it again,
or mirroring it afterwards, does not download it again.

Plain output is one item per line under a header line starting with "#"; --output json prints
one JSON document.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.run(cmd.Context(), g, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.catalog, "catalog", "", "the catalog: an image reference, oci:///LAYOUT or file:///ARCHIVE-DIR[#DESTINATION]")
	fl.StringVar(&f.pkg, "package", "", "list the channels of this package")
	fl.StringVar(&f.channel, "channel", "", "with --package: list the versions of this channel")
	fl.StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	fl.BoolVar(&f.catalogs, "catalogs", false, "with --version: list the Red Hat operator catalogs published for that OpenShift version, with their digests")
	fl.StringVar(&f.version, "version", "", "with --catalogs: the OpenShift minor version X.Y")
	fl.StringVar(&f.registry, "catalogs-registry", "registry.redhat.io/redhat", "with --catalogs: where the catalogs are looked for (e.g. an enclave's mirror of them)")
	return cmd
}

// redHatCatalogs are the catalog images Red Hat publishes for each
// OpenShift version, as <registry>/<name>:v<X.Y>.
var redHatCatalogs = []string{"redhat-operator-index", "certified-operator-index", "community-operator-index", "redhat-marketplace-index"}

// listCatalogs prints which of the Red Hat catalogs exist for --version.
func (f *listOperatorsFlags) listCatalogs(ctx context.Context, g *globalFlags, out io.Writer) error {
	switch {
	case f.version == "":
		return errors.New("--catalogs lists the catalogs of an OpenShift version: add --version, e.g. --version 4.18")
	case f.catalog != "" || f.pkg != "" || f.channel != "":
		return errors.New("--catalogs goes with --version alone: --catalog, --package and --channel look into one catalog")
	}
	minor := strings.TrimPrefix(strings.TrimSpace(f.version), "v")
	if _, err := release.CandidateChannels(minor); err != nil {
		return fmt.Errorf("--version: %w", err)
	}
	uo, err := g.upstream()
	if err != nil {
		return err
	}
	up := transfer.NewUpstream(uo)
	defer up.Close()
	up.Retries = 0 // a missing catalog is an answer, not an outage
	type found struct {
		Catalog string `json:"catalog"`
		Digest  string `json:"digest"`
	}
	list := []found{}
	for _, name := range redHatCatalogs {
		ref := strings.TrimSuffix(f.registry, "/") + "/" + name + ":v" + minor
		named, err := reference.ParseNormalizedNamed(ref)
		if err != nil {
			return fmt.Errorf("--catalogs-registry %q: %w", f.registry, err)
		}
		d, err := up.ResolveDigest(ctx, named)
		if err != nil {
			if strings.Contains(err.Error(), "does not exist") || strings.Contains(err.Error(), "not found") || strings.Contains(err.Error(), "manifest unknown") {
				continue
			}
			return err
		}
		list = append(list, found{Catalog: ref, Digest: d.String()})
	}
	if len(list) == 0 {
		return fmt.Errorf("no catalog of OpenShift %s at %s (looked for %s): check --version, and --catalogs-registry and credentials (--authfile)", minor, f.registry, strings.Join(redHatCatalogs, ", "))
	}
	if f.output == "json" {
		return writeJSON(out, list)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# operator catalogs of OpenShift %s at %s: catalog, digest\n", minor, f.registry)
	for _, c := range list {
		fmt.Fprintf(&b, "%s  %s\n", c.Catalog, c.Digest)
	}
	_, err = io.WriteString(out, b.String())
	return err
}

func (f *listOperatorsFlags) run(ctx context.Context, g *globalFlags, out io.Writer) error {
	if _, err := g.logger(nil); err != nil {
		return err
	}
	if f.output != "text" && f.output != "json" {
		return fmt.Errorf("--output %q: use text or json", f.output)
	}
	if f.catalogs || f.version != "" {
		if !f.catalogs {
			return errors.New("--version goes with --catalogs (list the catalogs of an OpenShift version); to look into one catalog, name it with --catalog")
		}
		return f.listCatalogs(ctx, g, out)
	}
	switch {
	case f.catalog == "":
		return errors.New("name the catalog with --catalog: an image (registry.redhat.io/redhat/redhat-operator-index:v4.18), oci:///LAYOUT, or file:///ARCHIVE-DIR made by mirror-to-disk")
	case f.channel != "" && f.pkg == "":
		return errors.New("--channel needs --package: channels belong to a package")
	case f.output != "text" && f.output != "json":
		return fmt.Errorf("--output %q: use text or json", f.output)
	}
	ci, basedOn, err := f.open(ctx, g)
	if err != nil {
		return err
	}
	c, err := ci.Load("")
	if err != nil {
		if basedOn != "" && errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w\nthis archive is incremental (it builds on archive %s), and the catalog's unchanged layers came in an earlier one: list the catalog from the mirror registry it was pushed to (--catalog HOST/PATH:TAG)", err, basedOn)
		}
		return err
	}
	pkgs := catalog.Packages(c)
	if f.pkg == "" {
		return f.listPackages(out, ci.Origin, pkgs)
	}
	var p *catalog.PackageSummary
	var names []string
	for i := range pkgs {
		names = append(names, pkgs[i].Name)
		if pkgs[i].Name == f.pkg {
			p = &pkgs[i]
		}
	}
	if p == nil {
		return fmt.Errorf("package %q is not in catalog %s: `gapmirror list operators --catalog %s` lists its %d packages", f.pkg, ci.Origin, f.catalog, len(names))
	}
	if f.channel == "" {
		return f.listChannels(out, ci.Origin, p)
	}
	for _, ch := range p.Channels {
		if ch.Name == f.channel {
			return f.listVersions(out, ci.Origin, p.Name, ch)
		}
	}
	var chs []string
	for _, ch := range p.Channels {
		chs = append(chs, ch.Name)
	}
	return fmt.Errorf("package %s of catalog %s has no channel %q (channels: %s)", p.Name, ci.Origin, f.channel, strings.Join(chs, ", "))
}

// open finds the catalog image: in an archive (then basedOn is the archive
// it builds on, if any), or fetched into the local store.
func (f *listOperatorsFlags) open(ctx context.Context, g *globalFlags) (ci *sections.CatalogImage, basedOn string, err error) {
	if strings.HasPrefix(f.catalog, "file://") {
		loc, pick, _ := strings.Cut(f.catalog, "#")
		dir, err := fileURL("--catalog", loc)
		if err != nil {
			return nil, "", err
		}
		ar, err := archive.Open(dir)
		if err != nil {
			return nil, "", fmt.Errorf("--catalog %s: %w", f.catalog, err)
		}
		img, err := pickCatalog(ar.Index().Set, pick, loc)
		if err != nil {
			return nil, "", fmt.Errorf("--catalog %s: %w", f.catalog, err)
		}
		return &sections.CatalogImage{Origin: img.Destination + " in " + dir, Digest: digest.Digest(img.Digest), Blobs: sections.ReadOnlyBlobs{BlobReader: ar}}, ar.Index().BasedOn, nil
	}
	storeDir, err := g.storeDir()
	if err != nil {
		return nil, "", err
	}
	store, err := ocistore.Open(storeDir)
	if err != nil {
		return nil, "", err
	}
	if _, isLayout := (imageset.OperatorCatalog{Catalog: f.catalog}).OCILayoutPath(); !isLayout {
		if err := imageset.CheckImageReference(f.catalog); err != nil {
			return nil, "", fmt.Errorf("--catalog %q: %w", f.catalog, err)
		}
		if w := imageset.ShortNameWarning(f.catalog); w != "" {
			fmt.Fprintf(g.stderr, "warning: --catalog %s\n", w)
		}
	}
	uo, err := g.upstream()
	if err != nil {
		return nil, "", err
	}
	up := transfer.NewUpstream(uo)
	defer up.Close()
	ci, err = sections.FetchCatalog(ctx, f.catalog, up, store, transfer.Options{})
	return ci, "", err
}

// pickCatalog finds the operator catalog of an archive's Set: the only one,
// or the one whose destination (or origin) is pick.
func pickCatalog(set *imageset.Set, pick, loc string) (imageset.Image, error) {
	var found []imageset.Image
	var names []string
	for _, img := range set.Images {
		if img.Kind != imageset.KindOperatorCatalog {
			continue
		}
		names = append(names, img.Destination)
		if pick == "" || img.Destination == pick || img.Origin == pick {
			found = append(found, img)
		}
	}
	switch {
	case len(names) == 0:
		return imageset.Image{}, errors.New("the archive holds no operator catalog")
	case len(found) == 1:
		return found[0], nil
	case pick == "":
		return imageset.Image{}, fmt.Errorf("the archive holds %d catalogs: name one, e.g. %s#%s (catalogs: %s)", len(names), loc, names[0], strings.Join(names, ", "))
	default:
		return imageset.Image{}, fmt.Errorf("the archive holds no catalog %s (catalogs: %s)", pick, strings.Join(names, ", "))
	}
}

// catalogListing is the JSON form of a catalog's packages.
type catalogListing struct {
	Catalog  string                   `json:"catalog"`
	Packages []catalog.PackageSummary `json:"packages"`
}

func (f *listOperatorsFlags) listPackages(out io.Writer, origin string, pkgs []catalog.PackageSummary) error {
	if f.output == "json" {
		return writeJSON(out, catalogListing{Catalog: origin, Packages: pkgs})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# catalog %s: %d packages: package, default channel, channels\n", origin, len(pkgs))
	wn, wd := 0, 0
	for _, p := range pkgs {
		wn, wd = max(wn, len(p.Name)), max(wd, len(p.DefaultChannel))
	}
	for _, p := range pkgs {
		var chs []string
		for _, ch := range p.Channels {
			chs = append(chs, ch.Name)
		}
		fmt.Fprintf(&b, "%-*s  %-*s  %s\n", wn, p.Name, wd, p.DefaultChannel, strings.Join(chs, ","))
	}
	_, err := io.WriteString(out, b.String())
	return err
}

func (f *listOperatorsFlags) listChannels(out io.Writer, origin string, p *catalog.PackageSummary) error {
	if f.output == "json" {
		return writeJSON(out, p)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# package %s of catalog %s, default channel %s: channel, head, versions\n", p.Name, origin, p.DefaultChannel)
	wc, wh := 0, 0
	for _, ch := range p.Channels {
		wc, wh = max(wc, len(ch.Name)), max(wh, len(headOf(ch)))
	}
	for _, ch := range p.Channels {
		fmt.Fprintf(&b, "%-*s  %-*s  %s\n", wc, ch.Name, wh, headOf(ch), strings.Join(ch.Versions, " "))
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// channelVersions is the JSON form of one channel's versions.
type channelVersions struct {
	Package string `json:"package"`
	catalog.ChannelSummary
}

func (f *listOperatorsFlags) listVersions(out io.Writer, origin, pkg string, ch catalog.ChannelSummary) error {
	if f.output == "json" {
		return writeJSON(out, channelVersions{Package: pkg, ChannelSummary: ch})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# channel %s of package %s (catalog %s): %d versions, head %s\n", ch.Name, pkg, origin, len(ch.Versions), headOf(ch))
	for _, v := range ch.Versions {
		b.WriteString(v + "\n")
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// headOf names a channel's head bundle, or says it has none.
func headOf(ch catalog.ChannelSummary) string {
	if ch.Head == "" {
		return "(no single head)"
	}
	return ch.Head
}
