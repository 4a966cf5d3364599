package catalog

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/imageset/fbc"
	"github.com/gapmirror/gapmirror/internal/fbctest"
	"github.com/gapmirror/gapmirror/internal/opmtest"
)

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
func branching(t testing.TB) *fbc.Catalog {
	f := &fixture{}
	app := f.pkg("app", "stable",
		"stable: 1.0.0; 1.1.0>1.0.0; 1.1.1>1.1.0; 1.2.0>1.1.0!1.1.1; 1.2.1>1.2.0~>=1.1.0 <1.2.1; 1.3.0>1.2.1",
		"fast: 1.2.0; 1.2.1>1.2.0; 1.3.0>1.2.1; 1.4.0-rc.1>1.3.0; 1.4.0>1.3.0!1.4.0-rc.1",
		"candidate: 2.0.0")
	app.Deprecations = &fbc.Deprecations{Package: "app", Entries: []fbc.DeprecationEntry{
		{Reference: fbc.DeprecationReference{Schema: fbc.SchemaPackage}, Message: "app is moving"},
		{Reference: fbc.DeprecationReference{Schema: fbc.SchemaChannel, Name: "fast"}, Message: "use stable"},
		{Reference: fbc.DeprecationReference{Schema: fbc.SchemaBundle, Name: "app.v1.0.0"}, Message: "upgrade"},
		{Reference: fbc.DeprecationReference{Schema: fbc.SchemaBundle, Name: "app.v1.4.0"}, Message: "broken"},
	}}
	app.Others = []*fbc.Blob{{Schema: "example.com.notes", Package: "app", Name: "n", Raw: json.RawMessage(`{"schema":"example.com.notes","package":"app","name":"n"}`)}}
	f.pkg("dep", "stable", "stable: 0.9.0; 1.0.0>0.9.0; 1.5.0>1.0.0; 2.0.0>1.5.0")
	f.pkg("base", "stable", "stable: 3.0.0; 3.1.0>3.0.0")
	f.pkg("other", "stable", "stable: 0.1.0")
	f.property("app", "1.3.0", fbc.PropertyPackageRequired, fbc.PackageRequirement{PackageName: "dep", VersionRange: ">=1.0.0 <2.0.0"})
	f.property("dep", "1.5.0", fbc.PropertyGVKRequired, fbc.GVK{Group: "base.example.com", Version: "v1", Kind: "Thing"})
	f.others = []*fbc.Blob{{Schema: "example.com.catalog-info", Raw: json.RawMessage(`{"schema":"example.com.catalog-info"}`)}}
	return f.catalog(t)
}

func TestFilterSemantics(t *testing.T) {
	c := branching(t)
	type want struct {
		channels map[string][]string // package/channel → kept entries
		heads    map[string]string   // package/channel → head
		defaults map[string]string   // package → default channel
		absent   []string            // packages not kept
		warn     []string            // substrings of some warning
	}
	cases := []struct {
		name string
		spec FilterSpec
		want want
	}{
		{
			name: "no packages: every channel's head, plus dependencies",
			spec: FilterSpec{},
			want: want{
				channels: map[string][]string{
					"app/stable": names("app", "1.3.0"), "app/fast": names("app", "1.4.0"), "app/candidate": names("app", "2.0.0"),
					"dep/stable": names("dep", "1.5.0", "2.0.0"), "base/stable": names("base", "3.1.0"), "other/stable": names("other", "0.1.0"),
				},
				heads: map[string]string{"dep/stable": "dep.v2.0.0"},
			},
		},
		{
			name: "package without channels: head of each channel",
			spec: FilterSpec{Packages: []PackageSpec{{Name: "app"}}},
			want: want{
				channels: map[string][]string{"app/stable": names("app", "1.3.0"), "app/fast": names("app", "1.4.0"), "app/candidate": names("app", "2.0.0"),
					"dep/stable": names("dep", "1.5.0"), "base/stable": names("base", "3.1.0")},
				heads:  map[string]string{"dep/stable": "dep.v1.5.0"},
				absent: []string{"other"},
			},
		},
		{
			name: "skip dependencies",
			spec: FilterSpec{Packages: []PackageSpec{{Name: "app"}}, SkipDependencies: true},
			want: want{absent: []string{"dep", "base", "other"}},
		},
		{
			name: "channel selection with defaultChannel",
			spec: FilterSpec{Packages: []PackageSpec{{Name: "app", Channels: []ChannelSpec{{Name: "fast"}}, DefaultChannel: "fast"}}, SkipDependencies: true},
			want: want{channels: map[string][]string{"app/fast": names("app", "1.4.0"), "app/stable": nil}, defaults: map[string]string{"app": "fast"}},
		},
		{
			name: "minVersion keeps the tail up to each head; prereleases compare by precedence",
			spec: FilterSpec{Packages: []PackageSpec{{Name: "app", MinVersion: "1.2.0"}}, SkipDependencies: true},
			want: want{channels: map[string][]string{
				"app/stable":    names("app", "1.2.0", "1.2.1", "1.3.0"),
				"app/fast":      names("app", "1.2.0", "1.2.1", "1.3.0", "1.4.0-rc.1", "1.4.0"),
				"app/candidate": names("app", "2.0.0"),
			}},
		},
		{
			name: "maxVersion makes a new head and drops channels with nothing in range",
			spec: FilterSpec{Packages: []PackageSpec{{Name: "app", MaxVersion: "1.1.1"}}, SkipDependencies: true},
			want: want{
				channels: map[string][]string{"app/stable": names("app", "1.0.0", "1.1.0", "1.1.1"), "app/fast": nil, "app/candidate": nil},
				heads:    map[string]string{"app/stable": "app.v1.1.1"},
				warn:     []string{"head is now app.v1.1.1", "channels candidate, fast dropped"},
			},
		},
		{
			name: "a skipped bundle stays a leaf under a head that skips it",
			spec: FilterSpec{Packages: []PackageSpec{{Name: "app", Channels: []ChannelSpec{{Name: "stable", MinVersion: "1.1.1", MaxVersion: "1.2.0"}}}}, SkipDependencies: true},
			want: want{
				channels: map[string][]string{"app/stable": names("app", "1.1.0", "1.1.1", "1.2.0")},
				heads:    map[string]string{"app/stable": "app.v1.2.0"},
				warn:     []string{"kept outside the selected versions for the upgrade path: app.v1.1.0"},
			},
		},
		{
			name: "explicit bundles keep the upgrade path to the head",
			spec: FilterSpec{Packages: []PackageSpec{{Name: "app", Bundles: []string{"app.v1.1.1", "app.v1.3.0"}}}, SkipDependencies: true},
			want: want{
				channels: map[string][]string{"app/stable": names("app", "1.1.0", "1.1.1", "1.2.0", "1.2.1", "1.3.0"), "app/fast": names("app", "1.3.0"), "app/candidate": nil},
				heads:    map[string]string{"app/stable": "app.v1.3.0", "app/fast": "app.v1.3.0"},
				warn:     []string{"head is now app.v1.3.0; the source head app.v1.4.0"},
			},
		},
		{
			name: "OLM v1 range with prerelease exclusion",
			spec: FilterSpec{Packages: []PackageSpec{{Name: "app", Channels: []ChannelSpec{{Name: "fast", VersionRange: ">=1.2.0, <1.4.0"}}, DefaultChannel: "fast"}}, SkipDependencies: true},
			want: want{
				channels: map[string][]string{"app/fast": names("app", "1.2.0", "1.2.1", "1.3.0")},
				heads:    map[string]string{"app/fast": "app.v1.3.0"},
				warn:     []string{"prerelease bundles app.v1.4.0-rc.1 are outside"},
			},
		},
		{
			name: "OLM v1 range with || and a tilde",
			spec: FilterSpec{Packages: []PackageSpec{{Name: "app", VersionRange: "~1.1.0 || 1.3.x"}}, SkipDependencies: true},
			want: want{channels: map[string][]string{
				"app/stable": names("app", "1.1.0", "1.1.1", "1.2.0", "1.2.1", "1.3.0"),
				"app/fast":   names("app", "1.3.0"),
			}},
		},
		{
			name: "full keeps whole channels",
			spec: FilterSpec{Full: true, Packages: []PackageSpec{{Name: "dep"}}},
			want: want{channels: map[string][]string{"dep/stable": names("dep", "0.9.0", "1.0.0", "1.5.0", "2.0.0"), "base/stable": names("base", "3.1.0")}},
		},
		{
			name: "a dependency in an unselected channel adds that channel",
			spec: FilterSpec{Packages: []PackageSpec{{Name: "app", Channels: []ChannelSpec{{Name: "candidate"}}, DefaultChannel: "candidate"}, {Name: "dep", Channels: []ChannelSpec{{Name: "stable", MaxVersion: "1.0.0"}}}}},
			want: want{channels: map[string][]string{"app/candidate": names("app", "2.0.0"), "dep/stable": names("dep", "0.9.0", "1.0.0")}, absent: []string{"base"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, rep, err := Filter(c, tc.spec)
			if err != nil {
				t.Fatalf("Filter: %v", err)
			}
			checkFiltered(t, c, out, rep)
			for key, entries := range tc.want.channels {
				pkg, ch, _ := strings.Cut(key, "/")
				if got := entryNames(out, pkg, ch); !slices.Equal(got, entries) {
					t.Errorf("%s: kept %v, want %v", key, got, entries)
				}
			}
			for key, head := range tc.want.heads {
				pkg, ch, _ := strings.Cut(key, "/")
				if pr := rep.Package(pkg); pr == nil || pr.channel(ch) == nil || pr.channel(ch).Head != head {
					t.Errorf("%s: report head is not %s: %+v", key, head, pr)
				}
			}
			for pkg, dc := range tc.want.defaults {
				if p := out.Package(pkg); p == nil || p.DefaultChannel != dc {
					t.Errorf("package %s: default channel is not %s", pkg, dc)
				}
			}
			for _, pkg := range tc.want.absent {
				if out.Package(pkg) != nil {
					t.Errorf("package %s is kept", pkg)
				}
			}
			warnings := strings.Join(allWarnings(rep), "\n")
			for _, w := range tc.want.warn {
				if !strings.Contains(warnings, w) {
					t.Errorf("no warning mentions %q; warnings:\n%s", w, warnings)
				}
			}
		})
	}
}

func allWarnings(rep *Report) []string {
	out := slices.Clone(rep.Warnings)
	for _, p := range rep.Packages {
		out = append(out, p.Warnings...)
	}
	return out
}

func TestFilterReasons(t *testing.T) {
	c := branching(t)
	_, rep, err := Filter(c, FilterSpec{Packages: []PackageSpec{{Name: "app", Channels: []ChannelSpec{{Name: "stable"}}, Bundles: []string{"app.v1.1.1", "app.v1.3.0"}}}})
	if err != nil {
		t.Fatal(err)
	}
	app := rep.Package("app")
	for name, kinds := range map[string][]ReasonKind{
		"app.v1.1.1": {reasonExplicit},
		"app.v1.3.0": {reasonExplicit, reasonHead},
		"app.v1.2.0": {reasonUpgradePath},
		"app.v1.1.0": {reasonUpgradePath},
	} {
		b := app.Bundle(name)
		if b == nil {
			t.Errorf("%s not in the report", name)
			continue
		}
		for _, k := range kinds {
			if !b.Has(k) {
				t.Errorf("%s: no %s reason in %v", name, k, b.Reasons)
			}
		}
	}
	dep := rep.Package("dep")
	if dep == nil || dep.Requested {
		t.Fatalf("dep should be kept as a dependency: %+v", dep)
	}
	b := dep.Bundle("dep.v1.5.0")
	if b == nil || !b.Has(reasonDependency) || !strings.Contains(b.Reasons[0].Detail, "required by app/app.v1.3.0") {
		t.Errorf("dep.v1.5.0 reasons: %+v", b)
	}
	var gotDeps []string
	for _, d := range rep.Dependencies {
		gotDeps = append(gotDeps, d.Bundle+" -> "+d.SatisfiedBy)
	}
	if !slices.Equal(gotDeps, []string{"app.v1.3.0 -> dep/dep.v1.5.0", "dep.v1.5.0 -> base/base.v3.1.0"}) {
		t.Errorf("dependencies %v", gotDeps)
	}
	var text strings.Builder
	if err := rep.writeText(&text); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"package dep (dependency)", "bundle app.v1.2.0 (1.2.0): upgrade-path in stable", "dependency app/app.v1.3.0 olm.package.required dep >=1.0.0 <2.0.0: satisfied by dep/dep.v1.5.0"} {
		if !strings.Contains(text.String(), w) {
			t.Errorf("report text lacks %q:\n%s", w, text.String())
		}
	}
}

func TestFilterPrunesDeprecationsAndOthers(t *testing.T) {
	c := branching(t)
	out, _, err := Filter(c, FilterSpec{Packages: []PackageSpec{{Name: "app", MaxVersion: "1.1.1"}}, SkipDependencies: true})
	if err != nil {
		t.Fatal(err)
	}
	d := out.Package("app").Deprecations
	var refs []string
	for _, e := range d.Entries {
		refs = append(refs, e.Reference.Schema+":"+e.Reference.Name)
	}
	if !slices.Equal(refs, []string{"olm.package:", "olm.bundle:app.v1.0.0"}) {
		t.Errorf("deprecation entries %v", refs)
	}
	if len(out.Package("app").Others) != 1 || len(out.Others()) != 1 {
		t.Errorf("custom blobs not kept: %v, %v", out.Package("app").Others, out.Others())
	}
	checkWithOPM(t, out)
	out, _, err = Filter(c, FilterSpec{Packages: []PackageSpec{{Name: "app", Channels: []ChannelSpec{{Name: "candidate"}}, DefaultChannel: "candidate"}}, SkipDependencies: true})
	if err != nil {
		t.Fatal(err)
	}
	if d := out.Package("app").Deprecations; d == nil || len(d.Entries) != 1 {
		t.Errorf("only the package deprecation should remain: %+v", d)
	}
	if _, err := validate(out); err != nil {
		t.Errorf("filtered catalog invalid: %v", err)
	}
	checkWithOPM(t, out)
}

func TestFilterFullCatalog(t *testing.T) {
	c := branching(t)
	out, rep, err := Filter(c, FilterSpec{Full: true})
	if err != nil {
		t.Fatal(err)
	}
	if out != c {
		t.Error("full with no packages should return the catalog itself")
	}
	if b := rep.Package("app").Bundle("app.v1.1.1"); b == nil || !b.Has(reasonFull) {
		t.Errorf("report of a full catalog: %+v", b)
	}
	if b := rep.Package("app").Bundle("app.v1.3.0"); b == nil || !b.Has(reasonHead) {
		t.Errorf("heads are reported in a full catalog: %+v", b)
	}
}

func TestFilterErrors(t *testing.T) {
	c := branching(t)
	cases := []struct {
		name string
		spec FilterSpec
		want []string
	}{
		{"unknown package", FilterSpec{Packages: []PackageSpec{{Name: "ap"}}}, []string{`package "ap" is not in the catalog`, `did you mean "app"`}},
		{"empty package name", FilterSpec{Packages: []PackageSpec{{}}}, []string{"packages[0]: name is empty"}},
		{"package twice", FilterSpec{Packages: []PackageSpec{{Name: "app"}, {Name: "app"}}}, []string{`package "app" is listed twice`}},
		{"unknown channel", FilterSpec{Packages: []PackageSpec{{Name: "app", Channels: []ChannelSpec{{Name: "stabel"}}}}},
			[]string{`package "app" channel "stabel" does not exist (channels of "app": candidate, fast, stable)`, `did you mean "stable"`}},
		{"channel twice", FilterSpec{Packages: []PackageSpec{{Name: "app", Channels: []ChannelSpec{{Name: "stable"}, {Name: "stable"}}}}}, []string{`channel "stable" is listed twice`}},
		{"min greater than max", FilterSpec{Packages: []PackageSpec{{Name: "app", MinVersion: "1.3.0", MaxVersion: "1.2.0"}}},
			[]string{`package "app": minVersion 1.3.0 is greater than maxVersion 1.2.0`}},
		{"channel min greater than max", FilterSpec{Packages: []PackageSpec{{Name: "app", Channels: []ChannelSpec{{Name: "stable", MinVersion: "2", MaxVersion: "1"}}}}},
			[]string{`package "app" channel "stable": minVersion 2 is greater than maxVersion 1`}},
		{"not a version", FilterSpec{Packages: []PackageSpec{{Name: "app", MinVersion: "one"}}}, []string{`minVersion "one" is not a version`}},
		{"bad range", FilterSpec{Packages: []PackageSpec{{Name: "app", VersionRange: ">>1"}}}, []string{`package "app": versionRange`, `">>1"`}},
		{"range and min", FilterSpec{Packages: []PackageSpec{{Name: "app", VersionRange: ">=1", MinVersion: "1.0.0"}}}, []string{"versionRange cannot be combined with minVersion or maxVersion"}},
		{"package and channel ranges", FilterSpec{Packages: []PackageSpec{{Name: "app", MinVersion: "1.0.0", Channels: []ChannelSpec{{Name: "stable", MaxVersion: "1.2.0"}}}}},
			[]string{`package "app" channel "stable": versions are set both for the package and for the channel`}},
		{"full with range", FilterSpec{Full: true, Packages: []PackageSpec{{Name: "app", MinVersion: "1.0.0"}}}, []string{"full: true keeps every version"}},
		{"channel range selects nothing", FilterSpec{Packages: []PackageSpec{{Name: "app", Channels: []ChannelSpec{{Name: "stable", MinVersion: "9.0.0"}}}}},
			[]string{`package "app" channel "stable": minVersion 9.0.0 selects no bundle (the channel has versions 1.0.0 to 1.3.0)`}},
		{"package range selects nothing", FilterSpec{Packages: []PackageSpec{{Name: "app", VersionRange: ">=9"}}},
			[]string{`package "app": versionRange ">=9" selects no bundle in any selected channel (the package has versions 1.0.0 to 2.0.0)`}},
		{"channel range holds only prereleases", FilterSpec{Packages: []PackageSpec{{Name: "app", Channels: []ChannelSpec{{Name: "fast", VersionRange: ">1.3.0, <1.4.0"}}, DefaultChannel: "fast"}}},
			[]string{`package "app" channel "fast": versionRange ">1.3.0, <1.4.0" selects no bundle: the channel's bundles in it are prereleases`, `only match prereleases when they name one`}},
		{"package range holds only prereleases", FilterSpec{Packages: []PackageSpec{{Name: "app", VersionRange: ">1.3.0 <1.4.0"}}},
			[]string{`package "app": versionRange ">1.3.0 <1.4.0" selects no bundle in any selected channel: the bundles in it are prereleases`, `only match prereleases when they name one`}},
		{"default channel not selected", FilterSpec{Packages: []PackageSpec{{Name: "app", Channels: []ChannelSpec{{Name: "fast"}}}}},
			[]string{`package "app": the default channel "stable" was filtered out: set defaultChannel to one of the kept channels (fast)`}},
		{"default channel emptied by the range", FilterSpec{Packages: []PackageSpec{{Name: "app", VersionRange: ">=1.4.0-0"}}},
			[]string{`the default channel "stable" was filtered out`, "(candidate, fast)"}},
		{"defaultChannel unknown", FilterSpec{Packages: []PackageSpec{{Name: "app", DefaultChannel: "beta"}}}, []string{`defaultChannel "beta" is not a channel of the package`}},
		{"defaultChannel not among channels", FilterSpec{Packages: []PackageSpec{{Name: "app", Channels: []ChannelSpec{{Name: "fast"}}, DefaultChannel: "stable"}}},
			[]string{`defaultChannel "stable" is not among the selected channels: add it to channels`}},
		{"unknown bundle", FilterSpec{Packages: []PackageSpec{{Name: "app", Bundles: []string{"app.v1.2.9"}}}}, []string{`bundle "app.v1.2.9" does not exist`, `did you mean "app.v1.2.0"`}},
		{"bundle outside the selected channels", FilterSpec{Packages: []PackageSpec{{Name: "app", Channels: []ChannelSpec{{Name: "stable"}}, Bundles: []string{"app.v2.0.0"}}}},
			[]string{`bundle "app.v2.0.0" is not in any selected channel (it is in: candidate)`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, rep, err := Filter(c, tc.spec)
			if err == nil {
				t.Fatalf("Filter succeeded (%d bundles), want an error", len(keptBundles(out)))
			}
			if out != nil || rep != nil {
				t.Error("a failed Filter returned a result")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestFilterBrokenSources covers source channels whose upgrade graph only
// older opm accepts, and channels no opm accepts.
func TestFilterBrokenSources(t *testing.T) {
	f := &fixture{}
	// 1.1.5 skips 1.1.0, which breaks the replaces chain for newer opm
	// and strands 1.0.0; older opm follows the chain past the skip.
	f.pkg("legacy", "fast", "fast: 1.0.0; 1.1.0>1.0.0; 1.1.5!1.1.0; 1.2.0>1.1.0!1.1.5")
	f.pkg("heads", "stable", "stable: 1.0.0; 1.1.0", "other: 1.1.0")
	c := f.catalog(t)

	out, rep, err := Filter(c, FilterSpec{Packages: []PackageSpec{{Name: "legacy", Bundles: []string{"legacy.v1.0.0", "legacy.v1.1.5"}}}})
	if err != nil {
		t.Fatalf("legacy channel: %v", err)
	}
	if got := entryNames(out, "legacy", "fast"); !slices.Equal(got, names("legacy", "1.0.0", "1.1.0", "1.1.5", "1.2.0")) {
		t.Errorf("legacy channel kept %v", got)
	}
	if w := strings.Join(allWarnings(rep), "\n"); !strings.Contains(w, "valid only for opm releases before") {
		t.Errorf("no warning about the legacy graph: %s", w)
	}
	if _, err := validate(out); err != nil {
		t.Errorf("filtered legacy channel invalid: %v", err)
	}
	// The newest opm does reject it, as the warning says.
	if opm := opmtest.Oracle(t); opm != "" {
		dir := t.TempDir()
		if err := out.WriteDir(dir); err != nil {
			t.Fatal(err)
		}
		if err := opmtest.ValidateErr(opm, dir); err == nil || !strings.Contains(err.Error(), "stranded bundles: legacy.v1.0.0") {
			t.Errorf("opm validate of the legacy channel: %v, want legacy.v1.0.0 stranded", err)
		}
	}

	_, _, err = Filter(c, FilterSpec{})
	if err == nil || !strings.Contains(err.Error(), `package "heads" channel "stable" has no single head`) || !strings.Contains(err.Error(), "heads.v1.0.0, heads.v1.1.0") {
		t.Errorf("multiple heads: %v", err)
	}
	out, _, err = Filter(c, FilterSpec{Packages: []PackageSpec{{Name: "heads", Channels: []ChannelSpec{{Name: "stable"}}}}, Full: true})
	if err != nil || len(entryNames(out, "heads", "stable")) != 2 {
		t.Errorf("full keeps a broken channel as it is: %v", err)
	}
	checkWithOPM(t, out) // Validate and opm both reject it
	_, _, err = Filter(c, FilterSpec{Packages: []PackageSpec{{Name: "heads", Bundles: []string{"heads.v1.0.0"}, Channels: []ChannelSpec{{Name: "stable"}}}}})
	if err == nil || !strings.Contains(err.Error(), "upgrade graph is invalid") {
		t.Errorf("range over a broken channel: %v", err)
	}
	if _, err := validate(c); err == nil || !strings.Contains(err.Error(), "multiple channel heads") {
		t.Errorf("Validate of a broken catalog: %v", err)
	}
}

func TestFilterUnsatisfiedDependency(t *testing.T) {
	f := &fixture{}
	f.pkg("lonely", "stable", "stable: 1.0.0")
	f.property("lonely", "1.0.0", fbc.PropertyGVKRequired, fbc.GVK{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"})
	f.property("lonely", "1.0.0", fbc.PropertyPackageRequired, fbc.PackageRequirement{PackageName: "ghost", VersionRange: ">=1.0.0"})
	c := f.catalog(t)
	_, rep, err := Filter(c, FilterSpec{})
	if err != nil {
		t.Fatal(err)
	}
	w := strings.Join(rep.Warnings, "\n")
	for _, want := range []string{"olm.gvk.required cert-manager.io/v1 Certificate", "olm.package.required ghost >=1.0.0", "nothing in the catalog provides"} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q: %s", want, w)
		}
	}
	if len(rep.Dependencies) != 2 || rep.Dependencies[0].SatisfiedBy != "" {
		t.Errorf("dependencies %+v", rep.Dependencies)
	}
}

func TestFilterRealCatalogs(t *testing.T) {
	c := fbctest.RealCatalog(t)
	cases := []struct {
		name  string
		spec  FilterSpec
		check func(t *testing.T, out *fbc.Catalog, rep *Report)
	}{
		{"heads of everything", FilterSpec{}, func(t *testing.T, out *fbc.Catalog, rep *Report) {
			if len(out.PackageNames()) != 35 {
				t.Errorf("%d packages kept", len(out.PackageNames()))
			}
			for _, p := range rep.Packages {
				for _, ch := range p.Channels {
					if len(ch.Bundles) != 1 || ch.Head != ch.SourceHead {
						t.Errorf("%s/%s kept %v", p.Name, ch.Name, ch.Bundles)
					}
				}
			}
		}},
		{"quay from 3.12 on", FilterSpec{Packages: []PackageSpec{{Name: "project-quay", MinVersion: "3.12.0"}}}, func(t *testing.T, out *fbc.Catalog, rep *Report) {
			for _, b := range out.Package("project-quay").Bundles {
				if b.Version().LessThan(mustVersion("3.12.0")) {
					t.Errorf("%s kept below minVersion", b.Name)
				}
			}
			if !strings.Contains(strings.Join(rep.Package("project-quay").Warnings, " "), "dropped") {
				t.Error("no warning about the dropped stable-3.x channels")
			}
		}},
		{"rabbitmq topology pulls the cluster operator", FilterSpec{Packages: []PackageSpec{{Name: "rabbitmq-messaging-topology-operator"}}}, func(t *testing.T, out *fbc.Catalog, rep *Report) {
			if p := rep.Package("rabbitmq-cluster-operator"); p == nil || p.Requested || len(p.Bundles) != 1 {
				t.Errorf("dependency package: %+v", p)
			}
		}},
		{"explicit old bundle keeps its upgrade path", FilterSpec{Packages: []PackageSpec{{Name: "infinispan", Channels: []ChannelSpec{{Name: "stable"}}, Bundles: []string{"infinispan-operator.v2.4.0"}}}}, func(t *testing.T, out *fbc.Catalog, rep *Report) {
			b := rep.Package("infinispan").Bundle("infinispan-operator.v2.4.0")
			if b == nil || !b.Has(reasonExplicit) {
				t.Errorf("explicit bundle: %+v", b)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, rep, err := Filter(c, tc.spec)
			if err != nil {
				t.Fatalf("Filter: %v", err)
			}
			checkFiltered(t, c, out, rep)
			tc.check(t, out, rep)
		})
	}
}
