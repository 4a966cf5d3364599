package generate

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/gapmirror/gapmirror/imageset"
)

const (
	kRel     = imageset.KindRelease
	kComp    = imageset.KindReleaseComponent
	kGraph   = imageset.KindReleaseGraph
	kCatalog = imageset.KindOperatorCatalog
	kBundle  = imageset.KindOperatorBundle
	kRelated = imageset.KindOperatorRelated
	kAdd     = imageset.KindAdditional
	kHelm    = imageset.KindHelm
)

// flatten merges the groups of g into source → sorted mirrors.
func flatten(g groupedEntries) map[string][]string {
	out := map[string][]string{}
	for _, bySource := range g {
		for s, mirrors := range bySource {
			for m := range mirrors {
				out[s] = append(out[s], m)
			}
		}
	}
	for s := range out {
		sort.Strings(out[s])
		out[s] = dedupe(out[s])
	}
	return out
}

func dedupe(s []string) []string {
	var out []string
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func TestMirrorScope(t *testing.T) {
	r := testRoot
	tests := []struct {
		name        string
		root        string
		images      []imageset.Image
		notMirrored []string
		idms, itms  map[string][]string
	}{
		{
			name:   "ordinary layout widens to the top namespace",
			images: []imageset.Image{img(kAdd, "quay.io/a/b/c@"+dg("1"), "a/b/c:x")},
			idms:   map[string][]string{"quay.io/a": {r + "/a"}},
		},
		{
			name: "release repositories stay repository-scoped; a release by tag is in both",
			images: []imageset.Image{
				img(kRel, "quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64", "openshift/release-images:4.18.1-x86_64"),
				img(kComp, "quay.io/openshift-release-dev/ocp-v4.0-art-dev@"+dg("a"), "openshift/release:4.18.1-x86_64-etcd"),
			},
			idms: map[string][]string{
				"quay.io/openshift-release-dev/ocp-release":      {r + "/openshift/release-images"},
				"quay.io/openshift-release-dev/ocp-v4.0-art-dev": {r + "/openshift/release"},
			},
			itms: map[string][]string{"quay.io/openshift-release-dev/ocp-release": {r + "/openshift/release-images"}},
		},
		{
			name: "widens several levels",
			images: []imageset.Image{
				img(kAdd, "registry.example.com/team/a/app1@"+dg("1"), "team/a/app1:1"),
				img(kAdd, "registry.example.com/team/a/app2@"+dg("2"), "team/a/app2:1"),
				img(kAdd, "registry.example.com/team/b/app3@"+dg("3"), "team/b/app3:1"),
			},
			idms: map[string][]string{"registry.example.com/team": {r + "/team"}},
		},
		{
			name: "an image mirrored elsewhere (targetRepo) keeps its namespace narrow",
			images: []imageset.Image{
				img(kAdd, "quay.io/org1/x@"+dg("1"), "org1/x:1"),
				img(kAdd, "quay.io/org1/y@"+dg("2"), "custom/y:1"),
			},
			idms: map[string][]string{"quay.io/org1/x": {r + "/org1/x"}, "quay.io/org1/y": {r + "/custom/y"}},
		},
		{
			name: "a blocked image keeps its namespace narrow",
			images: []imageset.Image{
				img(kAdd, "quay.io/org2/p@"+dg("1"), "org2/p:1"),
				img(kAdd, "quay.io/org2/q@"+dg("2"), "org2/q:1"),
			},
			notMirrored: []string{"quay.io/org2/secret:1"},
			idms:        map[string][]string{"quay.io/org2/p": {r + "/org2/p"}, "quay.io/org2/q": {r + "/org2/q"}},
		},
		{
			name: "a blocked image elsewhere stops widening one level below",
			images: []imageset.Image{
				img(kAdd, "quay.io/org3/sub/r@"+dg("1"), "org3/sub/r:1"),
				img(kAdd, "quay.io/org3/sub/deep/s@"+dg("2"), "org3/sub/deep/s:1"),
			},
			notMirrored: []string{"docker://quay.io/org3/other@" + dg("9")},
			idms:        map[string][]string{"quay.io/org3/sub": {r + "/org3/sub"}},
		},
		{
			name: "docker.io names are normalised",
			images: []imageset.Image{
				img(kAdd, "busybox:1.36", "library/busybox:1.36"),
				img(kAdd, "docker.io/library/alpine@"+dg("1"), "library/alpine:3"),
				img(kAdd, "bitnami/redis:7", "bitnami/redis:7"),
			},
			idms: map[string][]string{"docker.io/library": {r + "/library"}},
			itms: map[string][]string{"docker.io/library": {r + "/library"}, "docker.io/bitnami": {r + "/bitnami"}},
		},
		{
			name:        "a blocked short docker.io name is normalised too",
			images:      []imageset.Image{img(kAdd, "busybox:1.36", "library/busybox:1.36")},
			notMirrored: []string{"nginx:latest"},
			itms:        map[string][]string{"docker.io/library/busybox": {r + "/library/busybox"}},
		},
		{
			name: "one source, two mirrors, deduplicated",
			images: []imageset.Image{
				img(kAdd, "registry.example.com/multi/tool@"+dg("1"), "multi/tool:v1"),
				img(kAdd, "registry.example.com/multi/tool@"+dg("1"), "tools/tool:v1"),
				img(kAdd, "registry.example.com/multi/tool@"+dg("2"), "tools/tool:v2"),
			},
			idms: map[string][]string{"registry.example.com/multi/tool": {r + "/multi/tool", r + "/tools/tool"}},
		},
		{
			name: "two tags of one repository give one entry",
			images: []imageset.Image{
				img(kAdd, "ghcr.io/o/app:1", "o/app:1"),
				img(kAdd, "ghcr.io/o/app:2", "o/app:2"),
			},
			itms: map[string][]string{"ghcr.io/o": {r + "/o"}},
		},
		{
			name:   "never widens to a whole registry",
			images: []imageset.Image{img(kAdd, "quay.io/solo@"+dg("1"), "solo:1")},
			idms:   map[string][]string{"quay.io/solo": {r + "/solo"}},
		},
		{
			name:   "a mirror prefix keeps a path component after the host",
			root:   "docker://mirror.local:5000/",
			images: []imageset.Image{img(kAdd, "quay.io/ns/app@"+dg("1"), "app:1")},
			idms:   map[string][]string{"quay.io/ns/app": {"mirror.local:5000/app"}},
		},
		{
			name: "a catalog mirrored elsewhere narrows the namespace but gets no entry",
			images: []imageset.Image{
				img(kCatalog, "registry.redhat.io/redhat/redhat-operator-index:v4.18", "gapmirror/catalogs/redhat-operator-index:v4.18"),
				img(kBundle, "registry.redhat.io/redhat/x-bundle@"+dg("1"), "redhat/x-bundle:1"),
				img(kGraph, "localhost/openshift/graph-image:latest", "openshift/graph-image:latest"),
			},
			idms: map[string][]string{"registry.redhat.io/redhat/x-bundle": {r + "/redhat/x-bundle"}},
		},
		{
			name:        "a failed tag of a mirrored repository keeps that repository's entry",
			images:      []imageset.Image{img(kAdd, "quay.io/ns/app:v1", "ns/app:v1")},
			notMirrored: []string{"quay.io/ns/app:v2"},
			itms:        map[string][]string{"quay.io/ns/app": {r + "/ns/app"}},
		},
		{
			name:   "suffixes match whole path components only",
			images: []imageset.Image{img(kAdd, "quay.io/ns/app@"+dg("1"), "x/webapp:1")},
			idms:   map[string][]string{"quay.io/ns/app": {r + "/x/webapp"}},
		},
		{
			name:   "a mirror root that contains the source namespace does not confuse the scope",
			root:   "reg.local:5000/openshift-release-dev",
			images: []imageset.Image{img(kRel, "quay.io/openshift-release-dev/ocp-release@"+dg("1"), "openshift/release-images:4.18.1-x86_64")},
			idms:   map[string][]string{"quay.io/openshift-release-dev/ocp-release": {"reg.local:5000/openshift-release-dev/openshift/release-images"}},
		},
		{
			name: "a repository with a nested repository covers it when the suffix matches",
			images: []imageset.Image{
				img(kAdd, "quay.io/ns/app@"+dg("1"), "x/app:1"),
				img(kAdd, "quay.io/ns/app/debug@"+dg("2"), "x/app/debug:1"),
			},
			idms: map[string][]string{"quay.io/ns": {r + "/x"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := tt.root
			if root == "" {
				root = testRoot
			}
			digest, tag, err := mirrorEntries(newSet(tt.images...), root, tt.notMirrored, false)
			if err != nil {
				t.Fatal(err)
			}
			if tt.idms == nil {
				tt.idms = map[string][]string{}
			}
			if tt.itms == nil {
				tt.itms = map[string][]string{}
			}
			if got := flatten(digest); !reflect.DeepEqual(got, tt.idms) {
				t.Errorf("IDMS entries:\n got %v\nwant %v", got, tt.idms)
			}
			if got := flatten(tag); !reflect.DeepEqual(got, tt.itms) {
				t.Errorf("ITMS entries:\n got %v\nwant %v", got, tt.itms)
			}
		})
	}
}

func TestMirrorSetsGolden(t *testing.T) {
	tests := []struct {
		name        string
		images      []imageset.Image
		notMirrored []string
	}{
		{
			name: "mirrorsets-release",
			images: []imageset.Image{
				img(kRel, "quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64", "openshift/release-images:4.18.1-x86_64"),
				img(kRel, "quay.io/openshift-release-dev/ocp-release@"+dg("b"), "openshift/release-images:4.18.2-x86_64"),
				img(kComp, "quay.io/openshift-release-dev/ocp-v4.0-art-dev@"+dg("c"), "openshift/release:4.18.1-x86_64-etcd"),
				img(kComp, "quay.io/openshift-release-dev/ocp-v4.0-art-dev@"+dg("d"), "openshift/release:4.18.1-x86_64-cli"),
				img(kGraph, "localhost/openshift/graph-image:latest", "openshift/graph-image:latest"),
			},
		},
		{
			name: "mirrorsets-scope",
			images: []imageset.Image{
				img(kAdd, "registry.example.com/team/a/app1@"+dg("1"), "team/a/app1:1"),
				img(kAdd, "registry.example.com/team/b/app3@"+dg("3"), "team/b/app3:1"),
				img(kAdd, "quay.io/org1/x@"+dg("4"), "org1/x:1"),
				img(kAdd, "quay.io/org1/y@"+dg("5"), "custom/y:1"),
				img(kAdd, "quay.io/org2/p@"+dg("6"), "org2/p:1"),
				img(kAdd, "quay.io/org2/q:2", "org2/q:2"),
				img(kAdd, "busybox:1.36", "library/busybox:1.36"),
				img(kAdd, "busybox@"+dg("7"), "library/busybox:sha256-7777"),
				img(kAdd, "registry.example.com/multi/tool@"+dg("8"), "multi/tool:v1"),
				img(kAdd, "registry.example.com/multi/tool@"+dg("8"), "tools/tool:v1"),
			},
			notMirrored: []string{"quay.io/org2/secret:1"},
		},
		{
			name: "mirrorsets-groups",
			images: []imageset.Image{
				img(kCatalog, "registry.redhat.io/redhat/redhat-operator-index:v4.18", "redhat/redhat-operator-index:v4.18"),
				img(kBundle, "registry.redhat.io/rhel9/op-bundle@"+dg("1"), "rhel9/op-bundle:1"),
				img(kRelated, "registry.redhat.io/rhel9/op-rhel9:1.0@"+dg("2"), "rhel9/op-rhel9:1.0"),
				img(kAdd, "registry.redhat.io/rhel9/support-tools:latest", "rhel9/support-tools:latest"),
				img(kHelm, "ghcr.io/charts/nginx:1.25", "charts/nginx:1.25"),
				img(kHelm, "ghcr.io/charts/nginx@"+dg("3"), "charts/nginx:sha256-3333"),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files, err := mirrorSets(newSet(tt.images...), testRoot, tt.notMirrored, false, testMeta)
			if err != nil {
				t.Fatal(err)
			}
			assertGolden(t, tt.name, files)
		})
	}
}

func TestMirrorSetsNames(t *testing.T) {
	set := newSet(
		img(kRel, "quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64", "openshift/release-images:4.18.1-x86_64"),
		img(kRelated, "registry.redhat.io/rhel9/op@"+dg("1"), "rhel9/op:1"),
		img(kHelm, "ghcr.io/charts/nginx@"+dg("3"), "charts/nginx:1"),
		img(kAdd, "ghcr.io/o/app:1", "o/app:1"),
	)
	files, err := mirrorSets(set, testRoot, nil, false, Meta{})
	if err != nil {
		t.Fatal(err)
	}
	if got := objectNames(t, files[fileIDMS]); !reflect.DeepEqual(got, []string{"idms-release-0", "idms-operator-0", "idms-generic-0"}) {
		t.Errorf("IDMS objects = %v", got)
	}
	if got := objectNames(t, files[fileITMS]); !reflect.DeepEqual(got, []string{"itms-release-0", "itms-generic-0"}) {
		t.Errorf("ITMS objects = %v", got)
	}
	if strings.Contains(string(files[fileIDMS]), annotationCreatedAt) {
		t.Errorf("zero CreatedAt must leave %s out", annotationCreatedAt)
	}
}

func objectNames(t *testing.T, data []byte) []string {
	t.Helper()
	var names []string
	for _, doc := range splitDocuments(data) {
		var obj struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatal(err)
		}
		names = append(names, obj.Metadata.Name)
	}
	return names
}

func TestMirrorSetsSplitsLargeGroups(t *testing.T) {
	saved := mirrorObjectBudget
	mirrorObjectBudget = 300
	defer func() { mirrorObjectBudget = saved }()

	var images []imageset.Image
	for _, ns := range []string{"a", "b", "c", "d", "e"} {
		images = append(images, img(kAdd, "quay.io/"+ns+"/app@"+dg("1"), "elsewhere-"+ns+"/app:1"))
	}
	files, err := mirrorSets(newSet(images...), testRoot, nil, false, Meta{})
	if err != nil {
		t.Fatal(err)
	}
	names := objectNames(t, files[fileIDMS])
	if len(names) < 2 || names[0] != "idms-generic-0" || names[1] != "idms-generic-1" {
		t.Fatalf("want the generic group split into idms-generic-0, -1, …; got %v", names)
	}
	var sources []string
	for _, doc := range splitDocuments(files[fileIDMS]) {
		var o imageDigestMirrorSet
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatal(err)
		}
		for _, e := range o.Spec.ImageDigestMirrors {
			sources = append(sources, e.Source)
		}
	}
	want := []string{"quay.io/a", "quay.io/b", "quay.io/c", "quay.io/d", "quay.io/e"}
	if !reflect.DeepEqual(sources, want) {
		t.Errorf("entries across split objects = %v, want %v in order", sources, want)
	}
}

func TestMirrorSetsEmpty(t *testing.T) {
	for name, set := range map[string]*imageset.Set{
		"nil set":      nil,
		"empty set":    newSet(),
		"catalog only": newSet(img(kCatalog, "registry.redhat.io/redhat/redhat-operator-index:v4.18", "redhat/redhat-operator-index:v4.18")),
	} {
		files, err := mirrorSets(set, testRoot, nil, false, testMeta)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(files) != 0 {
			t.Errorf("%s: want no files, got %v", name, files.names())
		}
	}
}

func TestMirrorSetsErrors(t *testing.T) {
	ok := img(kAdd, "quay.io/ns/app@"+dg("1"), "ns/app:1")
	tests := []struct {
		name        string
		root        string
		images      []imageset.Image
		notMirrored []string
		want        []string
	}{
		{name: "empty root", root: "", images: []imageset.Image{ok}, want: []string{"mirror root is empty"}},
		{name: "root without host", root: "mirror", images: []imageset.Image{ok}, want: []string{`mirror root "mirror"`}},
		{name: "root with tag", root: "reg:5000/m:tag", images: []imageset.Image{ok}, want: []string{`mirror root "reg:5000/m:tag"`}},
		{name: "image without origin", root: testRoot, images: []imageset.Image{img(kAdd, "", "ns/app:1")}, want: []string{"ns/app:1", "no origin"}},
		{name: "bad origin", root: testRoot, images: []imageset.Image{img(kAdd, "quay.io/NS/App:1", "ns/app:1")}, want: []string{`"quay.io/NS/App:1"`}},
		{name: "empty destination", root: testRoot, images: []imageset.Image{img(kAdd, "quay.io/ns/app:1", "")}, want: []string{"quay.io/ns/app:1", "empty destination"}},
		{name: "bad destination", root: testRoot, images: []imageset.Image{img(kAdd, "quay.io/ns/app:1", "Ns/app:1")}, want: []string{"registry.airgap:5000/mirror/Ns/app"}},
		{name: "bad not-mirrored reference", root: testRoot, images: []imageset.Image{ok}, notMirrored: []string{"quay.io/a b"}, want: []string{`"quay.io/a b"`, "not mirrored"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := mirrorSets(newSet(tt.images...), tt.root, tt.notMirrored, false, testMeta)
			mustFail(t, err, tt.want...)
		})
	}
}

// With flattened destinations every source repository maps on its own,
// even where a namespace entry would happen to fit.
func TestMirrorEntriesRepositoryScope(t *testing.T) {
	set := newSet(
		img(kAdd, "quay.io/ns/app1@"+dg("1"), "ns/app1:1"),
		img(kAdd, "quay.io/ns/app2@"+dg("2"), "ns/app2:1"),
		img(kAdd, "quay.io/ns/deep/app3@"+dg("3"), "ns/deep-app3:1"),
	)
	digest, _, err := mirrorEntries(set, testRoot, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"quay.io/ns/app1":      {testRoot + "/ns/app1"},
		"quay.io/ns/app2":      {testRoot + "/ns/app2"},
		"quay.io/ns/deep/app3": {testRoot + "/ns/deep-app3"},
	}
	if got := flatten(digest); !reflect.DeepEqual(got, want) {
		t.Errorf("IDMS entries:\n got %v\nwant %v", got, want)
	}
}

// TestMirrorSetsLeaveOutSignatures: a signature, found by tag next to the
// image it signs, never makes an IDMS or ITMS entry of its own.
func TestMirrorSetsLeaveOutSignatures(t *testing.T) {
	sig := img(imageset.KindSignature, "quay.io/signed/elsewhere:sha256-1.sig", "signed/elsewhere:sha256-1.sig")
	files, err := mirrorSets(newSet(sig), testRoot, nil, false, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 0 {
		t.Errorf("want no files for a set of signatures, got %v", files.names())
	}
}
