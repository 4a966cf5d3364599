package generate

import (
	"fmt"
	"sort"
	"strings"

	"github.com/distribution/reference"

	"github.com/gapmirror/gapmirror/imageset"
)

// File names of the mirror-set manifests.
const (
	// fileIDMS holds the ImageDigestMirrorSets.
	fileIDMS = "idms-gapmirror.yaml"
	// fileITMS holds the ImageTagMirrorSets.
	fileITMS = "itms-gapmirror.yaml"
)

// mirrorObjectBudget bounds the estimated size in bytes of the entries of one
// IDMS or ITMS object. "oc apply" copies the whole object into an annotation
// that may not exceed 256 KiB, so larger groups are split into -0, -1, ….
var mirrorObjectBudget = 128 << 10

// groupOrder is the order of content groups in the mirror-set files.
var groupOrder = []string{"release", "operator", "generic"}

// imageMirrors is one entry of spec.imageDigestMirrors or spec.imageTagMirrors.
type imageMirrors struct {
	Source  string   `json:"source"`
	Mirrors []string `json:"mirrors"`
}

// imageDigestMirrorSet is a config.openshift.io/v1 ImageDigestMirrorSet.
type imageDigestMirrorSet struct {
	typeMeta
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		ImageDigestMirrors []imageMirrors `json:"imageDigestMirrors"`
	} `json:"spec"`
}

// imageTagMirrorSet is a config.openshift.io/v1 ImageTagMirrorSet.
type imageTagMirrorSet struct {
	typeMeta
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		ImageTagMirrors []imageMirrors `json:"imageTagMirrors"`
	} `json:"spec"`
}

// mirrorSets returns fileIDMS and fileITMS (each only when it has entries)
// for the images of set, mirrored under root (e.g.
// "registry.airgap:5000/mirror"). notMirrored lists source references that
// were blocked or failed to copy; no namespace entry will cover them. The
// scope rule is described in the package documentation; repoScope keeps
// every entry at repository scope (flattened destinations).
func mirrorSets(set *imageset.Set, root string, notMirrored []string, repoScope bool, meta Meta) (Files, error) {
	digest, tag, err := mirrorEntries(set, root, notMirrored, repoScope)
	if err != nil {
		return nil, err
	}
	files := Files{}
	if objs := digestMirrorSets(digest, meta); len(objs) > 0 {
		data, err := marshalDocuments(objs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fileIDMS, err)
		}
		files[fileIDMS] = data
	}
	if objs := tagMirrorSets(tag, meta); len(objs) > 0 {
		data, err := marshalDocuments(objs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fileITMS, err)
		}
		files[fileITMS] = data
	}
	return files, nil
}

// groupedEntries maps content group → source → set of mirrors.
type groupedEntries map[string]map[string]map[string]bool

func (g groupedEntries) add(group, source, mirror string) {
	if g[group] == nil {
		g[group] = map[string]map[string]bool{}
	}
	if g[group][source] == nil {
		g[group][source] = map[string]bool{}
	}
	g[group][source][mirror] = true
}

// chunks returns the entries of group sorted by source, mirrors sorted, cut
// into pieces that each fit mirrorObjectBudget.
func (g groupedEntries) chunks(group string) [][]imageMirrors {
	bySource := g[group]
	sources := make([]string, 0, len(bySource))
	for s := range bySource {
		sources = append(sources, s)
	}
	sort.Strings(sources)
	var out [][]imageMirrors
	var cur []imageMirrors
	size := 0
	for _, s := range sources {
		mirrors := make([]string, 0, len(bySource[s]))
		n := len(s) + 32
		for m := range bySource[s] {
			mirrors = append(mirrors, m)
			n += len(m) + 8
		}
		sort.Strings(mirrors)
		if len(cur) > 0 && size+n > mirrorObjectBudget {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur = append(cur, imageMirrors{Source: s, Mirrors: mirrors})
		size += n
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func digestMirrorSets(g groupedEntries, meta Meta) []imageDigestMirrorSet {
	var objs []imageDigestMirrorSet
	for _, group := range groupOrder {
		for i, entries := range g.chunks(group) {
			var o imageDigestMirrorSet
			o.typeMeta = typeMeta{APIVersion: "config.openshift.io/v1", Kind: "ImageDigestMirrorSet"}
			o.Metadata = objectMeta{Name: fmt.Sprintf("idms-%s-%d", group, i), Annotations: meta.annotations()}
			o.Spec.ImageDigestMirrors = entries
			objs = append(objs, o)
		}
	}
	return objs
}

func tagMirrorSets(g groupedEntries, meta Meta) []imageTagMirrorSet {
	var objs []imageTagMirrorSet
	for _, group := range groupOrder {
		for i, entries := range g.chunks(group) {
			var o imageTagMirrorSet
			o.typeMeta = typeMeta{APIVersion: "config.openshift.io/v1", Kind: "ImageTagMirrorSet"}
			o.Metadata = objectMeta{Name: fmt.Sprintf("itms-%s-%d", group, i), Annotations: meta.annotations()}
			o.Spec.ImageTagMirrors = entries
			objs = append(objs, o)
		}
	}
	return objs
}

// mapping is one image's source repository and mirror repository.
type mapping struct {
	domain string
	path   []string // path components of the source repository
	mirror string   // full mirror repository
	img    imageset.Image
}

func (m mapping) namespace(k int) string {
	return m.domain + "/" + strings.Join(m.path[:k], "/")
}

// namespaceState records whether one mirror prefix is right for every
// mapping at or under a candidate namespace, and nothing known to be missing
// lies there.
type namespaceState struct {
	prefix  string
	invalid bool
}

// mirrorEntries computes the IDMS and ITMS entries of set, grouped by content.
func mirrorEntries(set *imageset.Set, root string, notMirrored []string, repoScope bool) (digest, tag groupedEntries, err error) {
	root, err = normaliseRoot(root)
	if err != nil {
		return nil, nil, err
	}
	var mappings []mapping
	if set != nil {
		for _, img := range set.Images {
			if img.Kind.Attached() {
				continue // found next to the image it belongs to (by tag, or its referrers), which has its entry
			}
			if img.ServedAsIs() {
				continue // nothing pulls it by an upstream name: no entry to redirect
			}
			m, err := newMapping(img, root)
			if err != nil {
				if img.Kind == imageset.KindOperatorCatalog || img.Kind == imageset.KindReleaseGraph {
					// No entry of its own; an origin gapmirror made up
					// (a rebuilt catalog, the graph image) may not parse.
					continue
				}
				return nil, nil, err
			}
			mappings = append(mappings, m)
		}
	}

	states := map[string]*namespaceState{}
	for _, m := range mappings {
		for k := 1; k <= len(m.path); k++ {
			prefix, ok := mirrorPrefix(m.mirror, m.path[k:])
			key := m.namespace(k)
			st := states[key]
			switch {
			case st == nil:
				states[key] = &namespaceState{prefix: prefix, invalid: !ok}
			case !ok || st.prefix != prefix:
				st.invalid = true
			}
		}
	}
	for _, ref := range notMirrored {
		named, err := reference.ParseNormalizedNamed(strings.TrimPrefix(ref, "docker://"))
		if err != nil {
			return nil, nil, fmt.Errorf("reference %q listed as not mirrored is not a valid image reference: %w", ref, err)
		}
		m := mapping{domain: reference.Domain(named), path: strings.Split(reference.Path(named), "/")}
		for k := 1; k <= len(m.path); k++ {
			key := m.namespace(k)
			if st := states[key]; st != nil {
				st.invalid = true
			} else {
				states[key] = &namespaceState{invalid: true}
			}
		}
	}

	digest, tag = groupedEntries{}, groupedEntries{}
	for _, m := range mappings {
		kind := m.img.Kind
		if kind == imageset.KindOperatorCatalog || kind == imageset.KindReleaseGraph {
			continue
		}
		source, mirror := m.namespace(len(m.path)), m.mirror
		for k := 1; k < len(m.path) && !repoScope; k++ {
			if st := states[m.namespace(k)]; !st.invalid {
				source, mirror = m.namespace(k), st.prefix
				break
			}
		}
		group := contentGroup(kind)
		if m.img.ByDigest() || kind == imageset.KindRelease {
			digest.add(group, source, mirror)
		}
		if !m.img.ByDigest() {
			tag.add(group, source, mirror)
		}
	}
	return digest, tag, nil
}

// newMapping parses img's origin and destination under root.
func newMapping(img imageset.Image, root string) (mapping, error) {
	if img.Origin == "" {
		return mapping{}, fmt.Errorf("image %s (%s) has no origin reference: the image set is incomplete, resolve it again", img.Destination, img.Kind)
	}
	named, err := reference.ParseNormalizedNamed(strings.TrimPrefix(img.Origin, "docker://"))
	if err != nil {
		return mapping{}, fmt.Errorf("image origin %q (%s): not a valid image reference: %w", img.Origin, strings.Join(img.Why, ", "), err)
	}
	repo := img.DestinationRepo()
	if repo == "" {
		return mapping{}, fmt.Errorf("image %s has an empty destination: the image set is incomplete, resolve it again", img.Origin)
	}
	mirror := root + "/" + repo
	if m, err := reference.ParseNamed(mirror); err != nil || m.String() != mirror {
		if err == nil {
			err = fmt.Errorf("it is not a bare repository name")
		}
		return mapping{}, fmt.Errorf("mirror repository %q of image %s: %w", mirror, img.Origin, err)
	}
	return mapping{
		domain: reference.Domain(named),
		path:   strings.Split(reference.Path(named), "/"),
		mirror: mirror,
		img:    img,
	}, nil
}

// mirrorPrefix returns mirror without the trailing path components suffix,
// and whether that is possible while keeping a host and at least one path
// component.
func mirrorPrefix(mirror string, suffix []string) (string, bool) {
	if len(suffix) == 0 {
		return mirror, true
	}
	tail := "/" + strings.Join(suffix, "/")
	if !strings.HasSuffix(mirror, tail) {
		return "", false
	}
	prefix := strings.TrimSuffix(mirror, tail)
	return prefix, strings.Contains(prefix, "/")
}

// normaliseRoot strips a docker:// transport and trailing slashes from root
// and checks that it is a registry host with an optional path.
func normaliseRoot(root string) (string, error) {
	r := strings.TrimRight(strings.TrimPrefix(root, "docker://"), "/")
	if r == "" {
		return "", fmt.Errorf("mirror root is empty: give the destination registry, e.g. registry.example:5000/mirror")
	}
	probe := r + "/x"
	if named, err := reference.ParseNamed(probe); err != nil || named.String() != probe {
		return "", fmt.Errorf("mirror root %q is not a registry host with an optional repository path (e.g. registry.example:5000/mirror)", root)
	}
	return r, nil
}

// contentGroup is the IDMS/ITMS group of kind: release, operator or generic.
func contentGroup(kind imageset.Kind) string {
	switch g := kind.Group(); g {
	case "release", "operator":
		return g
	default:
		return "generic"
	}
}
