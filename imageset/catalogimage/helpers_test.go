package catalogimage

import (
	"slices"

	"github.com/gapmirror/gapmirror/imageset/fbc"
)

// keptBundles returns the names of every bundle of the catalog, sorted (as
// imageset/catalog's test helper of the same name does).
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
