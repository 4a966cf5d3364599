package imageset

import "testing"

// TestDockerTransportNormalised: image names written with oc-mirror's
// docker:// transport load as the plain references, in mirror and delete
// configurations; oci: layouts stay as written.
func TestDockerTransportNormalised(t *testing.T) {
	body := `mirror:
  platform:
    release: docker://quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64
  operators:
  - catalog: docker://registry.redhat.io/redhat/redhat-operator-index:v4.18
  additionalImages:
  - name: docker://registry.redhat.io/ubi8/ubi:latest
    targetRepo: base/ubi
    targetTag: stable
  - name: oci:///var/lib/layouts/tool
  blockedImages:
  - name: docker://quay.io/unwanted/.*
`
	cfg, err := ParseImageSetConfiguration([]byte(iscHeader+body), "isc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Mirror
	for got, want := range map[string]string{
		m.Platform.Release:         "quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64",
		m.Operators[0].Catalog:     "registry.redhat.io/redhat/redhat-operator-index:v4.18",
		m.AdditionalImages[0].Name: "registry.redhat.io/ubi8/ubi:latest",
		m.AdditionalImages[1].Name: "oci:///var/lib/layouts/tool",
		m.BlockedImages[0].Name:    "quay.io/unwanted/.*",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	if dir, ok := m.AdditionalImages[1].OCILayoutPath(); !ok || dir != "/var/lib/layouts/tool" {
		t.Errorf("layout path %q %v", dir, ok)
	}
	disc, err := parseDeleteImageSetConfiguration([]byte("kind: DeleteImageSetConfiguration\napiVersion: mirror.openshift.io/v2alpha1\ndelete:\n  additionalImages:\n  - name: docker://registry.redhat.io/ubi8/ubi:latest\n"), "disc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := disc.Delete.AdditionalImages[0].Name; got != "registry.redhat.io/ubi8/ubi:latest" {
		t.Errorf("delete: got %q", got)
	}
}
