package sigstore

import (
	"context"
	"fmt"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/failure"
	"github.com/gapmirror/gapmirror/imageset"
)

// maxReferrerDepth bounds how far referrers of referrers are followed (an
// image, its SBOM, the SBOM's signature, a countersignature): a registry
// answering in a cycle cannot keep the search going.
const maxReferrerDepth = 4

// ReferrerStats counts what a referrers search cost and found.
type ReferrerStats struct {
	// Lookups is the number of referrers lists asked for (one request each
	// on a registry with the referrers API or one known to lack it; the
	// first on a registry without it costs one more).
	Lookups int
	// Found counts the referrers added, by kind (imageset.ReferrerKind).
	Found map[string]int
	// Skipped counts the referrers found of kinds --referrers leaves out.
	Skipped int
	Failed  int
}

// String is "signatures=2 sbom=1", the kinds found.
func (st ReferrerStats) String() string {
	var out []string
	for _, k := range imageset.ReferrerKindNames {
		if st.Found[k] > 0 {
			out = append(out, fmt.Sprintf("%s=%d", k, st.Found[k]))
		}
	}
	return strings.Join(out, " ")
}

// referrerLookup is one "what refers to repo@manifest" question, asked of
// the image the manifest belongs to (its pull sources).
type referrerLookup struct {
	signatureLookup
	owner int // index into the images
}

// referrerSearch is what upstream lists as referring to a set's images,
// of the kinds chosen, before the set takes them.
type referrerSearch struct {
	// found[k] lists the referrers wanted of k, in the order listed.
	found    map[signatureLookup][]v1.Descriptor
	warnings []string
	st       ReferrerStats
}

// lookupReferrers lists upstream the OCI 1.1 referrers (registryapi's
// Client.Referrers: the referrers API, else the referrers tag schema) of
// every image and platform manifest of images, and of those referrers in
// turn, keeping those of the kinds chosen. A list that cannot be read is
// a warning (see add) and leaves the image itself alone. Lookups run
// twice the copy's parallelism at once, as the signature lookups do.
func (s Search) lookupReferrers(ctx context.Context, images []target, kidsOf [][]digest.Digest, choice imageset.ReferrerChoice) *referrerSearch {
	rs := &referrerSearch{found: map[signatureLookup][]v1.Descriptor{}, st: ReferrerStats{Found: map[string]int{}}}
	st := &rs.st

	type answer struct {
		refs []v1.Descriptor
		err  error
	}
	answers := map[signatureLookup]*answer{}
	// The subjects of the first round: every image and platform manifest.
	var round []referrerLookup
	for i, tg := range images {
		for _, d := range append([]digest.Digest{tg.manifest}, kidsOf[i]...) {
			k := signatureLookup{repo: tg.repo, manifest: d}
			if answers[k] == nil {
				answers[k] = &answer{}
				round = append(round, referrerLookup{k, i})
			}
		}
	}
	for depth := 0; len(round) > 0 && depth < maxReferrerDepth; depth++ {
		st.Lookups += len(round)
		parallelDo(len(round), 2*s.Parallel, func(i int) {
			l := round[i]
			a := answers[l.signatureLookup]
			a.refs, a.err = s.Upstream.Referrers(ctx, images[l.owner].img, l.manifest, "")
			if a.err != nil {
				a.err = failure.Explain(a.err, l.repo+"@"+l.manifest.String())
			}
		})
		var next []referrerLookup
		for _, l := range round {
			a := answers[l.signatureLookup]
			if a.err != nil {
				st.Failed++
				if !failure.Classify(a.err).Registry {
					rs.warnings = append(rs.warnings, fmt.Sprintf("referrers of %s@%s could not be listed, so they are not mirrored (the image is): %v; if the registry is at fault run again later, or pass --referrers=none to stop looking", l.repo, l.manifest, a.err))
				}
				continue
			}
			for _, r := range a.refs {
				if !choice.Wants(r.ArtifactType, r.Annotations[imageset.PredicateTypeAnnotation]) {
					st.Skipped++
					continue
				}
				d := digest.Digest(r.Digest.String())
				rs.found[l.signatureLookup] = append(rs.found[l.signatureLookup], r)
				k := signatureLookup{repo: l.repo, manifest: d}
				if answers[k] == nil {
					answers[k] = &answer{}
					next = append(next, referrerLookup{k, l.owner})
				}
			}
		}
		round = next
	}
	return rs
}

// add adds the referrers found to set, each to be copied by digest into
// its image's repository: each image takes the referrers of its
// manifests, and of theirs.
func (rs *referrerSearch) add(set *imageset.Set, images []target, kidsOf [][]digest.Digest, res *imageset.Resolution) ReferrerStats {
	res.Warnings = append(res.Warnings, rs.warnings...)
	st := rs.st
	found := rs.found
	for i, tg := range images {
		queue := append([]digest.Digest{tg.manifest}, kidsOf[i]...)
		seen := map[digest.Digest]bool{}
		for len(queue) > 0 {
			subject := queue[0]
			queue = queue[1:]
			if seen[subject] {
				continue
			}
			seen[subject] = true
			for _, r := range found[signatureLookup{repo: tg.repo, manifest: subject}] {
				d := digest.Digest(r.Digest.String())
				queue = append(queue, d)
				what := tg.img.Origin
				if subject != tg.manifest {
					what = fmt.Sprintf("%s (manifest %s)", tg.img.Origin, subject)
				}
				pt := r.Annotations[imageset.PredicateTypeAnnotation]
				kind := imageset.ReferrerKind(r.ArtifactType, pt)
				ref := imageset.Image{
					Source:        tg.repo + "@" + d.String(),
					Origin:        tg.repo + "@" + d.String(),
					Digest:        d.String(),
					Destination:   tg.img.DestinationRepo() + "@" + d.String(),
					Kind:          imageset.KindReferrer,
					Why:           []string{fmt.Sprintf("referrer (%s, %s) of %s", kind, r.ArtifactType, what)},
					AlsoKinds:     append([]imageset.Kind{tg.img.Kind}, tg.img.AlsoKinds...),
					SignatureOf:   tg.img.Digest,
					Subject:       subject.String(),
					ArtifactType:  r.ArtifactType,
					PredicateType: pt,
					// At a mirror without the referrers API the index
					// would go to the tag the image itself has.
					SubjectTagged: subject == tg.manifest && tg.img.DestinationTag() == imageset.DigestTag(subject),
				}
				if err := set.Add(ref); err != nil {
					res.Warnings = append(res.Warnings, fmt.Sprintf("referrer %s of %s not mirrored: %v", d, what, err))
				}
			}
		}
	}
	set.Sort()
	for k, n := range set.Referrers() {
		st.Found[k] = n
	}
	return st
}

// ReferrerKinds lists the kinds of referrers in counts ("2 signatures, 1 sbom"), "" when none.
func ReferrerKinds(counts map[string]int) string {
	var out []string
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool { return kindOrder(keys[a]) < kindOrder(keys[b]) })
	for _, k := range keys {
		if counts[k] > 0 {
			out = append(out, fmt.Sprintf("%d %s", counts[k], k))
		}
	}
	return strings.Join(out, ", ")
}

func kindOrder(k string) int {
	for i, n := range imageset.ReferrerKindNames {
		if n == k {
			return i
		}
	}
	return len(imageset.ReferrerKindNames)
}
