package catalog

import (
	"fmt"
	"slices"
	"strings"
)

// Graph validity levels. opm up to mid-2025 accepts a channel whose entries
// are all on the replaces chain from the head or skipped by some entry
// (levelLegacy); newer opm stops the chain at the first skipped entry and
// only counts skips by chain members (levelStrict).
const (
	levelInvalid = iota
	levelLegacy
	levelStrict
)

func levelName(l int) string {
	switch l {
	case levelStrict:
		return "valid"
	case levelLegacy:
		return "valid only for opm releases before the stricter graph checks of 2025 (a skipped bundle breaks the replaces chain)"
	default:
		return "invalid"
	}
}

// checkLegacy checks the rules of opm releases before 2025: one head; the
// replaces chain from the head has no cycle; every entry is on that chain or
// skipped by some entry of the channel.
func (g *graph) checkLegacy(s set) error {
	h, err := g.head(s)
	if err != nil {
		return err
	}
	onChain := make(set, len(s))
	path := []string{g.names[h]}
	for cur := h; ; {
		onChain[cur] = true
		next := g.replaces[cur]
		if next < 0 || !s[next] {
			break
		}
		path = append(path, g.names[next])
		if onChain[next] {
			return fmt.Errorf("cycle in replaces chain: %s", strings.Join(path, " -> "))
		}
		cur = next
	}
	skipped := map[string]bool{}
	for _, i := range g.members(s) {
		for _, sk := range g.ch.Entries[i].Skips {
			skipped[sk] = true
		}
	}
	var stranded []string
	for _, i := range g.members(s) {
		if !onChain[i] && !skipped[g.names[i]] {
			stranded = append(stranded, g.names[i])
		}
	}
	if len(stranded) > 0 {
		slices.Sort(stranded)
		return fmt.Errorf("stranded entries (neither on the replaces chain from head %q nor skipped): %s", g.names[h], strings.Join(stranded, ", "))
	}
	return nil
}

// level says which opm releases accept s as a channel, and why not.
func (g *graph) level(s set) (int, error) {
	if err := g.checkOPM(s); err == nil {
		return levelStrict, nil
	}
	if err := g.checkLegacy(s); err != nil {
		return levelInvalid, err
	}
	return levelLegacy, g.checkOPM(s)
}

// keep finds the smallest set of entries that holds every entry of want and
// forms a valid channel (level at least min), and its head. It keeps the
// source head when it is wanted; otherwise it tries each wanted entry as the
// new head, newest first, then the other entries from the oldest up.
func (g *graph) keep(want []int, sourceHead, minLevel int) (set, int, int, error) {
	wanted := make(set, len(g.names))
	for _, w := range want {
		wanted[w] = true
	}
	var candidates []int
	if wanted[sourceHead] {
		candidates = []int{sourceHead}
	} else {
		inWant := slices.Clone(want)
		g.byVersionDesc(inWant)
		var others []int
		for i := range g.names {
			if !wanted[i] {
				others = append(others, i)
			}
		}
		g.byVersionDesc(others)
		slices.Reverse(others)
		candidates = append(inWant, others...)
	}
	for _, h := range candidates {
		if kept, ok := g.supportStrict(h, want); ok {
			return kept, h, levelStrict, nil
		}
		if kept, ok := g.supportLegacy(h, want); ok {
			// opm counts the skips of every entry, not only of chain
			// members, so a set kept through skipping entries can be
			// valid for the newest opm once what those entries replace
			// is kept too.
			if closed := g.closeReplaces(h, kept); g.checkOPM(closed) == nil {
				return closed, h, levelStrict, nil
			}
			if minLevel <= levelLegacy {
				return kept, h, levelLegacy, nil
			}
		}
	}
	return nil, -1, levelInvalid, fmt.Errorf("no set of entries holding %s forms a valid upgrade graph", strings.Join(g.namesOf(want), ", "))
}

// supportStrict keeps want under head h with newest-opm rules: every kept
// entry is on h's replaces chain (so the chain is kept down to it) or skipped
// by a chain member (so the chain is kept down to that member), and an entry
// kept only because it is skipped keeps what it replaces.
func (g *graph) supportStrict(h int, want []int) (set, bool) {
	chain, _ := g.chain(h, g.all())
	pos := make(map[int]int, len(chain))
	for i, c := range chain {
		pos[c] = i
	}
	firstSkipper := map[string]int{}
	for i := len(chain) - 1; i >= 0; i-- {
		for _, sk := range g.ch.Entries[chain[i]].Skips {
			firstSkipper[sk] = i
		}
	}
	kept := make(set, len(g.names))
	done := make(set, len(g.names))
	need := 0
	queue := slices.Clone(want)
	for len(queue) > 0 {
		w := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if done[w] {
			continue
		}
		done[w] = true
		if i, ok := pos[w]; ok {
			need = max(need, i)
			continue
		}
		i, ok := firstSkipper[g.names[w]]
		if !ok {
			return nil, false
		}
		need = max(need, i)
		kept[w] = true
		if r := g.ch.Entries[w].Replaces; r != "" {
			if j := g.replaces[w]; j >= 0 {
				queue = append(queue, j)
				continue
			}
			// A bundle outside the channel: opm accepts it only as what the
			// chain's tail replaces, so keep the chain down to that tail.
			tail := len(chain) - 1
			if g.ch.Entries[chain[tail]].Replaces != r {
				return nil, false
			}
			need = tail
		}
	}
	for _, c := range chain[:need+1] {
		kept[c] = true
	}
	if g.checkOPM(kept) != nil {
		return nil, false
	}
	return kept, true
}

// closeReplaces is s with, for every entry of s off h's replaces chain, the
// entries it replaces, repeatedly, so that only the chain's tail may replace
// a name outside the set.
func (g *graph) closeReplaces(h int, s set) set {
	out := make(set, len(s))
	copy(out, s)
	chain, _ := g.chain(h, s)
	onChain := make(set, len(s))
	for _, c := range chain {
		onChain[c] = true
	}
	for _, i := range g.members(s) {
		if onChain[i] {
			continue
		}
		for j := g.replaces[i]; j >= 0 && !out[j]; j = g.replaces[j] {
			out[j] = true
		}
	}
	return out
}

// supportLegacy keeps want under head h with the rules of older opm: every
// kept entry is on h's replaces chain or skipped by a kept entry that is
// itself supported, found by a shortest search through skipping entries.
func (g *graph) supportLegacy(h int, want []int) (set, bool) {
	var chain []int
	pos := map[int]int{}
	for cur := h; cur >= 0; cur = g.replaces[cur] {
		if _, seen := pos[cur]; seen {
			break
		}
		pos[cur] = len(chain)
		chain = append(chain, cur)
	}
	kept := make(set, len(g.names))
	supported := make(set, len(g.names))
	kept[h], supported[h] = true, true
	need := 0
	order := slices.Clone(want)
	g.byVersionDesc(order)
	for _, w := range order {
		if supported[w] {
			continue
		}
		if i, ok := pos[w]; ok {
			need = max(need, i)
			for _, c := range chain[:need+1] {
				kept[c], supported[c] = true, true
			}
			continue
		}
		parent := map[int]int{w: -1}
		queue := []int{w}
		end := -1
		for len(queue) > 0 && end < 0 {
			x := queue[0]
			queue = queue[1:]
			for _, y := range g.skippedBy[g.names[x]] {
				if _, seen := parent[y]; seen {
					continue
				}
				parent[y] = x
				if _, onChain := pos[y]; supported[y] || onChain {
					end = y
					break
				}
				queue = append(queue, y)
			}
		}
		if end < 0 {
			return nil, false
		}
		if i, ok := pos[end]; ok && !supported[end] {
			need = max(need, i)
			for _, c := range chain[:need+1] {
				kept[c], supported[c] = true, true
			}
		}
		for x := end; x >= 0; x = parent[x] {
			kept[x], supported[x] = true, true
		}
	}
	if g.checkLegacy(kept) != nil {
		return nil, false
	}
	return kept, true
}
