package imageset

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const testdataConfig = "../testdata/config"

const iscHeader = "kind: ImageSetConfiguration\napiVersion: mirror.openshift.io/v2alpha1\n"

// markedLine returns the 1-based line of doc carrying the "# <-" marker.
func markedLine(t *testing.T, doc string) int {
	t.Helper()
	for i, l := range strings.Split(doc, "\n") {
		if strings.Contains(l, "# <-") {
			return i + 1
		}
	}
	t.Fatalf("no '# <-' marker in document:\n%s", doc)
	return 0
}

// fieldErrors asserts err is a FieldErrors and returns it.
func fieldErrors(t *testing.T, err error) FieldErrors {
	t.Helper()
	if err == nil {
		t.Fatal("expected an error, got none")
	}
	var errs FieldErrors
	if !errors.As(err, &errs) {
		t.Fatalf("error is %T, not FieldErrors: %v", err, err)
	}
	return errs
}

// expectOne asserts that errs holds exactly one error, at path and the marked
// line, whose message contains msg, and that its text says file:line: path.
func expectOne(t *testing.T, err error, doc, file, path, msg string) {
	t.Helper()
	errs := fieldErrors(t, err)
	if len(errs) != 1 {
		t.Fatalf("want exactly 1 error, got %d:\n%v", len(errs), errs)
	}
	e := errs[0]
	line := markedLine(t, doc)
	if e.Path != path || e.Line != line || e.File != file {
		t.Errorf("error at %s:%d %q, want %s:%d %q: %v", e.File, e.Line, e.Path, file, line, path, e)
	}
	if !strings.Contains(e.Msg, msg) {
		t.Errorf("message %q does not contain %q", e.Msg, msg)
	}
	prefix := fmt.Sprintf("%s:%d: %s: ", file, line, path)
	if path == "" {
		prefix = fmt.Sprintf("%s:%d: ", file, line)
	}
	if !strings.HasPrefix(err.Error(), prefix) {
		t.Errorf("error text %q does not start with %q", err.Error(), prefix)
	}
}

func TestLoadTestdata(t *testing.T) {
	full, err := LoadImageSetConfiguration(filepath.Join(testdataConfig, "isc-full.yaml"))
	if err != nil {
		t.Fatalf("isc-full.yaml: %v", err)
	}
	if full.File() != filepath.Join(testdataConfig, "isc-full.yaml") {
		t.Errorf("File() = %q", full.File())
	}
	if full.ArchiveSize != 4 || full.ArchiveSizeBytes() != 4<<30 {
		t.Errorf("archiveSize = %d (%d bytes)", full.ArchiveSize, full.ArchiveSizeBytes())
	}
	p := full.Mirror.Platform
	if len(p.Channels) != 3 || p.Channels[0] != (ReleaseChannel{Name: "stable-4.18", Type: releaseTypeOCP, MinVersion: "4.18.1", MaxVersion: "4.18.9", ShortestPath: true}) {
		t.Errorf("platform.channels = %+v", p.Channels)
	}
	if p.Channels[1].ReleaseType() != releaseTypeOCP || p.Channels[2].ReleaseType() != ReleaseTypeOKD {
		t.Errorf("release types: %q %q", p.Channels[1].ReleaseType(), p.Channels[2].ReleaseType())
	}
	ops := full.Mirror.Operators
	if len(ops) != 3 {
		t.Fatalf("operators = %d, want 3", len(ops))
	}
	if got := ops[0].Packages[0].Channels[0]; got != (Channel{Name: "stable-v1", MinVersion: "1.1.0", MaxVersion: "1.2.0"}) {
		t.Errorf("operators[0].packages[0].channels[0] = %+v", got)
	}
	if got := ops[0].Packages[4].Bundles; !reflect.DeepEqual(got, []Bundle{{Name: "etcdoperator.v0.9.4"}, {Name: "etcdoperator.v0.9.2"}}) {
		t.Errorf("bundles = %+v", got)
	}
	if got := ops[0].Packages[2].VersionRange; got != ">=6.0.0 <6.2.0" {
		t.Errorf("versionRange = %q", got)
	}
	if path, ok := ops[2].OCILayoutPath(); !ok || path != "/var/lib/catalogs/community-operator-index" {
		t.Errorf("OCILayoutPath = %q, %v", path, ok)
	}
	if got := full.Mirror.Helm.Repositories[0].Charts[0].ImagePaths[0]; got != "{.spec.template.spec.containers[*].env[*].value}" {
		t.Errorf("imagePaths[0] = %q", got)
	}
	// The full files must exercise every field of the schema (platform.release
	// and platform.platforms exclude channels and architectures, so they live
	// in their own file).
	release, err := LoadImageSetConfiguration(filepath.Join(testdataConfig, "isc-release-platforms.yaml"))
	if err != nil {
		t.Fatalf("isc-release-platforms.yaml: %v", err)
	}
	if got := release.Mirror.Platform.Platforms; !reflect.DeepEqual(got, []ImagePlatform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}) || got[1].String() != "linux/arm64" {
		t.Errorf("platform.platforms = %+v", got)
	}
	if unset := unsetFields(reflect.ValueOf(*full), reflect.ValueOf(*release)); len(unset) > 0 {
		t.Errorf("isc-full.yaml and isc-release-platforms.yaml leave fields unset: %s", strings.Join(unset, ", "))
	}

	docs, err := LoadImageSetConfiguration(filepath.Join(testdataConfig, "isc-oc-mirror-docs.yaml"))
	if err != nil {
		t.Fatalf("isc-oc-mirror-docs.yaml: %v", err)
	}
	if docs.ArchiveSizeBytes() != 500<<30 {
		t.Errorf("default ArchiveSizeBytes = %d", docs.ArchiveSizeBytes())
	}
	if pk := docs.Mirror.Operators[0].Packages[2]; pk.DefaultChannel != "threescale-2.13" || pk.Channels[0].MinVersion != "0.10.0" {
		t.Errorf("3scale package = %+v", pk)
	}

	minimal, err := LoadImageSetConfiguration(filepath.Join(testdataConfig, "isc-additional-images.yaml"))
	if err != nil {
		t.Fatalf("isc-additional-images.yaml: %v", err)
	}
	if len(minimal.Mirror.AdditionalImages) != 2 || minimal.Mirror.AdditionalImages[1].Name != "docker.io/library/busybox:1.36" {
		t.Errorf("additionalImages = %+v", minimal.Mirror.AdditionalImages)
	}

	disc, err := LoadDeleteImageSetConfiguration(filepath.Join(testdataConfig, "disc.yaml"))
	if err != nil {
		t.Fatalf("disc.yaml: %v", err)
	}
	if got := disc.Delete.BlockedImages; len(got) != 1 || got[0].Name != "ubi8/ubi-minimal" {
		t.Errorf("disc blockedImages = %+v", got)
	}
	if disc.Kind != DeleteImageSetConfigurationKind || disc.Delete.Platform.Channels[0].MaxVersion != "4.17.5" || disc.Delete.Operators[0].Packages[0].Channels[0].MaxVersion != "1.1.0" {
		t.Errorf("disc = %+v", disc.Delete)
	}
}

// unsetFields lists the struct fields (by json path) that are zero in every
// element of every value, so that "full" fixtures provably cover the schema.
func unsetFields(values ...reflect.Value) []string {
	set := map[string]bool{}
	var all []string
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.Struct:
			for i := range v.NumField() {
				f := v.Type().Field(i)
				if !f.IsExported() {
					continue
				}
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				p := joinPath(path, name)
				if _, ok := set[p]; !ok {
					set[p] = false
					all = append(all, p)
				}
				if !v.Field(i).IsZero() {
					set[p] = true
				}
				walk(v.Field(i), p)
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(v.Index(i), path+"[]")
			}
		}
	}
	for _, v := range values {
		walk(v, "")
	}
	var unset []string
	for _, p := range all {
		if !set[p] {
			unset = append(unset, p)
		}
	}
	return unset
}

func TestMarshalYAMLRoundTrip(t *testing.T) {
	for _, name := range []string{"isc-full.yaml", "isc-oc-mirror-docs.yaml", "isc-additional-images.yaml"} {
		t.Run(name, func(t *testing.T) {
			c, err := LoadImageSetConfiguration(filepath.Join(testdataConfig, name))
			if err != nil {
				t.Fatal(err)
			}
			out, err := MarshalYAML(c)
			if err != nil {
				t.Fatal(err)
			}
			again, err := ParseImageSetConfiguration(out, "pinned.yaml")
			if err != nil {
				t.Fatalf("re-parsing marshalled config: %v\n%s", err, out)
			}
			c.src, again.src = nil, nil
			if !reflect.DeepEqual(c, again) {
				t.Errorf("round trip changed the configuration:\n%s", out)
			}
			if strings.Contains(string(out), "platform: {}") || strings.Contains(string(out), "helm: {}") {
				t.Errorf("empty sections are marshalled:\n%s", out)
			}
		})
	}
	disc, err := LoadDeleteImageSetConfiguration(filepath.Join(testdataConfig, "disc.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := MarshalYAML(disc)
	if err != nil {
		t.Fatal(err)
	}
	again, err := parseDeleteImageSetConfiguration(out, "disc-pinned.yaml")
	if err != nil {
		t.Fatalf("re-parsing marshalled DISC: %v\n%s", err, out)
	}
	disc.src, again.src = nil, nil
	if !reflect.DeepEqual(disc, again) {
		t.Errorf("DISC round trip changed the configuration:\n%s", out)
	}
}

func TestArchiveSizeBytes(t *testing.T) {
	for _, tc := range []struct {
		gib  int64
		want int64
	}{
		{0, 500 << 30},
		{-3, 500 << 30},
		{1, 1 << 30},
		{20, 20 << 30},
		{maxArchiveSizeGiB + 1, 1<<63 - 1},
	} {
		c := ImageSetConfiguration{ArchiveSize: tc.gib}
		if got := c.ArchiveSizeBytes(); got != tc.want {
			t.Errorf("ArchiveSize %d: ArchiveSizeBytes() = %d, want %d", tc.gib, got, tc.want)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		path string
		msg  string
	}{
		{"typo with suggestion", iscHeader + `mirror:
  operators:
    - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.18
      packages:
        - name: a
        - name: b
          chanels: # <-
            - name: stable
`, "mirror.operators[0].packages[1].chanels", `unknown field (did you mean "channels"?)`},
		{"case typo", iscHeader + `mirror:
  additionalimages: # <-
    - name: ubi9/ubi
`, "mirror.additionalimages", `did you mean "additionalImages"?`},
		{"unknown field lists known ones", iscHeader + `mirror:
  additionalImages:
    - name: registry.redhat.io/ubi9/ubi:latest
      pullSecret: x # <-
`, "mirror.additionalImages[0].pullSecret", "known fields here: name, targetRepo, targetTag, platforms"},
		{"removed oc-mirror field", iscHeader + `mirror:
  operators:
    - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.18
      packages:
        - name: foo
          minBundle: foo.v1.0.0 # <-
`, "mirror.operators[0].packages[0].minBundle", "unknown field"},
		{"string where list expected", iscHeader + `mirror:
  operators: registry.redhat.io/redhat/redhat-operator-index:v4.18 # <-
`, "mirror.operators", `expected a list, got "registry.redhat.io/redhat/redhat-operator-index:v4.18" (write it as a list`},
		{"mapping where list expected", iscHeader + `mirror:
  additionalImages:
    name: registry.redhat.io/ubi9/ubi:latest # <-
`, "mirror.additionalImages", `expected a list, got a mapping (start each entry with "- ")`},
		{"list where string expected", iscHeader + `mirror:
  operators:
    - catalog:
        - registry.redhat.io/redhat/redhat-operator-index:v4.18 # <-
`, "mirror.operators[0].catalog", "expected a string, got a list"},
		{"scalar where mapping expected", iscHeader + `mirror:
  platform: stable-4.18 # <-
`, "mirror.platform", `expected a mapping (field: value), got "stable-4.18"`},
		{"bad boolean", iscHeader + `mirror:
  platform:
    graph: sometimes # <-
`, "mirror.platform.graph", `expected true or false, got "sometimes"`},
		{"bad integer", iscHeader + `archiveSize: 10G # <-
mirror:
  additionalImages:
    - name: registry.redhat.io/ubi9/ubi:latest
`, "archiveSize", `expected a whole number, got "10G"`},
		{"fractional integer", iscHeader + `archiveSize: 1.5 # <-
mirror: {}
`, "archiveSize", "expected a whole number, got the number 1.5"},
		{"duplicate key", iscHeader + `mirror:
  platform:
    graph: true
    graph: false # <-
`, "mirror.platform.graph", "duplicate field (first set at line 5)"},
		{"DISC given to the mirror loader", `kind: DeleteImageSetConfiguration # <-
apiVersion: mirror.openshift.io/v2alpha1
delete:
  additionalImages:
    - name: registry.redhat.io/ubi9/ubi:latest
`, "kind", "gapmirror delete"},
		{"unknown kind", `kind: ImageSetConfig # <-
apiVersion: mirror.openshift.io/v2alpha1
mirror: {}
`, "kind", `"ImageSetConfig" is not supported here: set kind: ImageSetConfiguration`},
		{"missing kind", `apiVersion: mirror.openshift.io/v2alpha1 # <-
mirror: {}
`, "kind", "missing: set kind: ImageSetConfiguration"},
		{"missing apiVersion", `kind: ImageSetConfiguration # <-
mirror: {}
`, "apiVersion", "missing: set apiVersion: mirror.openshift.io/v2alpha1"},
		{"other apiVersion", `kind: ImageSetConfiguration
apiVersion: mirror.openshift.io/v2 # <-
mirror: {}
`, "apiVersion", `"mirror.openshift.io/v2" is not supported`},
		{"delete section in ISC", iscHeader + `mirror: {}
delete: # <-
  additionalImages: []
`, "delete", "DeleteImageSetConfiguration"},
		{"missing mirror section", `kind: ImageSetConfiguration # <-
apiVersion: mirror.openshift.io/v2alpha1
archiveSize: 1
`, "mirror", "needs a mirror: section"},
		{"storageConfig", iscHeader + `storageConfig: # <-
  local:
    path: /tmp
mirror: {}
`, "storageConfig", "remove it"},
		{"root is a list", `- kind: ImageSetConfiguration # <-
`, "", "expected a mapping with kind, apiVersion and mirror, got a list"},
		{"syntax error", iscHeader + `mirror:
  platform:
    graph: "true # <-
`, "", "invalid YAML: found unexpected end of stream"},
		{"tab indentation", iscHeader + "mirror:\n\tplatform: {} # <-\n", "", "indent YAML with spaces"},
		{"second document", iscHeader + `mirror: {}
---
kind: ImageSetConfiguration # <-
`, "", "exactly one document"},
		{"empty document", `--- # <-
`, "", "document is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseImageSetConfiguration([]byte(tc.doc), "isc.yaml")
			expectOne(t, err, tc.doc, "isc.yaml", tc.path, tc.msg)
		})
	}
}

func TestLoadEmptyFile(t *testing.T) {
	for _, doc := range []string{"", "\n\n", "# only a comment\n"} {
		_, err := ParseImageSetConfiguration([]byte(doc), "empty.yaml")
		errs := fieldErrors(t, err)
		if len(errs) != 1 || errs[0].File != "empty.yaml" || !strings.Contains(errs[0].Msg, "file is empty") {
			t.Errorf("%q: got %v", doc, err)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := LoadImageSetConfiguration(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "nope.yaml") {
		t.Errorf("got %v, want a not-exist error naming the file", err)
	}
}

func TestLoadV1Alpha2ListsEverythingToChange(t *testing.T) {
	doc := `kind: ImageSetConfiguration
apiVersion: mirror.openshift.io/v1alpha2
storageConfig:
  registry:
    imageURL: registry.example.com/metadata
mirror:
  operators:
    - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.18
      packages:
        - name: foo
          startingVersion: 1.0.0
`
	_, err := ParseImageSetConfiguration([]byte(doc), "v1.yaml")
	errs := fieldErrors(t, err)
	want := []struct {
		line int
		path string
		msg  string
	}{
		{2, "apiVersion", "oc-mirror v1's format"},
		{3, "storageConfig", "remove it"},
		{11, "mirror.operators[0].packages[0].startingVersion", "unknown field"},
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(want), err)
	}
	for i, w := range want {
		if errs[i].Line != w.line || errs[i].Path != w.path || !strings.Contains(errs[i].Msg, w.msg) {
			t.Errorf("error %d = %v, want line %d %s %q", i, errs[i], w.line, w.path, w.msg)
		}
	}
	if !strings.Contains(errs[0].Msg, "set apiVersion: mirror.openshift.io/v2alpha1") {
		t.Errorf("apiVersion message does not say what to set: %s", errs[0].Msg)
	}
}

func TestLoadAcceptsYAMLFeatures(t *testing.T) {
	doc := iscHeader + `mirror:
  platform:
    graph: yes
    channels:
      - &base
        name: stable-4.18
        minVersion: "4.18.1"
        maxVersion: 4.18.2
      - <<: *base
        name: fast-4.18
  operators:
    - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.18
      packages:
        - name: foo
          channels: ~
          minVersion: 1.2
---
`
	c, err := ParseImageSetConfiguration([]byte(doc), "isc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	chs := c.Mirror.Platform.Channels
	if !c.Mirror.Platform.Graph || len(chs) != 2 || chs[1] != (ReleaseChannel{Name: "fast-4.18", MinVersion: "4.18.1", MaxVersion: "4.18.2"}) {
		t.Errorf("platform = %+v", c.Mirror.Platform)
	}
	// An unquoted 1.2 keeps its source text instead of becoming a float.
	if pk := c.Mirror.Operators[0].Packages[0]; pk.MinVersion != "1.2" || pk.Channels != nil {
		t.Errorf("package = %+v", pk)
	}
}

func TestLoadDeleteErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		path string
		msg  string
	}{
		{"ISC given to the delete loader", `kind: ImageSetConfiguration # <-
apiVersion: mirror.openshift.io/v2alpha1
mirror: {}
`, "kind", "gapmirror mirror"},
		{"mirror section in DISC", `kind: DeleteImageSetConfiguration
apiVersion: mirror.openshift.io/v2alpha1
delete: {}
mirror: # <-
  additionalImages: []
`, "mirror", "under delete:"},
		{"archiveSize in DISC", `kind: DeleteImageSetConfiguration
apiVersion: mirror.openshift.io/v2alpha1
archiveSize: 4 # <-
delete: {}
`, "archiveSize", "remove archiveSize"},
		{"missing delete section", `kind: DeleteImageSetConfiguration # <-
apiVersion: mirror.openshift.io/v2alpha1
`, "delete", "needs a delete: section"},
		{"validation under delete", `kind: DeleteImageSetConfiguration
apiVersion: mirror.openshift.io/v2alpha1
delete:
  operators:
    - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.17
      packages:
        - name: foo
        - name: foo # <-
`, "delete.operators[0].packages[1].name", `duplicate package "foo" (also delete.operators[0].packages[0], line 7)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseDeleteImageSetConfiguration([]byte(tc.doc), "disc.yaml")
			expectOne(t, err, tc.doc, "disc.yaml", tc.path, tc.msg)
		})
	}
}

func TestSuggest(t *testing.T) {
	fields := []string{"name", "channels", "defaultChannel", "minVersion", "maxVersion", "versionRange", "bundles"}
	for _, tc := range []struct{ word, want string }{
		{"chanels", "channels"},
		{"Channels", "channels"},
		{"minversion", "minVersion"},
		{"maxVerison", "maxVersion"},
		{"bundle", "bundles"},
		{"nmae", "name"},
		{"startingVersion", ""},
		{"x", ""},
	} {
		if got := suggest(tc.word, fields); got != tc.want {
			t.Errorf("suggest(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
}

func TestFieldErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		e    FieldError
		want string
	}{
		{FieldError{File: "isc.yaml", Line: 12, Path: "mirror.operators[0]", Msg: "bad"}, "isc.yaml:12: mirror.operators[0]: bad"},
		{FieldError{File: "isc.yaml", Msg: "file is empty"}, "isc.yaml: file is empty"},
		{FieldError{Path: "mirror.platform", Msg: "bad"}, "mirror.platform: bad"},
		{FieldError{Line: 3, Msg: "bad"}, "line 3: bad"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
	errs := FieldErrors{{File: "a", Line: 1, Msg: "x"}, {File: "a", Line: 2, Msg: "y"}}
	if got := errs.Error(); got != "a:1: x\na:2: y" {
		t.Errorf("FieldErrors.Error() = %q", got)
	}
}

func TestSourceLine(t *testing.T) {
	src := &source{file: "isc.yaml", lines: map[string]int{"": 1, "mirror": 3, "mirror.operators[0]": 5, "mirror.operators[0].packages": 7}}
	for _, tc := range []struct {
		path string
		want int
	}{
		{"mirror.operators[0].packages", 7},
		{"mirror.operators[0].packages[2].channels[1].name", 7},
		{"mirror.operators[0].catalog", 5},
		{"mirror.platform.channels", 3},
		{"archiveSize", 1},
	} {
		if got := src.line(tc.path); got != tc.want {
			t.Errorf("line(%q) = %d, want %d", tc.path, got, tc.want)
		}
	}
	var none *source
	if none.line("mirror") != 0 || none.fileName() != "" {
		t.Error("a nil source must locate nothing")
	}
}
