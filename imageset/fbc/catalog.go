package fbc

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// maxErrors caps how many problems one error lists.
const maxErrors = 20

// Catalog is a file-based catalog: packages with their channels, bundles and
// deprecations, plus blobs of other schemas that name no package.
type Catalog struct {
	pkgs   map[string]*Package
	names  []string
	others []*Blob
}

// NewCatalog assembles a catalog from packages (with their channels, bundles,
// deprecations and other blobs) and package-less blobs. It sorts channels and
// bundles by name, derives bundle versions and dependencies from their
// properties, and checks the structural rules opm enforces (unique names,
// default channel present, channel entries naming bundles of the package,
// every bundle in a channel, exactly one olm.package property with a semver
// version). It does not check upgrade graphs: see imageset/catalog.validate.
func NewCatalog(pkgs []*Package, others []*Blob) (*Catalog, error) {
	c := &Catalog{pkgs: make(map[string]*Package, len(pkgs)), others: others}
	var errs problems
	for _, p := range pkgs {
		if p.Name == "" {
			errs.add(p.Pos, fmt.Errorf("%s blob has no name", SchemaPackage))
			continue
		}
		if prev, ok := c.pkgs[p.Name]; ok {
			errs.add(p.Pos, fmt.Errorf("package %q is defined twice (first at %s): remove one of the %s blobs", p.Name, prev.Pos, SchemaPackage))
			continue
		}
		c.pkgs[p.Name] = p
		c.names = append(c.names, p.Name)
		p.check(&errs, true)
	}
	slices.Sort(c.names)
	if err := errs.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// Reassemble builds a catalog from packages taken from catalogs that
// NewCatalog built, as a filter does when it keeps part of one: the bundles
// are shared, so it checks the structure again without deriving bundle data
// from the properties a second time.
func Reassemble(pkgs []*Package, others []*Blob) (*Catalog, error) {
	c := &Catalog{pkgs: make(map[string]*Package, len(pkgs)), others: others}
	var errs problems
	for _, p := range pkgs {
		c.pkgs[p.Name] = p
		c.names = append(c.names, p.Name)
		p.check(&errs, false)
	}
	slices.Sort(c.names)
	return c, errs.err()
}

// check sorts and indexes the package and records every structural problem;
// with derive, it also derives bundle data from bundle properties.
func (p *Package) check(errs *problems, derive bool) {
	slices.SortStableFunc(p.Channels, func(a, b *Channel) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortStableFunc(p.Bundles, func(a, b *Bundle) int { return cmp.Compare(a.Name, b.Name) })
	p.bundles = make(map[string]*Bundle, len(p.Bundles))
	for _, b := range p.Bundles {
		where := fmt.Sprintf("%s %q of package %q", SchemaBundle, b.Name, p.Name)
		switch {
		case b.Package != p.Name:
			errs.add(b.Pos, fmt.Errorf("%s names package %q", where, b.Package))
			continue
		case b.Name == "":
			errs.add(b.Pos, fmt.Errorf("%s blob of package %q has no name", SchemaBundle, p.Name))
			continue
		}
		if prev, ok := p.bundles[b.Name]; ok {
			errs.add(b.Pos, fmt.Errorf("%s is defined twice (first at %s)", where, prev.Pos))
			continue
		}
		p.bundles[b.Name] = b
		if !derive {
			continue
		}
		if err := b.index(); err != nil {
			errs.add(b.Pos, fmt.Errorf("%s: %w", where, err))
		}
		if b.Image == "" && len(b.PropertyValues(PropertyBundleObject)) == 0 {
			errs.add(b.Pos, fmt.Errorf("%s has no image", where))
		}
	}
	inChannel := make(map[string]bool, len(p.Bundles))
	for i, ch := range p.Channels {
		where := fmt.Sprintf("%s %q of package %q", SchemaChannel, ch.Name, p.Name)
		switch {
		case ch.Package != p.Name:
			errs.add(ch.Pos, fmt.Errorf("%s names package %q", where, ch.Package))
			continue
		case ch.Name == "":
			errs.add(ch.Pos, fmt.Errorf("%s blob of package %q has no name", SchemaChannel, p.Name))
			continue
		case i > 0 && p.Channels[i-1].Name == ch.Name:
			errs.add(ch.Pos, fmt.Errorf("%s is defined twice (first at %s)", where, p.Channels[i-1].Pos))
			continue
		case len(ch.Entries) == 0:
			errs.add(ch.Pos, fmt.Errorf("%s has no entries", where))
		}
		seen := make(map[string]bool, len(ch.Entries))
		for j, e := range ch.Entries {
			switch {
			case e.Name == "":
				errs.add(ch.Pos, fmt.Errorf("%s: entries[%d] has no name", where, j))
				continue
			case seen[e.Name]:
				errs.add(ch.Pos, fmt.Errorf("%s lists bundle %q twice", where, e.Name))
				continue
			case p.bundles[e.Name] == nil:
				errs.add(ch.Pos, fmt.Errorf("%s: entries[%d] names bundle %q, which package %q does not have", where, j, e.Name, p.Name))
			}
			seen[e.Name] = true
			inChannel[e.Name] = true
			if slices.Contains(e.Skips, "") {
				errs.add(ch.Pos, fmt.Errorf("%s: entry %q has an empty skips item", where, e.Name))
			}
			if e.SkipRange != "" {
				if _, err := ParseSkipRange(e.SkipRange); err != nil {
					errs.add(ch.Pos, fmt.Errorf("%s: entry %q: skipRange: %w", where, e.Name, err))
				}
			}
		}
	}
	for _, b := range p.Bundles {
		if b.Package == p.Name && b.Name != "" && !inChannel[b.Name] {
			errs.add(b.Pos, fmt.Errorf("%s %q of package %q is in no channel: add it to a channel's entries or remove it", SchemaBundle, b.Name, p.Name))
		}
	}
	switch {
	case p.DefaultChannel == "":
		errs.add(p.Pos, fmt.Errorf("package %q has no defaultChannel", p.Name))
	case p.Channel(p.DefaultChannel) == nil:
		errs.add(p.Pos, fmt.Errorf("package %q: defaultChannel %q is not a channel of the package (channels: %s)", p.Name, p.DefaultChannel, strings.Join(p.ChannelNames(), ", ")))
	}
	if len(p.Channels) == 0 {
		errs.add(p.Pos, fmt.Errorf("package %q has no %s blob", p.Name, SchemaChannel))
	}
	if d := p.Deprecations; d != nil {
		if d.Package != p.Name {
			errs.add(d.Pos, fmt.Errorf("%s blob of package %q names package %q", SchemaDeprecations, p.Name, d.Package))
		}
		for i, e := range d.Entries {
			if err := e.check(); err != nil {
				errs.add(d.Pos, fmt.Errorf("%s of package %q: entries[%d]: %w", SchemaDeprecations, p.Name, i, err))
			}
		}
	}
}

func (e DeprecationEntry) check() error {
	switch e.Reference.Schema {
	case SchemaPackage:
		if e.Reference.Name != "" {
			return fmt.Errorf("a reference to the package must not have a name (got %q)", e.Reference.Name)
		}
	case SchemaChannel, SchemaBundle:
		if e.Reference.Name == "" {
			return fmt.Errorf("a reference to a %s needs a name", e.Reference.Schema)
		}
	default:
		return fmt.Errorf("reference.schema %q is not %s, %s or %s", e.Reference.Schema, SchemaPackage, SchemaChannel, SchemaBundle)
	}
	if e.Message == "" {
		return fmt.Errorf("message is empty")
	}
	return nil
}

// Package returns the package called name, or nil.
func (c *Catalog) Package(name string) *Package { return c.pkgs[name] }

// PackageNames returns the names of the catalog's packages, sorted.
func (c *Catalog) PackageNames() []string { return slices.Clone(c.names) }

// Others returns the blobs of other schemas that name no package of the catalog.
func (c *Catalog) Others() []*Blob { return c.others }

// BundleCount is the number of bundles in the catalog.
func (c *Catalog) BundleCount() int {
	n := 0
	for _, p := range c.pkgs {
		n += len(p.Bundles)
	}
	return n
}

// problems collects errors up to maxErrors.
type problems struct {
	list  []error
	extra int
}

func (p *problems) add(pos Position, err error) {
	if len(p.list) >= maxErrors {
		p.extra++
		return
	}
	if pos.File != "" {
		err = &SourceError{Pos: pos, Err: err}
	}
	p.list = append(p.list, err)
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	if p.extra > 0 {
		p.list = append(p.list, fmt.Errorf("and %d more problems", p.extra))
	}
	return errors.Join(p.list...)
}
