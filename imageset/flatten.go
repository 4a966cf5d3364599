package imageset

import (
	"fmt"
	"strings"
)

// FlattenDestinations limits every destination repository of the set to n
// path components below the registry host, for registries that refuse deeper
// repositories (Quay without nested repositories, some GitLab, Nexus and
// Artifactory setups). It follows oc-mirror v2's --max-nested-paths rule:
// the components of the mirror root's own path count towards n; the first
// n-1 components are kept and the rest are joined with "-" into the last one
// (root "mirror", n 2: "ubi9/ubi:9.4" becomes "ubi9-ubi:9.4", i.e.
// mirror/ubi9-ubi). rootPath is the root's path without the host ("" for
// none); n 0 leaves the set as it is.
//
// Unlike oc-mirror, a root with n or more path components is refused rather
// than renamed itself: every image must stay under the root the user gave,
// which the records, prune and delete rely on.
//
// Changed images keep their original destination in Unflattened. Two images
// that end up at the same repository:tag with different digests are an
// error naming both; with the same digest they become one image.
func (s *Set) FlattenDestinations(rootPath string, n int) (*Set, error) {
	if n < 0 {
		return nil, fmt.Errorf("a negative number of path components (%d) makes no sense: use 0 (no limit) or at least 1", n)
	}
	out := &Set{FormatVersion: s.FormatVersion}
	if n == 0 {
		// No limit: the set's own names (a retry of a flattened run may
		// come here with a set flattened before).
		for _, img := range s.Images {
			img.Destination, img.Unflattened = img.OriginalDestination(), ""
			out.Images = append(out.Images, img)
		}
		return out, nil
	}
	depth := 0
	if p := strings.Trim(rootPath, "/"); p != "" {
		depth = len(strings.Split(p, "/"))
	}
	if depth >= n {
		return nil, fmt.Errorf("the mirror root's path %q has %d components, which leaves no room under it for repositories of at most %d components: use a mirror root with at most %d path components, or allow more", rootPath, depth, n, n-1)
	}
	keep := n - 1 - depth // components of the destination kept as they are
	from := map[string]int{}
	var clashes []string
	for _, img := range s.Images {
		// Always from the set's own name, so that flattening a flattened
		// set again, with the same or another n, gives the same as once.
		orig := img.OriginalDestination()
		img.Destination, img.Unflattened = orig, ""
		repo, tag := splitTag(orig)
		parts := strings.Split(repo, "/")
		if len(parts) > keep+1 {
			flat := append(append([]string{}, parts[:keep]...), strings.Join(parts[keep:], "-"))
			img.Destination = strings.Join(flat, "/")
			if tag != "" {
				img.Destination += ":" + tag
			}
			if _, d, ok := strings.Cut(orig, "@"); ok {
				img.Destination += "@" + d // a referrer
			}
		}
		if img.Destination != orig {
			img.Unflattened = orig
		}
		i, seen := from[img.Destination]
		if !seen {
			from[img.Destination] = len(out.Images)
			out.Images = append(out.Images, img)
			continue
		}
		have := &out.Images[i]
		if have.Digest != img.Digest {
			clashes = append(clashes, fmt.Sprintf("%s (%s, digest %s) and %s (%s, digest %s) both become %s",
				have.OriginalDestination(), have.Origin, have.Digest, orig, img.Origin, img.Digest, img.Destination))
			continue
		}
		have.merge(img)
	}
	if len(clashes) > 0 {
		return nil, fmt.Errorf("flattening to %d path components makes different images share a repository and tag: %s; one tag cannot hold two images: give one of them another targetRepo or targetTag, or allow more path components", n, strings.Join(clashes, "; "))
	}
	out.Sort()
	return out, nil
}

// OriginalDestination is the destination the image set gave the image,
// before FlattenDestinations: the name the archive and the local store know
// it by, and the one delete configurations are matched against.
func (i Image) OriginalDestination() string {
	if i.Unflattened != "" {
		return i.Unflattened
	}
	return i.Destination
}
