package catalog

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gapmirror/gapmirror/imageset/fbc"
)

// Filter returns the part of c that spec asks for, and a report of what is
// kept and why. It follows oc-mirror v2's semantics and goes beyond them:
//
//   - no packages: the head of every channel of every package; Full with no
//     packages: c itself, unchanged;
//   - a package without channels: all its channels; with channels: those only;
//   - each kept channel keeps its head, or with Full every entry, or with a
//     version selection (min/max or an OLM v1 range, at package or channel
//     level) the entries in it; Bundles adds entries by name;
//   - every kept channel keeps a valid upgrade graph: one head, and every
//     kept bundle reaches it through kept bundles (OLM v0 replaces/skips;
//     skipRange from the head). Entries outside the selection that this needs
//     are kept and reported (reasonUpgradePath); when the source head is not
//     selected, the newest selected entry that all others can reach becomes
//     the head (as with maxVersion in oc-mirror);
//   - unless SkipDependencies, bundles required by kept bundles
//     (olm.package.required, olm.gvk.required, and olm.constraint with a
//     gvk or package; compound and CEL constraints only get a warning) are
//     kept too, transitively:
//     a kept bundle that satisfies the requirement, else the bundle OLM
//     classic would pick (the package's default channel first, then its
//     other channels by name, each from its head down);
//   - the default channel must survive, or DefaultChannel must name a kept
//     channel; deprecation entries are pruned to what is kept, and other
//     blobs of kept packages are kept.
//
// Errors name the package, channel and field to change. The result shares
// bundle blobs with c; neither is modified.
func Filter(c *fbc.Catalog, spec FilterSpec) (*fbc.Catalog, *Report, error) {
	if err := checkSpec(c, spec); err != nil {
		return nil, nil, err
	}
	if spec.Full && len(spec.Packages) == 0 {
		return c, wholeReport(c), nil
	}
	r := &run{c: c, spec: spec, pkgs: map[string]*pkgSel{}, resolved: map[*fbc.Bundle]bool{}, report: &Report{}}
	if err := r.selectInitial(); err != nil {
		return nil, nil, err
	}
	err := r.resolve()
	r.reportUnmet()
	if err != nil {
		return nil, nil, err
	}
	out, err := r.build()
	if err != nil {
		return nil, nil, err
	}
	return out, r.report, nil
}

// run is one application of a FilterSpec.
type run struct {
	c        *fbc.Catalog
	spec     FilterSpec
	pkgs     map[string]*pkgSel
	resolved map[*fbc.Bundle]bool
	gvks     map[fbc.GVK][]*fbc.Bundle
	ranks    map[string]map[string]int // package → bundle → channelRank
	report   *Report
	// unmet lists, per requirement nothing provides, the bundles having
	// it (in the order met): said once per requirement (reportUnmet).
	unmet      map[string][]string
	unmetOrder []string
}

// pkgSel is what is kept of one package.
type pkgSel struct {
	p         *fbc.Package
	spec      *PackageSpec
	requested bool
	channels  map[string]*chanSel
	warnings  []string
}

// chanSel is what is kept of one channel.
type chanSel struct {
	pkg        *pkgSel
	g          *graph
	sourceHead int
	level      int
	levelErr   error
	keepAll    bool
	ranged     bool // a version selection applies
	want       map[int][]Reason
	dirty      bool

	kept     set
	head     int
	outLevel int
}

func (r *run) addPackage(p *fbc.Package, ps *PackageSpec, requested bool) *pkgSel {
	if s := r.pkgs[p.Name]; s != nil {
		return s
	}
	s := &pkgSel{p: p, spec: ps, requested: requested, channels: map[string]*chanSel{}}
	r.pkgs[p.Name] = s
	return s
}

func (s *pkgSel) addChannel(ch *fbc.Channel) *chanSel {
	if cs := s.channels[ch.Name]; cs != nil {
		return cs
	}
	g := newGraph(s.p, ch)
	cs := &chanSel{pkg: s, g: g, sourceHead: -1, want: map[int][]Reason{}, dirty: true}
	if hs := g.heads(g.all()); len(hs) == 1 {
		cs.sourceHead = hs[0]
	}
	cs.level, cs.levelErr = g.level(g.all())
	s.channels[ch.Name] = cs
	return cs
}

func (cs *chanSel) name() string { return cs.g.ch.Name }

func (cs *chanSel) where() string {
	return fmt.Sprintf("package %q channel %q", cs.pkg.p.Name, cs.g.ch.Name)
}

// add records that entry i is wanted for reason why; it reports whether the reason is new.
func (cs *chanSel) add(i int, why Reason) bool {
	why.Channel = cs.name()
	if slices.Contains(cs.want[i], why) {
		return false
	}
	cs.want[i] = append(cs.want[i], why)
	cs.dirty = true
	return true
}

func (cs *chanSel) addHead() error {
	if cs.sourceHead < 0 {
		return fmt.Errorf("%s has no single head in the source catalog (%v): its upgrade graph is broken, so it cannot be reduced to its head; leave the channel out or keep it whole with full: true", cs.where(), cs.levelErr)
	}
	cs.add(cs.sourceHead, Reason{Kind: reasonHead, Detail: "channel head"})
	return nil
}

// selectInitial turns the spec into wanted entries per channel.
func (r *run) selectInitial() error {
	var errs []error
	if len(r.spec.Packages) == 0 {
		for _, name := range r.c.PackageNames() {
			p := r.c.Package(name)
			s := r.addPackage(p, nil, true)
			for _, ch := range p.Channels {
				if err := s.addChannel(ch).addHead(); err != nil {
					errs = append(errs, err)
				}
			}
		}
		return errors.Join(errs...)
	}
	for i := range r.spec.Packages {
		if err := r.selectPackage(&r.spec.Packages[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (r *run) selectPackage(ps *PackageSpec) error {
	p := r.c.Package(ps.Name)
	s := r.addPackage(p, ps, true)
	where := fmt.Sprintf("package %q", p.Name)
	pkgSelector, _ := parseSelector(where, ps.MinVersion, ps.MaxVersion, ps.VersionRange)
	explicit := map[string]bool{}
	for _, b := range ps.Bundles {
		explicit[b] = true
	}

	type pick struct {
		ch  *fbc.Channel
		sel *versionSelector
		own bool // the selection is the channel's own
	}
	var picks []pick
	switch {
	case len(ps.Channels) > 0:
		for _, cs := range ps.Channels {
			ch := p.Channel(cs.Name)
			sel, _ := parseSelector(where, cs.MinVersion, cs.MaxVersion, cs.VersionRange)
			if sel != nil {
				picks = append(picks, pick{ch, sel, true})
			} else {
				picks = append(picks, pick{ch, pkgSelector, false})
			}
		}
	case len(explicit) > 0 && pkgSelector == nil && !r.spec.Full:
		for _, ch := range p.Channels {
			if slices.ContainsFunc(ch.Entries, func(e fbc.ChannelEntry) bool { return explicit[e.Name] }) {
				picks = append(picks, pick{ch, nil, false})
			}
		}
	default:
		for _, ch := range p.Channels {
			picks = append(picks, pick{ch, pkgSelector, false})
		}
	}

	var errs []error
	var dropped []string
	prereleaseOnly := false // some channel's range missed only prereleases
	for _, pk := range picks {
		cs := s.addChannel(pk.ch)
		if r.spec.Full {
			cs.keepAll = true
			continue
		}
		selected, preOnly := false, false
		if pk.sel != nil {
			cs.ranged = true
			var pre []string
			for i, v := range cs.g.version {
				switch {
				case pk.sel.contains(v):
					cs.add(i, Reason{Kind: reasonInRange, Detail: pk.sel.desc})
					selected = true
				case pk.sel.excludedPrerelease(v):
					pre = append(pre, cs.g.names[i])
				}
			}
			if len(pre) > 0 {
				slices.Sort(pre)
				s.warnings = append(s.warnings, fmt.Sprintf("channel %s: prerelease bundles %s are outside %s: %s", cs.name(), strings.Join(pre, ", "), pk.sel.desc, prereleaseHint))
				preOnly = !selected
			}
		}
		for i, name := range cs.g.names {
			if explicit[name] {
				cs.add(i, Reason{Kind: reasonExplicit, Detail: "listed in bundles"})
				selected = true
			}
		}
		switch {
		case selected:
		case pk.sel == nil:
			if err := cs.addHead(); err != nil {
				errs = append(errs, err)
			}
		case pk.own && preOnly:
			errs = append(errs, fmt.Errorf("%s: %s selects no bundle: the channel's bundles in it are prereleases (%s), and %s", cs.where(), pk.sel.desc, versionSpan(cs.g), prereleaseHint))
		case pk.own:
			errs = append(errs, fmt.Errorf("%s: %s selects no bundle (the channel has %s): widen the range", cs.where(), pk.sel.desc, versionSpan(cs.g)))
		default:
			prereleaseOnly = prereleaseOnly || preOnly
			dropped = append(dropped, cs.name())
			delete(s.channels, cs.name())
		}
	}
	if len(dropped) > 0 {
		switch {
		case len(s.channels) == 0 && prereleaseOnly:
			errs = append(errs, fmt.Errorf("%s: %s selects no bundle in any selected channel: the bundles in it are prereleases (the package has %s), and %s", where, pkgSelector.desc, packageVersionSpan(p), prereleaseHint))
		case len(s.channels) == 0:
			errs = append(errs, fmt.Errorf("%s: %s selects no bundle in any selected channel (the package has %s): widen the range", where, pkgSelector.desc, packageVersionSpan(p)))
		default:
			s.warnings = append(s.warnings, fmt.Sprintf("channels %s dropped: %s selects none of their bundles", strings.Join(dropped, ", "), pkgSelector.desc))
		}
	}
	for _, name := range ps.Bundles {
		found := false
		for _, cs := range s.channels {
			if _, ok := cs.g.index[name]; ok {
				found = true
				break
			}
		}
		if !found {
			var in []string
			for _, ch := range p.Channels {
				if ch.Entry(name) != nil {
					in = append(in, ch.Name)
				}
			}
			errs = append(errs, fmt.Errorf("%s: bundle %q is not in any selected channel (it is in: %s): add one of them to channels", where, name, strings.Join(in, ", ")))
		}
	}
	return errors.Join(errs...)
}

// prereleaseHint explains why an OLM v1 range leaves prereleases out.
const prereleaseHint = `OLM v1 ranges only match prereleases when they name one (e.g. ">=1.2.0-0")`

// resolve computes each channel's kept entries, then pulls in dependencies until nothing changes.
func (r *run) resolve() error {
	for {
		var errs []error
		for _, name := range sortedKeys(r.pkgs) {
			s := r.pkgs[name]
			for _, chName := range sortedKeys(s.channels) {
				cs := s.channels[chName]
				if !cs.dirty {
					continue
				}
				if err := cs.compute(); err != nil {
					errs = append(errs, err)
				}
				cs.dirty = false
			}
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
		if r.spec.SkipDependencies || !r.dependencies() {
			return nil
		}
	}
}

// compute finds the kept entries and head of the channel.
func (cs *chanSel) compute() error {
	g := cs.g
	if cs.keepAll {
		cs.kept, cs.head, cs.outLevel = g.all(), cs.sourceHead, cs.level
		return nil
	}
	want := sortedKeys(cs.want)
	if len(want) == 1 && want[0] == cs.sourceHead {
		cs.kept = make(set, len(g.names))
		cs.kept[cs.sourceHead] = true
		cs.head, cs.outLevel = cs.sourceHead, levelStrict
		return nil
	}
	if cs.level == levelInvalid {
		return fmt.Errorf("%s: the source channel's upgrade graph is invalid (%v), so only its head or the whole channel (full: true) can be kept", cs.where(), cs.levelErr)
	}
	kept, head, level, err := g.keep(want, cs.sourceHead, cs.level)
	if err != nil {
		return fmt.Errorf("%s: %w", cs.where(), err)
	}
	cs.kept, cs.head, cs.outLevel = kept, head, level
	return nil
}

// build assembles the filtered catalog and the report.
func (r *run) build() (*fbc.Catalog, error) {
	var errs []error
	var pkgs []*fbc.Package
	for _, name := range sortedKeys(r.pkgs) {
		s := r.pkgs[name]
		p, pr, err := r.buildPackage(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		pkgs = append(pkgs, p)
		r.report.Packages = append(r.report.Packages, pr)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out, err := fbc.Reassemble(pkgs, r.c.Others())
	if err != nil {
		return nil, fmt.Errorf("internal error: the filtered catalog is inconsistent: %w", err)
	}
	return out, nil
}

func (r *run) buildPackage(s *pkgSel) (*fbc.Package, PackageReport, error) {
	src := s.p
	pr := PackageReport{Name: src.Name, Requested: s.requested}
	var kept []*chanSel
	for _, name := range sortedKeys(s.channels) {
		if cs := s.channels[name]; cs.kept != nil {
			kept = append(kept, cs)
		}
	}
	keptNames := make([]string, len(kept))
	for i, cs := range kept {
		keptNames[i] = cs.name()
	}
	dc := src.DefaultChannel
	switch {
	case s.spec != nil && s.spec.DefaultChannel != "":
		dc = s.spec.DefaultChannel
		if !slices.Contains(keptNames, dc) {
			return nil, pr, fmt.Errorf("package %q: defaultChannel %q is not kept (kept channels: %s)", src.Name, dc, strings.Join(keptNames, ", "))
		}
	case slices.Contains(keptNames, dc):
	case s.requested:
		return nil, pr, fmt.Errorf("package %q: the default channel %q was filtered out: set defaultChannel to one of the kept channels (%s), or select channel %q too", src.Name, dc, strings.Join(keptNames, ", "), dc)
	default:
		dc = keptNames[0]
		s.warnings = append(s.warnings, fmt.Sprintf("default channel set to %q: the source default channel %q does not hold the bundles this package is kept for", dc, src.DefaultChannel))
	}
	pr.DefaultChannel = dc

	// The kept blobs are copies of the source blobs, so that they keep the
	// fields the model does not know.
	out := new(fbc.Package)
	*out = *src
	out.DefaultChannel, out.Channels, out.Bundles, out.Deprecations = dc, nil, nil, nil
	reasons := map[string][]Reason{}
	bundleChannels := map[string][]string{}
	keptChannel := map[string]bool{}
	for _, cs := range kept {
		g := cs.g
		ch := new(fbc.Channel)
		*ch = *g.ch
		ch.Package, ch.Entries = src.Name, nil
		for i, e := range g.ch.Entries {
			if cs.kept[i] {
				ch.Entries = append(ch.Entries, e)
			}
		}
		out.Channels = append(out.Channels, ch)
		keptChannel[ch.Name] = true
		crep := ChannelReport{Name: ch.Name}
		if cs.head >= 0 {
			crep.Head = g.names[cs.head]
		}
		if cs.sourceHead >= 0 {
			crep.SourceHead = g.names[cs.sourceHead]
		}
		members := g.members(cs.kept)
		g.byVersionDesc(members)
		slices.Reverse(members)
		var extraKept []string
		for _, i := range members {
			name := g.names[i]
			crep.Bundles = append(crep.Bundles, name)
			bundleChannels[name] = append(bundleChannels[name], ch.Name)
			switch {
			case cs.keepAll:
				reasons[name] = append(reasons[name], Reason{Kind: reasonFull, Channel: ch.Name, Detail: "channel kept whole"})
				if i == cs.head {
					reasons[name] = append(reasons[name], Reason{Kind: reasonHead, Channel: ch.Name, Detail: "channel head"})
				}
				continue
			case len(cs.want[i]) > 0:
				reasons[name] = append(reasons[name], cs.want[i]...)
			default:
				extraKept = append(extraKept, name)
			}
			if i == cs.head && !slices.ContainsFunc(cs.want[i], func(r Reason) bool { return r.Kind == reasonHead }) {
				detail := "channel head"
				if cs.head != cs.sourceHead {
					detail = "new channel head: the selected bundles upgrade to it"
					if cs.sourceHead >= 0 {
						detail += fmt.Sprintf(" (the source head %s is not selected)", g.names[cs.sourceHead])
					}
				}
				reasons[name] = append(reasons[name], Reason{Kind: reasonHead, Channel: ch.Name, Detail: detail})
			} else if len(cs.want[i]) == 0 {
				reasons[name] = append(reasons[name], Reason{Kind: reasonUpgradePath, Channel: ch.Name, Detail: fmt.Sprintf("kept so that selected bundles can upgrade to head %s", crep.Head)})
			}
		}
		pr.Channels = append(pr.Channels, crep)
		s.warnings = append(s.warnings, cs.graphWarnings(extraKept)...)
	}
	for _, b := range src.Bundles {
		rs, ok := reasons[b.Name]
		if !ok {
			continue
		}
		out.Bundles = append(out.Bundles, b)
		pr.Bundles = append(pr.Bundles, BundleReport{Name: b.Name, Version: b.VersionString(), Image: b.Image, Channels: bundleChannels[b.Name], Reasons: rs})
	}
	slices.SortStableFunc(pr.Bundles, func(a, b BundleReport) int {
		return cmp.Or(compareVersions(src.Bundle(a.Name).Version(), src.Bundle(b.Name).Version()), cmp.Compare(a.Name, b.Name))
	})
	if d := src.Deprecations; d != nil {
		nd := new(fbc.Deprecations)
		*nd = *d
		nd.Entries = nil
		for _, e := range d.Entries {
			keep := false
			switch e.Reference.Schema {
			case fbc.SchemaPackage:
				keep = true
			case fbc.SchemaChannel:
				keep = keptChannel[e.Reference.Name]
			case fbc.SchemaBundle:
				_, keep = reasons[e.Reference.Name]
			}
			if keep {
				nd.Entries = append(nd.Entries, e)
			}
		}
		if len(nd.Entries) > 0 {
			out.Deprecations = nd
		}
	}
	pr.Warnings = s.warnings
	return out, pr, nil
}

// graphWarnings explains what the kept graph of the channel costs or lacks.
func (cs *chanSel) graphWarnings(extraKept []string) []string {
	g := cs.g
	var out []string
	if cs.keepAll {
		if cs.head < 0 {
			out = append(out, fmt.Sprintf("channel %s: the source channel has no single head (%v); it is kept whole as it is", cs.name(), cs.levelErr))
			return out
		}
	}
	if cs.head >= 0 && cs.sourceHead >= 0 && cs.head != cs.sourceHead {
		out = append(out, fmt.Sprintf("channel %s: head is now %s; the source head %s is not selected", cs.name(), g.names[cs.head], g.names[cs.sourceHead]))
	}
	if cs.ranged && len(extraKept) > 0 {
		out = append(out, fmt.Sprintf("channel %s: kept outside the selected versions for the upgrade path: %s", cs.name(), strings.Join(extraKept, ", ")))
	}
	if cs.outLevel == levelLegacy {
		out = append(out, fmt.Sprintf("channel %s: the upgrade graph is %s, as in the source catalog", cs.name(), levelName(levelLegacy)))
	}
	if cs.head < 0 {
		return out
	}
	if stranded := g.strandedV0(cs.kept, cs.head); len(stranded) > 0 {
		note := ""
		if cs.sourceHead >= 0 && len(g.strandedV0(g.all(), cs.sourceHead)) > 0 {
			note = " (the source channel has stranded bundles too)"
		}
		out = append(out, fmt.Sprintf("channel %s: under OLM v0 these kept bundles cannot upgrade to head %s%s: %s", cs.name(), g.names[cs.head], note, strings.Join(stranded, ", ")))
	}
	if stranded := g.strandedV1(cs.kept, cs.head); len(stranded) > 0 {
		out = append(out, fmt.Sprintf("channel %s: OLM v1's walk (highest version successor) from these kept bundles does not end at head %s: %s", cs.name(), g.names[cs.head], strings.Join(stranded, ", ")))
	}
	return out
}

// wholeReport describes a catalog kept whole.
func wholeReport(c *fbc.Catalog) *Report {
	rep := &Report{}
	for _, name := range c.PackageNames() {
		p := c.Package(name)
		pr := PackageReport{Name: name, DefaultChannel: p.DefaultChannel, Requested: true}
		bundleChannels := map[string][]string{}
		heads := map[string][]string{}
		for _, ch := range p.Channels {
			g := newGraph(p, ch)
			crep := ChannelReport{Name: ch.Name}
			if hs := g.heads(g.all()); len(hs) == 1 {
				crep.Head, crep.SourceHead = g.names[hs[0]], g.names[hs[0]]
				heads[crep.Head] = append(heads[crep.Head], ch.Name)
			}
			members := g.members(g.all())
			g.byVersionDesc(members)
			slices.Reverse(members)
			for _, i := range members {
				crep.Bundles = append(crep.Bundles, g.names[i])
				bundleChannels[g.names[i]] = append(bundleChannels[g.names[i]], ch.Name)
			}
			pr.Channels = append(pr.Channels, crep)
		}
		for _, b := range p.Bundles {
			br := BundleReport{Name: b.Name, Version: b.VersionString(), Image: b.Image, Channels: bundleChannels[b.Name]}
			for _, ch := range br.Channels {
				br.Reasons = append(br.Reasons, Reason{Kind: reasonFull, Channel: ch, Detail: "catalog kept whole"})
			}
			for _, ch := range heads[b.Name] {
				br.Reasons = append(br.Reasons, Reason{Kind: reasonHead, Channel: ch, Detail: "channel head"})
			}
			pr.Bundles = append(pr.Bundles, br)
		}
		rep.Packages = append(rep.Packages, pr)
	}
	return rep
}

func versionSpan(g *graph) string {
	var lo, hi *fbc.Bundle
	for _, name := range g.names {
		b := g.pkg.Bundle(name)
		if b == nil || b.Version() == nil {
			continue
		}
		if lo == nil || b.Version().Compare(lo.Version()) < 0 {
			lo = b
		}
		if hi == nil || b.Version().Compare(hi.Version()) > 0 {
			hi = b
		}
	}
	if lo == nil {
		return "no versions"
	}
	if lo == hi {
		return "only version " + lo.VersionString()
	}
	return fmt.Sprintf("versions %s to %s", lo.VersionString(), hi.VersionString())
}

func packageVersionSpan(p *fbc.Package) string {
	var lo, hi *fbc.Bundle
	for _, b := range p.Bundles {
		if b.Version() == nil {
			continue
		}
		if lo == nil || b.Version().Compare(lo.Version()) < 0 {
			lo = b
		}
		if hi == nil || b.Version().Compare(hi.Version()) > 0 {
			hi = b
		}
	}
	if lo == nil {
		return "no versions"
	}
	return fmt.Sprintf("versions %s to %s", lo.VersionString(), hi.VersionString())
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
