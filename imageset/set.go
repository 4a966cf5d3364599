package imageset

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// SetFormatVersion is bumped whenever the serialised Set changes incompatibly.
// 2: Image gained platforms (sparse copies), signatureOf and unflattened.
// 3: referrers (kind referrer, destination repo@digest, subject, artifactType).
const SetFormatVersion = 3

// Kind says what role an image plays in the image set. It decides the exit
// code bit when the image fails and the IDMS/ITMS group it lands in.
type Kind string

// Kinds of images in a Set.
const (
	KindAdditional       Kind = "additional"
	KindOperatorCatalog  Kind = "operator-catalog"
	KindOperatorBundle   Kind = "operator-bundle"
	KindOperatorRelated  Kind = "operator-related"
	KindRelease          Kind = "release"
	KindReleaseComponent Kind = "release-component"
	KindReleaseGraph     Kind = "release-graph"
	KindHelm             Kind = "helm"
	// KindHelmChart is a helm chart itself, as an OCI artifact (helm's
	// config and chart-layer media types) served from the mirror for
	// `helm install oci://…`; never in IDMS/ITMS.
	KindHelmChart Kind = "helm-chart"
	// KindSignature is a sigstore signature (the cosign "sha256-<hex>.sig"
	// tag) of another image of the set: copied like an image, never in
	// IDMS/ITMS, counted apart in summaries.
	KindSignature Kind = "signature"
	// KindReferrer is an OCI 1.1 referrer of another image of the set (a
	// cosign v3 bundle, an attestation, an SBOM, a Notation signature: a
	// manifest whose subject is the image or one of its platform
	// manifests, or another referrer): copied by digest into the image's
	// repository, without a tag (its Destination is repo@digest), never in
	// IDMS/ITMS, counted apart by kind in summaries.
	KindReferrer Kind = "referrer"
)

// Attached reports whether k is something attached to another image of the
// set (a signature or a referrer): it belongs to that image (SignatureOf),
// fails for it and is pruned with it.
func (k Kind) Attached() bool { return k == KindSignature || k == KindReferrer }

// Group is the content type a kind belongs to (release, operator, additional, helm).
func (k Kind) Group() string {
	switch k {
	case KindRelease, KindReleaseComponent, KindReleaseGraph:
		return "release"
	case KindOperatorCatalog, KindOperatorBundle, KindOperatorRelated:
		return "operator"
	case KindHelm, KindHelmChart:
		return "helm"
	case KindSignature, KindReferrer:
		// A signature fails for the image it signs: its AlsoKinds carry
		// that image's roles and so the exit code bits.
		return "signature"
	default:
		return "additional"
	}
}

// ExitCode is the exit code of a run whose failures hit groups, as mirror
// and verify set it: a bit per content group (2 release, 4 operator, 8
// additional, 16 helm; any other group, as a signature's own, counts with
// the additional images), 1 when groups is empty.
func ExitCode(groups []string) int {
	code := 0
	for _, g := range groups {
		switch g {
		case "release":
			code |= 2
		case "operator":
			code |= 4
		case "helm":
			code |= 16
		default:
			code |= 8
		}
	}
	if code == 0 {
		code = 1
	}
	return code
}

// Image is one image of a Set: where it comes from, pinned to a digest, and
// where it goes, relative to the mirror root.
type Image struct {
	// Source is the upstream reference pinned by digest: registry/repo@sha256:…
	Source string `json:"source"`
	// Origin is the reference as the configuration (or a catalog/payload) wrote it:
	// by tag, by digest, or both. IDMS/ITMS are derived from it.
	Origin string `json:"origin"`
	// Digest is the manifest digest (of the index for multi-arch images).
	Digest string `json:"digest"`
	// Destination is repo path and tag under the mirror root, e.g. "ubi9/ubi:9.4".
	// Every image has a tag at the destination so that registries which
	// collect untagged manifests keep it.
	Destination string `json:"destination"`
	// Unflattened is the destination before --max-nested-paths shortened
	// it (FlattenDestinations); empty when it did not change.
	Unflattened string `json:"unflattened,omitempty"`
	// Kind is the image's role.
	Kind Kind `json:"kind"`
	// Why lists the reasons the image is in the set, e.g. "mirror.additionalImages[2]".
	Why []string `json:"why,omitempty"`
	// AlsoKinds are the roles other sections need the same image in (an
	// operand that is also an additional image): its failure concerns them too.
	AlsoKinds []Kind `json:"alsoKinds,omitempty"`
	// Built marks an image gapmirror made (a filtered catalog, a graph-data
	// image): it exists only in the local store, never upstream, so it is
	// read from there and left out of IDMS/ITMS.
	Built bool `json:"built,omitempty"`
	// Platforms, when set, makes a multi-platform image a sparse manifest
	// list: its index is copied byte for byte (same digest), but only the
	// instances of these platforms ("os/architecture", sorted) with their
	// blobs. A single-platform image is copied whole whatever its platform.
	Platforms []string `json:"platforms,omitempty"`
	// SignatureOf is, for a signature or a referrer, the digest of the Set
	// image it belongs to (the index when a platform manifest, or a
	// referrer of the image, is what was signed): prune keeps the
	// signatures and referrers of images that stay.
	SignatureOf string `json:"signatureOf,omitempty"`
	// Subject is, for a referrer, the digest of the manifest it refers to
	// (its manifest's subject): the referrers tag schema index it is
	// listed in at a destination without the referrers API.
	Subject string `json:"subject,omitempty"`
	// ArtifactType is, for a referrer, its artifact type (its manifest's
	// artifactType, else its config's media type).
	ArtifactType string `json:"artifactType,omitempty"`
	// PredicateType is, for a referrer that is a cosign bundle, what it
	// signs (its dev.sigstore.bundle.predicateType annotation): a
	// signature's predicate or an attestation's.
	PredicateType string `json:"predicateType,omitempty"`
	// SubjectTagged marks a referrer whose subject is tagged at the
	// destination by its own digest (sha256-<hex>, oc-mirror's tag of an
	// image named by digest), the tag the referrers tag schema would put
	// the index in: at a destination without the referrers API the
	// index is not written there (the image keeps its tag).
	SubjectTagged bool `json:"subjectTagged,omitempty"`
}

// WantsPlatform reports whether an index instance of platform p is copied:
// every instance when Platforms is empty, else only those of a listed
// os/architecture (any variant). Instances without a platform (attestations)
// belong to no listed platform and are left out of a sparse copy.
func (i Image) WantsPlatform(p *ocispec.Platform) bool {
	if len(i.Platforms) == 0 {
		return true
	}
	return p != nil && slices.Contains(i.Platforms, p.OS+"/"+p.Architecture)
}

// PlatformNames turns configured platforms into the sorted, deduplicated
// "os/architecture" list an Image carries.
func PlatformNames(ps []ImagePlatform) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// MergePlatforms is the platform filter of an image needed (or copied) twice:
// whole (nil) if either is whole, else the union.
func MergePlatforms(a, b []string) []string {
	if len(a) == 0 || len(b) == 0 {
		return nil
	}
	out := append(append([]string(nil), a...), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// Groups are the content groups needing the image (Kind's first, then AlsoKinds'), each once.
// A signature has those of the images it signs.
func (i Image) Groups() []string {
	var groups []string
	if !i.Kind.Attached() || len(i.AlsoKinds) == 0 {
		groups = append(groups, i.Kind.Group())
	}
	for _, k := range i.AlsoKinds {
		if !slices.Contains(groups, k.Group()) {
			groups = append(groups, k.Group())
		}
	}
	return groups
}

// DestinationRepo is the destination repository path (without tag).
func (i Image) DestinationRepo() string {
	repo, _ := splitTag(i.Destination)
	return repo
}

// DestinationTag is the destination tag.
func (i Image) DestinationTag() string {
	_, tag := splitTag(i.Destination)
	return tag
}

// ByDigest reports whether the origin names a digest (and so belongs in IDMS
// rather than ITMS).
func (i Image) ByDigest() bool { return strings.Contains(i.Origin, "@") }

func splitTag(s string) (repo, tag string) {
	if repo, _, ok := strings.Cut(s, "@"); ok {
		return repo, "" // a referrer, by digest
	}
	slash := strings.LastIndex(s, "/")
	colon := strings.LastIndex(s, ":")
	if colon > slash {
		return s[:colon], s[colon+1:]
	}
	return s, ""
}

// Set is every image an image set needs, deterministic and serialisable: it
// is the plan (--dry-run), the archive index's content list, what prune diffs
// and what generate reads.
type Set struct {
	FormatVersion int     `json:"formatVersion"`
	Images        []Image `json:"images"`
}

// Add puts img into the set. An image already present under the same
// destination only gains the new reasons (and platforms); the same destination with another
// digest is an error, since one tag cannot hold two images.
func (s *Set) Add(img Image) error {
	for i := range s.Images {
		have := &s.Images[i]
		if have.Destination != img.Destination {
			continue
		}
		if have.Digest != img.Digest {
			return fmt.Errorf("destination %s is claimed by %s (%s) and %s (%s)",
				img.Destination, have.Origin, strings.Join(have.Why, ", "), img.Origin, strings.Join(img.Why, ", "))
		}
		have.merge(img)
		return nil
	}
	s.Images = append(s.Images, img)
	return nil
}

// merge adds the reasons and roles of img, the same image, to i.
func (i *Image) merge(img Image) {
	i.Why = appendUnique(i.Why, img.Why...)
	i.Platforms = MergePlatforms(i.Platforms, img.Platforms)
	for _, k := range append([]Kind{img.Kind}, img.AlsoKinds...) {
		if k != i.Kind && !slices.Contains(i.AlsoKinds, k) {
			i.AlsoKinds = append(i.AlsoKinds, k)
		}
	}
}

// Signatures counts the signature entries of the set.
func (s *Set) Signatures() int { return countSignatures(s.Images) }

// countSignatures counts the signatures among images.
func countSignatures(images []Image) int {
	n := 0
	for _, img := range images {
		if img.Kind == KindSignature {
			n++
		}
	}
	return n
}

// Referrers counts the referrer entries of the set by kind (ReferrerKind).
func (s *Set) Referrers() map[string]int {
	if s == nil {
		return nil
	}
	n := map[string]int{}
	for _, img := range s.Images {
		if img.Kind == KindReferrer {
			n[ReferrerKind(img.ArtifactType, img.PredicateType)]++
		}
	}
	return n
}

// Sort orders images by destination so that equal sets serialise equally.
func (s *Set) Sort() {
	sort.Slice(s.Images, func(a, b int) bool { return s.Images[a].Destination < s.Images[b].Destination })
}

// Marshal returns the indented JSON form of the set, sorted.
func (s *Set) Marshal() ([]byte, error) {
	s.Sort()
	if s.FormatVersion == 0 {
		s.FormatVersion = SetFormatVersion
	}
	return json.MarshalIndent(s, "", "  ")
}

// unmarshalSet parses a Set written by Marshal.
func unmarshalSet(data []byte) (*Set, error) {
	var s Set
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("parsing image set: %w", err)
	}
	if s.FormatVersion > SetFormatVersion {
		return nil, fmt.Errorf("image set format %d is newer than this gapmirror understands (%d): use a newer gapmirror", s.FormatVersion, SetFormatVersion)
	}
	return &s, nil
}

func appendUnique(list []string, more ...string) []string {
outer:
	for _, m := range more {
		for _, l := range list {
			if l == m {
				continue outer
			}
		}
		list = append(list, m)
	}
	return list
}
