package catalog

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gapmirror/gapmirror/imageset/fbc"
)

// validate checks c the way opm does before it serves it, beyond the
// structural rules fbc.NewCatalog enforces: each channel's upgrade graph (one
// head, no cycle, no stranded entry) and deprecation entries naming existing
// channels and bundles. What every opm release rejects is returned as the
// error; what only releases since 2025 reject (the stricter replaces-chain
// rules, several bundles with one version) is returned as warnings, since
// the opm inside older catalog images accepts it.
func validate(c *fbc.Catalog) (warnings []string, err error) {
	var errs []error
	for _, name := range c.PackageNames() {
		p := c.Package(name)
		for _, ch := range p.Channels {
			g := newGraph(p, ch)
			level, lerr := g.level(g.all())
			switch level {
			case levelInvalid:
				errs = append(errs, fmt.Errorf("package %q channel %q: %w", name, ch.Name, lerr))
			case levelLegacy:
				warnings = append(warnings, fmt.Sprintf("package %q channel %q: %s: %v", name, ch.Name, levelName(levelLegacy), lerr))
			}
		}
		versions := map[string][]string{}
		for _, b := range p.Bundles {
			if b.Version() != nil {
				versions[b.Version().String()] = append(versions[b.Version().String()], b.Name)
			}
		}
		for _, v := range sortedKeys(versions) {
			if names := versions[v]; len(names) > 1 {
				slices.Sort(names)
				warnings = append(warnings, fmt.Sprintf("package %q: bundles %s share version %s, which opm releases since 2025 reject", name, strings.Join(names, ", "), v))
			}
		}
		if d := p.Deprecations; d != nil {
			for i, e := range d.Entries {
				switch {
				case e.Reference.Schema == fbc.SchemaChannel && p.Channel(e.Reference.Name) == nil:
					errs = append(errs, fmt.Errorf("package %q: %s entries[%d] deprecates channel %q, which does not exist", name, fbc.SchemaDeprecations, i, e.Reference.Name))
				case e.Reference.Schema == fbc.SchemaBundle && p.Bundle(e.Reference.Name) == nil:
					errs = append(errs, fmt.Errorf("package %q: %s entries[%d] deprecates bundle %q, which does not exist", name, fbc.SchemaDeprecations, i, e.Reference.Name))
				}
			}
		}
	}
	return warnings, errors.Join(errs...)
}
