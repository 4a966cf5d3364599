package release

import (
	"fmt"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// upgradeGraph is a directed graph of releases, keyed by canonical version
// (semver String()), built from one or several channels' update graphs.
type upgradeGraph struct {
	nodes map[string]placedNode
	next  map[string][]string
	edges map[[2]string]edgeInfo
	// channels lists the channels whose graphs were added, in order.
	channels []string
}

// placedNode is a release and the first channel it was found in.
type placedNode struct {
	node    Node
	ver     *semver.Version
	channel string
}

// edgeInfo says where an update comes from and whether it carries risks.
type edgeInfo struct {
	channel     string
	conditional bool
	risks       []Risk
}

func newUpgradeGraph() *upgradeGraph {
	return &upgradeGraph{
		nodes: map[string]placedNode{},
		next:  map[string][]string{},
		edges: map[[2]string]edgeInfo{},
	}
}

// add merges a channel's graph. Conditional edges are added only when
// includeConditional is set; an update recommended unconditionally in any
// channel wins over the same update with risks.
func (u *upgradeGraph) add(g *Graph, includeConditional bool) error {
	u.channels = append(u.channels, g.Channel)
	keys := make([]string, len(g.Nodes))
	for i, n := range g.Nodes {
		v, err := semver.StrictNewVersion(n.Version)
		if err != nil {
			return fmt.Errorf("channel %s (arch %s): node version %q is not a semantic version", g.Channel, g.Arch, n.Version)
		}
		k := v.String()
		keys[i] = k
		if have, ok := u.nodes[k]; ok {
			if have.node.Payload != n.Payload {
				return fmt.Errorf("release %s has payload %s in channel %s but %s in channel %s (arch %s): the update graphs disagree; retry later",
					n.Version, have.node.Payload, have.channel, n.Payload, g.Channel, g.Arch)
			}
			continue
		}
		u.nodes[k] = placedNode{node: n, ver: v, channel: g.Channel}
	}
	for _, e := range g.Edges {
		if e[0] < 0 || e[0] >= len(keys) || e[1] < 0 || e[1] >= len(keys) {
			return fmt.Errorf("channel %s (arch %s): edge [%d,%d] does not name two of the %d nodes", g.Channel, g.Arch, e[0], e[1], len(keys))
		}
		u.addEdge(keys[e[0]], keys[e[1]], edgeInfo{channel: g.Channel})
	}
	if !includeConditional {
		return nil
	}
	for _, ce := range g.ConditionalEdges {
		for _, e := range ce.Edges {
			from, err1 := semver.StrictNewVersion(e.From)
			to, err2 := semver.StrictNewVersion(e.To)
			if err1 != nil || err2 != nil {
				return fmt.Errorf("channel %s (arch %s): conditional edge %s → %s does not name semantic versions", g.Channel, g.Arch, e.From, e.To)
			}
			if _, ok := u.nodes[from.String()]; !ok {
				return fmt.Errorf("channel %s (arch %s): conditional edge starts at %s, which is not a node of the graph", g.Channel, g.Arch, e.From)
			}
			if _, ok := u.nodes[to.String()]; !ok {
				return fmt.Errorf("channel %s (arch %s): conditional edge ends at %s, which is not a node of the graph", g.Channel, g.Arch, e.To)
			}
			u.addEdge(from.String(), to.String(), edgeInfo{channel: g.Channel, conditional: true, risks: ce.Risks})
		}
	}
	return nil
}

func (u *upgradeGraph) addEdge(from, to string, info edgeInfo) {
	k := [2]string{from, to}
	have, ok := u.edges[k]
	switch {
	case !ok:
		u.edges[k] = info
		u.next[from] = append(u.next[from], to)
	case have.conditional && !info.conditional:
		u.edges[k] = info
	}
}

// sortSuccessors orders every node's successors newest first; the BFS
// tie-break depends on it.
func (u *upgradeGraph) sortSuccessors() {
	for from, tos := range u.next {
		sort.Slice(tos, func(a, b int) bool {
			va, vb := u.nodes[tos[a]].ver, u.nodes[tos[b]].ver
			if !va.Equal(vb) {
				return va.GreaterThan(vb)
			}
			return tos[a] < tos[b]
		})
		u.next[from] = tos
	}
}

// shortestPath returns a shortest chain of updates from one version to
// another (both ends included), or nil and the set of versions reachable
// from the start when there is none.
//
// Tie-break: breadth-first search that visits each release's updates newest
// first and keeps the first way it reaches a release. Among all shortest
// paths this returns the one that is greatest when compared release by
// release from the start: it takes the newest possible release at the first
// step, then the newest possible at the second, and so on. The result depends
// only on the graphs, never on their order in the JSON.
func (u *upgradeGraph) shortestPath(from, to string) (path []string, reachable []string) {
	u.sortSuccessors()
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			break
		}
		for _, n := range u.next[cur] {
			if _, seen := prev[n]; !seen {
				prev[n] = cur
				queue = append(queue, n)
			}
		}
	}
	if _, ok := prev[to]; !ok {
		for v := range prev {
			reachable = append(reachable, v)
		}
		u.sortVersions(reachable)
		return nil, reachable
	}
	for v := to; v != ""; v = prev[v] {
		path = append(path, v)
		if v == from {
			break
		}
	}
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	return path, nil
}

// sortVersions orders canonical versions of the graph oldest first.
func (u *upgradeGraph) sortVersions(vs []string) {
	sort.Slice(vs, func(a, b int) bool { return u.nodes[vs[a]].ver.LessThan(u.nodes[vs[b]].ver) })
}

// explainNoPath says why no path leads from one release to another: how far
// the updates from the start reach, and which minor-version hop is missing.
func (u *upgradeGraph) explainNoPath(from, to string, reachable []string) string {
	fv, tv := u.nodes[from].ver, u.nodes[to].ver
	if tv.LessThan(fv) {
		return fmt.Sprintf("%s is older than %s and updates never go backwards", to, from)
	}
	newest := u.nodes[reachable[len(reachable)-1]].ver
	if len(reachable) == 1 {
		return fmt.Sprintf("the graph has no update from %s at all", from)
	}
	if newest.Major() == tv.Major() && newest.Minor() < tv.Minor() {
		return fmt.Sprintf("the hop from %d.%d to %d.%d is missing: the newest release reachable from %s is %s, and no reachable release has an update to a %d.%d release",
			newest.Major(), newest.Minor(), newest.Major(), newest.Minor()+1, from, newest.Original(), newest.Major(), newest.Minor()+1)
	}
	if newest.Major() < tv.Major() {
		return fmt.Sprintf("the hop to major version %d is missing: the newest release reachable from %s is %s", tv.Major(), from, newest.Original())
	}
	var sameMinor []string
	for _, r := range reachable {
		v := u.nodes[r].ver
		if v.Major() == tv.Major() && v.Minor() == tv.Minor() {
			sameMinor = append(sameMinor, u.nodes[r].node.Version)
		}
	}
	return fmt.Sprintf("%d.%d releases are reachable from %s (%s) but none of them updates to %s",
		tv.Major(), tv.Minor(), from, nearestList(sameMinor, 6), u.nodes[to].node.Version)
}

// nearestList renders at most max versions, eliding the middle.
func nearestList(vs []string, max int) string {
	if len(vs) <= max {
		return strings.Join(vs, ", ")
	}
	half := max / 2
	return strings.Join(vs[:half], ", ") + ", …, " + strings.Join(vs[len(vs)-half:], ", ")
}
