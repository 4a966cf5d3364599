package generate

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const redhatIndex = testRoot + "/redhat/redhat-operator-index:v4.18"

// writeTemplate writes a CatalogSource template fixture and returns its path.
func writeTemplate(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cs-template.yaml")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const fullTemplate = `# a CatalogSource exported from a cluster
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata:
  name: replaced-by-gapmirror
  creationTimestamp: "2024-05-01T00:00:00Z"
  resourceVersion: "12345"
  uid: 0b0e2f43-0000-0000-0000-000000000000
  labels:
    example.com/team: platform
  annotations:
    example.com/owner: platform-team
spec:
  displayName: Red Hat Operators (mirrored)
  publisher: Example Org
  priority: -400
  secrets:
  - mirror-pull-secret
  image: registry.redhat.io/redhat/redhat-operator-index:v4.18
  updateStrategy:
    registryPoll:
      interval: 30m0s
  grpcPodConfig:
    securityContextConfig: restricted
    priorityClassName: system-cluster-critical
    nodeSelector:
      node-role.kubernetes.io/infra: ""
    tolerations:
    - key: node-role.kubernetes.io/infra
      operator: Exists
      effect: NoSchedule
status:
  connectionState:
    lastObservedState: READY
`

func TestCatalogGolden(t *testing.T) {
	tests := []struct {
		name    string
		catalog Catalog
	}{
		{name: "catalog-default", catalog: Catalog{Image: redhatIndex, Digest: dg("e")}},
		{name: "catalog-template", catalog: Catalog{Image: redhatIndex, Digest: dg("e"), TemplatePath: writeTemplate(t, fullTemplate)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := Files{}
			cs, err := CatalogSource(tt.catalog, testMeta)
			if err != nil {
				t.Fatal(err)
			}
			cc, err := ClusterCatalog(tt.catalog, testMeta)
			if err != nil {
				t.Fatal(err)
			}
			if err := files.merge(cs); err != nil {
				t.Fatal(err)
			}
			if err := files.merge(cc); err != nil {
				t.Fatal(err)
			}
			assertGolden(t, tt.name, files)
		})
	}
}

func TestCatalogSourceTemplateKeepsNamespace(t *testing.T) {
	path := writeTemplate(t, "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  namespace: my-catalogs\n")
	files, err := CatalogSource(Catalog{Image: redhatIndex, TemplatePath: path}, Meta{})
	if err != nil {
		t.Fatal(err)
	}
	var cs catalogSource
	if err := yaml.Unmarshal(files["cs-redhat-operator-index-v4-18.yaml"], &cs); err != nil {
		t.Fatal(err)
	}
	if cs.Metadata.Namespace != "my-catalogs" || cs.Spec.SourceType != "grpc" || cs.Spec.Image != redhatIndex || cs.Metadata.Name != "cs-redhat-operator-index-v4-18" {
		t.Errorf("got %+v", cs)
	}
}

func TestCatalogNames(t *testing.T) {
	hex := "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789"
	tests := []struct {
		name             string
		catalog          Catalog
		csName, csFile   string
		ccName, ccFile   string
		csImage, ccImage string
	}{
		{
			name:    "tag",
			catalog: Catalog{Image: redhatIndex, Digest: dg("e")},
			csName:  "cs-redhat-operator-index-v4-18", csFile: "cs-redhat-operator-index-v4-18.yaml",
			ccName: "cc-redhat-operator-index-v4-18", ccFile: "cc-redhat-operator-index-v4-18.yaml",
			csImage: redhatIndex, ccImage: testRoot + "/redhat/redhat-operator-index@" + dg("e"),
		},
		{
			name:    "long tag is cut to 12 characters",
			catalog: Catalog{Image: testRoot + "/x/certified-operator-index:v4.18.20250101-long", Digest: dg("e")},
			csName:  "cs-certified-operator-index-v4-18-202501", csFile: "cs-certified-operator-index-v4-18-202501.yaml",
			ccName: "cc-certified-operator-index-v4-18-202501", ccFile: "cc-certified-operator-index-v4-18-202501.yaml",
			csImage: testRoot + "/x/certified-operator-index:v4.18.20250101-long", ccImage: testRoot + "/x/certified-operator-index@" + dg("e"),
		},
		{
			name:    "digest only",
			catalog: Catalog{Image: testRoot + "/x/cat@sha256:" + hex},
			csName:  "cs-cat-abcdef012345", csFile: "cs-cat-abcdef012345.yaml",
			ccName: "cc-cat-abcdef012345", ccFile: "cc-cat-abcdef012345.yaml",
			csImage: testRoot + "/x/cat@sha256:" + hex, ccImage: testRoot + "/x/cat@sha256:" + hex,
		},
		{
			name:    "bare repository pinned by the digest field",
			catalog: Catalog{Image: testRoot + "/x/cat", Digest: "sha256:" + hex},
			csName:  "cs-cat-abcdef012345", csFile: "cs-cat-abcdef012345.yaml",
			ccName: "cc-cat-abcdef012345", ccFile: "cc-cat-abcdef012345.yaml",
			csImage: testRoot + "/x/cat@sha256:" + hex, ccImage: testRoot + "/x/cat@sha256:" + hex,
		},
		{
			name:    "odd characters become dashes, trailing dashes go",
			catalog: Catalog{Image: testRoot + "/x/my_catalog:V4_18.", Digest: dg("e"), TemplatePath: ""},
			csName:  "cs-my-catalog-v4-18", csFile: "cs-my-catalog-v4-18.yaml",
			ccName: "cc-my-catalog-v4-18", ccFile: "cc-my-catalog-v4-18.yaml",
			csImage: testRoot + "/x/my_catalog:V4_18.", ccImage: testRoot + "/x/my_catalog@" + dg("e"),
		},
		{
			name:    "long repository names are cut to 63 characters",
			catalog: Catalog{Image: testRoot + "/x/" + strings.Repeat("long-", 16) + "index:v1", Digest: dg("e")},
			csName:  "cs-long-long-long-long-long-long-long-long-long-long-long-lo-v1", csFile: "cs-long-long-long-long-long-long-long-long-long-long-long-lo-v1.yaml",
			ccName: "cc-long-long-long-long-long-long-long-long-long-long-long-lo-v1", ccFile: "cc-long-long-long-long-long-long-long-long-long-long-long-lo-v1.yaml",
			csImage: testRoot + "/x/" + strings.Repeat("long-", 16) + "index:v1", ccImage: testRoot + "/x/" + strings.Repeat("long-", 16) + "index@" + dg("e"),
		},
		{
			name:    "given name",
			catalog: Catalog{Name: "my-operators", Image: redhatIndex, Digest: dg("e")},
			csName:  "my-operators", csFile: "cs-my-operators.yaml",
			ccName: "my-operators", ccFile: "cc-my-operators.yaml",
			csImage: redhatIndex, ccImage: testRoot + "/redhat/redhat-operator-index@" + dg("e"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			csFiles, err := CatalogSource(tt.catalog, Meta{})
			if err != nil {
				t.Fatal(err)
			}
			ccFiles, err := ClusterCatalog(tt.catalog, Meta{})
			if err != nil {
				t.Fatal(err)
			}
			if got := csFiles.names(); !reflect.DeepEqual(got, []string{tt.csFile}) {
				t.Fatalf("CatalogSource files = %v, want %s", got, tt.csFile)
			}
			if got := ccFiles.names(); !reflect.DeepEqual(got, []string{tt.ccFile}) {
				t.Fatalf("ClusterCatalog files = %v, want %s", got, tt.ccFile)
			}
			var cs catalogSource
			if err := yaml.Unmarshal(csFiles[tt.csFile], &cs); err != nil {
				t.Fatal(err)
			}
			var cc clusterCatalog
			if err := yaml.Unmarshal(ccFiles[tt.ccFile], &cc); err != nil {
				t.Fatal(err)
			}
			if len(cs.Metadata.Name) > maxNameLen || len(cc.Metadata.Name) > maxNameLen {
				t.Errorf("names longer than %d: %s, %s", maxNameLen, cs.Metadata.Name, cc.Metadata.Name)
			}
			if cs.Metadata.Name != tt.csName || cs.Spec.Image != tt.csImage || cs.Metadata.Namespace != "openshift-marketplace" || cs.Spec.SourceType != "grpc" {
				t.Errorf("CatalogSource = %+v, want name %s image %s", cs, tt.csName, tt.csImage)
			}
			if cc.Metadata.Name != tt.ccName || cc.Spec.Source.Image.Ref != tt.ccImage || cc.Spec.Source.Type != "Image" {
				t.Errorf("ClusterCatalog = %+v, want name %s ref %s", cc, tt.ccName, tt.ccImage)
			}
		})
	}
}

func TestCatalogErrors(t *testing.T) {
	tests := []struct {
		name    string
		catalog Catalog
		cc      bool // check ClusterCatalog rather than CatalogSource
		want    []string
	}{
		{name: "invalid given name", catalog: Catalog{Name: "My_Ops", Image: redhatIndex}, want: []string{`"My_Ops"`}},
		{name: "image without registry", catalog: Catalog{Image: "redhat-operator-index:v4.18", Origin: "registry.redhat.io/redhat/redhat-operator-index:v4.18"}, want: []string{"registry.redhat.io/redhat/redhat-operator-index:v4.18", `"redhat-operator-index:v4.18"`}},
		{name: "bare repository without digest", catalog: Catalog{Image: testRoot + "/x/cat"}, want: []string{"no digest"}},
		{name: "ClusterCatalog without digest", catalog: Catalog{Image: redhatIndex}, cc: true, want: []string{"no digest", redhatIndex}},
		{name: "malformed digest", catalog: Catalog{Image: redhatIndex, Digest: "sha256:xyz"}, cc: true, want: []string{`"sha256:xyz"`}},
		{name: "digests disagree", catalog: Catalog{Image: testRoot + "/x/cat@" + dg("1"), Digest: dg("2")}, cc: true, want: []string{"disagree"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.cc {
				_, err = ClusterCatalog(tt.catalog, Meta{})
			} else {
				_, err = CatalogSource(tt.catalog, Meta{})
			}
			mustFail(t, err, tt.want...)
		})
	}
}

func TestCatalogSourceBadTemplate(t *testing.T) {
	head := "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\n"
	tests := []struct {
		name, content, want string
	}{
		{name: "wrong kind", content: "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\n", want: "kind is Subscription"},
		{name: "wrong apiVersion", content: "apiVersion: v1\nkind: CatalogSource\n", want: "apiVersion is v1"},
		{name: "configmap source type", content: head + "spec:\n  sourceType: configmap\n", want: "spec.sourceType is configmap"},
		{name: "configMap set", content: head + "spec:\n  configMap: my-catalog\n", want: "spec.configMap"},
		{name: "address set", content: head + "spec:\n  address: 10.0.0.1:50051\n", want: "spec.address"},
		{name: "two documents", content: head + "---\n" + head, want: "found 2 YAML documents"},
		{name: "empty", content: "# nothing here\n", want: "found 0 YAML documents"},
		{name: "a list", content: "- a\n- b\n", want: "must be a YAML mapping"},
		{name: "invalid YAML", content: "a: [b\n", want: "not valid YAML"},
		{name: "spec not a mapping", content: head + "spec: grpc\n", want: "spec must be a mapping"},
		{name: "annotations not a mapping", content: head + "metadata:\n  annotations: [a]\n", want: "metadata.annotations"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeTemplate(t, tt.content)
			_, err := CatalogSource(Catalog{Image: redhatIndex, TemplatePath: path}, Meta{})
			mustFail(t, err, path, "targetCatalogSourceTemplate", tt.want)
		})
	}
	t.Run("missing file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "absent.yaml")
		_, err := CatalogSource(Catalog{Image: redhatIndex, TemplatePath: path}, Meta{})
		mustFail(t, err, path, "targetCatalogSourceTemplate")
	})
}

func TestCatalogsFromSet(t *testing.T) {
	set := newSet(
		img(kAdd, "quay.io/ns/app:1", "ns/app:1"),
		img(kCatalog, "registry.redhat.io/redhat/redhat-operator-index:v4.18", "redhat/redhat-operator-index:v4.18"),
		img(kCatalog, "registry.redhat.io/redhat/certified-operator-index:v4.18", "redhat/certified-operator-index:v4.18"),
	)
	set.Images[1].Digest = dg("1")
	set.Images[2].Digest = dg("2")
	got, err := CatalogsFromSet(set, "docker://"+testRoot)
	if err != nil {
		t.Fatal(err)
	}
	want := []Catalog{
		{Image: testRoot + "/redhat/certified-operator-index:v4.18", Digest: dg("2"), Origin: "registry.redhat.io/redhat/certified-operator-index:v4.18"},
		{Image: testRoot + "/redhat/redhat-operator-index:v4.18", Digest: dg("1"), Origin: "registry.redhat.io/redhat/redhat-operator-index:v4.18"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}
