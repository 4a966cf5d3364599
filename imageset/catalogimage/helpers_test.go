package catalogimage

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gapmirror/gapmirror/imageset/catalog"
	"github.com/gapmirror/gapmirror/internal/opmtest"
)

// The helpers below are copies of imageset/catalog's test helpers (branching
// from filter_test.go; fixture, fxBundle, keptBundles and opmOracle from
// helpers_test.go; genProperty from generate.go), with qualifiers, for
// TestRebuildFilteredCatalog, which filters a catalog before rebuilding it.
// Test helpers of another package cannot be shared without exporting them.

// branching builds the catalog most filter tests use:
//
//	app (default stable):
//	  stable:    1.0.0 <- 1.1.0 <- 1.2.0 <- 1.2.1 <- 1.3.0, with 1.1.1 replacing
//	             1.1.0 but skipped by 1.2.0, and 1.2.1 skipRange ">=1.1.0 <1.2.1"
//	  fast:      1.2.0 <- 1.2.1 <- 1.3.0 <- 1.4.0, which skips 1.4.0-rc.1
//	  candidate: 2.0.0
//	  1.3.0 requires package dep >=1.0.0 <2.0.0; deprecations; a custom blob
//	dep:   stable 0.9.0 <- 1.0.0 <- 1.5.0 <- 2.0.0; 1.5.0 requires base's GVK
//	base:  stable 3.0.0 <- 3.1.0
//	other: stable 0.1.0
func branching(t testing.TB) *catalog.Catalog {
	f := &fixture{}
	app := f.pkg("app", "stable",
		"stable: 1.0.0; 1.1.0>1.0.0; 1.1.1>1.1.0; 1.2.0>1.1.0!1.1.1; 1.2.1>1.2.0~>=1.1.0 <1.2.1; 1.3.0>1.2.1",
		"fast: 1.2.0; 1.2.1>1.2.0; 1.3.0>1.2.1; 1.4.0-rc.1>1.3.0; 1.4.0>1.3.0!1.4.0-rc.1",
		"candidate: 2.0.0")
	app.Deprecations = &catalog.Deprecations{Package: "app", Entries: []catalog.DeprecationEntry{
		{Reference: catalog.DeprecationReference{Schema: catalog.SchemaPackage}, Message: "app is moving"},
		{Reference: catalog.DeprecationReference{Schema: catalog.SchemaChannel, Name: "fast"}, Message: "use stable"},
		{Reference: catalog.DeprecationReference{Schema: catalog.SchemaBundle, Name: "app.v1.0.0"}, Message: "upgrade"},
		{Reference: catalog.DeprecationReference{Schema: catalog.SchemaBundle, Name: "app.v1.4.0"}, Message: "broken"},
	}}
	app.Others = []*catalog.Blob{{Schema: "example.com.notes", Package: "app", Name: "n", Raw: json.RawMessage(`{"schema":"example.com.notes","package":"app","name":"n"}`)}}
	f.pkg("dep", "stable", "stable: 0.9.0; 1.0.0>0.9.0; 1.5.0>1.0.0; 2.0.0>1.5.0")
	f.pkg("base", "stable", "stable: 3.0.0; 3.1.0>3.0.0")
	f.pkg("other", "stable", "stable: 0.1.0")
	f.property("app", "1.3.0", catalog.PropertyPackageRequired, catalog.PackageRequirement{PackageName: "dep", VersionRange: ">=1.0.0 <2.0.0"})
	f.property("dep", "1.5.0", catalog.PropertyGVKRequired, catalog.GVK{Group: "base.example.com", Version: "v1", Kind: "Thing"})
	f.others = []*catalog.Blob{{Schema: "example.com.catalog-info", Raw: json.RawMessage(`{"schema":"example.com.catalog-info"}`)}}
	return f.catalog(t)
}

// fixture builds small catalogs from a compact channel notation:
//
//	"stable: 1.0.0; 1.1.0>1.0.0; 1.2.0>1.1.0!1.1.0,0.9.0; 1.3.0>1.2.0~>=1.0.0 <1.3.0"
//
// Each entry is a version, then optionally ">replaced", "!skipped,skipped"
// and "~skipRange"; bundle names are "<package>.v<version>". Every version
// used as an entry gets a bundle.
type fixture struct {
	pkgs   []*catalog.Package
	others []*catalog.Blob
}

func (f *fixture) pkg(name, defaultChannel string, channels ...string) *catalog.Package {
	p := &catalog.Package{Name: name, DefaultChannel: defaultChannel}
	have := map[string]bool{}
	for _, spec := range channels {
		chName, body, _ := strings.Cut(spec, ":")
		ch := &catalog.Channel{Package: name, Name: strings.TrimSpace(chName)}
		for _, item := range strings.Split(body, ";") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			var e catalog.ChannelEntry
			if rest, rng, ok := strings.Cut(item, "~"); ok {
				item, e.SkipRange = rest, rng
			}
			if rest, skips, ok := strings.Cut(item, "!"); ok {
				item = rest
				for _, s := range strings.Split(skips, ",") {
					e.Skips = append(e.Skips, name+".v"+s)
				}
			}
			if rest, repl, ok := strings.Cut(item, ">"); ok {
				item, e.Replaces = rest, name+".v"+repl
			}
			e.Name = name + ".v" + item
			ch.Entries = append(ch.Entries, e)
			if !have[item] {
				have[item] = true
				p.Bundles = append(p.Bundles, fxBundle(name, item))
			}
		}
		p.Channels = append(p.Channels, ch)
	}
	f.pkgs = append(f.pkgs, p)
	return p
}

func fxBundle(pkg, version string) *catalog.Bundle {
	return &catalog.Bundle{
		Package: pkg,
		Name:    pkg + ".v" + version,
		Image:   fmt.Sprintf("quay.example.com/%s/bundle:v%s", pkg, version),
		Properties: []catalog.Property{
			genProperty(catalog.PropertyPackage, map[string]string{"packageName": pkg, "version": version}),
			genProperty(catalog.PropertyGVK, catalog.GVK{Group: pkg + ".example.com", Version: "v1", Kind: "Thing"}),
		},
		RelatedImages: []catalog.RelatedImage{
			{Name: "operator", Image: fmt.Sprintf("quay.example.com/%s/operator:v%s", pkg, version)},
			{Name: "shared", Image: "quay.example.com/shared/kube-rbac-proxy:v1"},
		},
	}
}

// property adds a property to the bundle of pkg at version.
func (f *fixture) property(pkg, version, typ string, value any) {
	for _, p := range f.pkgs {
		if p.Name != pkg {
			continue
		}
		for _, b := range p.Bundles {
			if b.Name == pkg+".v"+version {
				b.Properties = append(b.Properties, genProperty(typ, value))
				return
			}
		}
	}
	panic(fmt.Sprintf("fixture has no bundle %s.v%s", pkg, version))
}

func (f *fixture) catalog(t testing.TB) *catalog.Catalog {
	t.Helper()
	c, err := catalog.NewCatalog(f.pkgs, f.others)
	if err != nil {
		t.Fatalf("fixture catalog: %v", err)
	}
	return c
}

func genProperty(typ string, v any) catalog.Property {
	raw, _ := json.Marshal(v) // plain maps and structs always marshal
	return catalog.Property{Type: typ, Value: raw}
}

// keptBundles returns the names of every bundle of the catalog, sorted.
func keptBundles(c *catalog.Catalog) []string {
	var out []string
	for _, name := range c.PackageNames() {
		for _, b := range c.Package(name).Bundles {
			out = append(out, b.Name)
		}
	}
	slices.Sort(out)
	return out
}

// opmOracle returns the opm binary for oracle checks inside tests that check
// more than opm: "" (with a note in the log) when it is not built, so the
// rest of the test still runs; a failure when CI requires it.
func opmOracle(t testing.TB) string {
	t.Helper()
	opm, err := opmtest.Find()
	if err != nil {
		if opmtest.Required() {
			t.Fatalf("opm oracle required (GAPMIRROR_REQUIRE_OPM=1) but missing: %v", err)
		}
		opmMissing.Do(func() { t.Logf("not checking with opm: %v", err) })
		return ""
	}
	return opm
}

var opmMissing sync.Once
