package catalog

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Validate checks the catalog the way opm does before it serves it, beyond
// the structural rules NewCatalog enforces: each channel's upgrade graph (one
// head, no cycle, no stranded entry) and deprecation entries naming existing
// channels and bundles. What every opm release rejects is returned as the
// error; what only releases since 2025 reject (the stricter replaces-chain
// rules, several bundles with one version) is returned as warnings, since
// the opm inside older catalog images accepts it.
func (c *Catalog) Validate() (warnings []string, err error) {
	var errs []error
	for _, name := range c.names {
		p := c.pkgs[name]
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
			if b.version != nil {
				versions[b.version.String()] = append(versions[b.version.String()], b.Name)
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
				case e.Reference.Schema == SchemaChannel && p.Channel(e.Reference.Name) == nil:
					errs = append(errs, fmt.Errorf("package %q: %s entries[%d] deprecates channel %q, which does not exist", name, SchemaDeprecations, i, e.Reference.Name))
				case e.Reference.Schema == SchemaBundle && p.Bundle(e.Reference.Name) == nil:
					errs = append(errs, fmt.Errorf("package %q: %s entries[%d] deprecates bundle %q, which does not exist", name, SchemaDeprecations, i, e.Reference.Name))
				}
			}
		}
	}
	return warnings, errors.Join(errs...)
}
