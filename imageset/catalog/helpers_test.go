package catalog

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gapmirror/gapmirror/imageset/fbc"
	"github.com/gapmirror/gapmirror/internal/opmtest"
)

// fixture builds small catalogs from a compact channel notation:
//
//	"stable: 1.0.0; 1.1.0>1.0.0; 1.2.0>1.1.0!1.1.0,0.9.0; 1.3.0>1.2.0~>=1.0.0 <1.3.0"
//
// Each entry is a version, then optionally ">replaced", "!skipped,skipped"
// and "~skipRange"; bundle names are "<package>.v<version>". Every version
// used as an entry gets a bundle.
type fixture struct {
	pkgs   []*fbc.Package
	others []*fbc.Blob
}

func (f *fixture) pkg(name, defaultChannel string, channels ...string) *fbc.Package {
	p := &fbc.Package{Name: name, DefaultChannel: defaultChannel}
	have := map[string]bool{}
	for _, spec := range channels {
		chName, body, _ := strings.Cut(spec, ":")
		ch := &fbc.Channel{Package: name, Name: strings.TrimSpace(chName)}
		for _, item := range strings.Split(body, ";") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			var e fbc.ChannelEntry
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

func fxBundle(pkg, version string) *fbc.Bundle {
	return &fbc.Bundle{
		Package: pkg,
		Name:    pkg + ".v" + version,
		Image:   fmt.Sprintf("quay.example.com/%s/bundle:v%s", pkg, version),
		Properties: []fbc.Property{
			genProperty(fbc.PropertyPackage, map[string]string{"packageName": pkg, "version": version}),
			genProperty(fbc.PropertyGVK, fbc.GVK{Group: pkg + ".example.com", Version: "v1", Kind: "Thing"}),
		},
		RelatedImages: []fbc.RelatedImage{
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

func (f *fixture) catalog(t testing.TB) *fbc.Catalog {
	t.Helper()
	c, err := fbc.NewCatalog(f.pkgs, f.others)
	if err != nil {
		t.Fatalf("fixture catalog: %v", err)
	}
	return c
}

// keptBundles returns the names of every bundle of the catalog, sorted.
func keptBundles(c *fbc.Catalog) []string {
	var out []string
	for _, name := range c.PackageNames() {
		for _, b := range c.Package(name).Bundles {
			out = append(out, b.Name)
		}
	}
	slices.Sort(out)
	return out
}

// entryNames returns the entries of a channel, sorted.
func entryNames(c *fbc.Catalog, pkg, channel string) []string {
	p := c.Package(pkg)
	if p == nil {
		return nil
	}
	ch := p.Channel(channel)
	if ch == nil {
		return nil
	}
	var out []string
	for _, e := range ch.Entries {
		out = append(out, e.Name)
	}
	slices.Sort(out)
	return out
}

// names prefixes versions with the package's bundle naming.
func names(pkg string, versions ...string) []string {
	out := make([]string, len(versions))
	for i, v := range versions {
		out[i] = pkg + ".v" + v
	}
	slices.Sort(out)
	return out
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

var (
	// opmChecked remembers the catalogs opm already judged, by the hash of
	// their files: the property tests filter to the same result many times,
	// and each opm run costs a process start.
	opmChecked sync.Map
	// opmRuns counts opm validate runs, for the tests' logs.
	opmRuns atomicCounter
)

type atomicCounter struct {
	mu sync.Mutex
	n  int
}

func (a *atomicCounter) add() { a.mu.Lock(); a.n++; a.mu.Unlock() }
func (a *atomicCounter) get() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

// checkWithOPM writes c with WriteDir and has opm validate it. gapmirror's
// Validate and opm must agree where gapmirror is sure: a catalog Validate
// accepts without warnings passes, one it rejects fails. A catalog it warns
// about (valid only for older opm, or for none that keeps names outside the
// channel safe) may go either way with this opm release: logged.
func checkWithOPM(t testing.TB, c *fbc.Catalog) {
	t.Helper()
	opm := opmtest.Oracle(t)
	if opm == "" {
		return
	}
	warnings, verr := validate(c)
	h := sha256.New()
	if err := c.WriteFiles(func(name string, data []byte) error {
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(data))
		h.Write(data)
		return nil
	}); err != nil {
		t.Fatalf("WriteFiles: %v", err)
	}
	key := string(h.Sum(nil))
	if _, seen := opmChecked.Load(key); seen {
		return
	}
	opmChecked.Store(key, true)
	dir := t.TempDir()
	if err := c.WriteDir(dir); err != nil {
		t.Fatalf("WriteDir: %v", err)
	}
	opmRuns.add()
	// opm runs in the background, NumCPU at a time, while the test goes on
	// filtering; the cleanup (run before TempDir's) waits for the verdict.
	done := make(chan struct{})
	t.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		opmSlots <- struct{}{}
		oerr := opmtest.ValidateErr(opm, dir)
		<-opmSlots
		switch {
		case verr != nil && oerr == nil:
			t.Errorf("Validate rejects the catalog but opm validate accepts it: %v", verr)
		case verr == nil && len(warnings) == 0 && oerr != nil:
			t.Errorf("Validate accepts the catalog but opm rejects it: %v", oerr)
		case verr == nil && len(warnings) > 0:
			t.Logf("opm validate on a catalog with warnings (%s): accepted=%v", strings.Join(warnings, "; "), oerr == nil)
		}
	}()
}

// opmSlots bounds the opm processes running at once.
var opmSlots = make(chan struct{}, runtime.NumCPU())
