package release

import "strings"

// Destinations under the mirror root, as oc-mirror v2 names them, so that
// mirrors made by either tool look the same to clusters and to users.
const (
	// ReleaseImageRepository holds release images, tagged <version>-<arch>.
	ReleaseImageRepository = "openshift/release-images"
	// ComponentRepository holds release components, tagged
	// <version>-<arch>-<component>.
	ComponentRepository = "openshift/release"
	// GraphImageDestination is the update graph data image the disconnected
	// OpenShift Update Service reads.
	GraphImageDestination = "openshift/graph-image:latest"
)

// tagArchOf returns the release tag suffix of an architecture written in any
// accepted spelling (amd64 or x86_64 give x86_64); an unknown one is kept.
func tagArchOf(arch string) string {
	if ga, err := GraphArch(arch); err == nil {
		return TagArch(ga)
	}
	return arch
}

// releaseTag is the tag of an OpenShift release image: <version>-<arch tag>,
// e.g. 4.18.1-x86_64 for amd64, 4.18.1-multi.
func releaseTag(version, arch string) string {
	return version + "-" + tagArchOf(arch)
}

// TagVersion is the version of a release tag releaseTag made (4.18.1 of
// 4.18.1-x86_64); a tag without an architecture suffix is returned whole.
func TagVersion(tag string) string {
	for _, suffix := range releaseTagArch {
		if v, ok := strings.CutSuffix(tag, "-"+suffix); ok {
			return v
		}
	}
	return tag
}

// ReleaseImageDestination is where a release image goes under the mirror
// root: openshift/release-images:<version>-<arch tag>, e.g.
// openshift/release-images:4.18.1-x86_64.
func ReleaseImageDestination(version, arch string) string {
	return ReleaseImageRepository + ":" + releaseTag(version, arch)
}

// componentTag is the destination tag of a release component:
// <version>-<arch tag>-<component>, e.g. 4.18.1-x86_64-etcd.
func componentTag(version, arch, component string) string {
	return releaseTag(version, arch) + "-" + component
}

// ComponentDestination is where a release component goes under the mirror
// root: openshift/release:<version>-<arch tag>-<component>, e.g.
// openshift/release:4.18.1-x86_64-etcd; the KubeVirt container disk is the
// component KubeVirtComponentName.
func ComponentDestination(version, arch, component string) string {
	return ComponentRepository + ":" + componentTag(version, arch, component)
}

// Destination is where the release image goes under the mirror root:
// openshift/release-images:<Tag()> (OKD amd64 releases keep their bare
// version as tag).
func (r Release) Destination() string {
	return ReleaseImageRepository + ":" + r.Tag()
}

// ComponentDestination is where the release's component goes under the
// mirror root: openshift/release:<Tag()>-<component>.
func (r Release) ComponentDestination(component string) string {
	return ComponentRepository + ":" + r.Tag() + "-" + component
}
