// Package fbctest holds what the tests of imageset/fbc and imageset/catalog
// share: the real catalogs of the shared workspace, loaded once, a catalog
// tree in every form fbc.LoadFS reads, a YAML alias bomb, and a catalog written
// into memory.
package fbctest

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/gapmirror/gapmirror/imageset/fbc"
)

// RealCatalogDir holds the 35 real community catalogs (one package per file),
// in the shared workspace next to the repository; the path is relative to a
// package directory two levels below the module root, as the tests of
// imageset/fbc and imageset/catalog run in.
const RealCatalogDir = "../../../shared/realdata/catalogs/v4.18"

var (
	realOnce sync.Once
	realCat  *fbc.Catalog
	realErr  error
)

// RealCatalog loads the real catalogs once, or skips the test when they are absent.
func RealCatalog(t testing.TB) *fbc.Catalog {
	t.Helper()
	if _, err := os.Stat(RealCatalogDir); err != nil {
		t.Skipf("real catalogs not available at %s (shared workspace data, not part of the repository): %v", RealCatalogDir, err)
	}
	realOnce.Do(func() { realCat, realErr = fbc.LoadFS(os.DirFS(RealCatalogDir), ".") })
	if realErr != nil {
		t.Fatalf("loading real catalogs: %v", realErr)
	}
	return realCat
}

// RenderFS writes the catalog with WriteFiles into an in-memory file system.
func RenderFS(t testing.TB, c *fbc.Catalog) fstest.MapFS {
	t.Helper()
	fsys := fstest.MapFS{}
	if err := c.WriteFiles(func(name string, data []byte) error {
		fsys[name] = &fstest.MapFile{Data: slices.Clone(data), Mode: 0o644}
		return nil
	}); err != nil {
		t.Fatalf("WriteFiles: %v", err)
	}
	return fsys
}

// Rendered returns the catalog's files as one string per file, for comparisons.
func Rendered(t testing.TB, c *fbc.Catalog) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, f := range RenderFS(t, c) {
		out[name] = string(f.Data)
	}
	return out
}

// FormatsFS is a catalog tree mixing every input form fbc.LoadFS accepts.
func FormatsFS() fstest.MapFS {
	csv := "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata:\n  name: beta.v1.0.0\n"
	return fstest.MapFS{
		"alpha/index.yaml": {Data: []byte(`---
# a comment before the first blob
schema: olm.package
name: alpha
defaultChannel: stable
icon: {base64data: aWNvbg==, mediatype: image/png}
x-custom: {keep: me}
---
---
schema: olm.channel
package: alpha
name: stable
x-channel-note: kept
entries:
  - name: alpha.v1.0.0
  - name: alpha.v1.1.0
    replaces: alpha.v1.0.0
    x-entry-note: kept too
    skipRange: '>=1.0.0 <1.1.0'
---
defaults: &defaults
  schema: olm.bundle
  package: alpha
<<: *defaults
name: alpha.v1.0.0
image: quay.example.com/alpha/bundle@sha256:1111111111111111111111111111111111111111111111111111111111111111
properties:
  - type: olm.package
    value: {packageName: alpha, version: 1.0.0}
  - type: example.com/answer
    value: 42
---
schema: olm.bundle
package: alpha
name: alpha.v1.1.0
image: quay.example.com/alpha/bundle@sha256:2222222222222222222222222222222222222222222222222222222222222222
properties:
  - type: olm.package
    value: {packageName: alpha, version: "1.1.0"}
  - type: olm.gvk
    value: {group: alpha.example.com, version: v1, kind: Alpha}
relatedImages:
  - {name: operator, image: quay.example.com/alpha/operator@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}
---
schema: example.com.notes
package: alpha
name: alpha-notes
notes: [1, 2.5, true, null]
`)},
		"beta/catalog.json": {Data: []byte(`{"schema":"olm.package","name":"beta","defaultChannel":"stable"}
{"schema":"olm.channel","package":"beta","name":"stable","entries":[{"name":"beta.v1.0.0"}]}{"schema":"olm.bundle","package":"beta","name":"beta.v1.0.0","image":"quay.example.com/beta/bundle@sha256:3333333333333333333333333333333333333333333333333333333333333333",
 "properties":[{"type":"olm.package","value":{"packageName":"beta","version":"1.0.0"}},
  {"type":"olm.bundle.object","value":{"ref":"objects/csv.yaml"}},
  {"type":"olm.gvk.required","value":{"group":"alpha.example.com","version":"v1","kind":"Alpha"}}]}
{"schema":"olm.deprecations","package":"beta","entries":[{"reference":{"schema":"olm.package"},"message":"use alpha"}]}
`)},
		"beta/.indexignore":        {Data: []byte("# bundle manifests are not blobs\nobjects/\n")},
		"beta/objects/csv.yaml":    {Data: []byte(csv)},
		"gamma/blobs":              {Data: []byte(`  {"schema":"olm.package","name":"gamma","defaultChannel":"alpha"}`)},
		"gamma/more":               {Data: []byte("schema: olm.channel\npackage: gamma\nname: alpha\nentries: [{name: gamma.v0.1.0}]\n---\nschema: olm.bundle\npackage: gamma\nname: gamma.v0.1.0\nimage: quay.example.com/gamma/bundle:0.1.0\nproperties: [{type: olm.package, value: {packageName: gamma, version: 0.1.0}}]\n")},
		"catalog-wide.json":        {Data: []byte(`{"schema":"example.com.catalog-info","owner":"platform team"}`)},
		"README.md":                {Data: []byte("this file is ignored\n")},
		".indexignore":             {Data: []byte("*.md\n")},
		"gamma/.indexignore":       {Data: []byte("")},
		"gamma/notes/.indexignore": {Data: []byte("*\n")},
		"gamma/notes/todo.txt":     {Data: []byte("not a blob\n")},
	}
}

// AliasBomb is a catalog file whose bundle carries levels of lists,
// each fanout aliases of the one before (30 and 5: 24 million nodes in
// under 1 KiB); the bundle starts on line 5.
func AliasBomb(fanout, levels int) []byte {
	var b strings.Builder
	b.WriteString("schema: olm.package\nname: p\ndefaultChannel: stable\n---\n")
	b.WriteString("schema: olm.bundle\npackage: p\nname: p.v1.0.0\nimage: example.com/p:1\n")
	fmt.Fprintf(&b, "x-l0: &l0 [%sx]\n", strings.Repeat("x,", fanout-1))
	for l := 1; l <= levels; l++ {
		fmt.Fprintf(&b, "x-l%d: &l%d [%s*l%d]\n", l, l, strings.Repeat(fmt.Sprintf("*l%d,", l-1), fanout-1), l-1)
	}
	return []byte(b.String())
}
