package imageset

import (
	"strings"
	"testing"
)

const catalog418 = "registry.redhat.io/redhat/redhat-operator-index:v4.18"

func TestValidationErrors(t *testing.T) {
	tests := []struct {
		name string
		body string // appended to the ISC header
		path string
		msg  string
	}{
		// archiveSize
		{"negative archiveSize", `archiveSize: -1 # <-
mirror: {}
`, "archiveSize", "is negative"},
		{"archiveSize in bytes", `archiveSize: 10737418240000 # <-
mirror: {}
`, "archiveSize", "in GiB, not bytes"},

		// platform
		{"release channel without name", `mirror:
  platform:
    channels:
      - type: ocp # <-
`, "mirror.platform.channels[0].name", "missing: set the release channel"},
		{"release channel type", `mirror:
  platform:
    channels:
      - name: stable-4.18
        type: rhel # <-
`, "mirror.platform.channels[0].type", `"rhel" is not a release type: use ocp (the default) or okd`},
		{"release minVersion not x.y.z", `mirror:
  platform:
    channels:
      - name: stable-4.18
        minVersion: 4.18 # <-
`, "mirror.platform.channels[0].minVersion", "full x.y.z release version"},
		{"release maxVersion not semver", `mirror:
  platform:
    channels:
      - name: stable-4.18
        maxVersion: latest # <-
`, "mirror.platform.channels[0].maxVersion", `"latest" is not a valid version`},
		{"release max below min", `mirror:
  platform:
    channels:
      - name: stable-4.18
        minVersion: 4.18.9
        maxVersion: 4.18.2 # <-
`, "mirror.platform.channels[0].maxVersion", "4.18.2 is lower than minVersion 4.18.9"},
		{"duplicate release channel", `mirror:
  platform:
    channels:
      - name: stable-4.18
      - name: eus-4.18
      - name: stable-4.18 # <-
`, "mirror.platform.channels[2].name", `duplicate release channel "stable-4.18" (also mirror.platform.channels[0], line 6)`},
		{"architecture value", `mirror:
  platform:
    architectures:
      - amd64
      - x86_64 # <-
`, "mirror.platform.architectures[1]", `"x86_64" is not a release architecture: use one of amd64, arm64, ppc64le, s390x, multi`},
		{"duplicate architecture", `mirror:
  platform:
    architectures:
      - arm64
      - arm64 # <-
`, "mirror.platform.architectures[1]", "listed twice"},
		{"platforms and architectures", `mirror:
  platform:
    architectures: [amd64]
    platforms: # <-
      - os: linux
        architecture: arm64
`, "mirror.platform.platforms", "platforms and architectures are exclusive"},
		{"platform without os", `mirror:
  platform:
    platforms:
      - architecture: arm64 # <-
`, "mirror.platform.platforms[0].os", "missing: set the operating system"},
		{"platform os unknown", `mirror:
  additionalImages:
    - name: quay.io/a/b:1
      platforms:
        - os: Linux # <-
          architecture: arm64
`, "mirror.additionalImages[0].platforms[0].os", `"Linux" is not an image operating system`},
		{"platform architecture unknown", `mirror:
  operators:
    - catalog: quay.io/c/index:v1
      platforms:
        - os: linux
          architecture: arm64/v8 # <-
`, "mirror.operators[0].platforms[0].architecture", "a variant such as arm64/v8 cannot be selected"},
		{"platform listed twice", `mirror:
  platform:
    platforms:
      - os: linux
        architecture: arm64
      - os: linux # <-
        architecture: arm64
`, "mirror.platform.platforms[1]", "linux/arm64 is listed twice"},
		{"release reference", `mirror:
  platform:
    release: quay.io/openshift-release-dev/OCP-release:4.18.1 # <-
`, "mirror.platform.release", "not a valid release image reference"},
		{"release with transport", `mirror:
  platform:
    release: docker-archive:///tmp/ocp-release.tar # <-
`, "mirror.platform.release", "no transport prefix"},

		// operators: catalogs
		{"catalog missing", `mirror:
  operators:
    - full: true # <-
`, "mirror.operators[0].catalog", "missing: set the catalog image"},
		{"catalog reference", `mirror:
  operators:
    - catalog: registry.redhat.io/redhat/Redhat-Operator-Index:v4.18 # <-
`, "mirror.operators[0].catalog", "not a valid catalog reference"},
		{"catalog empty oci path", `mirror:
  operators:
    - catalog: "oci://" # <-
`, "mirror.operators[0].catalog", "OCI layout path is empty"},
		{"duplicate catalog", `mirror:
  operators:
    - catalog: ` + catalog418 + `
    - catalog: registry.redhat.io/redhat/certified-operator-index:v4.18
    - catalog: ` + catalog418 + ` # <-
`, "mirror.operators[2].catalog", "duplicate catalog: this entry and mirror.operators[0], line 5, both mirror to redhat/redhat-operator-index:v4.18"},
		{"duplicate catalog from another registry", `mirror:
  operators:
    - catalog: ` + catalog418 + `
    - catalog: quay.io/redhat/redhat-operator-index:v4.18 # <-
`, "mirror.operators[1].catalog", "duplicate catalog"},
		{"duplicate catalog through targetCatalog and targetTag", `mirror:
  operators:
    - catalog: registry.redhat.io/redhat/certified-operator-index:v4.17
      targetCatalog: mirror/index
      targetTag: v1
    - catalog: ` + catalog418 + ` # <-
      targetCatalog: mirror/index
      targetTag: v1
`, "mirror.operators[1].catalog", "both mirror to mirror/index:v1"},
		{"targetCatalog with tag", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      targetCatalog: mirror/index:v4.18 # <-
`, "mirror.operators[0].targetCatalog", "put a tag in targetTag"},
		{"targetCatalog with digest", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      targetCatalog: mirror/index@sha256:0123 # <-
`, "mirror.operators[0].targetCatalog", "must not contain a digest"},
		{"targetCatalog uppercase", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      targetCatalog: Mirror/Index # <-
`, "mirror.operators[0].targetCatalog", "lowercase path components"},
		{"targetTag", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      targetTag: -v4.18 # <-
`, "mirror.operators[0].targetTag", `"-v4.18" is not a valid tag`},
		{"catalog platform without architecture", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      platforms:
        - os: linux # <-
`, "mirror.operators[0].platforms[0].architecture", "missing: set the architecture"},

		// operators: packages and channels
		{"package without name", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      packages:
        - minVersion: 1.0.0 # <-
`, "mirror.operators[0].packages[0].name", "missing: set the operator package name"},
		{"duplicate package", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      packages:
        - name: foo
        - name: bar
        - name: foo # <-
`, "mirror.operators[0].packages[2].name", `duplicate package "foo" (also mirror.operators[0].packages[0], line 7)`},
		{"channel without name", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      packages:
        - name: foo
          channels:
            - minVersion: 1.0.0 # <-
`, "mirror.operators[0].packages[0].channels[0].name", "missing: set the channel name"},
		{"duplicate channel", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      packages:
        - name: foo
          channels:
            - name: stable
            - name: stable # <-
`, "mirror.operators[0].packages[0].channels[1].name", `duplicate channel "stable"`},
		{"package minVersion syntax", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      packages:
        - name: foo
          minVersion: one.two # <-
`, "mirror.operators[0].packages[0].minVersion", `"one.two" is not a valid version`},
		{"package max below min", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      packages:
        - name: foo
          minVersion: 1.4.0
          maxVersion: 1.2.0 # <-
`, "mirror.operators[0].packages[0].maxVersion", "1.2.0 is lower than minVersion 1.4.0"},
		{"channel max below min", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      packages:
        - name: foo
          channels:
            - name: stable
              minVersion: 2.0.0
              maxVersion: 1.9.9 # <-
`, "mirror.operators[0].packages[0].channels[0].maxVersion", "1.9.9 is lower than minVersion 2.0.0"},
		{"package and channel ranges mixed", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      packages:
        - name: foo
          minVersion: 1.0.0
          channels:
            - name: stable
              maxVersion: 2.0.0 # <-
`, "mirror.operators[0].packages[0].channels[0].maxVersion", `a version range is set both on package "foo" and on its channel "stable"`},
		{"package versionRange and channel minVersion mixed", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      packages:
        - name: foo
          versionRange: ">=1.0.0"
          channels:
            - name: stable
              minVersion: 1.1.0 # <-
`, "mirror.operators[0].packages[0].channels[0].minVersion", "set it in one place"},
		{"versionRange syntax", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      packages:
        - name: foo
          versionRange: ">=1.0.0 <<2" # <-
`, "mirror.operators[0].packages[0].versionRange", `">=1.0.0 <<2" is not a valid version range`},
		{"channel versionRange syntax", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      packages:
        - name: foo
          channels:
            - name: stable
              versionRange: "one to two" # <-
`, "mirror.operators[0].packages[0].channels[0].versionRange", "is not a valid version range"},
		{"package versionRange with minVersion", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      packages:
        - name: foo
          minVersion: 1.0.0
          versionRange: ">=1.0.0" # <-
`, "mirror.operators[0].packages[0].versionRange", "versionRange and minVersion/maxVersion are exclusive"},
		{"channel versionRange with maxVersion", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      packages:
        - name: foo
          channels:
            - name: stable
              maxVersion: 2.0.0
              versionRange: "<2.0.0" # <-
`, "mirror.operators[0].packages[0].channels[0].versionRange", "versionRange and minVersion/maxVersion are exclusive"},
		{"full with minVersion", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      full: true
      packages:
        - name: foo
          minVersion: 1.0.0 # <-
`, "mirror.operators[0].packages[0].minVersion", "cannot be combined with full: true on the catalog (mirror.operators[0].full, line 6)"},
		{"full with channel versionRange", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      full: true
      packages:
        - name: foo
          channels:
            - name: stable
              versionRange: ">=1.0.0" # <-
`, "mirror.operators[0].packages[0].channels[0].versionRange", "cannot be combined with full: true"},
		{"full with bundles", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      full: true
      packages:
        - name: foo
          bundles: # <-
            - name: foo.v1.0.0
`, "mirror.operators[0].packages[0].bundles", "cannot be combined with full: true"},
		{"bundles with a version range", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      packages:
        - name: foo
          maxVersion: 2.0.0
          bundles: # <-
            - name: foo.v1.0.0
`, "mirror.operators[0].packages[0].bundles", "bundles and a version range are exclusive"},
		{"bundle without name", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      packages:
        - name: foo
          bundles:
            - name: "" # <-
`, "mirror.operators[0].packages[0].bundles[0].name", "missing: set the bundle name, e.g. foo.v1.2.3"},
		{"duplicate bundle", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      packages:
        - name: foo
          bundles:
            - name: foo.v1.0.0
            - name: foo.v1.0.0 # <-
`, "mirror.operators[0].packages[0].bundles[1].name", `duplicate bundle "foo.v1.0.0"`},
		{"defaultChannel not listed", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      packages:
        - name: foo
          defaultChannel: fast # <-
          channels:
            - name: stable
            - name: candidate
`, "mirror.operators[0].packages[0].defaultChannel", `"fast" is not one of the listed channels (stable, candidate)`},

		// additionalImages
		{"additional image without name", `mirror:
  additionalImages:
    - targetTag: v1 # <-
`, "mirror.additionalImages[0].name", "missing: set the image reference"},
		{"additional image reference", `mirror:
  additionalImages:
    - name: registry.redhat.io/ubi9/ubi:la test # <-
`, "mirror.additionalImages[0].name", "not a valid image reference"},
		{"additional image with transport", `mirror:
  additionalImages:
    - name: docker-archive:///tmp/image.tar # <-
`, "mirror.additionalImages[0].name", "no transport prefix"},
		{"layout image with platforms", `mirror:
  additionalImages:
    - name: oci:///tmp/layout
      platforms: # <-
      - os: linux
        architecture: amd64
`, "mirror.additionalImages[0].platforms", "mirrored whole"},
		{"layout image without a directory", `mirror:
  additionalImages:
    - name: "oci://" # <-
`, "mirror.additionalImages[0].name", "names no directory"},
		{"targetRepo with tag", `mirror:
  additionalImages:
    - name: registry.redhat.io/ubi9/ubi:latest
      targetRepo: base/ubi:9 # <-
`, "mirror.additionalImages[0].targetRepo", "put a tag in targetTag"},
		{"targetRepo with registry-like slash", `mirror:
  additionalImages:
    - name: registry.redhat.io/ubi9/ubi:latest
      targetRepo: /base/ubi # <-
`, "mirror.additionalImages[0].targetRepo", "lowercase path components"},
		{"additional targetTag", `mirror:
  additionalImages:
    - name: registry.redhat.io/ubi9/ubi:latest
      targetTag: "9/latest" # <-
`, "mirror.additionalImages[0].targetTag", "is not a valid tag"},

		// helm
		{"helm url missing", `mirror:
  helm:
    repositories:
      - name: podinfo # <-
`, "mirror.helm.repositories[0].url", "missing: set the chart repository URL"},
		{"helm url without scheme", `mirror:
  helm:
    repositories:
      - name: podinfo
        url: stefanprodan.github.io/podinfo # <-
`, "mirror.helm.repositories[0].url", "expected http://, https:// or oci://"},
		{"helm imagePaths broken", `mirror:
  helm:
    local:
      - name: mine
        path: ./mine
        imagePaths:
          - "{.spec.containers[*" # <-
`, "mirror.helm.local[0].imagePaths[0]", "is not a JSONPath expression"},
		{"helm url unparsable", `mirror:
  helm:
    repositories:
      - name: podinfo
        url: "https://exa mple.com:port/" # <-
`, "mirror.helm.repositories[0].url", "is not a URL"},
		{"duplicate helm repository", `mirror:
  helm:
    repositories:
      - name: podinfo
        url: https://stefanprodan.github.io/podinfo
      - name: podinfo # <-
        url: https://example.com/charts
`, "mirror.helm.repositories[1].name", `duplicate repository name "podinfo"`},
		{"helm chart without name", `mirror:
  helm:
    repositories:
      - name: podinfo
        url: https://stefanprodan.github.io/podinfo
        charts:
          - version: 6.7.1 # <-
`, "mirror.helm.repositories[0].charts[0].name", "missing: set the chart name"},
		{"local chart without path", `mirror:
  helm:
    local:
      - name: my-chart # <-
`, "mirror.helm.local[0].path", "missing: set the path"},
		{"path on a repository chart", `mirror:
  helm:
    repositories:
      - name: podinfo
        url: https://stefanprodan.github.io/podinfo
        charts:
          - name: podinfo
            path: /tmp/x # <-
`, "mirror.helm.repositories[0].charts[0].path", "unknown field"},

		// blockedImages
		{"blocked image regex", `mirror:
  blockedImages:
    - name: "registry.redhat.io/(ubi8" # <-
`, "mirror.blockedImages[0].name", "not a valid regular expression"},
		{"blocked image without name", `mirror:
  blockedImages:
    - name: "" # <-
`, "mirror.blockedImages[0].name", "missing"},
		{"catalog blocked by its own configuration", `mirror:
  operators:
    - catalog: ` + catalog418 + ` # <-
  blockedImages:
    - name: redhat-operator-index
`, "mirror.operators[0].catalog", "is blocked by mirror.blockedImages[0].name, line 7"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := iscHeader + tc.body
			_, err := ParseImageSetConfiguration([]byte(doc), "isc.yaml")
			expectOne(t, err, doc, "isc.yaml", tc.path, tc.msg)
		})
	}
}

func TestValidConfigurations(t *testing.T) {
	tests := []struct {
		name string
		body string
	}{
		{"same catalog with different targetTag", `mirror:
  operators:
    - catalog: ` + catalog418 + `
    - catalog: ` + catalog418 + `
      targetTag: v4.18-full
      full: true
`},
		{"same catalog with different targetCatalog", `mirror:
  operators:
    - catalog: ` + catalog418 + `
    - catalog: ` + catalog418 + `
      targetCatalog: other/index
`},
		{"same package in two catalogs", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      packages: [{name: foo}]
    - catalog: registry.redhat.io/redhat/certified-operator-index:v4.18
      packages: [{name: foo}]
`},
		{"catalog by tag and digest", `mirror:
  operators:
    - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.18@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
`},
		{"relative oci catalog", `mirror:
  operators:
    - catalog: oci:catalogs/my-index
`},
		{"full without ranges", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      full: true
      packages:
        - name: foo
          channels: [{name: stable}]
`},
		{"bundles with channels", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      packages:
        - name: foo
          channels: [{name: stable}]
          bundles: [{name: foo.v1.0.0}]
`},
		{"lenient bundle versions, as oc-mirror", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      packages:
        - name: foo
          minVersion: v1.2
          maxVersion: "1.10"
`},
		{"OLM v1 ranges", `mirror:
  operators:
    - catalog: ` + catalog418 + `
      packages:
        - name: a
          versionRange: ">=1.2.0, <1.4.0"
        - name: b
          versionRange: "1.2.x || 1.4.x"
        - name: c
          versionRange: "~1.2.3"
        - name: d
          versionRange: "1.0.0 - 1.5.0"
`},
		{"release equal bounds and same channel for ocp and okd", `mirror:
  platform:
    channels:
      - name: stable-4.18
        minVersion: 4.18.3
        maxVersion: 4.18.3
      - name: stable-4.18
        type: okd
`},
		{"release by digest", `mirror:
  platform:
    release: quay.io/openshift-release-dev/ocp-release@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
`},
		{"oci helm repository and Docker Hub images named in full", `mirror:
  helm:
    repositories:
      - name: charts
        url: oci://ghcr.io/example/charts
  additionalImages:
    - name: docker.io/library/busybox
    - name: docker.io/ubi9/ubi@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
    - name: localhost/team/app:v1
    - name: localhost:5000/app:v1
`},
		{"additional images listed and blocked, skipped as oc-mirror skips them", `mirror:
  additionalImages:
    - name: quay.io/internal/app:1
    - name: oci:///srv/layouts/tool
      targetRepo: internal/tool
  blockedImages:
    - name: internal/
`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseImageSetConfiguration([]byte(iscHeader+tc.body), "isc.yaml"); err != nil {
				t.Errorf("unexpected error:\n%v", err)
			}
		})
	}
}

func TestAllErrorsReportedInFileOrder(t *testing.T) {
	doc := iscHeader + `archiveSize: -2
mirror:
  platform:
    architectures: [sparc]
  operators:
    - catalog: ` + catalog418 + `
      packages:
        - name: foo
          chanels: [{name: stable}]
        - name: bar
          minVersion: 2.0.0
          maxVersion: 1.0.0
  additionalImages:
    - name: "upper/Case:tag"
  blockedImages:
    - name: "(["
`
	_, err := ParseImageSetConfiguration([]byte(doc), "isc.yaml")
	errs := fieldErrors(t, err)
	want := []struct {
		line int
		path string
	}{
		{3, "archiveSize"},
		{6, "mirror.platform.architectures[0]"},
		{11, "mirror.operators[0].packages[0].chanels"},
		{14, "mirror.operators[0].packages[1].maxVersion"},
		{16, "mirror.additionalImages[0].name"},
		{18, "mirror.blockedImages[0].name"},
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(want), err)
	}
	for i, w := range want {
		if errs[i].Line != w.line || errs[i].Path != w.path {
			t.Errorf("error %d = %v, want line %d at %s", i, errs[i], w.line, w.path)
		}
	}
	if n := strings.Count(err.Error(), "\n"); n != len(want)-1 {
		t.Errorf("Error() has %d lines, want one per error:\n%v", n+1, err)
	}
}

func TestDecodeErrorSuppressesValidationOfSameField(t *testing.T) {
	doc := iscHeader + `mirror:
  additionalImages:
    - name:
        image: registry.redhat.io/ubi9/ubi:latest # <-
`
	_, err := ParseImageSetConfiguration([]byte(doc), "isc.yaml")
	expectOne(t, err, doc, "isc.yaml", "mirror.additionalImages[0].name", "expected a string, got a mapping")
}

func TestValidateConfigBuiltInCode(t *testing.T) {
	c := &ImageSetConfiguration{
		Kind:       imageSetConfigurationKind,
		APIVersion: APIVersion,
		Mirror: Mirror{
			AdditionalImages: []AdditionalImage{{Name: "registry.redhat.io/ubi9/ubi:latest"}},
		},
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	c.Mirror.Operators = []OperatorCatalog{{Catalog: catalog418, Packages: []Package{{Name: "foo", MinVersion: "x"}}}}
	err := c.Validate()
	errs := fieldErrors(t, err)
	if len(errs) != 1 || errs[0].Line != 0 || errs[0].File != "" {
		t.Fatalf("got %v", err)
	}
	if got := err.Error(); !strings.HasPrefix(got, `mirror.operators[0].packages[0].minVersion: "x" is not a valid version`) {
		t.Errorf("Error() = %q", got)
	}

	d := &DeleteImageSetConfiguration{Delete: Delete{Platform: Platform{Architectures: []string{"i386"}}}}
	errs = fieldErrors(t, d.Validate())
	if len(errs) != 1 || errs[0].Path != "delete.platform.architectures[0]" {
		t.Errorf("got %v", errs)
	}
}

func TestCatalogKey(t *testing.T) {
	for _, tc := range []struct {
		o    OperatorCatalog
		want string
	}{
		{OperatorCatalog{Catalog: catalog418}, "redhat/redhat-operator-index:v4.18"},
		{OperatorCatalog{Catalog: "registry.redhat.io/redhat/redhat-operator-index"}, "redhat/redhat-operator-index:latest"},
		{OperatorCatalog{Catalog: "quay.io/a/b@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}, "a/b@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
		{OperatorCatalog{Catalog: catalog418, TargetCatalog: "x/y", TargetTag: "t"}, "x/y:t"},
		{OperatorCatalog{Catalog: "oci:///abs/dir"}, "oci:/abs/dir"},
		{OperatorCatalog{Catalog: "oci:rel/dir", TargetTag: "v1"}, "oci:rel/dir:v1"},
	} {
		if got := catalogKey(tc.o); got != tc.want {
			t.Errorf("catalogKey(%+v) = %q, want %q", tc.o, got, tc.want)
		}
	}
}

func TestOCILayoutPath(t *testing.T) {
	for _, tc := range []struct {
		catalog string
		path    string
		ok      bool
	}{
		{"oci:///var/lib/index", "/var/lib/index", true},
		{"oci:rel/index", "rel/index", true},
		{"oci://rel/index", "rel/index", true},
		{catalog418, "", false},
	} {
		path, ok := OperatorCatalog{Catalog: tc.catalog}.OCILayoutPath()
		if path != tc.path || ok != tc.ok {
			t.Errorf("OCILayoutPath(%q) = %q, %v; want %q, %v", tc.catalog, path, ok, tc.path, tc.ok)
		}
	}
}

// TestShortNameWarnings: images, catalogs and releases named without their
// registry load (read as Docker Hub's, as oc-mirror reads them) and each is
// a warning with its file, line and field; names with a registry (a host
// with a dot or a port, localhost) are not.
func TestShortNameWarnings(t *testing.T) {
	cfg, err := ParseImageSetConfiguration([]byte(`kind: ImageSetConfiguration
apiVersion: mirror.openshift.io/v2alpha1
mirror:
  platform:
    release: openshift-release-dev/ocp-release:4.18.1-x86_64
  operators:
    - catalog: redhat/redhat-operator-index:v4.18
    - catalog: registry.redhat.io/redhat/certified-operator-index:v4.18
  additionalImages:
    - name: ubi9/ubi:latest
    - name: busybox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
    - name: localhost/team/app:v1
    - name: localhost:5000/app:v1
    - name: docker.io/library/alpine:3
`), "isc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`isc.yaml:5: mirror.platform.release: "openshift-release-dev/ocp-release:4.18.1-x86_64" names no registry: read as docker.io/openshift-release-dev/ocp-release:4.18.1-x86_64 (Docker Hub)`,
		`isc.yaml:7: mirror.operators[0].catalog: "redhat/redhat-operator-index:v4.18" names no registry: read as docker.io/redhat/redhat-operator-index:v4.18`,
		`isc.yaml:10: mirror.additionalImages[0].name: "ubi9/ubi:latest" names no registry: read as docker.io/ubi9/ubi:latest (Docker Hub), as oc-mirror and skopeo read it`,
		`isc.yaml:11: mirror.additionalImages[1].name: "busybox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" names no registry: read as docker.io/library/busybox@sha256:`,
	}
	got := cfg.Warnings()
	if len(got) != len(want) {
		t.Fatalf("%d warnings, want %d:\n%v", len(got), len(want), got)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i].Error(), w) {
			t.Errorf("warning %d:\n got %s\nwant %s…", i, got[i].Error(), w)
		}
	}
}
