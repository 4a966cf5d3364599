package release

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// Graph is one channel's update graph for one architecture, as the
// OpenShift Update Service (Cincinnati) serves it.
type Graph struct {
	// Channel and Arch say which graph this is; they are not part of the JSON.
	Channel string `json:"-"`
	Arch    string `json:"-"`
	// Nodes are the releases of the channel.
	Nodes []Node `json:"nodes"`
	// Edges are recommended updates, as pairs of indexes into Nodes.
	Edges [][2]int `json:"edges"`
	// ConditionalEdges are updates recommended only to clusters that do not
	// match their known risks.
	ConditionalEdges []ConditionalEdge `json:"conditionalEdges,omitempty"`
	// Raw is the JSON document the graph was parsed from (what SaveGraph writes).
	Raw []byte `json:"-"`
}

// Node is one release in an update graph.
type Node struct {
	// Version is the release's semantic version, e.g. 4.18.1.
	Version string `json:"version"`
	// Payload is the release image pull spec, by digest.
	Payload string `json:"payload"`
	// Metadata holds the graph's annotations (channels, errata URL, …).
	Metadata map[string]string `json:"metadata,omitempty"`
}

// ConditionalEdge is a group of updates that share the same known risks.
type ConditionalEdge struct {
	// Edges are the conditional updates.
	Edges []EdgeRef `json:"edges"`
	// Risks apply to every one of Edges.
	Risks []Risk `json:"risks"`
}

// EdgeRef is one update of a conditional edge, by version.
type EdgeRef struct {
	// From is the version updated from.
	From string `json:"from"`
	// To is the version updated to.
	To string `json:"to"`
}

// Risk is a known issue that makes an update conditional.
type Risk struct {
	// Name identifies the risk, e.g. AzureDefaultVMType.
	Name string `json:"name"`
	// URL points at the risk's description.
	URL string `json:"url,omitempty"`
	// Message explains the risk in one paragraph.
	Message string `json:"message,omitempty"`
	// MatchingRules say which clusters the risk applies to (PromQL, Always);
	// kept verbatim.
	MatchingRules []json.RawMessage `json:"matchingRules,omitempty"`
}

// ParseGraph parses an update graph document for the given channel and
// architecture and checks that it is consistent: every node has a semantic
// version and a payload, no version appears twice, and every edge names
// existing nodes.
func ParseGraph(data []byte, channel, arch string) (*Graph, error) {
	var g Graph
	if err := json.Unmarshal(data, &g); err != nil {
		return nil, fmt.Errorf("update graph of channel %s (arch %s) is not valid JSON: %w", channel, arch, err)
	}
	g.Channel, g.Arch = channel, arch
	g.Raw = append([]byte(nil), data...)
	if err := g.check(); err != nil {
		return nil, fmt.Errorf("update graph of channel %s (arch %s) is inconsistent: %w", channel, arch, err)
	}
	return &g, nil
}

// check validates node versions, payloads and edge references.
func (g *Graph) check() error {
	var errs []error
	seen := make(map[string]int, len(g.Nodes))
	for i, n := range g.Nodes {
		v, err := semver.StrictNewVersion(n.Version)
		if err != nil {
			errs = append(errs, fmt.Errorf("nodes[%d]: version %q is not a semantic version", i, n.Version))
			continue
		}
		if j, dup := seen[v.String()]; dup {
			errs = append(errs, fmt.Errorf("nodes[%d]: version %s already appears at nodes[%d]", i, n.Version, j))
			continue
		}
		seen[v.String()] = i
		if strings.TrimSpace(n.Payload) == "" {
			errs = append(errs, fmt.Errorf("nodes[%d]: release %s has no payload", i, n.Version))
		}
	}
	for i, e := range g.Edges {
		if e[0] < 0 || e[0] >= len(g.Nodes) || e[1] < 0 || e[1] >= len(g.Nodes) {
			errs = append(errs, fmt.Errorf("edges[%d]: [%d,%d] does not name two of the %d nodes", i, e[0], e[1], len(g.Nodes)))
		}
	}
	for i, ce := range g.ConditionalEdges {
		for j, e := range ce.Edges {
			for _, end := range []string{e.From, e.To} {
				v, err := semver.StrictNewVersion(end)
				if err != nil {
					errs = append(errs, fmt.Errorf("conditionalEdges[%d].edges[%d]: %q is not a semantic version", i, j, end))
					continue
				}
				if _, ok := seen[v.String()]; !ok {
					errs = append(errs, fmt.Errorf("conditionalEdges[%d].edges[%d]: version %s is not a node of the graph", i, j, end))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// Versions returns the versions of the graph's releases, oldest first by
// semantic version ordering.
func (g *Graph) Versions() []string {
	nodes := g.sortedNodes()
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.node.Version
	}
	return out
}

// Head returns the newest release of the graph (the channel head), and false
// when the graph has no releases.
func (g *Graph) Head() (Node, bool) {
	nodes := g.sortedNodes()
	if len(nodes) == 0 {
		return Node{}, false
	}
	return nodes[len(nodes)-1].node, true
}

// node returns the release with the given version (compared as semantic
// versions), and false when the graph does not have it.
func (g *Graph) node(version string) (Node, bool) {
	want, err := semver.NewVersion(version)
	if err != nil {
		return Node{}, false
	}
	for _, n := range g.Nodes {
		if v, err := semver.StrictNewVersion(n.Version); err == nil && v.Equal(want) {
			return n, true
		}
	}
	return Node{}, false
}

// versionedNode is a node with its parsed version and its index in Nodes.
type versionedNode struct {
	node  Node
	ver   *semver.Version
	index int
}

// sortedNodes returns the nodes with valid versions, oldest first.
func (g *Graph) sortedNodes() []versionedNode {
	out := make([]versionedNode, 0, len(g.Nodes))
	for i, n := range g.Nodes {
		v, err := semver.StrictNewVersion(n.Version)
		if err != nil {
			continue
		}
		out = append(out, versionedNode{node: n, ver: v, index: i})
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].ver.LessThan(out[b].ver) })
	return out
}
