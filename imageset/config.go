package imageset

import (
	"fmt"
	"math"
	"net/url"
	"strings"

	"sigs.k8s.io/yaml"
)

// APIVersion is the only apiVersion gapmirror reads: oc-mirror v2's configuration format.
const APIVersion = "mirror.openshift.io/v2alpha1"

// apiVersionV1 is oc-mirror v1's configuration format, refused with an explanation.
const apiVersionV1 = "mirror.openshift.io/v1alpha2"

// imageSetConfigurationKind is the kind of a configuration that says what to mirror.
const imageSetConfigurationKind = "ImageSetConfiguration"

// DeleteImageSetConfigurationKind is the kind of a configuration that says what to delete from a mirror.
const DeleteImageSetConfigurationKind = "DeleteImageSetConfiguration"

// defaultArchiveSizeGiB is the archive chunk size used when archiveSize is 0 or unset.
const defaultArchiveSizeGiB = 500

// maxArchiveSizeGiB is the largest archiveSize whose size in bytes fits an int64.
const maxArchiveSizeGiB = math.MaxInt64 >> 30

// ImageSetConfiguration says what to mirror: releases, operator catalogs,
// additional images and helm charts (kind ImageSetConfiguration).
type ImageSetConfiguration struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	// ArchiveSize is the maximum size of one archive chunk, in GiB; 0 means defaultArchiveSizeGiB.
	ArchiveSize int64 `json:"archiveSize,omitempty"`
	// Mirror is the content to mirror.
	Mirror Mirror `json:"mirror"`

	src      *source
	warnings FieldErrors
}

// DeleteImageSetConfiguration says what to delete from a mirror registry
// (kind DeleteImageSetConfiguration).
type DeleteImageSetConfiguration struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	// Delete is the content to delete.
	Delete Delete `json:"delete"`

	src *source
}

// Mirror is the content section of an ImageSetConfiguration.
type Mirror struct {
	Platform         Platform          `json:"platform,omitzero"`
	Operators        []OperatorCatalog `json:"operators,omitempty"`
	AdditionalImages []AdditionalImage `json:"additionalImages,omitempty"`
	Helm             Helm              `json:"helm,omitzero"`
	// BlockedImages excludes every collected image whose origin or destination matches one of the regular expressions.
	BlockedImages []BlockedImage `json:"blockedImages,omitempty"`
	// Samples is accepted for compatibility with oc-mirror; it has no effect.
	Samples []SampleImage `json:"samples,omitempty"`
}

// Delete is the content section of a DeleteImageSetConfiguration. It has the
// same shape as Mirror (oc-mirror accepts blockedImages here too).
type Delete struct {
	Platform         Platform          `json:"platform,omitzero"`
	Operators        []OperatorCatalog `json:"operators,omitempty"`
	AdditionalImages []AdditionalImage `json:"additionalImages,omitempty"`
	Helm             Helm              `json:"helm,omitzero"`
	// BlockedImages keeps every matching image out of the delete list.
	BlockedImages []BlockedImage `json:"blockedImages,omitempty"`
	// Samples is accepted for compatibility with oc-mirror; it has no effect.
	Samples []SampleImage `json:"samples,omitempty"`
}

// Platform selects OpenShift/OKD release payloads (mirror.platform).
type Platform struct {
	// Channels are the update channels whose releases are mirrored.
	Channels []ReleaseChannel `json:"channels,omitempty"`
	// Graph asks for the update-graph data image (for an OpenShift Update Service).
	Graph bool `json:"graph,omitempty"`
	// Architectures are payload architectures: amd64, arm64, ppc64le, s390x or multi.
	// Deprecated by oc-mirror in favour of Platforms; the two are exclusive.
	Architectures []string `json:"architectures,omitempty"`
	// Platforms selects the multi payload and copies only these platforms of it (sparse manifest list).
	Platforms []ImagePlatform `json:"platforms,omitempty"`
	// Release is one release image by tag or digest; when set, Channels are ignored.
	Release string `json:"release,omitempty"`
	// KubeVirtContainer also mirrors the RHCOS KubeVirt container image named in the payload.
	KubeVirtContainer bool `json:"kubeVirtContainer,omitempty"`
}

// ReleaseType is the product a release channel belongs to: ocp (default) or okd.
type ReleaseType string

// Release channel types.
const (
	releaseTypeOCP ReleaseType = "ocp"
	ReleaseTypeOKD ReleaseType = "okd"
)

// ReleaseChannel is one update channel of mirror.platform.channels.
type ReleaseChannel struct {
	// Name is the channel name, e.g. stable-4.18.
	Name string `json:"name"`
	// Type is ocp (the default when empty) or okd.
	Type ReleaseType `json:"type,omitempty"`
	// MinVersion is the lowest release to mirror (x.y.z).
	MinVersion string `json:"minVersion,omitempty"`
	// MaxVersion is the highest release to mirror (x.y.z).
	MaxVersion string `json:"maxVersion,omitempty"`
	// ShortestPath mirrors only the releases on the shortest upgrade path from MinVersion to MaxVersion.
	ShortestPath bool `json:"shortestPath,omitempty"`
	// Full mirrors every release of the channel (within MinVersion/MaxVersion when set).
	Full bool `json:"full,omitempty"`
}

// ReleaseType returns the channel's type with the default applied.
func (r ReleaseChannel) ReleaseType() ReleaseType {
	if r.Type == "" {
		return releaseTypeOCP
	}
	return r.Type
}

// OperatorCatalog is one operator catalog of mirror.operators and what to take from it.
type OperatorCatalog struct {
	// Catalog is the catalog image reference, or oci:///abs/path / oci:rel/path for an OCI layout on disk.
	Catalog string `json:"catalog"`
	// TargetCatalog replaces the catalog's repository path on the mirror (path only, no tag or digest).
	TargetCatalog string `json:"targetCatalog,omitempty"`
	// TargetTag is the tag of the mirrored catalog.
	TargetTag string `json:"targetTag,omitempty"`
	// Full without packages mirrors the catalog unfiltered; with packages, every bundle of the selected channels.
	Full bool `json:"full,omitempty"`
	// Packages selects packages; none means the head of every channel of every package.
	Packages []Package `json:"packages,omitempty"`
	// SkipDependencies is accepted for compatibility with oc-mirror.
	SkipDependencies bool `json:"skipDependencies,omitempty"`
	// TargetCatalogSourceTemplate is the path of a CatalogSource YAML used as template for the generated one.
	TargetCatalogSourceTemplate string `json:"targetCatalogSourceTemplate,omitempty"`
	// Platforms restricts the catalog and all its images to these platforms.
	Platforms []ImagePlatform `json:"platforms,omitempty"`
}

// OCILayoutPath returns the on-disk OCI layout path when Catalog is an
// oci: reference ("oci:///abs/path" gives "/abs/path", "oci:rel" gives "rel").
func (o OperatorCatalog) OCILayoutPath() (string, bool) {
	rest, ok := strings.CutPrefix(o.Catalog, "oci:")
	if !ok {
		return "", false
	}
	if abs, ok := strings.CutPrefix(rest, "//"); ok {
		rest = abs
	}
	return rest, true
}

// Package selects one operator package of a catalog.
type Package struct {
	// Name is the package name.
	Name string `json:"name"`
	// Channels selects channels; none means every channel.
	Channels []Channel `json:"channels,omitempty"`
	// DefaultChannel overrides the package's default channel (needed when filtering drops it).
	DefaultChannel string `json:"defaultChannel,omitempty"`
	// MinVersion is the lowest bundle version, applied to each selected channel.
	MinVersion string `json:"minVersion,omitempty"`
	// MaxVersion is the highest bundle version, applied to each selected channel.
	MaxVersion string `json:"maxVersion,omitempty"`
	// VersionRange is an OLM v1 style version range (gapmirror extension), exclusive with MinVersion/MaxVersion.
	VersionRange string `json:"versionRange,omitempty"`
	// Bundles selects explicit bundles by name (gapmirror extension).
	Bundles []Bundle `json:"bundles,omitempty"`
}

// Channel selects one channel of an operator package.
type Channel struct {
	// Name is the channel name.
	Name string `json:"name"`
	// MinVersion is the lowest bundle version in the channel.
	MinVersion string `json:"minVersion,omitempty"`
	// MaxVersion is the highest bundle version in the channel.
	MaxVersion string `json:"maxVersion,omitempty"`
	// VersionRange is an OLM v1 style version range (gapmirror extension), exclusive with MinVersion/MaxVersion.
	VersionRange string `json:"versionRange,omitempty"`
}

// Bundle names one operator bundle to mirror (gapmirror extension).
type Bundle struct {
	// Name is the bundle (olm.bundle) name, e.g. etcdoperator.v0.9.4.
	Name string `json:"name"`
}

// hasVersionFilter reports whether the package narrows its bundles by version
// or by name, at package or channel level.
func (p Package) hasVersionFilter() bool {
	if p.MinVersion != "" || p.MaxVersion != "" || p.VersionRange != "" || len(p.Bundles) > 0 {
		return true
	}
	for _, c := range p.Channels {
		if c.MinVersion != "" || c.MaxVersion != "" || c.VersionRange != "" {
			return true
		}
	}
	return false
}

// AdditionalImage is one image of mirror.additionalImages.
type AdditionalImage struct {
	// Name is the image reference; without tag or digest it means :latest.
	Name string `json:"name"`
	// TargetRepo replaces the repository path on the mirror (path only, no tag or digest).
	TargetRepo string `json:"targetRepo,omitempty"`
	// TargetTag is the tag on the mirror.
	TargetTag string `json:"targetTag,omitempty"`
	// Platforms restricts a multi-platform image to these platforms.
	Platforms []ImagePlatform `json:"platforms,omitempty"`
}

// ImagePlatform is an os/architecture pair selecting instances of a manifest list.
type ImagePlatform struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
}

// String returns the platform as os/architecture.
func (p ImagePlatform) String() string { return p.OS + "/" + p.Architecture }

// Helm selects helm charts whose images are mirrored (mirror.helm).
type Helm struct {
	Repositories []HelmRepository `json:"repositories,omitempty"`
	Local        []LocalHelmChart `json:"local,omitempty"`
}

// HelmRepository is one chart repository and the charts taken from it.
type HelmRepository struct {
	Name string `json:"name"`
	URL  string `json:"url"`
	// Charts selects charts; none means every version of every chart in the repository index.
	Charts []HelmChart `json:"charts,omitempty"`
}

// HelmChart is one chart of a helm repository.
type HelmChart struct {
	Name string `json:"name"`
	// Version is the chart version; empty means the latest.
	Version string `json:"version,omitempty"`
	// ImagePaths are extra JSONPath expressions locating images in the rendered manifests.
	ImagePaths []string        `json:"imagePaths,omitempty"`
	Platforms  []ImagePlatform `json:"platforms,omitempty"`
}

// LocalHelmChart is a chart directory or archive on disk.
type LocalHelmChart struct {
	Name string `json:"name"`
	Path string `json:"path"`
	// ImagePaths are extra JSONPath expressions locating images in the rendered manifests.
	ImagePaths []string        `json:"imagePaths,omitempty"`
	Platforms  []ImagePlatform `json:"platforms,omitempty"`
}

// BlockedImage is a Go regular expression matched (unanchored) against image
// origins and destinations; matching images are left out.
type BlockedImage struct {
	Name string `json:"name"`
}

// SampleImage is an entry of mirror.samples (accepted, not implemented, as in oc-mirror).
type SampleImage struct {
	Name string `json:"name"`
}

// ArchiveSizeBytes is the maximum size of one archive chunk in bytes.
func (c *ImageSetConfiguration) ArchiveSizeBytes() int64 {
	gib := c.ArchiveSize
	if gib <= 0 {
		gib = defaultArchiveSizeGiB
	}
	if gib > maxArchiveSizeGiB {
		return math.MaxInt64
	}
	return gib << 30
}

// File is the path the configuration was loaded from ("" when built in code).
func (c *ImageSetConfiguration) File() string { return c.src.fileName() }

// Line is the line of a field path (e.g. mirror.platform.channels[0].name),
// or of its closest parent the file has; 0 when unknown.
func (c *ImageSetConfiguration) Line(path string) int { return c.src.line(path) }

// file is the path the configuration was loaded from ("" when built in code).
func (c *DeleteImageSetConfiguration) file() string { return c.src.fileName() }

// MarshalYAML returns the YAML form of a configuration (or any value with json tags),
// e.g. for the pinned copy kept with a workspace or archive.
func MarshalYAML(v any) ([]byte, error) {
	out, err := yaml.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("marshalling configuration to YAML: %w", err)
	}
	return out, nil
}

// Redacted is cfg as it may be stored or carried across the air gap: the
// password of every helm repository URL (https://user:pass@host/…) is
// replaced, since archives and workspaces are not secret stores.
func Redacted(cfg *ImageSetConfiguration) *ImageSetConfiguration {
	out := *cfg
	out.Mirror.Helm.Repositories = append([]HelmRepository(nil), cfg.Mirror.Helm.Repositories...)
	for i := range out.Mirror.Helm.Repositories {
		out.Mirror.Helm.Repositories[i].URL = redactURL(out.Mirror.Helm.Repositories[i].URL)
	}
	return &out
}

// redactURL hides the password of a URL's user information.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "REDACTED")
	}
	return u.String()
}
