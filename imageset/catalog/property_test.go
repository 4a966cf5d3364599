package catalog

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"

	"github.com/gapmirror/gapmirror/imageset/fbc"
	"github.com/gapmirror/gapmirror/internal/fbctest"
)

func mustVersion(s string) *semver.Version { return semver.MustParse(s) }

// checkFiltered asserts the invariants every Filter result must hold.
func checkFiltered(t *testing.T, src, out *fbc.Catalog, rep *Report) {
	t.Helper()
	// It is a catalog opm would serve, and it survives being written and read.
	warnings, err := validate(out)
	if err != nil {
		t.Errorf("filtered catalog does not validate: %v", err)
	}
	for _, w := range warnings {
		if !strings.Contains(w, "valid only for opm releases before") {
			t.Errorf("unexpected validation warning: %s", w)
		}
	}
	again, err := fbc.LoadFS(fbctest.RenderFS(t, out), ".")
	if err != nil {
		t.Fatalf("the written filtered catalog does not load: %v", err)
	}
	if !slices.Equal(keptBundles(again), keptBundles(out)) {
		t.Error("bundles differ after writing the filtered catalog")
	}
	checkWithOPM(t, out)

	reported := map[string]bool{}
	for _, pr := range rep.Packages {
		for _, br := range pr.Bundles {
			reported[pr.Name+"/"+br.Name] = true
			if len(br.Reasons) == 0 {
				t.Errorf("bundle %s/%s is kept without a reason", pr.Name, br.Name)
			}
		}
	}
	for _, pn := range out.PackageNames() {
		p, sp := out.Package(pn), src.Package(pn)
		pr := rep.Package(pn)
		if pr == nil || pr.DefaultChannel != p.DefaultChannel {
			t.Errorf("package %s: report %+v does not match", pn, pr)
			continue
		}
		for _, b := range p.Bundles {
			if sp.Bundle(b.Name) != b {
				t.Errorf("bundle %s/%s is not the source's bundle", pn, b.Name)
			}
			if !reported[pn+"/"+b.Name] {
				t.Errorf("bundle %s/%s is kept but not reported", pn, b.Name)
			}
			delete(reported, pn+"/"+b.Name)
		}
		for _, ch := range p.Channels {
			sch := sp.Channel(ch.Name)
			for _, e := range ch.Entries {
				se := sch.Entry(e.Name)
				if se == nil || mustJSON(t, se) != mustJSON(t, e) {
					t.Errorf("%s/%s: entry %s differs from the source", pn, ch.Name, e.Name)
				}
			}
			g := newGraph(p, ch)
			all := g.all()
			hs := g.heads(all)
			if len(hs) != 1 {
				t.Errorf("%s/%s has %d heads", pn, ch.Name, len(hs))
				continue
			}
			if cr := pr.channel(ch.Name); cr == nil || cr.Head != g.names[hs[0]] || len(cr.Bundles) != len(ch.Entries) {
				t.Errorf("%s/%s: report %+v does not match head %s", pn, ch.Name, cr, g.names[hs[0]])
			}
			sg := newGraph(sp, sch)
			sourceHead := -1
			if shs := sg.heads(sg.all()); len(shs) == 1 {
				sourceHead = shs[0]
			}
			// Every kept bundle reaches the head under OLM v0 and OLM v1,
			// unless it could not do so in the source either.
			var srcV0, srcV1 []string
			if sourceHead >= 0 {
				srcV0, srcV1 = sg.strandedV0(sg.all(), sourceHead), sg.strandedV1(sg.all(), sourceHead)
			}
			for _, s := range g.strandedV0(all, hs[0]) {
				if !slices.Contains(srcV0, s) {
					t.Errorf("%s/%s: %s cannot reach head %s under OLM v0", pn, ch.Name, s, g.names[hs[0]])
				}
			}
			for _, s := range g.strandedV1(all, hs[0]) {
				if !slices.Contains(srcV1, s) {
					t.Errorf("%s/%s: OLM v1's walk from %s does not reach head %s", pn, ch.Name, s, g.names[hs[0]])
				}
			}
		}
	}
	for key := range reported {
		t.Errorf("bundle %s is reported but not kept", key)
	}
}

// specsFor builds filter specs exercising every kind of selection on one
// package, at random but reproducibly.
func specsFor(p *fbc.Package, rng *rand.Rand) []FilterSpec {
	specs := []FilterSpec{
		{Packages: []PackageSpec{{Name: p.Name}}},
		{Packages: []PackageSpec{{Name: p.Name}}, Full: true},
	}
	for _, ch := range p.Channels {
		var versions []*fbc.Bundle
		for _, e := range ch.Entries {
			versions = append(versions, p.Bundle(e.Name))
		}
		slices.SortFunc(versions, func(a, b *fbc.Bundle) int { return compareVersions(a.Version(), b.Version()) })
		lo := versions[rng.IntN(len(versions))]
		hi := versions[rng.IntN(len(versions))]
		if compareVersions(lo.Version(), hi.Version()) > 0 {
			lo, hi = hi, lo
		}
		one := func(cs ChannelSpec, bundles ...string) FilterSpec {
			cs.Name = ch.Name
			return FilterSpec{Packages: []PackageSpec{{Name: p.Name, Channels: []ChannelSpec{cs}, DefaultChannel: ch.Name, Bundles: bundles}}}
		}
		specs = append(specs,
			one(ChannelSpec{MinVersion: lo.VersionString()}),
			one(ChannelSpec{MaxVersion: hi.VersionString()}),
			one(ChannelSpec{MinVersion: lo.VersionString(), MaxVersion: hi.VersionString()}),
			one(ChannelSpec{VersionRange: fmt.Sprintf(">=%s, <=%s", lowest(lo.Version()), hi.Version().String())}),
			one(ChannelSpec{}, versions[rng.IntN(len(versions))].Name),
			one(ChannelSpec{MaxVersion: lo.VersionString()}, hi.Name),
		)
	}
	return specs
}

// TestFilterInvariantsReal filters every real package many ways and checks
// the invariants: one head per kept channel, every kept bundle reaches it
// through kept bundles (OLM v0 and v1), the result validates and round-trips.
func TestFilterInvariantsReal(t *testing.T) {
	c := fbctest.RealCatalog(t)
	rng := rand.New(rand.NewPCG(42, 42))
	runs := 0
	for _, name := range c.PackageNames() {
		for i, spec := range specsFor(c.Package(name), rng) {
			out, rep, err := Filter(c, spec)
			if err != nil {
				t.Errorf("%s spec %d %+v: %v", name, i, spec.Packages, err)
				continue
			}
			runs++
			checkFiltered(t, c, out, rep)
		}
	}
	t.Logf("%d filter runs checked, %d distinct results judged by opm so far", runs, opmRuns.get())
}

func TestFilterInvariantsGenerated(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		c, err := Generate(GenSpec{Seed: seed, Packages: 6, Bundles: 30, Channels: 4, DependencyRatio: 0.3, SkipRatio: 0.3, Deprecations: true, Others: true})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(seed, 7))
		for _, name := range c.PackageNames() {
			for i, spec := range specsFor(c.Package(name), rng) {
				out, rep, err := Filter(c, spec)
				if err != nil {
					t.Errorf("seed %d %s spec %d %+v: %v", seed, name, i, spec.Packages, err)
					continue
				}
				checkFiltered(t, c, out, rep)
			}
		}
		out, rep, err := Filter(c, FilterSpec{})
		if err != nil {
			t.Fatalf("seed %d, heads: %v", seed, err)
		}
		checkFiltered(t, c, out, rep)
	}
}

// lowest writes v so that an OLM v1 range starting there also holds prereleases.
func lowest(v *semver.Version) string {
	if v.Prerelease() != "" {
		return v.String()
	}
	return v.String() + "-0"
}
