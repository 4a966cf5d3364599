package sections

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/docker/distribution/registry/api/errcode"
	v2 "github.com/docker/distribution/registry/api/v2"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"helm.sh/helm/v3/pkg/registry"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/internal/helmtest"
)

// TestChartArtifact: an HTTP or local chart becomes the artifact helm push
// makes (helm's media types, the .tgz byte for byte as the one layer), the
// same bytes every time, served at charts/<name>:<version with + as _>.
func TestChartArtifact(t *testing.T) {
	data := helmtest.Pod("web", "1.0.0+build.1", "quay.io/org/web:v1").Archive()
	c := &helmChart{name: "web", ver: "1.0.0+build.1", data: data}
	manifest, blobs, err := c.artifact()
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := c.artifact()
	if err != nil || string(again) != string(manifest) {
		t.Errorf("the artifact's manifest differs between two calls: %v", err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(manifest, &m); err != nil {
		t.Fatal(err)
	}
	if m.MediaType != ocispec.MediaTypeImageManifest || m.Config.MediaType != registry.ConfigMediaType || len(m.Layers) != 1 ||
		m.Layers[0].MediaType != registry.ChartLayerMediaType || m.Layers[0].Digest != digest.FromBytes(data) {
		t.Errorf("not a helm chart artifact:\n%s", manifest)
	}
	var meta struct{ Name, Version string }
	if err := json.Unmarshal(blobs[m.Config.Digest], &meta); err != nil || meta.Name != "web" || meta.Version != "1.0.0+build.1" {
		t.Errorf("config %s: %v", blobs[m.Config.Digest], err)
	}
	if got := c.destination(); got != "charts/web:1.0.0_build.1" {
		t.Errorf("destination %s", got)
	}
	c.dest = "team/Charts/web"
	if got := c.destination(); got != "team/charts/web:1.0.0_build.1" {
		t.Errorf("destination of an OCI chart %s", got)
	}
}

func TestChartRefused(t *testing.T) {
	for msg, want := range map[string]bool{
		"writing manifest sha256:1: uploading manifest 1.0.0 to r/charts/web: manifest invalid":       true,
		"uploading manifest: unsupported media type application/vnd.cncf.helm.config.v1+json":         true,
		"PUT https://r/v2/charts/web/manifests/1.0.0: 400 Bad Request":                                true,
		"reading blob sha256:2: dial tcp 127.0.0.1:5000: connect: connection refused":                 false,
		"writing manifest sha256:1: 127.0.0.1:5000/charts/web: unauthorized: authentication required": false,
	} {
		if got := ChartRefused(errors.New(msg)); got != want {
			t.Errorf("chartRefused(%q) = %v, want %v", msg, got, want)
		}
	}
	// The registry's error code, wrapped as the copy wraps it.
	invalid := fmt.Errorf("writing manifest: %w", errcode.Error{Code: v2.ErrorCodeManifestInvalid, Message: "config media type not allowed"})
	if !ChartRefused(invalid) {
		t.Errorf("MANIFEST_INVALID is not a refusal")
	}
	if ChartRefused(fmt.Errorf("writing manifest: %w", errcode.Error{Code: errcode.ErrorCodeDenied})) {
		t.Errorf("DENIED is a refusal of OCI artifacts")
	}
}

func TestLayoutDestination(t *testing.T) {
	for _, c := range []struct {
		ai   imageset.AdditionalImage
		want string
	}{
		{imageset.AdditionalImage{Name: "oci:///srv/Layouts/my tool"}, "srv/layouts/my-tool:latest"},
		{imageset.AdditionalImage{Name: "oci://layouts/tool"}, "layouts/tool:latest"}, // relative, as written (oc-mirror's rule)
		{imageset.AdditionalImage{Name: "oci:./layouts/../tool"}, "layouts/tool:latest"},
		{imageset.AdditionalImage{Name: "oci:///srv/x", TargetRepo: "/tools/x/", TargetTag: "v1"}, "tools/x:v1"},
	} {
		repo, tag := layoutDestination(c.ai)
		if got := repo + ":" + tag; got != c.want {
			t.Errorf("%s: %s, want %s", c.ai.Name, got, c.want)
		}
	}
}
