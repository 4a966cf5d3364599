package catalog

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/gapmirror/gapmirror/imageset/fbc"
)

// graph is the upgrade graph of one channel. An edge x → y means a cluster
// running x may upgrade to y: y replaces x, y skips x, or y's skipRange
// contains x's version.
type graph struct {
	pkg        *fbc.Package
	ch         *fbc.Channel
	index      map[string]int    // entry name → position in ch.Entries
	version    []*semver.Version // per entry
	replacedBy map[string][]int  // name → entries replacing it
	skippedBy  map[string][]int  // name → entries skipping it
	skipRange  map[int]fbc.Range // entries with a skipRange
	names      []string          // per entry
	replaces   []int             // per entry: index of the replaced entry, or -1
}

func newGraph(p *fbc.Package, ch *fbc.Channel) *graph {
	n := len(ch.Entries)
	g := &graph{
		pkg:        p,
		ch:         ch,
		index:      make(map[string]int, n),
		version:    make([]*semver.Version, n),
		replacedBy: make(map[string][]int),
		skippedBy:  make(map[string][]int),
		skipRange:  make(map[int]fbc.Range),
		names:      make([]string, n),
		replaces:   make([]int, n),
	}
	for i, e := range ch.Entries {
		g.index[e.Name] = i
		g.names[i] = e.Name
		if b := p.Bundle(e.Name); b != nil {
			g.version[i] = b.Version()
		}
	}
	for i, e := range ch.Entries {
		g.replaces[i] = -1
		if e.Replaces != "" && e.Replaces != e.Name {
			g.replacedBy[e.Replaces] = append(g.replacedBy[e.Replaces], i)
			if j, ok := g.index[e.Replaces]; ok {
				g.replaces[i] = j
			}
		}
		for _, s := range e.Skips {
			if s != e.Name {
				g.skippedBy[s] = append(g.skippedBy[s], i)
			}
		}
		if e.SkipRange != "" {
			if r, err := fbc.ParseSkipRange(e.SkipRange); err == nil {
				g.skipRange[i] = r
			}
		}
	}
	return g
}

// set is a subset of a channel's entries, by position.
type set []bool

func (g *graph) all() set {
	s := make(set, len(g.names))
	for i := range s {
		s[i] = true
	}
	return s
}

func (g *graph) members(s set) []int {
	var out []int
	for i, in := range s {
		if in {
			out = append(out, i)
		}
	}
	return out
}

// heads are the entries of s that no entry of s replaces or skips: opm's channel heads.
func (g *graph) heads(s set) []int {
	var out []int
	for i, in := range s {
		if in && !g.hasIncoming(i, s) {
			out = append(out, i)
		}
	}
	return out
}

func (g *graph) hasIncoming(i int, s set) bool {
	for _, j := range g.replacedBy[g.names[i]] {
		if s[j] {
			return true
		}
	}
	for _, j := range g.skippedBy[g.names[i]] {
		if s[j] {
			return true
		}
	}
	return false
}

func (g *graph) namesOf(idx []int) []string {
	out := make([]string, len(idx))
	for k, i := range idx {
		out[k] = g.names[i]
	}
	slices.Sort(out)
	return out
}

// head returns the single head of s, or an error naming what is wrong.
func (g *graph) head(s set) (int, error) {
	hs := g.heads(s)
	switch len(hs) {
	case 1:
		return hs[0], nil
	case 0:
		return -1, fmt.Errorf("no channel head: every entry is replaced or skipped by another (a cycle)")
	default:
		return -1, fmt.Errorf("multiple channel heads: %s", strings.Join(g.namesOf(hs), ", "))
	}
}

// chain is opm's replaces chain from h within s: h, the entry h replaces, and
// so on, stopping at an entry outside s, an entry skipped by any entry of s,
// or a repeat. skipped collects the names skipped by the entries of s. This is
// operator-registry v1.65.0's validateReplacesChain (alpha/model), which
// counts the skips of every bundle in the channel, not only of chain members:
// stopping only at entries skipped by chain members accepted channels that
// `opm validate` rejects as stranded (TestGraphLevels).
func (g *graph) chain(h int, s set) (members []int, skipped map[string]bool) {
	skipped = map[string]bool{}
	for _, i := range g.members(s) {
		for _, sk := range g.ch.Entries[i].Skips {
			skipped[sk] = true
		}
	}
	onChain := map[int]bool{}
	for cur := h; cur >= 0 && s[cur] && (cur == h || !skipped[g.names[cur]]) && !onChain[cur]; cur = g.replaces[cur] {
		onChain[cur] = true
		members = append(members, cur)
	}
	return members, skipped
}

// checkOPM checks the upgrade-graph rules the newest opm enforces on a
// channel holding the entries of s (operator-registry alpha/model): one head;
// no cycle through replaces; every entry on the head's replaces chain or
// skipped by an entry of the channel ("stranded" otherwise). Two rules go
// beyond what opm v1.65.0 checks (it accepts both; they stay because older
// opm was found to crash on the second): every name an entry replaces that
// is not in the channel is the chain tail's or skipped, and no name outside
// the channel is both replaced and skipped.
func (g *graph) checkOPM(s set) error {
	h, err := g.head(s)
	if err != nil {
		return err
	}
	if cyc := g.cycle(s); cyc != nil {
		return fmt.Errorf("cycle in upgrade graph: %s", strings.Join(cyc, " -> "))
	}
	members, skipped := g.chain(h, s)
	covered := make(set, len(s))
	for _, m := range members {
		covered[m] = true
	}
	var stranded []string
	external := map[string]bool{}
	for _, i := range g.members(s) {
		if !covered[i] && !skipped[g.names[i]] {
			stranded = append(stranded, g.names[i])
		}
		if r := g.ch.Entries[i].Replaces; r != "" && (g.replaces[i] < 0 || !s[g.replaces[i]]) {
			external[r] = true
		}
	}
	tail := members[len(members)-1]
	for _, r := range sortedKeys(external) {
		if r == g.ch.Entries[tail].Replaces && !skipped[r] {
			continue // the chain's tail may replace a bundle outside the channel
		}
		if !skipped[r] {
			stranded = append(stranded, r+" (replaced, but not in the channel)")
		}
		for _, j := range g.skippedBy[r] {
			if s[j] {
				return fmt.Errorf("%q is both replaced and skipped but is not in the channel: keep it in the channel or drop one of the edges", r)
			}
		}
	}
	if len(stranded) > 0 {
		slices.Sort(stranded)
		return fmt.Errorf("stranded entries (neither on the replaces chain from head %q nor skipped by it): %s", g.names[h], strings.Join(stranded, ", "))
	}
	return nil
}

// cycle returns a cycle of upgrade edges through replaces and skips within s, or nil.
func (g *graph) cycle(s set) []string {
	const (
		white = iota
		grey
		black
	)
	colour := make([]int, len(s))
	var stack []int
	var found []string
	var visit func(i int) bool
	visit = func(i int) bool {
		colour[i] = grey
		stack = append(stack, i)
		for _, j := range g.successors(i, s, false) {
			switch colour[j] {
			case grey:
				at := slices.Index(stack, j)
				for _, k := range stack[at:] {
					found = append(found, g.names[k])
				}
				found = append(found, g.names[j])
				return true
			case white:
				if visit(j) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		colour[i] = black
		return false
	}
	for _, i := range g.members(s) {
		if colour[i] == white && visit(i) {
			return found
		}
	}
	return nil
}

// successors are the entries of s a cluster on entry i may upgrade to:
// entries replacing or skipping it, and with ranges, entries whose skipRange
// contains its version.
func (g *graph) successors(i int, s set, ranges bool) []int {
	var out []int
	name := g.names[i]
	for _, j := range g.replacedBy[name] {
		if s[j] && j != i {
			out = append(out, j)
		}
	}
	for _, j := range g.skippedBy[name] {
		if s[j] && j != i && !slices.Contains(out, j) {
			out = append(out, j)
		}
	}
	if ranges && g.version[i] != nil {
		for j, r := range g.skipRange {
			if s[j] && j != i && !slices.Contains(out, j) && r.Contains(g.version[i]) {
				out = append(out, j)
			}
		}
	}
	return out
}

// strandedV0 returns the entries of s that cannot reach head h under OLM v0
// rules: an entry upgrades to the entries that replace or skip it, or to the
// head when the head's skipRange contains its version; the edges of an entry
// that another entry of s skips are ignored, as OLM v0 ignores skipped bundles.
func (g *graph) strandedV0(s set, h int) []string {
	skipped := make(set, len(s))
	for _, i := range g.members(s) {
		for _, sk := range g.ch.Entries[i].Skips {
			if j, ok := g.index[sk]; ok && j != i {
				skipped[j] = true
			}
		}
	}
	reach := make(set, len(s))
	reach[h] = true
	queue := []int{h}
	for len(queue) > 0 {
		y := queue[0]
		queue = queue[1:]
		if skipped[y] {
			continue
		}
		var preds []int
		if j := g.replaces[y]; j >= 0 {
			preds = append(preds, j)
		}
		for _, sk := range g.ch.Entries[y].Skips {
			if j, ok := g.index[sk]; ok {
				preds = append(preds, j)
			}
		}
		if r, ok := g.skipRange[y]; ok && y == h {
			for _, j := range g.members(s) {
				if r.Contains(g.version[j]) {
					preds = append(preds, j)
				}
			}
		}
		for _, j := range preds {
			if s[j] && !reach[j] {
				reach[j] = true
				queue = append(queue, j)
			}
		}
	}
	var out []string
	for _, i := range g.members(s) {
		if !reach[i] {
			out = append(out, g.names[i])
		}
	}
	slices.Sort(out)
	return out
}

// strandedV1 returns the entries of s from which OLM v1's walk does not end
// at head h. OLM v1 upgrades to the successor with the highest version among
// every entry whose replaces, skips or skipRange covers the installed one.
func (g *graph) strandedV1(s set, h int) []string {
	next := make([]int, len(s))
	for _, i := range g.members(s) {
		next[i] = -1
		for _, j := range g.successors(i, s, true) {
			if next[i] < 0 || compareVersions(g.version[j], g.version[next[i]]) > 0 ||
				compareVersions(g.version[j], g.version[next[i]]) == 0 && g.names[j] > g.names[next[i]] {
				next[i] = j
			}
		}
	}
	const (
		unknown = iota
		walking
		good
		bad
	)
	state := make([]int, len(s))
	var out []string
	for _, start := range g.members(s) {
		var path []int
		cur := start
		for state[cur] == unknown {
			state[cur] = walking
			path = append(path, cur)
			if next[cur] < 0 {
				break
			}
			cur = next[cur]
		}
		result := good
		switch {
		case state[cur] == walking && next[cur] >= 0: // a cycle
			result = bad
		case state[cur] == walking: // the walk stopped here
			if cur != h {
				result = bad
			}
		default:
			result = state[cur]
		}
		for _, p := range path {
			state[p] = result
		}
		if result == bad {
			out = append(out, g.names[start])
		}
	}
	slices.Sort(out)
	return out
}

// compareVersions orders versions, nil first.
func compareVersions(a, b *semver.Version) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	default:
		return a.Compare(b)
	}
}

// byVersionDesc orders entries by version, newest first, then by name.
func (g *graph) byVersionDesc(idx []int) {
	slices.SortFunc(idx, func(a, b int) int {
		return cmp.Or(-compareVersions(g.version[a], g.version[b]), cmp.Compare(g.names[a], g.names[b]))
	})
}
