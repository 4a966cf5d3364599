package catalog

import (
	"slices"
	"testing"

	"github.com/gapmirror/gapmirror/imageset/fbc"
	"github.com/gapmirror/gapmirror/internal/fbctest"
)

func TestRoundTrip(t *testing.T) {
	gen, err := Generate(GenSpec{Seed: 7, Packages: 6, Bundles: 25, Channels: 4, Deprecations: true, Others: true, ObjectBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	formats, err := fbc.LoadFS(fbctest.FormatsFS(), ".")
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]func(t *testing.T) *fbc.Catalog{
		"generated": func(*testing.T) *fbc.Catalog { return gen },
		"formats":   func(*testing.T) *fbc.Catalog { return formats },
		"real":      func(t *testing.T) *fbc.Catalog { return fbctest.RealCatalog(t) },
	}
	for name, source := range sources {
		t.Run(name, func(t *testing.T) {
			c := source(t)
			first := fbctest.RenderFS(t, c)
			again, err := fbc.LoadFS(first, ".")
			if err != nil {
				t.Fatalf("loading the written catalog: %v", err)
			}
			second := fbctest.RenderFS(t, again)
			if len(first) != len(second) {
				t.Fatalf("%d files written, %d after a round trip", len(first), len(second))
			}
			for file, f := range first {
				if string(second[file].Data) != string(f.Data) {
					t.Errorf("%s differs after a round trip", file)
				}
			}
			if !slices.Equal(keptBundles(c), keptBundles(again)) {
				t.Error("bundles differ after a round trip")
			}
			checkWithOPM(t, c)
			for _, pn := range c.PackageNames() {
				for _, b := range c.Package(pn).Bundles {
					b2 := again.Package(pn).Bundle(b.Name)
					if mustJSON(t, b.Properties) != mustJSON(t, b2.Properties) || mustJSON(t, b.RelatedImages) != mustJSON(t, b2.RelatedImages) {
						t.Errorf("bundle %s changed in a round trip", b.Name)
					}
				}
			}
		})
	}
}
