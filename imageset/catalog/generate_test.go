package catalog

import (
	"maps"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/internal/fbctest"
)

func TestGenerate(t *testing.T) {
	spec := GenSpec{Seed: 3, Packages: 10, Bundles: 40, Channels: 5, Deprecations: true, Others: true, DependencyRatio: 0.3}
	c, err := Generate(spec)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if len(c.PackageNames()) != 10 || c.BundleCount() != 400 {
		t.Fatalf("%d packages, %d bundles; want 10 and 400", len(c.PackageNames()), c.BundleCount())
	}
	warnings, err := validate(c)
	if err != nil || len(warnings) > 0 {
		t.Fatalf("generated catalog is not valid for the newest opm: %v %v", err, warnings)
	}
	checkWithOPM(t, c)
	again, err := Generate(spec)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(fbctest.Rendered(t, c), fbctest.Rendered(t, again)) {
		t.Error("Generate is not deterministic")
	}
	other, _ := Generate(GenSpec{Seed: 4, Packages: 10, Bundles: 40, Channels: 5})
	if maps.Equal(fbctest.Rendered(t, c), fbctest.Rendered(t, other)) {
		t.Error("different seeds give the same catalog")
	}

	var skips, skipRanges, rcs, deps, deprecations, others int
	channels := map[int]bool{}
	for _, name := range c.PackageNames() {
		p := c.Package(name)
		channels[len(p.Channels)] = true
		for _, ch := range p.Channels {
			for _, e := range ch.Entries {
				if len(e.Skips) > 0 {
					skips++
				}
				if e.SkipRange != "" {
					skipRanges++
				}
			}
		}
		for _, b := range p.Bundles {
			if strings.Contains(b.Name, "-rc.") {
				rcs++
			}
			deps += len(b.RequiredPackages()) + len(b.RequiredGVKs())
		}
		if p.Deprecations != nil {
			deprecations++
		}
		others += len(p.Others)
	}
	if skips == 0 || skipRanges == 0 || rcs == 0 || deps == 0 || deprecations != 4 || others != 10 || !channels[5] {
		t.Errorf("generated features: %d skips, %d skipRanges, %d release candidates, %d dependencies, %d deprecations, %d custom blobs, channel counts %v",
			skips, skipRanges, rcs, deps, deprecations, others, channels)
	}
}

func TestGenerateLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 20,000 bundles")
	}
	c, err := Generate(GenSpec{Seed: 1, Packages: 100, Bundles: 200, Channels: 4})
	if err != nil {
		t.Fatal(err)
	}
	if c.BundleCount() != 20000 {
		t.Errorf("%d bundles, want 20000", c.BundleCount())
	}
}
