package fbc

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// ImageRef is an image the bundles of a catalog need, and who needs it.
type ImageRef struct {
	// Image is the reference as the catalog writes it (normally by digest).
	Image string `json:"image"`
	// Bundle is true when the image is a bundle image (the image field of an
	// olm.bundle), false when it is only a related image.
	Bundle bool `json:"bundle"`
	// Users are the bundles that need the image, sorted.
	Users []ImageUser `json:"users"`
}

// ImageUser is one bundle that needs an image.
type ImageUser struct {
	Package string `json:"package"`
	Bundle  string `json:"bundle"`
	// Name is the relatedImages entry's name; "" for the bundle image itself.
	Name string `json:"name,omitempty"`
}

// RelatedImages lists every image the catalog's bundles need: each bundle's
// own image and every relatedImages entry, deduplicated by reference and
// sorted, with the bundles that need each. Entries with an empty image are
// skipped.
func (c *Catalog) RelatedImages() []ImageRef {
	index := map[string]*ImageRef{}
	use := func(image string, bundle bool, u ImageUser) {
		if image == "" {
			return
		}
		ref := index[image]
		if ref == nil {
			ref = &ImageRef{Image: image}
			index[image] = ref
		}
		ref.Bundle = ref.Bundle || bundle
		if !slices.Contains(ref.Users, u) {
			ref.Users = append(ref.Users, u)
		}
	}
	for _, name := range c.names {
		for _, b := range c.pkgs[name].Bundles {
			use(b.Image, true, ImageUser{Package: b.Package, Bundle: b.Name})
			for _, ri := range b.RelatedImages {
				use(ri.Image, false, ImageUser{Package: b.Package, Bundle: b.Name, Name: ri.Name})
			}
		}
	}
	out := make([]ImageRef, 0, len(index))
	for _, ref := range index {
		slices.SortFunc(ref.Users, func(a, b ImageUser) int {
			return cmp.Or(cmp.Compare(a.Package, b.Package), cmp.Compare(a.Bundle, b.Bundle), cmp.Compare(a.Name, b.Name))
		})
		out = append(out, *ref)
	}
	slices.SortFunc(out, func(a, b ImageRef) int { return cmp.Compare(a.Image, b.Image) })
	return out
}

// BundlesOf names the bundles of users for messages, the first few in full.
func BundlesOf(users []ImageUser) string {
	var names []string
	for _, u := range users {
		n := "package " + u.Package + " bundle " + u.Bundle
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if len(names) > 3 {
		return strings.Join(names[:3], ", ") + fmt.Sprintf(" and %d more bundles", len(names)-3)
	}
	return strings.Join(names, ", ")
}
