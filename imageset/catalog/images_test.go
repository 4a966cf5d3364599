package catalog

import (
	"slices"
	"testing"

	"github.com/gapmirror/gapmirror/imageset/fbc"
)

func TestRelatedImages(t *testing.T) {
	c := branching(t)
	out, _, err := Filter(c, FilterSpec{Packages: []PackageSpec{{Name: "app", MaxVersion: "1.1.0"}}, SkipDependencies: true})
	if err != nil {
		t.Fatal(err)
	}
	refs := out.RelatedImages()
	var images []string
	for _, r := range refs {
		images = append(images, r.Image)
	}
	want := []string{
		"quay.example.com/app/bundle:v1.0.0", "quay.example.com/app/bundle:v1.1.0",
		"quay.example.com/app/operator:v1.0.0", "quay.example.com/app/operator:v1.1.0",
		"quay.example.com/shared/kube-rbac-proxy:v1",
	}
	if !slices.Equal(images, want) {
		t.Fatalf("images %v, want %v", images, want)
	}
	shared := refs[4]
	if shared.Bundle || len(shared.Users) != 2 || shared.Users[0] != (fbc.ImageUser{Package: "app", Bundle: "app.v1.0.0", Name: "shared"}) {
		t.Errorf("shared image: %+v", shared)
	}
	if !refs[0].Bundle || refs[0].Users[0].Name != "" {
		t.Errorf("bundle image: %+v", refs[0])
	}
}

func TestPackagesSummary(t *testing.T) {
	c := branching(t)
	sums := Packages(c)
	if len(sums) != 4 || sums[0].Name != "app" || sums[0].DefaultChannel != "stable" {
		t.Fatalf("summary %+v", sums)
	}
	var fast ChannelSummary
	for _, ch := range sums[0].Channels {
		if ch.Name == "fast" {
			fast = ch
		}
	}
	if fast.Head != "app.v1.4.0" || fast.HeadVersion != "1.4.0" || !slices.Equal(fast.Versions, []string{"1.2.0", "1.2.1", "1.3.0", "1.4.0-rc.1", "1.4.0"}) {
		t.Errorf("fast channel summary %+v", fast)
	}
}
