package workspace

import (
	"sort"
	"time"

	"github.com/gapmirror/gapmirror/imageset"
)

// MirroredImage is one manifest at a mirror root that a run of this
// Workspace pushed, or found already there.
type MirroredImage struct {
	// Destination is repo:tag under the mirror root.
	Destination string `json:"destination"`
	// Unflattened is the image set's name for it when --max-nested-paths
	// pushed it under a shortened one (Destination): delete configurations
	// name images the way the image set does.
	Unflattened string        `json:"unflattened,omitempty"`
	Digest      string        `json:"digest"`
	Kind        imageset.Kind `json:"kind,omitempty"`
	Origin      string        `json:"origin,omitempty"`
	// Pushed is true when gapmirror pushed it. An image the destination
	// already had the first time gapmirror looked is someone else's and
	// is never pruned or deleted.
	Pushed bool `json:"pushed"`
	// SignatureOf is, for a signature, the digest of the image it belongs to.
	SignatureOf string    `json:"signatureOf,omitempty"`
	FirstSeen   time.Time `json:"firstSeen"`
	// LastSeen is the last run whose image set held it.
	LastSeen time.Time `json:"lastSeen"`
	// Platforms are the platforms a sparse copy holds (empty: whole), so a
	// later run wanting more checks the instances, not just the tag.
	Platforms []string `json:"platforms,omitempty"`
}

// Key identifies the image in a root's record: its tag and digest.
func (m MirroredImage) Key() string { return m.Destination + "@" + m.Digest }

// SetName is the destination the image set gave the image, before any
// flattening: what delete configurations are matched against.
func (m MirroredImage) SetName() string {
	if m.Unflattened != "" {
		return m.Unflattened
	}
	return m.Destination
}

func sortImages(list []MirroredImage) {
	sort.Slice(list, func(a, b int) bool { return list[a].Key() < list[b].Key() })
}

// ListedReferrers are the referrers (by Key) the record places at the
// mirror, listed among their subject's referrers: those that the latest
// run to see the image they are attached to saw too. A referrer a run
// could not copy or list keeps the date of an earlier run, older than its
// image's, and is asked about again (see transfer.Registry.TrustReferrers).
func (r *LocationRecord) ListedReferrers() map[string]bool {
	owners := map[string]time.Time{} // repository@digest → last seen
	for _, m := range r.Images {
		if m.Kind != imageset.KindReferrer {
			k := repoOf(m.Destination) + "@" + m.Digest
			if m.LastSeen.After(owners[k]) {
				owners[k] = m.LastSeen
			}
		}
	}
	out := map[string]bool{}
	for _, m := range r.Images {
		if m.Kind != imageset.KindReferrer {
			continue
		}
		seen, ok := owners[repoOf(m.Destination)+"@"+m.SignatureOf]
		if ok && !m.LastSeen.Before(seen) {
			out[m.Key()] = true
		}
	}
	return out
}

// repoOf is the repository of a destination (repo:tag or repo@digest).
func repoOf(dest string) string {
	return imageset.Image{Destination: dest}.DestinationRepo()
}
