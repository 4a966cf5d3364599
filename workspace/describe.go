package workspace

import (
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/imageset"
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

// CatalogEntry is one operator catalog and the bundles mirrored per package.
type CatalogEntry struct {
	Catalog  string              `json:"catalog"`
	Packages map[string][]string `json:"packages"`
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
// the predecessor held.
func Describe(dir string, idx *archive.Index) *Description {
	d := &Description{ID: idx.ID, Created: idx.Created, ToolVersion: idx.ToolVersion, Blobs: len(idx.Blobs), Chunks: idx.Chunks,
		LeftOut: idx.LeftOut, Blocked: idx.Blocked, Workspace: idx.Workspace}
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
			if img.Kind == imageset.KindSignature {
				d.Signatures++
				continue
			}
			d.Images++
			d.ImageList = append(d.ImageList, DescribedImage{Kind: img.Kind, Destination: img.Destination, Digest: img.Digest,
				Carried: carried[img.Digest], Platforms: img.Platforms})
		}
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
			version, arch, _ := strings.Cut(tag, "-")
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
	sort.Slice(rels, func(a, b int) bool {
		return rels[a].Arch+rels[a].Version < rels[b].Arch+rels[b].Version
	})
	for c, pkgs := range byCatalog {
		for _, bs := range pkgs {
			sort.Strings(bs)
		}
		cats = append(cats, CatalogEntry{Catalog: c, Packages: pkgs})
	}
	sort.Slice(cats, func(a, b int) bool { return cats[a].Catalog < cats[b].Catalog })
	sort.Strings(additional)
	return rels, cats, additional
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
			if img.Kind == imageset.KindSignature {
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
	diff := func(a, b map[string]bool) []string {
		out := []string{}
		for k := range a {
			if !b[k] {
				out = append(out, k)
			}
		}
		sort.Strings(out)
		return out
	}
	c.AddedImages, c.RemovedImages = diff(ci, pi), diff(pi, ci)
	c.AddedReleases, c.RemovedReleases = diff(cr, pr), diff(pr, cr)
	c.AddedBundles, c.RemovedBundles = diff(cb, pb), diff(pb, cb)
	return c
}
