package releasetest

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/Masterminds/semver/v3"
	"sigs.k8s.io/yaml"
)

// DefaultRepository is the repository generated payloads live in.
const DefaultRepository = "quay.io/openshift-release-dev/ocp-release"

// PayloadDigest returns the made-up digest of a generated release payload.
func PayloadDigest(arch, version string) string {
	return fmt.Sprintf("sha256:%x", sha256.Sum256([]byte("releasetest payload "+arch+" "+version)))
}

// Risk is a known risk attached to a conditional edge.
type Risk struct {
	// Name identifies the risk.
	Name string
	// URL points at the risk's description.
	URL string
	// Message explains the risk.
	Message string
}

// Graph builds an update graph document like the update service serves.
type Graph struct {
	// Arch is the graph's architecture; it seeds the payload digests.
	Arch string
	// Repository is where payloads live; DefaultRepository when empty.
	Repository string

	versions    []string
	payloads    map[string]string
	edges       [][2]string
	conditional []conditionalEdge
}

type conditionalEdge struct {
	from, to string
	risks    []Risk
}

// NewGraph starts a graph whose nodes are versions, in the given order.
func NewGraph(arch string, versions ...string) *Graph {
	return &Graph{Arch: arch, versions: append([]string(nil), versions...), payloads: map[string]string{}}
}

// Versions returns the graph's node versions in node order.
func (g *Graph) Versions() []string {
	return append([]string(nil), g.versions...)
}

// Payload returns the pull spec of a version's payload: the one set with
// SetPayload, else Repository@PayloadDigest(Arch, version).
func (g *Graph) Payload(version string) string {
	if p, ok := g.payloads[version]; ok {
		return p
	}
	repo := g.Repository
	if repo == "" {
		repo = DefaultRepository
	}
	return repo + "@" + PayloadDigest(g.Arch, version)
}

// SetPayload gives a version a specific payload pull spec (e.g. a real image
// pushed to a test registry).
func (g *Graph) SetPayload(version, pullspec string) *Graph {
	g.payloads[version] = pullspec
	return g
}

// Edge adds a recommended update.
func (g *Graph) Edge(from, to string) *Graph {
	g.edges = append(g.edges, [2]string{from, to})
	return g
}

// ConditionalEdge adds an update with known risks.
func (g *Graph) ConditionalEdge(from, to string, risks ...Risk) *Graph {
	g.conditional = append(g.conditional, conditionalEdge{from: from, to: to, risks: risks})
	return g
}

// GenerateEdges adds deterministic, plausible updates: every release updates
// to the next three releases of its minor, and to the first three releases of
// the next minor whose patch number is at least its own (or the newest of
// that minor when none is). Versions that are not semantic are ignored.
func (g *Graph) GenerateEdges() *Graph {
	type ver struct {
		s string
		v *semver.Version
	}
	groups := map[[2]uint64][]ver{}
	for _, s := range g.versions {
		v, err := semver.StrictNewVersion(s)
		if err != nil {
			continue
		}
		k := [2]uint64{v.Major(), v.Minor()}
		groups[k] = append(groups[k], ver{s, v})
	}
	keys := make([][2]uint64, 0, len(groups))
	for k, vs := range groups {
		sort.Slice(vs, func(a, b int) bool { return vs[a].v.LessThan(vs[b].v) })
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		if keys[a][0] != keys[b][0] {
			return keys[a][0] < keys[b][0]
		}
		return keys[a][1] < keys[b][1]
	})
	seen := map[[2]string]bool{}
	for _, e := range g.edges {
		seen[e] = true
	}
	add := func(from, to string) {
		if e := [2]string{from, to}; !seen[e] {
			seen[e] = true
			g.edges = append(g.edges, e)
		}
	}
	for _, k := range keys {
		group := groups[k]
		next := groups[[2]uint64{k[0], k[1] + 1}]
		var nextMaxPatch uint64
		for _, n := range next {
			nextMaxPatch = max(nextMaxPatch, n.v.Patch())
		}
		for i, v := range group {
			for j := i + 1; j < len(group) && j <= i+3; j++ {
				add(v.s, group[j].s)
			}
			floor := min(v.v.Patch(), nextMaxPatch)
			taken := 0
			for _, n := range next {
				if n.v.Patch() >= floor && taken < 3 {
					add(v.s, n.s)
					taken++
				}
			}
		}
	}
	return g
}

// graphDoc is the update service's JSON shape.
type graphDoc struct {
	Version          int           `json:"version"`
	Nodes            []nodeDoc     `json:"nodes"`
	Edges            [][2]int      `json:"edges"`
	ConditionalEdges []condEdgeDoc `json:"conditionalEdges"`
}

type nodeDoc struct {
	Version  string            `json:"version"`
	Payload  string            `json:"payload"`
	Metadata map[string]string `json:"metadata"`
}

type condEdgeDoc struct {
	Edges []edgeRefDoc `json:"edges"`
	Risks []riskDoc    `json:"risks"`
}

type edgeRefDoc struct {
	From string `json:"from"`
	To   string `json:"to"`
}

type riskDoc struct {
	URL           string           `json:"url"`
	Name          string           `json:"name"`
	Message       string           `json:"message"`
	MatchingRules []map[string]any `json:"matchingRules"`
}

// JSON renders the graph document; edges must name versions of the graph.
func (g *Graph) JSON() ([]byte, error) {
	index := map[string]int{}
	doc := graphDoc{Version: 1, Nodes: []nodeDoc{}, Edges: [][2]int{}, ConditionalEdges: []condEdgeDoc{}}
	for i, v := range g.versions {
		index[v] = i
		doc.Nodes = append(doc.Nodes, nodeDoc{
			Version: v,
			Payload: g.Payload(v),
			Metadata: map[string]string{
				"io.openshift.upgrades.graph.release.manifestref": PayloadDigest(g.Arch, v),
				"url": "https://access.redhat.com/errata/RHSA-test-" + v,
			},
		})
	}
	for _, e := range g.edges {
		from, ok1 := index[e[0]]
		to, ok2 := index[e[1]]
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("edge %s → %s names a version that is not a node", e[0], e[1])
		}
		doc.Edges = append(doc.Edges, [2]int{from, to})
	}
	for _, c := range g.conditional {
		if _, ok := index[c.from]; !ok {
			return nil, fmt.Errorf("conditional edge %s → %s names a version that is not a node", c.from, c.to)
		}
		if _, ok := index[c.to]; !ok {
			return nil, fmt.Errorf("conditional edge %s → %s names a version that is not a node", c.from, c.to)
		}
		ce := condEdgeDoc{Edges: []edgeRefDoc{{From: c.from, To: c.to}}, Risks: []riskDoc{}}
		for _, r := range c.risks {
			ce.Risks = append(ce.Risks, riskDoc{
				URL: r.URL, Name: r.Name, Message: r.Message,
				MatchingRules: []map[string]any{{"type": "Always"}},
			})
		}
		doc.ConditionalEdges = append(doc.ConditionalEdges, ce)
	}
	return json.Marshal(doc)
}

// ChannelFile is a channel file of openshift/cincinnati-graph-data
// (channels/<name>.yaml): the channel's name and its releases.
type ChannelFile struct {
	// Name is the channel name.
	Name string `json:"name"`
	// Versions are the channel's releases, in file order.
	Versions []string `json:"versions"`
}

// ReadChannelFile reads a cincinnati-graph-data channel file.
func ReadChannelFile(path string) (*ChannelFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading channel file: %w", err)
	}
	var c ChannelFile
	if err := yaml.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("channel file %s: %w", path, err)
	}
	if c.Name == "" || len(c.Versions) == 0 {
		return nil, fmt.Errorf("channel file %s has no name or no versions", path)
	}
	return &c, nil
}
