package prune

// delete.operators: a catalog entry of a DeleteImageSetConfiguration selects
// bundles with the same filter as mirroring, applied to the file-based
// catalog of what this workspace mirrored (the catalog image recorded at the
// mirror root, read from the local store or pulled from the mirror by its
// recorded digest). The selected bundles' images that the workspace pushed
// are deleted, except those bundles that stay mirrored still need. As in
// oc-mirror v2, the catalog image itself is never deleted.

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/catalog"
	"github.com/gapmirror/gapmirror/imageset/fbc"
	"github.com/gapmirror/gapmirror/ocistore"
	"github.com/gapmirror/gapmirror/sections"
	"github.com/gapmirror/gapmirror/transfer"
	"github.com/gapmirror/gapmirror/workspace"
)

// bundleWhy matches the reason operators.bundleImages gives an image.
var bundleWhy = regexp.MustCompile(`^operator catalog (.+): package (\S+) bundle (\S+)$`)

// catalogKey normalises a catalog reference so that the DISC and the run
// records compare equal however they spell it.
func catalogKey(ref string) string {
	if _, ok := (imageset.OperatorCatalog{Catalog: ref}).OCILayoutPath(); ok {
		return ref
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return ref
	}
	return reference.TagNameOnly(named).String()
}

// userKey names one bundle of one catalog.
func userKey(cat, pkg, bundle string) string { return catalogKey(cat) + " " + pkg + " " + bundle }

// selection is what the delete sections that select recorded images
// (delete.operators, delete.helm, delete.additionalImages) resolved to: the
// recorded images they pick and the reasons of the latest run's Set they
// take away. settle keeps the picked images something that stays still
// needs.
type selection struct {
	picked []matchedImage
	drops  []func(why string) bool
	// additional holds the images delete.additionalImages names
	// (destination@digest, as recorded and as the Set names them): their
	// additionalImages reasons go with them.
	additional map[string]bool
	images     []matchedImage
	kept       []Kept
	// notes are said with the plan: images deleted although the latest
	// run's configuration still lists them.
	notes []string
}

// named marks m as named by delete.additionalImages.
func (s *selection) named(m workspace.MirroredImage) {
	if s.additional == nil {
		s.additional = map[string]bool{}
	}
	s.additional[m.Key()] = true
	s.additional[m.SetName()+"@"+m.Digest] = true
}

// additionalWhy is the reason the Set gives an additional image.
const additionalWhy = "mirror.additionalImages["

// dropped reports whether a reason the latest run's Set gives img goes
// with the deletion.
func (s *selection) dropped(img imageset.Image, why string) bool {
	if strings.HasPrefix(why, additionalWhy) && s.additional[img.Destination+"@"+img.Digest] {
		return true
	}
	for _, d := range s.drops {
		if d(why) {
			return true
		}
	}
	return false
}

// settle splits the picked images into those to delete and those kept
// because a reason the deletion does not take away still holds for them
// (another bundle or chart, an additional image not named, a release).
func (s *selection) settle(latest func() (*imageset.Set, error)) error {
	if len(s.picked) == 0 {
		return nil
	}
	set, err := latest()
	if err != nil {
		return err
	}
	still := stillNeeded(set, s.dropped)
	all := stillNeeded(set, func(imageset.Image, string) bool { return false })
	seen := map[string]bool{}
	for _, p := range s.picked {
		if seen[p.img.Key()] {
			continue
		}
		seen[p.img.Key()] = true
		lookup := func(m map[string][]string) []string {
			if why := m[p.img.SetName()+"@"+p.img.Digest]; len(why) > 0 {
				return why
			}
			return m[p.img.Key()]
		}
		if why := lookup(still); len(why) > 0 {
			s.kept = append(s.kept, Kept{Image: p.img.Destination, Digest: p.img.Digest, Why: "selected by " + p.why + " but still used by " + joinFew(why)})
			continue
		}
		var listed []string
		for _, why := range lookup(all) {
			if strings.HasPrefix(why, additionalWhy) {
				listed = append(listed, why)
			}
		}
		if len(listed) > 0 {
			s.notes = append(s.notes, fmt.Sprintf("%s@%s (%s) is still %s of the latest run's ImageSetConfiguration: the next mirror run pushes it again unless it is removed there", p.img.Destination, p.img.Digest, p.why, strings.Join(listed, ", ")))
		}
		s.images = append(s.images, p)
	}
	return nil
}

// operatorImages resolves delete.operators against the catalogs this
// workspace mirrored to root, adding what they select to sel.
func (d *Delete) operatorImages(ctx context.Context, sel *selection, ops []imageset.OperatorCatalog, cfgPath, root string, images []workspace.MirroredImage) []error {
	if len(ops) == 0 {
		return nil
	}
	var errs []error
	store, cleanup, err := d.catalogStore(ctx)
	if err != nil {
		return []error{err}
	}
	defer cleanup()
	tmp, err := os.MkdirTemp("", "gapmirror-delete-")
	if err != nil {
		return []error{err}
	}
	defer os.RemoveAll(tmp)

	deleted := map[string]bool{} // userKey of every selected bundle
	var picked []matchedImage
	for i, oc := range ops {
		path := fmt.Sprintf("delete.operators[%d]", i)
		if len(oc.Platforms) > 0 {
			errs = append(errs, fmt.Errorf("%s: %s.platforms: deleting some platforms of a catalog's images is not supported; remove the field", cfgPath, path))
			continue
		}
		cats := recordedCatalogs(oc.Catalog, images)
		if len(cats) == 0 {
			errs = append(errs, fmt.Errorf("%s: %s.catalog: %s was not mirrored to %s by this workspace%s: check the catalog reference (as the ImageSetConfiguration named it) and --workspace", cfgPath, path, oc.Catalog, root, mirroredCatalogs(images)))
			continue
		}
		spec := sections.FilterSpec(oc)
		// Delete only what is named: bundles of other packages that the
		// named ones depend on stay.
		spec.SkipDependencies = true
		var refs []fbc.ImageRef
		var ferrs []string
		for _, m := range cats {
			c, err := d.loadMirroredCatalog(ctx, store, root, m, tmp)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %s.catalog: %w", cfgPath, path, err))
				continue
			}
			kept, _, err := catalog.Filter(c, spec)
			if err != nil {
				ferrs = append(ferrs, fmt.Sprintf("catalog %s@%s: %s", m.Destination, m.Digest, sections.LocateFilterError(path, oc, err.Error())))
				continue
			}
			refs = append(refs, kept.RelatedImages()...)
		}
		// A catalog mirrored several times selects from every version of
		// it; the entry fails only when no version has what it names.
		if len(refs) == 0 {
			if len(ferrs) > 0 {
				errs = append(errs, fmt.Errorf("%s: %s selects nothing this workspace mirrored from %s (delete filters the catalog as mirrored, so only what was mirrored can be named): %s", cfgPath, path, oc.Catalog, strings.Join(ferrs, "; ")))
			}
			continue
		}
		found := 0
		for _, ref := range refs {
			for _, u := range ref.Users {
				deleted[userKey(oc.Catalog, u.Package, u.Bundle)] = true
			}
			for _, m := range matchRecorded(ref.Image, images) {
				found++
				picked = append(picked, matchedImage{m, fmt.Sprintf("%s (%s)", path, fbc.BundlesOf(ref.Users))})
			}
		}
		if found == 0 {
			errs = append(errs, fmt.Errorf("%s: the bundles %s selects from %s were not pushed to %s by this workspace (already deleted, or they were there before gapmirror mirrored them)", cfgPath, path, oc.Catalog, root))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	sel.picked = append(sel.picked, picked...)
	sel.drops = append(sel.drops, func(why string) bool {
		m := bundleWhy.FindStringSubmatch(why)
		return m != nil && deleted[userKey(m[1], m[2], m[3])]
	})
	return nil
}

// joinFew joins reasons, the first few in full.
func joinFew(list []string) string {
	if len(list) > 3 {
		return strings.Join(list[:3], "; ") + fmt.Sprintf(" and %d more", len(list)-3)
	}
	return strings.Join(list, "; ")
}

// recordedCatalogs are the catalog images the workspace pushed to the root
// for the catalog ref, one per digest.
func recordedCatalogs(ref string, images []workspace.MirroredImage) []workspace.MirroredImage {
	var out []workspace.MirroredImage
	seen := map[string]bool{}
	for _, m := range images {
		if m.Kind == imageset.KindOperatorCatalog && catalogKey(m.Origin) == catalogKey(ref) && !seen[m.Digest] {
			seen[m.Digest] = true
			out = append(out, m)
		}
	}
	return out
}

// mirroredCatalogs lists the catalogs a root's record holds, for errors.
func mirroredCatalogs(images []workspace.MirroredImage) string {
	var names []string
	for _, m := range images {
		if m.Kind == imageset.KindOperatorCatalog && !slices.Contains(names, m.Origin) {
			names = append(names, m.Origin)
		}
	}
	if len(names) == 0 {
		return " (it mirrored no operator catalog there)"
	}
	sort.Strings(names)
	return " (catalogs it mirrored there: " + strings.Join(names, ", ") + ")"
}

// matchRecorded finds the pushed bundle or related images at the root that
// the catalog's image reference ref was mirrored as.
func matchRecorded(ref string, images []workspace.MirroredImage) []workspace.MirroredImage {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return nil
	}
	named = reference.TagNameOnly(named)
	repo := reference.Path(named)
	var dig string
	if c, ok := named.(reference.Canonical); ok {
		dig = c.Digest().String()
	}
	var out []workspace.MirroredImage
	for _, m := range images {
		if !m.Pushed || (m.Kind != imageset.KindOperatorBundle && m.Kind != imageset.KindOperatorRelated) {
			continue
		}
		mrepo, _ := splitDest(m.SetName())
		// By digest: the repository and digest; by tag: every digest the
		// tag was mirrored as (its origin).
		if dig != "" && mrepo == repo && m.Digest == dig || dig == "" && m.Origin == named.String() {
			out = append(out, m)
		}
	}
	return out
}

// stillNeeded maps each image (destination@digest) of set, the Set of the
// latest run that mirrored to this root, to the reasons it stays: every
// reason of set for it except those the deletion takes away (dropped).
func stillNeeded(set *imageset.Set, dropped func(img imageset.Image, why string) bool) map[string][]string {
	if set == nil {
		return nil
	}
	out := map[string][]string{}
	for _, img := range set.Images {
		for _, why := range img.Why {
			if dropped(img, why) {
				continue
			}
			k := img.Destination + "@" + img.Digest
			out[k] = append(out[k], why)
		}
	}
	return out
}

// LatestSet is the Set of the newest run that mirrored into the root: the
// newest run record naming that root; records older gapmirror versions
// wrote name none, and count when they hold an image of the root's record.
func LatestSet(w workspace.Workspace, root string, images []workspace.MirroredImage) (*imageset.Set, error) {
	at := map[string]bool{}
	for _, m := range images {
		at[m.Key()] = true
	}
	var names []string
	if err := w.ReadAll("runs", func(name string) error {
		if !strings.HasSuffix(name, "-mirror-to-disk.json") {
			names = append(names, name)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	sort.Sort(sort.Reverse(sort.StringSlice(names))) // timestamped names
	for _, name := range names {
		var r workspace.Run
		if _, err := w.Read(&r, "runs", name); err != nil {
			return nil, err
		}
		if r.Set == nil || r.Mirror != "" && r.Mirror != root {
			continue
		}
		if r.Mirror == root {
			return r.Set, nil
		}
		for _, img := range r.Set.Images {
			if at[img.Destination+"@"+img.Digest] {
				return r.Set, nil
			}
		}
	}
	return nil, nil
}

// catalogStore opens the local store delete reads catalogs from: the
// configured one, or a temporary one when none is configured.
func (d *Delete) catalogStore(ctx context.Context) (*ocistore.Store, func(), error) {
	if d.StoreDir != "" {
		lock, err := workspace.LockStore(ctx, d.StoreDir, nil) // takes its turn with the runs using it
		if err != nil {
			return nil, nil, err
		}
		s, err := ocistore.Open(d.StoreDir)
		if err != nil {
			lock.Release()
		}
		return s, lock.Release, err
	}
	dir, err := os.MkdirTemp("", "gapmirror-delete-store-")
	if err != nil {
		return nil, nil, err
	}
	s, err := ocistore.Open(dir)
	return s, func() { os.RemoveAll(dir) }, err
}

// loadMirroredCatalog loads the FBC of the catalog image m recorded at the
// root: from the store when it holds it (the run built or copied it there),
// else pulled from the mirror by its recorded digest.
func (d *Delete) loadMirroredCatalog(ctx context.Context, store *ocistore.Store, root string, m workspace.MirroredImage, tmp string) (*fbc.Catalog, error) {
	dg, err := digest.Parse(m.Digest)
	if err != nil {
		return nil, fmt.Errorf("the workspace records catalog %s with a bad digest %q: %w", m.Destination, m.Digest, err)
	}
	if !store.Has(dg) {
		repo, _ := splitDest(m.Destination)
		img := imageset.Image{
			Source:      root + "/" + repo + "@" + m.Digest,
			Origin:      m.Origin,
			Digest:      m.Digest,
			Destination: sections.CatalogSourcesRepo + "mirrored/" + repo + ":" + imageset.DigestTag(dg),
			Kind:        imageset.KindOperatorCatalog,
		}
		if err := sections.CopyIntoStore(ctx, img, transfer.NewUpstream(d.Mirror), store, transfer.Options{}); err != nil {
			return nil, fmt.Errorf("reading the mirrored catalog %s/%s@%s to find its bundles: %w", root, repo, m.Digest, err)
		}
	}
	ci := &sections.CatalogImage{Origin: root + "/" + m.Destination, Digest: dg, Blobs: store}
	return ci.Load(tmp)
}
