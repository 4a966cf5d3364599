package catalog

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/gapmirror/gapmirror/imageset/fbc"
)

// dependencies resolves the requirements of kept bundles not resolved yet.
// It reports whether it changed any channel's wanted entries.
func (r *run) dependencies() bool {
	changed := false
	for _, b := range r.keptBundles() {
		if r.resolved[b] {
			continue
		}
		r.resolved[b] = true
		for _, req := range b.RequiredPackages() {
			rng, err := fbc.ParseSkipRange(req.VersionRange)
			if err != nil {
				continue // rejected when the catalog was loaded
			}
			desc := fmt.Sprintf("%s %s %s", fbc.PropertyPackageRequired, req.PackageName, req.VersionRange)
			if r.requirePackage(b, desc, req.PackageName, rng) {
				changed = true
			}
		}
		for _, gvk := range b.RequiredGVKs() {
			if r.requireGVK(b, fmt.Sprintf("%s %s", fbc.PropertyGVKRequired, gvk), gvk) {
				changed = true
			}
		}
		if r.constraints(b) {
			changed = true
		}
	}
	return changed
}

// constraints resolves b's olm.constraint properties: a gvk or package
// constraint like olm.gvk.required or olm.package.required; the compound and
// CEL ones (all, any, not, cel) only with a warning, as they are not
// resolved.
func (r *run) constraints(b *fbc.Bundle) bool {
	changed := false
	for _, raw := range b.PropertyValues(fbc.PropertyConstraint) {
		var v struct {
			GVK     *fbc.GVK `json:"gvk"`
			Package *struct {
				PackageName  string `json:"packageName"`
				Name         string `json:"name"`
				VersionRange string `json:"versionRange"`
			} `json:"package"`
		}
		_ = json.Unmarshal(raw, &v)
		switch {
		case v.GVK != nil && v.GVK.Kind != "":
			if r.requireGVK(b, fmt.Sprintf("%s gvk %s", fbc.PropertyConstraint, *v.GVK), *v.GVK) {
				changed = true
			}
		case v.Package != nil && cmp.Or(v.Package.PackageName, v.Package.Name) != "":
			name := cmp.Or(v.Package.PackageName, v.Package.Name)
			rng, err := fbc.ParseSkipRange(cmp.Or(v.Package.VersionRange, ">=0.0.0-0"))
			if err != nil {
				r.report.Warnings = append(r.report.Warnings, fmt.Sprintf("bundle %s/%s: %s package %s: versionRange %q: %v: not resolved", b.Package, b.Name, fbc.PropertyConstraint, name, v.Package.VersionRange, err))
				continue
			}
			desc := fmt.Sprintf("%s package %s %s", fbc.PropertyConstraint, name, v.Package.VersionRange)
			if r.requirePackage(b, desc, name, rng) {
				changed = true
			}
		default:
			r.report.Warnings = append(r.report.Warnings, fmt.Sprintf("bundle %s/%s has an %s gapmirror does not resolve (only gvk and package ones are): %s; list the packages it needs under packages", b.Package, b.Name, fbc.PropertyConstraint, compact(raw)))
		}
	}
	return changed
}

// requirePackage satisfies b's requirement desc of a bundle of package
// name whose version rng contains.
func (r *run) requirePackage(b *fbc.Bundle, desc, name string, rng fbc.Range) bool {
	var candidates []*fbc.Bundle
	if p := r.c.Package(name); p != nil {
		candidates = p.Bundles
	}
	return r.require(b, desc, candidates, func(c *fbc.Bundle) bool { return c.Package == name && rng.Contains(c.Version()) })
}

// requireGVK satisfies b's requirement desc of a bundle providing gvk.
func (r *run) requireGVK(b *fbc.Bundle, desc string, gvk fbc.GVK) bool {
	return r.require(b, desc, r.providers(gvk), func(c *fbc.Bundle) bool { return slices.Contains(c.GVKs(), gvk) })
}

// compact shortens a raw JSON value for a message.
func compact(raw json.RawMessage) string {
	s := strings.Join(strings.Fields(string(raw)), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// require satisfies one requirement of b: by a kept bundle if one matches,
// else by the best matching candidate, which is then kept.
func (r *run) require(b *fbc.Bundle, desc string, candidates []*fbc.Bundle, match func(*fbc.Bundle) bool) bool {
	dep := DependencyReport{Package: b.Package, Bundle: b.Name, Requirement: desc}
	why := Reason{Kind: reasonDependency, Detail: fmt.Sprintf("required by %s/%s (%s)", b.Package, b.Name, desc)}
	var keptMatch, best *fbc.Bundle
	for _, c := range candidates {
		if c == b || !match(c) {
			continue
		}
		if r.isKept(c) && (keptMatch == nil || r.better(c, keptMatch)) {
			keptMatch = c
		}
		if best == nil || r.better(c, best) {
			best = c
		}
	}
	if match(b) {
		keptMatch = b // a bundle satisfying its own requirement needs nothing else
	}
	switch {
	case keptMatch != nil:
		dep.SatisfiedBy = keptMatch.Package + "/" + keptMatch.Name
		r.report.Dependencies = append(r.report.Dependencies, dep)
		if keptMatch == b {
			return false
		}
		return r.want(keptMatch, why)
	case best != nil:
		dep.SatisfiedBy = best.Package + "/" + best.Name
		dep.Added = true
		r.report.Dependencies = append(r.report.Dependencies, dep)
		return r.want(best, why)
	default:
		r.report.Dependencies = append(r.report.Dependencies, dep)
		if r.unmet == nil {
			r.unmet = map[string][]string{}
		}
		if _, seen := r.unmet[desc]; !seen {
			r.unmetOrder = append(r.unmetOrder, desc)
		}
		r.unmet[desc] = append(r.unmet[desc], b.Package+"/"+b.Name)
		return false
	}
}

// reportUnmet warns once per requirement nothing in the catalog provides,
// naming the bundles that have it (a few, and how many more): a package
// whose every bundle needs cert-manager gets one line, not one per bundle.
func (r *run) reportUnmet() {
	for _, desc := range r.unmetOrder {
		bundles := r.unmet[desc]
		if len(bundles) == 1 {
			r.report.Warnings = append(r.report.Warnings, fmt.Sprintf("bundle %s requires %s, which nothing in the catalog provides: OLM will not install it unless another catalog provides it", bundles[0], desc))
			continue
		}
		names := strings.Join(bundles[:min(3, len(bundles))], ", ")
		if more := len(bundles) - 3; more > 0 {
			names += fmt.Sprintf(" and %d more", more)
		}
		r.report.Warnings = append(r.report.Warnings, fmt.Sprintf("%d bundles (%s) require %s, which nothing in the catalog provides: OLM will not install them unless another catalog provides it", len(bundles), names, desc))
	}
}

// better orders candidates: bundles of packages already kept first; within
// a package, as OLM classic tries them (the default channel first, then the
// other channels by name; within a channel, the newest first, so the head),
// then by name; across packages, by package name.
func (r *run) better(a, b *fbc.Bundle) bool {
	ak, bk := r.pkgs[a.Package] != nil, r.pkgs[b.Package] != nil
	if ak != bk {
		return ak
	}
	if a.Package == b.Package {
		if c := cmp.Compare(r.channelRank(a), r.channelRank(b)); c != 0 {
			return c < 0
		}
		if c := compareVersions(a.Version(), b.Version()); c != 0 {
			return c > 0
		}
		return a.Name < b.Name
	}
	return cmp.Or(cmp.Compare(a.Package, b.Package), cmp.Compare(a.Name, b.Name)) < 0
}

// defaultChannel is the default channel package p has in the result: the
// spec's defaultChannel when it sets one, else the source's.
func (r *run) defaultChannel(p *fbc.Package) string {
	if s := r.pkgs[p.Name]; s != nil && s.spec != nil && s.spec.DefaultChannel != "" {
		return s.spec.DefaultChannel
	}
	return p.DefaultChannel
}

// channelRank is the place of b's first channel in the order OLM classic
// tries a package's channels when it resolves a dependency: 0 for the
// default channel, then 1, 2, … for the others by name.
func (r *run) channelRank(b *fbc.Bundle) int {
	ranks := r.ranks[b.Package]
	if ranks == nil {
		p := r.c.Package(b.Package)
		dc := r.defaultChannel(p)
		ranks = map[string]int{}
		for i, ch := range p.Channels { // sorted by name
			rank := i + 1
			if ch.Name == dc {
				rank = 0
			}
			for _, e := range ch.Entries {
				if old, ok := ranks[e.Name]; !ok || rank < old {
					ranks[e.Name] = rank
				}
			}
		}
		if r.ranks == nil {
			r.ranks = map[string]map[string]int{}
		}
		r.ranks[b.Package] = ranks
	}
	return ranks[b.Name]
}

// want keeps bundle b for reason why: in a kept channel of its package that
// holds it (the default channel first), else in the package's default
// channel or its first channel holding b, adding the package if needed.
func (r *run) want(b *fbc.Bundle, why Reason) bool {
	p := r.c.Package(b.Package)
	s := r.pkgs[p.Name]
	if s == nil {
		s = r.addPackage(p, nil, false)
	}
	dc := r.defaultChannel(p)
	var target *chanSel
	for _, name := range sortedKeys(s.channels) {
		cs := s.channels[name]
		if _, ok := cs.g.index[b.Name]; !ok {
			continue
		}
		if target == nil || name == dc {
			target = cs
		}
	}
	if target == nil {
		var pick *fbc.Channel
		for _, ch := range p.Channels {
			if ch.Entry(b.Name) == nil {
				continue
			}
			if pick == nil || ch.Name == dc {
				pick = ch
			}
		}
		if pick == nil {
			return false // fbc.NewCatalog guarantees every bundle is in a channel
		}
		target = s.addChannel(pick)
	}
	if target.keepAll {
		return false
	}
	return target.add(target.g.index[b.Name], why)
}

// isKept reports whether b is kept in some channel as things stand.
func (r *run) isKept(b *fbc.Bundle) bool {
	s := r.pkgs[b.Package]
	if s == nil {
		return false
	}
	for _, cs := range s.channels {
		if i, ok := cs.g.index[b.Name]; ok && cs.kept != nil && cs.kept[i] {
			return true
		}
	}
	return false
}

// keptBundles lists the kept bundles in package and name order.
func (r *run) keptBundles() []*fbc.Bundle {
	var out []*fbc.Bundle
	for _, name := range sortedKeys(r.pkgs) {
		s := r.pkgs[name]
		seen := map[string]bool{}
		for _, chName := range sortedKeys(s.channels) {
			cs := s.channels[chName]
			for _, i := range cs.g.members(cs.kept) {
				n := cs.g.names[i]
				if seen[n] {
					continue
				}
				seen[n] = true
				if b := s.p.Bundle(n); b != nil {
					out = append(out, b)
				}
			}
		}
	}
	slices.SortStableFunc(out, func(a, b *fbc.Bundle) int {
		return cmp.Or(cmp.Compare(a.Package, b.Package), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// providers lists the bundles of the catalog that provide gvk.
func (r *run) providers(gvk fbc.GVK) []*fbc.Bundle {
	if r.gvks == nil {
		r.gvks = map[fbc.GVK][]*fbc.Bundle{}
		for _, name := range r.c.PackageNames() {
			for _, b := range r.c.Package(name).Bundles {
				for _, g := range b.GVKs() {
					r.gvks[g] = append(r.gvks[g], b)
				}
			}
		}
	}
	return r.gvks[gvk]
}
