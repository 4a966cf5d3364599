package imageset

import "strings"

// dockerTransport is the transport prefix oc-mirror accepts in front of
// registry image references ("docker://quay.io/org/app:v1", the form of its
// own targetRepo/targetTag examples). gapmirror reads such names as the
// plain reference.
const dockerTransport = "docker://"

// ociTransport prefixes an OCI image layout on disk: "oci:///abs/path" or
// "oci:relative/path".
const ociTransport = "oci:"

// normaliseNames strips the docker:// transport from every image name of
// the content section where oc-mirror accepts it: the release image,
// catalogs, additional images and blocked-image expressions (oc-mirror
// matches those against names with the transport stripped).
func normaliseNames(release *string, catalogs []OperatorCatalog, additional []AdditionalImage, blocked []BlockedImage) {
	*release = strings.TrimPrefix(*release, dockerTransport)
	for i := range catalogs {
		catalogs[i].Catalog = strings.TrimPrefix(catalogs[i].Catalog, dockerTransport)
	}
	for i := range additional {
		additional[i].Name = strings.TrimPrefix(additional[i].Name, dockerTransport)
	}
	for i := range blocked {
		blocked[i].Name = strings.TrimPrefix(blocked[i].Name, dockerTransport)
	}
}

// layoutPath returns the directory of an oci: name ("oci:///abs" gives
// "/abs", "oci:rel" gives "rel").
func layoutPath(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, ociTransport)
	if !ok {
		return "", false
	}
	if abs, ok := strings.CutPrefix(rest, "//"); ok {
		rest = abs
	}
	return rest, true
}

// OCILayoutPath returns the on-disk OCI layout directory when the image is
// an oci: name (an image layout on disk, mirrored by targetRepo/targetTag).
func (a AdditionalImage) OCILayoutPath() (string, bool) { return layoutPath(a.Name) }

// ServedAsIs reports whether nothing pulls the image by an upstream name that
// IDMS/ITMS would redirect: a helm chart (helm pulls it from the mirror) or
// an image read from an OCI layout on disk.
func (i Image) ServedAsIs() bool {
	return i.Kind == KindHelmChart || strings.HasPrefix(i.Origin, ociTransport)
}
