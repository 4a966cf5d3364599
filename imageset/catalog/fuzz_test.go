package catalog

import (
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/gapmirror/gapmirror/internal/fuzzguard"

	"github.com/gapmirror/gapmirror/imageset/fbc"
	"github.com/gapmirror/gapmirror/internal/fbctest"
)

// FuzzLoadFS: any catalog file (as JSON stream, YAML, or sniffed) loads or
// is refused with an error, never a panic or a hang. Seeded with a built
// catalog and, where they are, the small real catalogs.
func FuzzLoadFS(f *testing.F) {
	fx := &fixture{}
	fx.pkg("etcd", "stable", "stable: 1.0.0; 1.1.0>1.0.0; 1.2.0>1.1.0!1.0.0~>=1.0.0 <1.2.0", "alpha: 1.2.0")
	fx.pkg("other", "v1", "v1: 0.1.0")
	for _, file := range fbctest.RenderFS(f, fx.catalog(f)) {
		f.Add("catalog.json", file.Data)
	}
	real, _ := filepath.Glob(filepath.Join(fbctest.RealCatalogDir, "*.yaml"))
	for _, p := range real {
		if fi, err := os.Stat(p); err == nil && fi.Size() < 64<<10 {
			data, _ := os.ReadFile(p)
			f.Add("catalog.yaml", data)
		}
	}
	f.Add("catalog.json", []byte(`{"schema":"olm.package","name":"a"}{"schema":"olm.bundle","package":"a","name":"a.v1","properties":[{"type":"olm.bundle.object","value":{"ref":"../../etc/passwd"}}]}`))
	f.Add("catalog.yaml", fbctest.AliasBomb(30, 5)) // refused by the alias budget (TestLoadRefusesAliasBomb)
	f.Add("x", []byte("{\"schema\":\"olm.channel\",\"package\":\"a\",\"name\":\"c\",\"entries\":[{\"name\":\"a.v1\",\"replaces\":\"a.v1\"}]}"))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		if name == "" || len(name) > 64 || !fstestValid(name) {
			name = "catalog.json"
		}
		fsys := fstest.MapFS{"configs/" + name: {Data: data}}
		fuzzguard.Within(t, func() {
			if c, err := fbc.LoadFS(fsys, "/configs"); err == nil {
				_ = c.WriteFiles(func(string, []byte) error { return nil })
			}
		})
	})
}

// fstestValid reports whether name is one path element MapFS accepts.
func fstestValid(name string) bool {
	for _, r := range name {
		if r == '/' || r == 0 {
			return false
		}
	}
	return name != "." && name != ".."
}
