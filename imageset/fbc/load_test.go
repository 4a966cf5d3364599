package fbc_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/gapmirror/gapmirror/imageset/fbc"
	"github.com/gapmirror/gapmirror/imageset/yamlbudget"
	"github.com/gapmirror/gapmirror/internal/fbctest"
	"github.com/gapmirror/gapmirror/internal/opmtest"
)

func TestLoadRealCatalogs(t *testing.T) {
	c := fbctest.RealCatalog(t)
	var channels, bundles int
	for _, name := range c.PackageNames() {
		p := c.Package(name)
		channels += len(p.Channels)
		bundles += len(p.Bundles)
		if p.Pos.File != name+".yaml" || p.Pos.Line < 1 {
			t.Errorf("package %s: position %v, want %s.yaml with a line", name, p.Pos, name)
		}
		for _, b := range p.Bundles {
			if b.Version() == nil {
				t.Errorf("bundle %s has no version", b.Name)
			}
		}
	}
	if got := len(c.PackageNames()); got != 35 || channels != 78 || bundles != 727 {
		t.Errorf("got %d packages, %d channels, %d bundles; want 35, 78, 727", got, channels, bundles)
	}
	p := c.Package("rabbitmq-messaging-topology-operator")
	b := p.Bundles[len(p.Bundles)-1]
	for _, cand := range p.Bundles {
		if len(cand.RequiredPackages()) > 0 {
			b = cand
		}
	}
	if len(b.RequiredPackages()) != 1 || b.RequiredPackages()[0].PackageName != "rabbitmq-cluster-operator" {
		t.Errorf("olm.package.required not read: %+v", b.RequiredPackages())
	}
	if len(b.RequiredGVKs()) == 0 || len(b.GVKs()) == 0 || len(b.PropertyValues(fbc.PropertyCSVMetadata)) != 1 {
		t.Errorf("bundle properties not read: required %v, provided %v", b.RequiredGVKs(), b.GVKs())
	}
}

func TestLoadFormats(t *testing.T) {
	fsys := fbctest.FormatsFS()
	c, err := fbc.LoadFS(fsys, ".")
	if err != nil {
		t.Fatalf("LoadFS: %v", err)
	}
	alphaText := string(fsys["alpha/index.yaml"].Data)
	if got := c.PackageNames(); !slices.Equal(got, []string{"alpha", "beta", "gamma"}) {
		t.Fatalf("packages %v", got)
	}
	alpha := c.Package("alpha")
	if b := alpha.Bundle("alpha.v1.0.0"); b == nil || b.VersionString() != "1.0.0" || b.Pos.File != "alpha/index.yaml" || b.Pos.Line != lineOf(alphaText, "defaults: &defaults") {
		t.Errorf("bundle from a YAML merge key: %+v", b)
	}
	if ch := alpha.Channel("stable"); ch.Pos.Line != lineOf(alphaText, "schema: olm.channel") || ch.Entries[1].SkipRange != ">=1.0.0 <1.1.0" {
		t.Errorf("channel position %v, entries %+v", ch.Pos, ch.Entries)
	}
	if len(alpha.Others) != 1 || alpha.Others[0].Name != "alpha-notes" {
		t.Errorf("custom blob of alpha: %+v", alpha.Others)
	}
	if len(c.Others()) != 1 || c.Others()[0].Schema != "example.com.catalog-info" {
		t.Errorf("package-less blobs: %+v", c.Others())
	}
	beta := c.Package("beta")
	if beta.Deprecations == nil || beta.Deprecations.Entries[0].Message != "use alpha" {
		t.Errorf("deprecations: %+v", beta.Deprecations)
	}
	if b := beta.Bundles[0]; b.Pos.Line != 2 || b.Pos.Offset < 90 {
		t.Errorf("concatenated JSON blob position %v", b.Pos)
	}
	obj := beta.Bundles[0].PropertyValues(fbc.PropertyBundleObject)
	var v struct{ Data string }
	if len(obj) != 1 || json.Unmarshal(obj[0], &v) != nil {
		t.Fatalf("bundle object: %s", obj)
	}
	if data, _ := base64.StdEncoding.DecodeString(v.Data); !strings.Contains(string(data), "ClusterServiceVersion") {
		t.Errorf("olm.bundle.object ref not inlined: %q", data)
	}
	if c.Package("gamma").Bundles[0].Image != "quay.example.com/gamma/bundle:0.1.0" {
		t.Error("extension-less YAML file not read")
	}

	// Unknown fields survive a write.
	files := fbctest.Rendered(t, c)
	for file, want := range map[string][]string{
		"alpha/catalog.json": {`"x-custom"`, `"keep": "me"`, `"x-channel-note": "kept"`, `"x-entry-note": "kept too"`, `"icon"`, `"type": "example.com/answer"`, `"value": 42`, `"notes": [`, `2.5`},
		"beta/catalog.json":  {`"olm.deprecations"`, `"olm.gvk.required"`},
		fbc.OthersFile:       {`"owner": "platform team"`},
	} {
		for _, w := range want {
			if !strings.Contains(files[file], w) {
				t.Errorf("%s lacks %s:\n%s", file, w, files[file])
			}
		}
	}
}

func TestLoadRoot(t *testing.T) {
	fsys := fstest.MapFS{}
	for name, f := range fbctest.FormatsFS() {
		fsys["configs/"+name] = f
	}
	for _, root := range []string{"configs", "/configs", "configs/", "./configs"} {
		c, err := fbc.LoadFS(fsys, root)
		if err != nil {
			t.Fatalf("LoadFS(%q): %v", root, err)
		}
		if p := c.Package("alpha"); p == nil || p.Pos.File != "configs/alpha/index.yaml" {
			t.Errorf("LoadFS(%q): alpha at %v", root, p)
		}
	}
	if _, err := fbc.LoadFS(fsys, "nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("missing root: %v", err)
	}
	if _, err := fbc.LoadFS(fsys, "configs/README.md"); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("file as root: %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	pkgYAML := "schema: olm.package\nname: p\ndefaultChannel: stable\n"
	chanYAML := "---\nschema: olm.channel\npackage: p\nname: stable\nentries: [{name: p.v1.0.0}]\n"
	bundleYAML := func(version string) string {
		return "---\nschema: olm.bundle\npackage: p\nname: p.v1.0.0\nimage: example.com/p:1\nproperties: [{type: olm.package, value: {packageName: p, version: \"" + version + "\"}}]\n"
	}
	// opmAccepts marks what opm v1.65.0's validate lets through and
	// gapmirror refuses: a skipRange that is not a range, and an
	// olm.bundle.object ref to a missing file (opm does not read refs).
	opmAccepts := map[string]bool{"bad skipRange": true, "missing bundle object file": true}
	cases := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"JSON syntax", map[string]string{"p/c.json": "{\"schema\":\"olm.package\",\"name\":\"p\"}\n{\"schema\": \"olm.channel\",,}\n"},
			[]string{"p/c.json:2 (byte", "malformed JSON"}},
		{"JSON truncated", map[string]string{"p/c.json": "{\"schema\":\"olm.package\",\n\"name\":"},
			[]string{"p/c.json:2", "unexpected end of file"}},
		{"JSON not an object", map[string]string{"p/c.json": "[1,2]"},
			[]string{"p/c.json:1 (byte 0)", "expected a JSON object"}},
		{"YAML syntax", map[string]string{"p/c.yaml": pkgYAML + "---\nschema: olm.channel\n  name: [oops\n"},
			[]string{"p/c.yaml:6", "malformed YAML"}},
		{"YAML scalar document", map[string]string{"p/c.yaml": pkgYAML + "---\njust a string\n"},
			[]string{"p/c.yaml:5", "expected a YAML mapping"}},
		{"missing schema", map[string]string{"p/c.yaml": "name: p\n"},
			[]string{"p/c.yaml:1", `no "schema" field`}},
		{"wrong field type", map[string]string{"p/c.yaml": pkgYAML + "---\nschema: olm.channel\npackage: p\nname: stable\nentries: {name: x}\n"},
			[]string{"p/c.yaml:5", "olm.channel blob", `"entries"`}},
		{"bad version", map[string]string{"p/c.yaml": pkgYAML + chanYAML + bundleYAML("1.0")},
			[]string{"p/c.yaml:10", `version "1.0" is not semantic versioning`}},
		{"channel names a missing bundle", map[string]string{"p/c.yaml": pkgYAML + chanYAML},
			[]string{"p/c.yaml:5", `names bundle "p.v1.0.0", which package "p" does not have`}},
		{"channel of unknown package", map[string]string{"p/c.yaml": "schema: olm.channel\npackage: q\nname: s\nentries: [{name: q.v1}]\n"},
			[]string{"p/c.yaml:1", `names package "q", which has no olm.package blob`}},
		{"duplicate package", map[string]string{"a.yaml": pkgYAML + chanYAML + bundleYAML("1.0.0"), "b.yaml": pkgYAML},
			[]string{"b.yaml:1", `package "p" is defined twice (first at a.yaml:1)`}},
		{"missing default channel", map[string]string{"p/c.yaml": strings.Replace(pkgYAML, "stable", "fast", 1) + chanYAML + bundleYAML("1.0.0")},
			[]string{"p/c.yaml:1", `defaultChannel "fast" is not a channel`}},
		{"bundle in no channel", map[string]string{"p/c.yaml": pkgYAML + strings.Replace(chanYAML, "entries: [{name: p.v1.0.0}]", "entries: []", 1) + bundleYAML("1.0.0")},
			[]string{"is in no channel", "has no entries"}},
		{"package property mismatch", map[string]string{"p/c.yaml": pkgYAML + chanYAML + strings.Replace(bundleYAML("1.0.0"), "packageName: p", "packageName: q", 1)},
			[]string{"p/c.yaml:10", `names package "q"`}},
		{"bad skipRange", map[string]string{"p/c.yaml": pkgYAML + strings.Replace(chanYAML, "{name: p.v1.0.0}", "{name: p.v1.0.0, skipRange: '>=banana'}", 1) + bundleYAML("1.0.0")},
			[]string{"p/c.yaml:5", "skipRange"}},
		{"bad deprecation", map[string]string{"p/c.yaml": pkgYAML + chanYAML + bundleYAML("1.0.0") + "---\nschema: olm.deprecations\npackage: p\nentries: [{reference: {schema: olm.channel}, message: old}]\n"},
			[]string{"p/c.yaml:16", "needs a name"}},
		{"missing bundle object file", map[string]string{"p/c.yaml": pkgYAML + chanYAML + strings.Replace(bundleYAML("1.0.0"), "}}]", "}}, {type: olm.bundle.object, value: {ref: objects/gone.yaml}}]", 1)},
			[]string{"p/c.yaml:10", `refers to "objects/gone.yaml"`}},
		{"two files broken", map[string]string{"a.json": "{", "b.yaml": "a: [\n"},
			[]string{"a.json:1", "b.yaml:"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for name, data := range tc.files {
				fsys[name] = &fstest.MapFile{Data: []byte(data)}
			}
			_, err := fbc.LoadFS(fsys, ".")
			if err == nil {
				t.Fatal("LoadFS succeeded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			// gapmirror refuses no catalog that opm would serve, but for
			// the known cases above.
			if opm := opmtest.Oracle(t); opm != "" {
				dir := t.TempDir()
				for name, data := range tc.files {
					p := filepath.Join(dir, filepath.FromSlash(name))
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if oerr := opmtest.ValidateErr(opm, dir); (oerr == nil) != opmAccepts[tc.name] {
					t.Errorf("opm validate accepted=%v, want %v (%v)", oerr == nil, opmAccepts[tc.name], oerr)
				}
			}
		})
	}
}

func TestSourceErrorIsReachable(t *testing.T) {
	_, err := fbc.LoadFS(fstest.MapFS{"x/c.json": {Data: []byte("\n\n{\"name\":1}")}}, ".")
	var se *fbc.SourceError
	if !errors.As(err, &se) || se.Pos.File != "x/c.json" || se.Pos.Line != 3 || se.Pos.Offset != 2 {
		t.Fatalf("want a SourceError at x/c.json:3 byte 2, got %#v", err)
	}
}

func TestWriteDir(t *testing.T) {
	c, err := fbc.LoadFS(fbctest.FormatsFS(), ".")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "configs")
	if err := c.WriteDir(dir); err != nil {
		t.Fatalf("WriteDir: %v", err)
	}
	for _, f := range []string{"alpha/catalog.json", "beta/catalog.json", "gamma/catalog.json", fbc.OthersFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	again, err := fbc.LoadFS(os.DirFS(dir), ".")
	if err != nil || len(again.PackageNames()) != 3 {
		t.Fatalf("reloading: %v", err)
	}
	if err := c.WriteDir(dir); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("writing into a non-empty directory: %v", err)
	}
}

// lineOf returns the 1-based line of the first occurrence of sub in text.
func lineOf(text, sub string) int {
	i := strings.Index(text, sub)
	if i < 0 {
		return -1
	}
	return strings.Count(text[:i], "\n") + 1
}

// TestLoadRefusesAliasBomb: a catalog file whose aliases stand for 24
// million nodes (1.6 s and 600 MiB per file when each file could expand to
// 50 million) is refused once aliases add yamlbudget.AliasNodes nodes,
// naming the file and the blob; a file that reuses lists through aliases
// within that loads.
func TestLoadRefusesAliasBomb(t *testing.T) {
	bomb := fbctest.AliasBomb(30, 5)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	_, err := fbc.LoadFS(fstest.MapFS{"p/c.yaml": {Data: bomb}}, ".")
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d bytes refused in %v, %d MiB allocated: %v", len(bomb), took, allocated>>20, err)
	var se *fbc.SourceError
	if !errors.As(err, &se) || se.Pos.File != "p/c.yaml" || se.Pos.Line != 5 || !strings.Contains(err.Error(), "alias bomb") ||
		!strings.Contains(err.Error(), fmt.Sprintf("aliases may add at most %d", yamlbudget.AliasNodes)) {
		t.Fatalf("want an alias bomb refused at p/c.yaml:5, got %v", err)
	}
	if took > 5*time.Second || allocated > 256<<20 {
		t.Errorf("refusing took %v and %d MiB: the budget does not stop the expansion early", took, allocated>>20)
	}

	reuse := "schema: olm.package\nname: p\ndefaultChannel: stable\n---\n" +
		"schema: olm.channel\npackage: p\nname: stable\nentries: [{name: p.v1.0.0}, {name: p.v1.1.0, replaces: p.v1.0.0}]\n"
	for _, v := range []string{"1.0.0", "1.1.0"} {
		reuse += "---\nschema: olm.bundle\npackage: p\nname: p.v" + v + "\nimage: example.com/p:" + v + "\n" +
			"x-notes: &notes [" + strings.Repeat("{a: b, c: [d, e]},", 1000) + "{}]\nx-again: [*notes, *notes, *notes]\n" +
			"properties: [{type: olm.package, value: {packageName: p, version: \"" + v + "\"}}]\n"
	}
	c, err := fbc.LoadFS(fstest.MapFS{"p/c.yaml": {Data: []byte(reuse)}}, ".")
	if err != nil {
		t.Fatalf("lists reused through aliases within the allowance: %v", err)
	}
	if n := len(c.Package("p").Bundles); n != 2 {
		t.Fatalf("%d bundles", n)
	}
}
