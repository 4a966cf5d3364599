package fbc_test

import (
	"testing"

	"github.com/gapmirror/gapmirror/internal/fbctest"
)

func TestRelatedImagesReal(t *testing.T) {
	c := fbctest.RealCatalog(t)
	refs := c.RelatedImages()
	bundles := 0
	seen := map[string]bool{}
	for _, r := range refs {
		if seen[r.Image] || r.Image == "" || len(r.Users) == 0 {
			t.Fatalf("bad or duplicate image %+v", r)
		}
		seen[r.Image] = true
		if r.Bundle {
			bundles++
		}
	}
	if bundles != 727 || len(refs) < 1000 {
		t.Errorf("%d images of which %d bundle images; want 727 bundle images and more than 1000 in all", len(refs), bundles)
	}
}
