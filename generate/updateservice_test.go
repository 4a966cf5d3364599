package generate

import (
	"testing"

	"sigs.k8s.io/yaml"
)

func TestUpdateServiceGolden(t *testing.T) {
	set := newSet(
		img(kRel, "quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64", "openshift/release-images:4.18.1-x86_64"),
		img(kComp, "quay.io/openshift-release-dev/ocp-v4.0-art-dev@"+dg("a"), "openshift/release:4.18.1-x86_64-etcd"),
		img(kGraph, "localhost/openshift/graph-image:latest", "openshift/graph-image:latest"),
	)
	files, err := UpdateService(set, testRoot, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	assertGolden(t, "updateservice", files)
}

func TestUpdateService(t *testing.T) {
	t.Run("no graph image, no file", func(t *testing.T) {
		files, err := UpdateService(newSet(img(kRel, "quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64", "openshift/release-images:4.18.1-x86_64")), testRoot, testMeta)
		if err != nil || len(files) != 0 {
			t.Fatalf("want no file and no error, got %v, %v", files.names(), err)
		}
	})
	t.Run("releases follow the Set", func(t *testing.T) {
		set := newSet(
			img(kRel, "quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64", "ocp/releases:4.18.1-x86_64"),
			img(kGraph, "localhost/openshift/graph-image:latest", "ocp/graph:v1"),
		)
		files, err := UpdateService(set, testRoot, Meta{})
		if err != nil {
			t.Fatal(err)
		}
		var us updateService
		if err := yaml.Unmarshal(files[fileUpdateService], &us); err != nil {
			t.Fatal(err)
		}
		if us.Spec.Releases != testRoot+"/ocp/releases" || us.Spec.GraphDataImage != testRoot+"/ocp/graph:v1" || us.Spec.Replicas != 2 {
			t.Errorf("got %+v", us.Spec)
		}
	})
	t.Run("no release image: conventional repository", func(t *testing.T) {
		files, err := UpdateService(newSet(img(kGraph, "localhost/openshift/graph-image:latest", "openshift/graph-image:latest")), testRoot, Meta{})
		if err != nil {
			t.Fatal(err)
		}
		var us updateService
		if err := yaml.Unmarshal(files[fileUpdateService], &us); err != nil {
			t.Fatal(err)
		}
		if us.Spec.Releases != testRoot+"/openshift/release-images" {
			t.Errorf("releases = %s", us.Spec.Releases)
		}
	})
	t.Run("releases in two repositories", func(t *testing.T) {
		set := newSet(
			img(kRel, "quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64", "a/release-images:4.18.1-x86_64"),
			img(kRel, "quay.io/openshift-release-dev/ocp-release:4.18.2-x86_64", "b/release-images:4.18.2-x86_64"),
			img(kGraph, "localhost/openshift/graph-image:latest", "openshift/graph-image:latest"),
		)
		_, err := UpdateService(set, testRoot, Meta{})
		mustFail(t, err, testRoot+"/a/release-images", testRoot+"/b/release-images")
	})
	t.Run("two graph images", func(t *testing.T) {
		set := newSet(
			img(kGraph, "localhost/openshift/graph-image:latest", "openshift/graph-image:latest"),
			img(kGraph, "localhost/openshift/graph-image:v2", "openshift/graph-image:v2"),
		)
		_, err := UpdateService(set, testRoot, Meta{})
		mustFail(t, err, "several graph images")
	})
}
