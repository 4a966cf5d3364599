package catalog

import (
	"slices"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/imageset/fbc"
)

// TestFilterDependencyPrefersDefaultChannel: OLM classic resolves a
// dependency by trying the package's default channel first (head first),
// then the other channels by name [olm-and-releases-from-seeds §1.13.3]. A
// dependency the filter pulls in must be the bundle OLM would pick online,
// not the newest version anywhere: here a nightly build in a side channel,
// which would also have become the package's default channel in the mirror.
func TestFilterDependencyPrefersDefaultChannel(t *testing.T) {
	t.Parallel()
	f := &fixture{}
	f.pkg("app", "stable", "stable: 1.0.0")
	f.pkg("mesh", "stable",
		"stable: 1.29.0; 1.30.0>1.29.0",
		"nightly: 1.31.0-nightly.1; 1.31.0-nightly.2>1.31.0-nightly.1",
		"alpha: 1.29.0; 1.30.5>1.29.0")
	f.pkg("api", "stable",
		"stable: 2.0.0; 2.1.0>2.0.0",
		"candidate: 3.0.0-rc.1")
	f.property("app", "1.0.0", fbc.PropertyPackageRequired, fbc.PackageRequirement{PackageName: "mesh", VersionRange: ">=1.0.0"})
	f.property("app", "1.0.0", fbc.PropertyGVKRequired, fbc.GVK{Group: "api.example.com", Version: "v1", Kind: "Thing"})
	c := f.catalog(t)

	out, rep, err := Filter(c, FilterSpec{Packages: []PackageSpec{{Name: "app"}}})
	if err != nil {
		t.Fatal(err)
	}
	checkFiltered(t, c, out, rep)
	for _, tc := range []struct{ pkg, channel, head string }{
		{"mesh", "stable", "mesh.v1.30.0"},
		{"api", "stable", "api.v2.1.0"},
	} {
		p := out.Package(tc.pkg)
		if p == nil {
			t.Errorf("dependency package %s not kept", tc.pkg)
			continue
		}
		if p.DefaultChannel != tc.channel || !slices.Equal(p.ChannelNames(), []string{tc.channel}) {
			t.Errorf("%s: default channel %s, channels %v; want only %s (the source default channel)", tc.pkg, p.DefaultChannel, p.ChannelNames(), tc.channel)
		}
		if got := entryNames(out, tc.pkg, tc.channel); !slices.Equal(got, []string{tc.head}) {
			t.Errorf("%s/%s kept %v, want the head %s only", tc.pkg, tc.channel, got, tc.head)
		}
	}
	if w := strings.Join(allWarnings(rep), "\n"); strings.Contains(w, "default channel set to") {
		t.Errorf("a dependency changed a package's default channel:\n%s", w)
	}

	// Outside the default channel, channels are tried by name, each from its
	// head: a requirement only alpha and nightly meet is met from alpha.
	f2 := &fixture{}
	f2.pkg("app", "stable", "stable: 1.0.0")
	f2.pkgs = append(f2.pkgs, f.pkgs[1])
	f2.property("app", "1.0.0", fbc.PropertyPackageRequired, fbc.PackageRequirement{PackageName: "mesh", VersionRange: ">1.30.0"})
	c2 := f2.catalog(t)
	out, rep, err = Filter(c2, FilterSpec{Packages: []PackageSpec{{Name: "app"}}})
	if err != nil {
		t.Fatal(err)
	}
	checkFiltered(t, c2, out, rep)
	if p := out.Package("mesh"); p == nil || !slices.Equal(p.ChannelNames(), []string{"alpha"}) || !slices.Equal(entryNames(out, "mesh", "alpha"), []string{"mesh.v1.30.5"}) {
		t.Errorf("mesh kept %v, want alpha with mesh.v1.30.5", keptBundles(out))
	}
}

// TestFilterConstraintDependencies: an olm.constraint with a gvk or package
// is a dependency like olm.gvk.required and olm.package.required
// [olm-and-releases-from-seeds §1.8]; compound and CEL constraints are not
// resolved, and a warning says so.
func TestFilterConstraintDependencies(t *testing.T) {
	t.Parallel()
	f := &fixture{}
	f.pkg("app", "stable", "stable: 1.0.0")
	f.pkg("certs", "stable", "stable: 1.0.0; 1.1.0>1.0.0")
	f.pkg("db", "stable", "stable: 2.0.0; 3.0.0>2.0.0")
	f.pkg("unused", "stable", "stable: 0.1.0")
	f.property("app", "1.0.0", fbc.PropertyConstraint, map[string]any{"failureMessage": "needs certs", "gvk": fbc.GVK{Group: "certs.example.com", Version: "v1", Kind: "Thing"}})
	f.property("app", "1.0.0", fbc.PropertyConstraint, map[string]any{"failureMessage": "needs db 2", "package": map[string]string{"packageName": "db", "versionRange": "<3.0.0"}})
	f.property("app", "1.0.0", fbc.PropertyConstraint, map[string]any{"failureMessage": "either", "any": map[string]any{"constraints": []any{map[string]any{"package": map[string]string{"packageName": "unused"}}}}})
	c := f.catalog(t)
	out, rep, err := Filter(c, FilterSpec{Packages: []PackageSpec{{Name: "app"}}})
	if err != nil {
		t.Fatal(err)
	}
	checkFiltered(t, c, out, rep)
	if got := keptBundles(out); !slices.Equal(got, []string{"app.v1.0.0", "certs.v1.1.0", "db.v2.0.0"}) {
		t.Errorf("kept %v, want app, certs' head and db 2.0.0", got)
	}
	if w := strings.Join(rep.Warnings, "\n"); !strings.Contains(w, "olm.constraint gapmirror does not resolve") || !strings.Contains(w, `"any"`) {
		t.Errorf("no warning about the unresolved compound constraint:\n%s", w)
	}
	out, _, err = Filter(c, FilterSpec{Packages: []PackageSpec{{Name: "app"}}, SkipDependencies: true})
	if err != nil || !slices.Equal(keptBundles(out), []string{"app.v1.0.0"}) {
		t.Errorf("skipDependencies: %v, kept %v", err, keptBundles(out))
	}
}

// TestUnmetRequirementSaidOnce: a requirement nothing in the catalog
// provides is one warning naming a few of the bundles that have it and how
// many more, not one per bundle (a whole channel needing cert-manager).
func TestUnmetRequirementSaidOnce(t *testing.T) {
	t.Parallel()
	f := &fixture{}
	f.pkg("app", "stable", "stable: 1.0.0; 1.1.0>1.0.0; 1.2.0>1.1.0; 1.3.0>1.2.0; 1.4.0>1.3.0")
	f.pkg("solo", "stable", "stable: 2.0.0")
	certs := fbc.GVK{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}
	for _, v := range []string{"1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0"} {
		f.property("app", v, fbc.PropertyGVKRequired, certs)
	}
	f.property("solo", "2.0.0", fbc.PropertyPackageRequired, fbc.PackageRequirement{PackageName: "gone", VersionRange: ">=1.0.0"})
	c := f.catalog(t)
	out, rep, err := Filter(c, FilterSpec{Full: true, Packages: []PackageSpec{{Name: "app"}, {Name: "solo"}}})
	if err != nil {
		t.Fatal(err)
	}
	checkFiltered(t, c, out, rep)
	var unmet []string
	for _, w := range allWarnings(rep) {
		if strings.Contains(w, "which nothing in the catalog provides") {
			unmet = append(unmet, w)
		}
	}
	want := []string{
		"5 bundles (app/app.v1.0.0, app/app.v1.1.0, app/app.v1.2.0 and 2 more) require " + fbc.PropertyGVKRequired + " " + certs.String() + ", which nothing in the catalog provides: OLM will not install them unless another catalog provides it",
		"bundle solo/solo.v2.0.0 requires " + fbc.PropertyPackageRequired + " gone >=1.0.0, which nothing in the catalog provides: OLM will not install it unless another catalog provides it",
	}
	if !slices.Equal(unmet, want) {
		t.Errorf("unmet requirement warnings:\n%s\nwant:\n%s", strings.Join(unmet, "\n"), strings.Join(want, "\n"))
	}
}
