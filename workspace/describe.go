package workspace

import (
	"cmp"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/release"
)

// Description is what an admin asks of an archive: what it holds, what it
// builds on and whether that was applied here, and what changed since.
type Description struct {
	ID          string          `json:"id"`
	Created     time.Time       `json:"created"`
	ToolVersion string          `json:"toolVersion,omitempty"`
	Images      int             `json:"images"`
	Signatures  int             `json:"signatures"`
	Blobs       int             `json:"blobs"`
	Bytes       int64           `json:"bytes"`
	Chunks      []archive.Chunk `json:"chunks"`

	Releases   []ReleaseEntry `json:"releases,omitempty"`
	Catalogs   []CatalogEntry `json:"operatorCatalogs,omitempty"`
	HelmCharts []string       `json:"helmCharts,omitempty"`
	Additional []string       `json:"additionalImages,omitempty"`
	LeftOut    []string       `json:"leftOut,omitempty"`
	Blocked    []string       `json:"blocked,omitempty"`

	// Workspace is the mirror-to-disk workspace that wrote the archive
	// (empty for archives written before archives named it).
	Workspace string `json:"workspace,omitempty"`
	// AppliedTo lists the mirrors disk-to-mirror pushed this archive to
	// from this directory, and when.
	AppliedTo []Application `json:"appliedTo,omitempty"`

	BasedOn *Predecessor `json:"basedOn,omitempty"`
	// Changes against the predecessor, when its image list is known here.
	Changes *Changes `json:"changes,omitempty"`
	// ImageList is every image (with --images, and always in JSON).
	ImageList []DescribedImage `json:"imageList,omitempty"`
}

// ReleaseEntry is one OpenShift release of the archive.
type ReleaseEntry struct {
	Version  string   `json:"version"`
	Arch     string   `json:"arch"`
	Channels []string `json:"channels,omitempty"`
	Image    string   `json:"image"`
}

// CatalogEntry is one operator catalog and the bundles mirrored per package
// (in version order).
type CatalogEntry struct {
	Catalog  string              `json:"catalog"`
	Packages map[string][]string `json:"packages"`
}

// PackageNames are the entry's packages in natural order.
func (c CatalogEntry) PackageNames() []string {
	names := make([]string, 0, len(c.Packages))
	for p := range c.Packages {
		names = append(names, p)
	}
	slices.SortFunc(names, compareNatural)
	return names
}

// Application is one push of an archive to a mirror from this directory.
type Application struct {
	Mirror  string    `json:"mirror"`
	Applied time.Time `json:"applied"`
}

// Predecessor is the archive this one builds on.
type Predecessor struct {
	ID string `json:"id"`
	// InDirectory: the predecessor is in the same directory too (so
	// disk-to-mirror applies it first); set by the caller, who lists the
	// directory.
	InDirectory bool `json:"inDirectory,omitempty"`
	// Applied: disk-to-mirror from this directory pushed it (when, where).
	Applied   bool      `json:"applied"`
	AppliedAt time.Time `json:"appliedAt,omitempty"`
	Mirror    string    `json:"mirror,omitempty"`
}

// Changes are the images, releases and bundles added and removed.
type Changes struct {
	AddedImages     []string `json:"addedImages"`
	RemovedImages   []string `json:"removedImages"`
	AddedReleases   []string `json:"addedReleases"`
	RemovedReleases []string `json:"removedReleases"`
	AddedBundles    []string `json:"addedBundles"`
	RemovedBundles  []string `json:"removedBundles"`
}

// DescribedImage is one image of the archive.
type DescribedImage struct {
	Kind        imageset.Kind `json:"kind"`
	Destination string        `json:"destination"`
	Digest      string        `json:"digest"`
	// Carried: its manifest is in this archive (else an earlier one has it).
	Carried   bool     `json:"carried"`
	Platforms []string `json:"platforms,omitempty"`
}

var (
	channelWhy      = regexp.MustCompile(`mirror\.platform\.channels\[\d+\] (\S+): `)
	describedBundle = regexp.MustCompile(`operator catalog (\S+): package (\S+) bundle (\S+)`)
)

// Describe summarises the archive in dir; the workspace next to it
// (dir/working-dir) says whether its predecessor was applied here and what
// the predecessor held. Its lists are in the order people read them:
// versions (bundles, releases) in semver order, names (images, catalogs,
// packages) in natural order, numbers compared as numbers; helm charts as
// the configuration lists them.
func Describe(dir string, idx *archive.Index) *Description {
	d := &Description{ID: idx.ID, Created: idx.Created, ToolVersion: idx.ToolVersion, Blobs: len(idx.Blobs), Chunks: idx.Chunks,
		LeftOut: sortedNatural(idx.LeftOut), Blocked: sortedNatural(idx.Blocked), Workspace: idx.Workspace}
	w := Workspace{Dir: filepath.Join(dir, WorkingDir)}
	_ = w.ReadAll("applied", func(name string) error {
		var r AppliedRecord
		if ok, err := w.Read(&r, "applied", name); err == nil && ok && r.ID == idx.ID {
			d.AppliedTo = append(d.AppliedTo, Application{Mirror: r.Mirror, Applied: r.Applied})
		}
		return nil
	})
	sort.Slice(d.AppliedTo, func(a, b int) bool { return d.AppliedTo[a].Applied.Before(d.AppliedTo[b].Applied) })
	carried := map[string]bool{}
	for _, b := range idx.Blobs {
		d.Bytes += b.Size
		carried[b.Digest.String()] = true
	}
	for _, e := range idx.Extras {
		if strings.HasPrefix(e.Name, "helm/charts/") {
			d.HelmCharts = append(d.HelmCharts, strings.TrimPrefix(e.Name, "helm/charts/"))
		}
	}
	if idx.Set != nil {
		d.Releases, d.Catalogs, d.Additional = summarise(idx.Set)
		for _, img := range idx.Set.Images {
			if img.Kind.Attached() {
				d.Signatures++ // and referrers
				continue
			}
			d.Images++
			d.ImageList = append(d.ImageList, DescribedImage{Kind: img.Kind, Destination: img.Destination, Digest: img.Digest,
				Carried: carried[img.Digest], Platforms: img.Platforms})
		}
		slices.SortStableFunc(d.ImageList, func(a, b DescribedImage) int { return compareNatural(a.Destination, b.Destination) })
	}
	if idx.BasedOn == "" {
		return d
	}
	d.BasedOn = &Predecessor{ID: idx.BasedOn}
	applied, _ := w.Applied("")
	var since time.Time
	mode := "mirror-to-disk"
	if a, ok := applied[idx.BasedOn]; ok {
		d.BasedOn.Applied, d.BasedOn.AppliedAt, d.BasedOn.Mirror = true, a.Applied, a.Mirror
		since, mode = a.Applied, "disk-to-mirror"
	} else if history, err := w.Archives(); err == nil {
		for _, r := range history {
			if r.ID == idx.BasedOn {
				since = r.Created
			}
		}
	}
	prev := setOf(w, idx.BasedOn)
	if prev == nil {
		prev = setAfter(w, mode, since) // records older than ArchiveID
	}
	if prev != nil && idx.Set != nil {
		d.Changes = compare(prev, idx.Set)
	}
	return d
}

// summarise lists the releases, catalogs with their bundles, and
// additional images of a set.
func summarise(set *imageset.Set) (rels []ReleaseEntry, cats []CatalogEntry, additional []string) {
	byCatalog := map[string]map[string][]string{}
	for _, img := range set.Images {
		switch img.Kind {
		case imageset.KindRelease:
			_, tag, _ := strings.Cut(img.Destination, ":")
			version, arch := releaseTag(tag)
			e := ReleaseEntry{Version: version, Arch: arch, Image: img.Origin}
			for _, w := range img.Why {
				if m := channelWhy.FindStringSubmatch(w); m != nil {
					e.Channels = appendNew(e.Channels, m[1])
				}
			}
			rels = append(rels, e)
		case imageset.KindOperatorBundle:
			for _, w := range img.Why {
				if m := describedBundle.FindStringSubmatch(w); m != nil {
					if byCatalog[m[1]] == nil {
						byCatalog[m[1]] = map[string][]string{}
					}
					byCatalog[m[1]][m[2]] = appendNew(byCatalog[m[1]][m[2]], m[3])
				}
			}
		case imageset.KindOperatorCatalog:
			if byCatalog[img.Origin] == nil {
				byCatalog[img.Origin] = map[string][]string{}
			}
		case imageset.KindAdditional:
			additional = append(additional, img.Origin)
		}
	}
	slices.SortFunc(rels, func(a, b ReleaseEntry) int {
		return cmp.Or(compareNatural(a.Arch, b.Arch), compareVersioned(a.Version, b.Version))
	})
	for c, pkgs := range byCatalog {
		for _, bs := range pkgs {
			slices.SortFunc(bs, compareVersioned)
		}
		cats = append(cats, CatalogEntry{Catalog: c, Packages: pkgs})
	}
	slices.SortFunc(cats, func(a, b CatalogEntry) int { return compareNatural(a.Catalog, b.Catalog) })
	slices.SortFunc(additional, compareNatural)
	return rels, cats, additional
}

// releaseTag splits a release tag (4.18.1-x86_64, 4.19.0-rc.1-multi) into
// its version and architecture.
func releaseTag(tag string) (version, arch string) {
	version = release.TagVersion(tag)
	if version == tag { // no architecture suffix known
		version, arch, _ = strings.Cut(tag, "-")
		return version, arch
	}
	return version, strings.TrimPrefix(tag[len(version):], "-")
}

func appendNew(list []string, s string) []string {
	for _, l := range list {
		if l == s {
			return list
		}
	}
	return append(list, s)
}

// setOf is the Set of the run that wrote or pushed archive id here.
func setOf(w Workspace, id string) *imageset.Set {
	var set *imageset.Set
	_ = w.ReadAll("runs", func(name string) error {
		var r Run
		if ok, err := w.Read(&r, "runs", name); err == nil && ok && r.ArchiveID == id && r.Plan != nil && r.Set != nil {
			set = r.Set
		}
		return nil
	})
	return set
}

// setAfter is the Set of the first run of mode recorded at or after since:
// the run that wrote (mirror-to-disk) or pushed (disk-to-mirror) the
// predecessor.
func setAfter(w Workspace, mode string, since time.Time) *imageset.Set {
	if since.IsZero() {
		return nil
	}
	var best *Run
	_ = w.ReadAll("runs", func(name string) error {
		var r Run
		if ok, err := w.Read(&r, "runs", name); err != nil || !ok {
			return nil
		}
		if r.Mode == mode && !r.Time.Before(since.Add(-time.Second)) && (best == nil || r.Time.Before(best.Time)) {
			rr := r
			best = &rr
		}
		return nil
	})
	if best == nil || best.Plan == nil {
		return nil
	}
	return best.Set
}

// compare lists what changed from prev to cur.
func compare(prev, cur *imageset.Set) *Changes {
	c := &Changes{}
	key := func(img imageset.Image) string {
		if strings.HasSuffix(img.Origin, "@"+img.Digest) {
			return img.Origin // named by digest already
		}
		return img.Origin + "@" + img.Digest
	}
	index := func(s *imageset.Set) (imgs, rels, bundles map[string]bool) {
		imgs, rels, bundles = map[string]bool{}, map[string]bool{}, map[string]bool{}
		for _, img := range s.Images {
			if img.Kind.Attached() {
				continue
			}
			imgs[key(img)] = true
			if img.Kind == imageset.KindRelease {
				_, tag, _ := strings.Cut(img.Destination, ":")
				rels[tag] = true
			}
			for _, w := range img.Why {
				if m := describedBundle.FindStringSubmatch(w); m != nil && img.Kind == imageset.KindOperatorBundle {
					bundles[m[3]] = true
				}
			}
		}
		return
	}
	pi, pr, pb := index(prev)
	ci, cr, cb := index(cur)
	diff := func(a, b map[string]bool, order func(x, y string) int) []string {
		out := []string{}
		for k := range a {
			if !b[k] {
				out = append(out, k)
			}
		}
		slices.SortFunc(out, order)
		return out
	}
	byTag := func(x, y string) int {
		vx, ax := releaseTag(x)
		vy, ay := releaseTag(y)
		return cmp.Or(compareNatural(ax, ay), compareVersioned(vx, vy), compareNatural(x, y))
	}
	c.AddedImages, c.RemovedImages = diff(ci, pi, compareNatural), diff(pi, ci, compareNatural)
	c.AddedReleases, c.RemovedReleases = diff(cr, pr, byTag), diff(pr, cr, byTag)
	c.AddedBundles, c.RemovedBundles = diff(cb, pb, compareVersioned), diff(pb, cb, compareVersioned)
	return c
}

// sortedNatural is a copy of list in natural order.
func sortedNatural(list []string) []string {
	out := slices.Clone(list)
	slices.SortFunc(out, compareNatural)
	return out
}

// compareNatural orders strings as people read them: runs of digits by
// their value (app-2 before app-10), the rest byte by byte; strings equal
// so (1 and 01) by their bytes, so that the order is total.
func compareNatural(a, b string) int {
	x, y := a, b
	for x != "" && y != "" {
		if isDigit(x[0]) && isDigit(y[0]) {
			nx, ny := digitRun(x), digitRun(y)
			vx, vy := strings.TrimLeft(x[:nx], "0"), strings.TrimLeft(y[:ny], "0")
			if c := cmp.Or(cmp.Compare(len(vx), len(vy)), strings.Compare(vx, vy)); c != 0 {
				return c
			}
			x, y = x[nx:], y[ny:]
			continue
		}
		if x[0] != y[0] {
			return cmp.Compare(x[0], y[0])
		}
		x, y = x[1:], y[1:]
	}
	return cmp.Or(cmp.Compare(len(x), len(y)), strings.Compare(a, b))
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// digitRun is the length of the run of digits s starts with.
func digitRun(s string) int {
	n := 0
	for n < len(s) && isDigit(s[n]) {
		n++
	}
	return n
}

// compareVersioned orders versions (4.18.10) and names that end in one
// (bundles: etcd.v0.9.10): by the name before the version in natural
// order, then by the version in semver order (1.0.0-rc.1 before 1.0.0,
// 1.0.2 before 1.0.10), then in natural order; a name without a semantic
// version in natural order, before those of its name with one.
func compareVersioned(a, b string) int {
	na, va := splitVersion(a)
	nb, vb := splitVersion(b)
	if c := compareNatural(na, nb); c != 0 {
		return c
	}
	switch {
	case va != nil && vb != nil:
		if c := va.Compare(vb); c != 0 {
			return c
		}
	case va != nil:
		return 1
	case vb != nil:
		return -1
	}
	return compareNatural(a, b)
}

// splitVersion splits s into the name before its semantic version and the
// version: all of s (4.18.1, v1.2.0), else what follows its first dot that
// starts one (etcd.v0.9.2); nil when none does.
func splitVersion(s string) (string, *semver.Version) {
	if v, err := semver.NewVersion(s); err == nil {
		return "", v
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '.' {
			continue
		}
		if v, err := semver.NewVersion(s[i+1:]); err == nil {
			return s[:i], v
		}
	}
	return s, nil
}
