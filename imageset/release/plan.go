package release

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// Spec says which releases to mirror: the ImageSetConfiguration's
// mirror.platform channels and architectures.
type Spec struct {
	// Channels are mirror.platform.channels, in configuration order.
	Channels []ChannelSpec
	// Architectures are graph architectures (amd64, arm64, ppc64le, s390x,
	// multi); empty means amd64.
	Architectures []string
	// IncludeConditional lets upgrade paths use conditional updates (updates
	// with known risks); the Plan then names every risk it accepted.
	IncludeConditional bool
}

// ChannelSpec is one mirror.platform.channels[] entry.
type ChannelSpec struct {
	// Name is the channel, e.g. stable-4.18.
	Name string
	// Type is ocp (default when empty) or okd.
	Type ChannelType
	// MinVersion and MaxVersion bound the selected releases (X.Y.Z).
	MinVersion string
	MaxVersion string
	// ShortestPath keeps only the releases on the shortest upgrade path
	// from the lowest to the highest selected release.
	ShortestPath bool
	// Full selects the whole channel when no bound is given.
	Full bool
}

// Graphs holds the update graphs a Plan reads.
type Graphs map[GraphKey]*Graph

// Plan is the outcome of planning: the releases to mirror and what the user
// should know about them.
type Plan struct {
	// Releases are sorted by architecture, then version.
	Releases []Release
	// ConditionalUpdates are the updates with known risks that upgrade paths
	// use (only with Spec.IncludeConditional).
	ConditionalUpdates []ConditionalUpdate
	// Warnings are notes for the user, in a stable order.
	Warnings []string
}

// Release is one release payload selected for mirroring.
type Release struct {
	// Version is the release version, e.g. 4.18.1.
	Version string
	// Arch is the graph architecture (amd64, arm64, ppc64le, s390x, multi).
	Arch string
	// Type is the product the release belongs to (ocp or okd).
	Type ChannelType
	// Payload is the release image pull spec by digest, from the graph.
	Payload string
	// Digest is the payload's manifest digest (sha256:…).
	Digest string
	// Channels are the channels whose selection or upgrade path put the
	// release in the plan, sorted.
	Channels []string
	// Why lists the reasons the release is selected.
	Why []string
}

// Repository is the payload's repository (pull spec without the digest).
func (r Release) Repository() string {
	if at := strings.LastIndex(r.Payload, "@"); at >= 0 {
		return r.Payload[:at]
	}
	return r.Payload
}

// Tag is the conventional tag of the release image: <version>-<arch> for
// OpenShift (4.18.1-x86_64, 4.18.1-multi), the bare version for OKD amd64.
func (r Release) Tag() string {
	if r.Type == TypeOKD && r.Arch == archAMD64 {
		return r.Version
	}
	return r.Version + "-" + TagArch(r.Arch)
}

// ConditionalUpdate is an update with known risks that a planned upgrade path
// takes.
type ConditionalUpdate struct {
	// Arch and Channel say which graph the update comes from.
	Arch    string
	Channel string
	// From and To are the update's versions.
	From string
	To   string
	// Risks are the known risks the update carries.
	Risks []Risk
}

// channelName matches OpenShift channel names: <prefix>-<major>.<minor>.
var channelName = regexp.MustCompile(`^(.+)-(\d+)\.(\d+)$`)

// channelMinor splits a channel name into its prefix, major and minor.
func channelMinor(name string) (prefix string, major, minor uint64, ok bool) {
	m := channelName.FindStringSubmatch(name)
	if m == nil {
		return "", 0, 0, false
	}
	major, err1 := strconv.ParseUint(m[2], 10, 32)
	minor, err2 := strconv.ParseUint(m[3], 10, 32)
	if err1 != nil || err2 != nil {
		return "", 0, 0, false
	}
	return m[1], major, minor, true
}

// channelType returns the channel's type with the default applied.
func (c ChannelSpec) channelType() ChannelType {
	if c.Type == "" {
		return TypeOCP
	}
	return c.Type
}

// architectures returns the spec's graph architectures, normalised and
// de-duplicated, amd64 when none.
func (s Spec) architectures() ([]string, error) {
	if len(s.Architectures) == 0 {
		return []string{DefaultArch}, nil
	}
	var out []string
	seen := map[string]bool{}
	for i, a := range s.Architectures {
		ga, err := GraphArch(a)
		if err != nil {
			return nil, fmt.Errorf("mirror.platform.architectures[%d]: %w", i, err)
		}
		if !seen[ga] {
			seen[ga] = true
			out = append(out, ga)
		}
	}
	return out, nil
}

// check validates channel names and types.
func (s Spec) check() error {
	var errs []error
	for i, c := range s.Channels {
		if strings.TrimSpace(c.Name) == "" {
			errs = append(errs, fmt.Errorf("mirror.platform.channels[%d].name is empty: name a channel such as stable-4.18", i))
		}
		if t := c.channelType(); t != TypeOCP && t != TypeOKD {
			errs = append(errs, fmt.Errorf("mirror.platform.channels[%d].type %q is unknown: use ocp or okd", i, c.Type))
		}
	}
	return errors.Join(errs...)
}

// GraphKeys returns the graphs Plan needs: required ones (every channel for
// every architecture) and optional ones (intermediate channels an upgrade
// path across several OpenShift channels may go through; they may not exist,
// e.g. eus-4.17).
func (s Spec) GraphKeys() (required, optional []GraphKey, err error) {
	if err := s.check(); err != nil {
		return nil, nil, err
	}
	archs, err := s.architectures()
	if err != nil {
		return nil, nil, err
	}
	have := map[GraphKey]bool{}
	for _, arch := range archs {
		for _, c := range s.Channels {
			k := GraphKey{Channel: c.Name, Type: c.channelType(), Arch: arch}
			if !have[k] {
				have[k] = true
				required = append(required, k)
			}
		}
	}
	for _, name := range s.intermediateChannels() {
		for _, arch := range archs {
			k := GraphKey{Channel: name, Type: TypeOCP, Arch: arch}
			if !have[k] {
				have[k] = true
				optional = append(optional, k)
			}
		}
	}
	return required, optional, nil
}

// intermediateChannels lists, for every prefix of the listed OpenShift
// channels, the channels of each minor between the lowest and the highest
// listed minor of the same major (a superset of what any path walks).
func (s Spec) intermediateChannels() []string {
	type span struct{ lo, hi uint64 }
	var ocp []ChannelSpec
	for _, c := range s.Channels {
		if c.channelType() == TypeOCP {
			ocp = append(ocp, c)
		}
	}
	if len(ocp) < 2 {
		return nil
	}
	spans := map[uint64]*span{}
	prefixes := map[string]bool{}
	for _, c := range ocp {
		p, major, minor, ok := channelMinor(c.Name)
		if !ok {
			continue
		}
		prefixes[p] = true
		if sp, ok := spans[major]; ok {
			sp.lo, sp.hi = min(sp.lo, minor), max(sp.hi, minor)
		} else {
			spans[major] = &span{minor, minor}
		}
	}
	var out []string
	for p := range prefixes {
		for major, sp := range spans {
			for m := sp.lo; m <= sp.hi; m++ {
				out = append(out, fmt.Sprintf("%s-%d.%d", p, major, m))
			}
		}
	}
	sort.Strings(out)
	return out
}

// FetchGraphs gets every graph the spec needs from src. Required graphs must
// exist and have releases; optional ones (intermediate channels) are skipped
// when the channel has no releases or was never saved.
func FetchGraphs(ctx context.Context, src GraphSource, spec Spec) (Graphs, error) {
	required, optional, err := spec.GraphKeys()
	if err != nil {
		return nil, err
	}
	graphs := Graphs{}
	var errs []error
	for _, k := range required {
		g, err := src.Graph(ctx, k)
		if errors.Is(err, ErrNoReleases) {
			errs = append(errs, noReleasesHint(ctx, src, k, spec))
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fillKey(g, k)
		if len(g.Nodes) == 0 {
			errs = append(errs, noReleasesHint(ctx, src, k, spec))
			continue
		}
		graphs[k] = g
	}
	for _, k := range optional {
		g, err := src.Graph(ctx, k)
		if errors.Is(err, ErrNoReleases) || errors.Is(err, ErrGraphNotSaved) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fillKey(g, k)
		graphs[k] = g
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return graphs, nil
}

func fillKey(g *Graph, k GraphKey) {
	if g.Channel == "" {
		g.Channel = k.Channel
	}
	if g.Arch == "" {
		g.Arch = k.Arch
	}
}

func noReleases(k GraphKey) error {
	return fmt.Errorf("channel %s has no releases for arch %s: check the channel name (e.g. stable-4.18) and the architecture: %w", k.Channel, k.Arch, ErrNoReleases)
}

// planner accumulates releases and notes while a Plan is computed.
type planner struct {
	spec     Spec
	graphs   Graphs
	releases map[[2]string]*Release
	updates  map[[4]string]ConditionalUpdate
	warnings []string
}

// resolved is a channel's outcome for one architecture: its lowest and
// highest selected releases.
type resolved struct {
	spec     ChannelSpec
	min, max placedNode
}

// NewPlan decides which releases the spec selects from the graphs, following
// oc-mirror v2's rules (see Spec and ChannelSpec):
//
//   - no minVersion, no maxVersion, full false: the channel head only;
//   - full true: the whole channel;
//   - minVersion only: every release from minVersion to the head;
//   - maxVersion only: every release from the channel's first release to
//     maxVersion (the channel may start with older minors);
//   - both: every release in [minVersion, maxVersion];
//   - shortestPath: instead of every release in the range, only those on the
//     shortest upgrade path from the lowest to the highest selected release;
//   - several OpenShift channels: also the releases on an upgrade path from
//     the lowest selected release to the highest, walking the channel of each
//     minor in between (a missing path is a warning that names the hop).
//
// Every error of every channel and architecture is reported at once.
func NewPlan(graphs Graphs, spec Spec) (*Plan, error) {
	if err := spec.check(); err != nil {
		return nil, err
	}
	archs, err := spec.architectures()
	if err != nil {
		return nil, err
	}
	p := &planner{
		spec:     spec,
		graphs:   graphs,
		releases: map[[2]string]*Release{},
		updates:  map[[4]string]ConditionalUpdate{},
	}
	var errs []error
	for _, arch := range archs {
		var done []resolved
		for i, c := range spec.Channels {
			r, err := p.channel(i, c, arch)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			done = append(done, r)
		}
		if err := p.acrossChannels(arch, done); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p.plan(), nil
}

// graph returns the graph of a channel, or an error saying what is missing.
func (p *planner) graph(k GraphKey) (*Graph, error) {
	g, ok := p.graphs[k]
	if !ok || g == nil {
		return nil, fmt.Errorf("no update graph for channel %s (arch %s): fetch it first (FetchGraphs fetches every graph a Spec needs)", k.Channel, k.Arch)
	}
	if len(g.Nodes) == 0 {
		return nil, noReleases(k)
	}
	if g.Channel == "" || g.Arch == "" {
		c := *g
		fillKey(&c, k)
		g = &c
	}
	return g, nil
}

// channel resolves one channel for one architecture and records its releases.
func (p *planner) channel(i int, c ChannelSpec, arch string) (resolved, error) {
	field := fmt.Sprintf("mirror.platform.channels[%d]", i)
	label := fmt.Sprintf("%s %s", field, c.Name)
	g, err := p.graph(GraphKey{Channel: c.Name, Type: c.channelType(), Arch: arch})
	if err != nil {
		return resolved{}, fmt.Errorf("%s: %w", field, err)
	}
	u := newUpgradeGraph()
	if err := u.add(g, p.spec.IncludeConditional); err != nil {
		return resolved{}, fmt.Errorf("%s: %w", field, err)
	}
	sorted := g.sortedNodes()
	first, head := sorted[0], sorted[len(sorted)-1]

	lookup := func(fieldName, version string) (placedNode, bool, error) {
		if strings.TrimSpace(version) == "" {
			return placedNode{}, false, nil
		}
		v, err := semver.StrictNewVersion(strings.TrimSpace(version))
		if err != nil {
			return placedNode{}, false, fmt.Errorf("%s.%s %q is not a full semantic version: write it as X.Y.Z, e.g. 4.18.1", field, fieldName, version)
		}
		n, ok := u.nodes[v.String()]
		if !ok {
			return placedNode{}, false, fmt.Errorf("%s.%s %s is not in channel %s (arch %s); nearest versions: %s",
				field, fieldName, version, c.Name, arch, nearest(sorted, v))
		}
		return n, true, nil
	}
	minNode, hasMin, errMin := lookup("minVersion", c.MinVersion)
	maxNode, hasMax, errMax := lookup("maxVersion", c.MaxVersion)
	if err := errors.Join(errMin, errMax); err != nil {
		return resolved{}, err
	}

	headNode := u.nodes[head.ver.String()]
	firstNode := u.nodes[first.ver.String()]
	var what string
	switch {
	case hasMin && hasMax && minNode.ver.Equal(maxNode.ver):
		what = fmt.Sprintf("version %s", minNode.node.Version)
	case hasMin && hasMax:
		what = fmt.Sprintf("versions %s to %s", minNode.node.Version, maxNode.node.Version)
	case hasMin:
		maxNode = headNode
		what = fmt.Sprintf("versions %s to the channel head %s", minNode.node.Version, maxNode.node.Version)
	case hasMax:
		minNode = firstNode
		what = fmt.Sprintf("versions from the channel's first release %s to %s", minNode.node.Version, maxNode.node.Version)
		if _, _, minor, ok := channelMinor(c.Name); ok && minNode.ver.Minor() < minor {
			p.warn("%s (arch %s): maxVersion without minVersion starts at the channel's first release %s, an older minor; set minVersion to mirror fewer releases",
				label, arch, minNode.node.Version)
		}
	case c.Full:
		minNode, maxNode = firstNode, headNode
		what = "full channel"
	default:
		minNode, maxNode = headNode, headNode
		what = "channel head"
	}
	if maxNode.ver.LessThan(minNode.ver) {
		return resolved{}, fmt.Errorf("%s: minVersion %s is newer than maxVersion %s: swap them or fix one", field, minNode.node.Version, maxNode.node.Version)
	}
	if strings.HasPrefix(c.Name, "eus-") && hasMin && maxNode.ver.Minor() >= minNode.ver.Minor()+2 && minNode.ver.Major() == maxNode.ver.Major() {
		p.warn("%s (arch %s): an EUS channel spanning %s to %s: check the supported EUS-to-EUS update path at https://access.redhat.com/labs/ocpupgradegraph/update_path",
			label, arch, minNode.node.Version, maxNode.node.Version)
	}

	var selected []string
	if c.ShortestPath {
		from, to := minNode.ver.String(), maxNode.ver.String()
		path, reachable := u.shortestPath(from, to)
		if path == nil {
			return resolved{}, fmt.Errorf("%s (arch %s): no upgrade path from %s to %s in channel %s: %s%s",
				field, arch, minNode.node.Version, maxNode.node.Version, c.Name, u.explainNoPath(from, to, reachable), p.conditionalHint(g, from, to))
		}
		what = fmt.Sprintf("shortest upgrade path %s", arrowPath(u, path))
		selected = path
		p.recordConditional(arch, u, path)
	} else {
		for _, n := range sorted {
			if !n.ver.LessThan(minNode.ver) && !n.ver.GreaterThan(maxNode.ver) {
				selected = append(selected, n.ver.String())
			}
		}
	}
	why := fmt.Sprintf("%s: %s", label, what)
	for _, k := range selected {
		n := u.nodes[k]
		if err := p.add(arch, c.channelType(), n.node, c.Name, why); err != nil {
			return resolved{}, fmt.Errorf("%s: %w", field, err)
		}
	}
	return resolved{spec: c, min: minNode, max: maxNode}, nil
}

// acrossChannels adds an upgrade path from the lowest to the highest release
// selected by the OpenShift channels of one architecture.
func (p *planner) acrossChannels(arch string, done []resolved) error {
	var ocp []resolved
	for _, r := range done {
		if r.spec.channelType() == TypeOCP {
			ocp = append(ocp, r)
		}
	}
	if len(ocp) < 2 {
		return nil
	}
	src, dst := ocp[0], ocp[0]
	for _, r := range ocp[1:] {
		if r.min.ver.LessThan(src.min.ver) {
			src = r
		}
		if r.max.ver.GreaterThan(dst.max.ver) {
			dst = r
		}
	}
	walk, note, ok := walkChannels(src.spec.Name, dst.spec.Name, ocp)
	if !ok {
		p.warn("arch %s: no upgrade path computed across channels: %s", arch, note)
		return nil
	}
	u := newUpgradeGraph()
	var absent []string
	for _, name := range walk {
		g, ok := p.graphs[GraphKey{Channel: name, Type: TypeOCP, Arch: arch}]
		if !ok || g == nil || len(g.Nodes) == 0 {
			absent = append(absent, name)
			continue
		}
		if g.Channel == "" || g.Arch == "" {
			c := *g
			fillKey(&c, GraphKey{Channel: name, Arch: arch})
			g = &c
		}
		if err := u.add(g, p.spec.IncludeConditional); err != nil {
			return fmt.Errorf("upgrade path across channels: %w", err)
		}
	}
	from, to := src.min.ver.String(), dst.max.ver.String()
	route := strings.Join(walk, " → ")
	if len(absent) > 0 {
		route += fmt.Sprintf(" (no releases for arch %s in %s)", arch, strings.Join(absent, ", "))
	}
	if from == to {
		return nil
	}
	path, reachable := u.shortestPath(from, to)
	if path == nil {
		hint := ""
		if !p.spec.IncludeConditional {
			c := newUpgradeGraph()
			for _, name := range walk {
				if g, ok := p.graphs[GraphKey{Channel: name, Type: TypeOCP, Arch: arch}]; ok && g != nil && len(g.Nodes) > 0 {
					_ = c.add(g, true)
				}
			}
			hint = c.hint(from, to)
		}
		p.warn("arch %s: no upgrade path from %s (%s) to %s (%s) through %s: %s%s",
			arch, src.min.node.Version, src.spec.Name, dst.max.node.Version, dst.spec.Name, route, u.explainNoPath(from, to, reachable), hint)
		return nil
	}
	why := fmt.Sprintf("mirror.platform.channels: upgrade path %s (%s)", arrowPath(u, path), route)
	for i, k := range path {
		n := u.nodes[k]
		channel := n.channel
		if i > 0 {
			channel = u.edges[[2]string{path[i-1], k}].channel
		}
		if err := p.add(arch, TypeOCP, n.node, channel, why); err != nil {
			return fmt.Errorf("upgrade path across channels: %w", err)
		}
	}
	p.recordConditional(arch, u, path)
	return nil
}

// walkChannels lists the channels an upgrade path from src's channel to
// dst's channel may use: src, the channel of every minor in between (with
// src's prefix), and dst. Across major versions only the listed channels are
// used.
func walkChannels(src, dst string, listed []resolved) (walk []string, note string, ok bool) {
	sp, smaj, smin, ok1 := channelMinor(src)
	_, dmaj, dmin, ok2 := channelMinor(dst)
	if !ok1 || !ok2 {
		bad := src
		if ok1 {
			bad = dst
		}
		return nil, fmt.Sprintf("channel name %s does not end in -<major>.<minor>", bad), false
	}
	add := func(name string) {
		for _, w := range walk {
			if w == name {
				return
			}
		}
		walk = append(walk, name)
	}
	add(src)
	if smaj == dmaj {
		lo, hi := min(smin, dmin), max(smin, dmin)
		for m := lo + 1; m < hi; m++ {
			add(fmt.Sprintf("%s-%d.%d", sp, smaj, m))
		}
	} else {
		type named struct {
			name         string
			major, minor uint64
		}
		var mids []named
		for _, r := range listed {
			if _, maj, mi, ok := channelMinor(r.spec.Name); ok {
				mids = append(mids, named{r.spec.Name, maj, mi})
			}
		}
		sort.Slice(mids, func(a, b int) bool {
			if mids[a].major != mids[b].major {
				return mids[a].major < mids[b].major
			}
			if mids[a].minor != mids[b].minor {
				return mids[a].minor < mids[b].minor
			}
			return mids[a].name < mids[b].name
		})
		for _, m := range mids {
			add(m.name)
		}
	}
	add(dst)
	return walk, "", true
}

// conditionalHint says whether conditional updates would give a path, when
// they are not allowed.
func (p *planner) conditionalHint(g *Graph, from, to string) string {
	if p.spec.IncludeConditional || len(g.ConditionalEdges) == 0 {
		return ""
	}
	c := newUpgradeGraph()
	if err := c.add(g, true); err != nil {
		return ""
	}
	return c.hint(from, to)
}

// hint reports a path that exists only through conditional updates, naming
// their risks.
func (u *upgradeGraph) hint(from, to string) string {
	if _, ok := u.nodes[from]; !ok {
		return ""
	}
	if _, ok := u.nodes[to]; !ok {
		return ""
	}
	path, _ := u.shortestPath(from, to)
	if path == nil {
		return ""
	}
	var risks []string
	for i := 1; i < len(path); i++ {
		e := u.edges[[2]string{path[i-1], path[i]}]
		for _, r := range e.risks {
			risks = append(risks, r.Name)
		}
	}
	return fmt.Sprintf("; a path exists through conditional updates (known risks: %s): include conditional updates to use it", strings.Join(uniqueSorted(risks), ", "))
}

// recordConditional notes the conditional updates a path takes.
func (p *planner) recordConditional(arch string, u *upgradeGraph, path []string) {
	for i := 1; i < len(path); i++ {
		e := u.edges[[2]string{path[i-1], path[i]}]
		if !e.conditional {
			continue
		}
		from, to := u.nodes[path[i-1]].node.Version, u.nodes[path[i]].node.Version
		k := [4]string{arch, e.channel, from, to}
		if _, ok := p.updates[k]; ok {
			continue
		}
		p.updates[k] = ConditionalUpdate{Arch: arch, Channel: e.channel, From: from, To: to, Risks: e.risks}
		var names []string
		for _, r := range e.risks {
			names = append(names, riskLabel(r))
		}
		p.warn("arch %s: the upgrade path takes the conditional update %s → %s (channel %s) despite known risks: %s",
			arch, from, to, e.channel, strings.Join(names, "; "))
	}
}

func riskLabel(r Risk) string {
	if r.URL != "" {
		return fmt.Sprintf("%s (%s)", r.Name, r.URL)
	}
	return r.Name
}

// add records a selected release.
func (p *planner) add(arch string, t ChannelType, n Node, channel, why string) error {
	v, err := semver.StrictNewVersion(n.Version)
	if err != nil {
		return fmt.Errorf("release version %q is not a semantic version", n.Version)
	}
	digest, err := payloadDigest(n.Payload)
	if err != nil {
		return fmt.Errorf("release %s in channel %s (arch %s): %w", n.Version, channel, arch, err)
	}
	k := [2]string{arch, v.String()}
	r, ok := p.releases[k]
	if !ok {
		r = &Release{Version: n.Version, Arch: arch, Type: t, Payload: n.Payload, Digest: digest}
		p.releases[k] = r
	} else if r.Payload != n.Payload {
		return fmt.Errorf("release %s (arch %s) has payload %s in one channel and %s in channel %s: the update graphs disagree; retry later",
			n.Version, arch, r.Payload, n.Payload, channel)
	}
	r.Channels = appendUnique(r.Channels, channel)
	r.Why = appendUnique(r.Why, why)
	return nil
}

// payloadDigest returns the sha256 digest a payload pull spec is pinned to.
func payloadDigest(payload string) (string, error) {
	at := strings.LastIndex(payload, "@")
	if at < 0 {
		return "", fmt.Errorf("payload %q is not pinned by digest: the update service must name payloads as repository@sha256:…", payload)
	}
	d := payload[at+1:]
	if !validDigest(d) {
		return "", fmt.Errorf("payload %q does not end in a sha256 digest", payload)
	}
	return d, nil
}

// validDigest reports whether d is sha256: followed by 64 lowercase hex digits.
func validDigest(d string) bool {
	hex, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	for _, c := range hex {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func (p *planner) warn(format string, args ...any) {
	p.warnings = append(p.warnings, fmt.Sprintf(format, args...))
}

// plan returns the accumulated plan in a deterministic order.
func (p *planner) plan() *Plan {
	out := &Plan{Warnings: p.warnings}
	for _, r := range p.releases {
		sort.Strings(r.Channels)
		out.Releases = append(out.Releases, *r)
	}
	sort.Slice(out.Releases, func(a, b int) bool {
		ra, rb := out.Releases[a], out.Releases[b]
		if ra.Arch != rb.Arch {
			return ra.Arch < rb.Arch
		}
		va, _ := semver.StrictNewVersion(ra.Version)
		vb, _ := semver.StrictNewVersion(rb.Version)
		return va.LessThan(vb)
	})
	for _, u := range p.updates {
		out.ConditionalUpdates = append(out.ConditionalUpdates, u)
	}
	sort.Slice(out.ConditionalUpdates, func(a, b int) bool {
		ua, ub := out.ConditionalUpdates[a], out.ConditionalUpdates[b]
		return fmt.Sprint(ua.Arch, "\x00", ua.Channel, "\x00", ua.From, "\x00", ua.To) < fmt.Sprint(ub.Arch, "\x00", ub.Channel, "\x00", ub.From, "\x00", ub.To)
	})
	return out
}

// nearest lists the versions of a channel closest to a missing one.
func nearest(sorted []versionedNode, v *semver.Version) string {
	i := sort.Search(len(sorted), func(i int) bool { return !sorted[i].ver.LessThan(v) })
	lo, hi := max(0, i-3), min(len(sorted), i+3)
	var vs []string
	for _, n := range sorted[lo:hi] {
		vs = append(vs, n.node.Version)
	}
	return fmt.Sprintf("%s (the channel has %d releases, %s to %s)",
		strings.Join(vs, ", "), len(sorted), sorted[0].node.Version, sorted[len(sorted)-1].node.Version)
}

// arrowPath renders a path as "4.16.1 → 4.16.5 → 4.17.2".
func arrowPath(u *upgradeGraph, path []string) string {
	vs := make([]string, len(path))
	for i, k := range path {
		vs[i] = u.nodes[k].node.Version
	}
	return strings.Join(vs, " → ")
}

func appendUnique(list []string, more ...string) []string {
outer:
	for _, m := range more {
		for _, l := range list {
			if l == m {
				continue outer
			}
		}
		list = append(list, m)
	}
	return list
}

func uniqueSorted(in []string) []string {
	sort.Strings(in)
	out := in[:0]
	for i, s := range in {
		if i == 0 || s != in[i-1] {
			out = append(out, s)
		}
	}
	return out
}
