package generate

import (
	"reflect"
	"testing"

	"github.com/gapmirror/gapmirror/imageset"
)

func TestManifests(t *testing.T) {
	set := newSet(
		img(kRel, "quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64", "openshift/release-images:4.18.1-x86_64"),
		img(kComp, "quay.io/openshift-release-dev/ocp-v4.0-art-dev@"+dg("a"), "openshift/release:4.18.1-x86_64-etcd"),
		img(kGraph, "localhost/openshift/graph-image:latest", "openshift/graph-image:latest"),
		img(kCatalog, "registry.redhat.io/redhat/redhat-operator-index:v4.18", "redhat/redhat-operator-index:v4.18"),
		img(kBundle, "registry.redhat.io/rhel9/op-bundle@"+dg("1"), "rhel9/op-bundle:1"),
		img(kAdd, "quay.io/ns/app:1", "ns/app:1"),
	)
	catalogs, err := CatalogsFromSet(set, testRoot)
	if err != nil {
		t.Fatal(err)
	}
	in := Input{
		Set:               set,
		MirrorRoot:        testRoot,
		Catalogs:          catalogs,
		ReleaseSignatures: map[string][][]byte{dg("b"): {[]byte("sig")}},
		Meta:              testMeta,
	}
	files, err := Manifests(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"cc-redhat-operator-index-v4-18.yaml",
		"cs-redhat-operator-index-v4-18.yaml",
		fileIDMS, fileITMS, FileSignaturesJSON, fileSignatures, fileUpdateService,
	}
	if got := files.names(); !reflect.DeepEqual(got, want) {
		t.Errorf("files = %v\nwant %v", got, want)
	}
	for _, n := range files.names() {
		checkDocuments(t, n, files[n])
	}

	// Two catalogs that derive the same name must be told apart by the user.
	in.Catalogs = append(in.Catalogs, Catalog{Image: "other.example/redhat/redhat-operator-index:v4.18", Digest: dg("3"), Origin: "other.example/redhat/redhat-operator-index:v4.18"})
	_, err = Manifests(in)
	mustFail(t, err, "other.example/redhat/redhat-operator-index:v4.18", "cs-redhat-operator-index-v4-18.yaml")

	// Errors from every part surface.
	_, err = Manifests(Input{Set: &imageset.Set{Images: []imageset.Image{img(kAdd, "", "x:1")}}, MirrorRoot: testRoot})
	mustFail(t, err, "mirror sets", "no origin")
}
