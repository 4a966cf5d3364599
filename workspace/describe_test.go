package workspace

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gapmirror/gapmirror/imageset"
)

// TestDescribeOrders: names in natural order, versions and versioned names
// (bundles) in semver order, whatever order they come in.
func TestDescribeOrders(t *testing.T) {
	for _, c := range []struct {
		name  string
		order func(a, b string) int
		want  []string
	}{
		{"natural", compareNatural, []string{"", "app", "app-01", "app-1", "app-2", "app-10", "app-10:v1", "app-10:v2", "app-10:v10", "app-10a", "app-a", "b"}},
		{"versions", compareVersioned, []string{"1.2.0", "4.9.1", "4.18.0-rc.1", "4.18.0", "4.18.2", "4.18.10", "v5.0.0"}},
		{"bundles", compareVersioned, []string{
			"etcd", "etcd.v0.9.2", "etcd.v0.9.10", "etcd.v0.10.0-rc.1", "etcd.v0.10.0", "etcd.v0.10.0+build.1", "etcd.v0.10.0+build.2", "etcd.vnext",
			"op-2.v1.0.0", "op-10.v0.1.0", "zz.latest"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			for range 20 {
				got := slices.Clone(c.want)
				rng.Shuffle(len(got), func(i, j int) { got[i], got[j] = got[j], got[i] })
				slices.SortFunc(got, c.order)
				if !slices.Equal(got, c.want) {
					t.Fatalf("got %q, want %q", got, c.want)
				}
			}
			for i, a := range c.want {
				for j, b := range c.want {
					if got := c.order(a, b); (got < 0) != (i < j) || (got == 0) != (i == j) {
						t.Errorf("order(%q, %q) = %d, want the sign of %d", a, b, got, i-j)
					}
				}
			}
		})
	}
}

// TestSummaryOrder: describe's releases by architecture then version
// (prereleases split from their architecture right), bundles by version,
// images by name, and the changes likewise.
func TestSummaryOrder(t *testing.T) {
	rel := func(tag string) imageset.Image {
		return imageset.Image{Kind: imageset.KindRelease, Destination: "openshift/release-images:" + tag, Origin: "quay.io/ocp-release:" + tag}
	}
	bundle := func(name string) imageset.Image {
		return imageset.Image{Kind: imageset.KindOperatorBundle, Destination: "op/bundle:" + name, Origin: "quay.io/op/bundle:" + name,
			Why: []string{"operator catalog quay.io/cat:v1: package op bundle " + name}}
	}
	add := func(name string) imageset.Image {
		return imageset.Image{Kind: imageset.KindAdditional, Destination: "apps/" + name + ":v1", Origin: "quay.io/apps/" + name + ":v1"}
	}
	prev := &imageset.Set{Images: []imageset.Image{rel("4.18.2-x86_64"), bundle("op.v1.0.2"), add("app-1")}}
	cur := &imageset.Set{Images: []imageset.Image{
		rel("4.18.10-x86_64"), rel("4.18.2-x86_64"), rel("4.19.0-rc.1-x86_64"), rel("4.18.9-aarch64"), rel("4.18.10-aarch64"),
		bundle("op.v1.0.10"), bundle("op.v1.0.2"), bundle("op.v1.0.9"), bundle("op.v1.1.0-rc.1"),
		add("app-10"), add("app-2"), add("app-1"),
	}}
	rels, cats, additional := summarise(cur)
	var got []string
	for _, r := range rels {
		got = append(got, r.Version+" "+r.Arch)
	}
	if want := []string{"4.18.9 aarch64", "4.18.10 aarch64", "4.18.2 x86_64", "4.18.10 x86_64", "4.19.0-rc.1 x86_64"}; !slices.Equal(got, want) {
		t.Errorf("releases %q, want %q", got, want)
	}
	if want := []string{"op.v1.0.2", "op.v1.0.9", "op.v1.0.10", "op.v1.1.0-rc.1"}; len(cats) != 1 || !slices.Equal(cats[0].Packages["op"], want) {
		t.Errorf("catalogs %+v, want op: %q", cats, want)
	}
	if want := []string{"quay.io/apps/app-1:v1", "quay.io/apps/app-2:v1", "quay.io/apps/app-10:v1"}; !slices.Equal(additional, want) {
		t.Errorf("additional images %q, want %q", additional, want)
	}
	ch := compare(prev, cur)
	if want := []string{"4.18.9-aarch64", "4.18.10-aarch64", "4.18.10-x86_64", "4.19.0-rc.1-x86_64"}; !slices.Equal(ch.AddedReleases, want) {
		t.Errorf("added releases %q, want %q", ch.AddedReleases, want)
	}
	if want := []string{"op.v1.0.9", "op.v1.0.10", "op.v1.1.0-rc.1"}; !slices.Equal(ch.AddedBundles, want) {
		t.Errorf("added bundles %q, want %q", ch.AddedBundles, want)
	}
	if want := []string{"quay.io/apps/app-2:v1@", "quay.io/apps/app-10:v1@", "quay.io/ocp-release:4.18.9-aarch64@", "quay.io/ocp-release:4.18.10-aarch64@",
		"quay.io/ocp-release:4.18.10-x86_64@", "quay.io/ocp-release:4.19.0-rc.1-x86_64@", "quay.io/op/bundle:op.v1.0.9@", "quay.io/op/bundle:op.v1.0.10@",
		"quay.io/op/bundle:op.v1.1.0-rc.1@"}; !slices.Equal(ch.AddedImages, want) {
		t.Errorf("added images %q, want %q", ch.AddedImages, want)
	}
}
