package release_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"

	"github.com/gapmirror/gapmirror/imageset/release"
	"github.com/gapmirror/gapmirror/internal/releasetest"
)

// realChannels is where the real cincinnati-graph-data channel lists live.
const realChannels = "../../../shared/realdata/cincinnati/channels"

// realGraphs serves the named real channels (nodes from the channel lists,
// generated edges) for amd64 and returns a client and the built graphs.
func realGraphs(t *testing.T, names ...string) (*release.GraphClient, map[string]*releasetest.Graph) {
	t.Helper()
	if _, err := os.Stat(realChannels); err != nil {
		t.Skipf("real channel lists not available (%s): %v", realChannels, err)
	}
	built := map[string]*releasetest.Graph{}
	for _, n := range names {
		cf, err := releasetest.ReadChannelFile(filepath.Join(realChannels, n+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if cf.Name != n {
			t.Fatalf("%s.yaml names channel %s", n, cf.Name)
		}
		built[n] = releasetest.NewGraph("amd64", cf.Versions...).GenerateEdges()
	}
	client, _ := graphServer(t, built)
	return client, built
}

// lastVersion returns the newest version of a list by semver.
func lastVersion(t *testing.T, vs []string) string {
	t.Helper()
	var best *semver.Version
	for _, s := range vs {
		v := semver.MustParse(s)
		if best == nil || v.GreaterThan(best) {
			best = v
		}
	}
	return best.Original()
}

// bfsDistance computes, independently of the package, the number of updates
// on a shortest path over the union of graphs (-1 when unreachable).
func bfsDistance(graphs []*release.Graph, from, to string) int {
	next := map[string][]string{}
	for _, g := range graphs {
		for _, e := range g.Edges {
			a, b := g.Nodes[e[0]].Version, g.Nodes[e[1]].Version
			next[a] = append(next[a], b)
		}
	}
	dist := map[string]int{from: 0}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			return dist[cur]
		}
		for _, n := range next[cur] {
			if _, ok := dist[n]; !ok {
				dist[n] = dist[cur] + 1
				queue = append(queue, n)
			}
		}
	}
	return -1
}

// checkPath fails unless path is a chain of edges of the graphs and is as
// short as possible.
func checkPath(t *testing.T, graphs []*release.Graph, path []string) {
	t.Helper()
	edges := map[[2]string]bool{}
	for _, g := range graphs {
		for _, e := range g.Edges {
			edges[[2]string{g.Nodes[e[0]].Version, g.Nodes[e[1]].Version}] = true
		}
	}
	for i := 1; i < len(path); i++ {
		if !edges[[2]string{path[i-1], path[i]}] {
			t.Errorf("path step %s → %s is not an update of the graphs", path[i-1], path[i])
		}
	}
	if d := bfsDistance(graphs, path[0], path[len(path)-1]); d != len(path)-1 {
		t.Errorf("path %v has %d updates, the shortest has %d", path, len(path)-1, d)
	}
}

// pathOf extracts the versions of a plan's upgrade path from a Why entry.
func pathOf(t *testing.T, p *release.Plan, marker string) []string {
	t.Helper()
	for _, r := range p.Releases {
		for _, w := range r.Why {
			if i := strings.Index(w, marker); i >= 0 {
				rest := w[i+len(marker):]
				if j := strings.Index(rest, " ("); j >= 0 {
					rest = rest[:j]
				}
				return strings.Split(rest, " → ")
			}
		}
	}
	t.Fatalf("no release has %q in its reasons", marker)
	return nil
}

func TestRealChannelsHeadsAndFull(t *testing.T) {
	client, built := realGraphs(t, "stable-4.16", "candidate-4.18")
	spec := release.Spec{Channels: []release.ChannelSpec{{Name: "stable-4.16"}, {Name: "candidate-4.18", Full: true}}}
	graphs, err := release.FetchGraphs(ctx, client, spec)
	if err != nil {
		t.Fatal(err)
	}
	p, err := release.NewPlan(graphs, spec)
	if err != nil {
		t.Fatal(err)
	}
	head := lastVersion(t, built["stable-4.16"].Versions())
	r := find(t, p, "amd64", head)
	mustContain(t, strings.Join(r.Why, ";"), "stable-4.16: channel head")
	var full int
	for _, r := range p.Releases {
		if strings.Contains(strings.Join(r.Why, ";"), "candidate-4.18: full channel") {
			full++
		}
	}
	if want := len(built["candidate-4.18"].Versions()); full != want {
		t.Errorf("full candidate-4.18 has %d releases in the plan, the channel has %d", full, want)
	}
}

func TestRealChannelShortestPath(t *testing.T) {
	client, built := realGraphs(t, "stable-4.18")
	head := lastVersion(t, built["stable-4.18"].Versions())
	spec := release.Spec{Channels: []release.ChannelSpec{{Name: "stable-4.18", MinVersion: "4.16.0", ShortestPath: true}}}
	graphs, err := release.FetchGraphs(ctx, client, spec)
	if err != nil {
		t.Fatal(err)
	}
	p1, err := release.NewPlan(graphs, spec)
	if err != nil {
		t.Fatal(err)
	}
	path := pathOf(t, p1, "shortest upgrade path ")
	if path[0] != "4.16.0" || path[len(path)-1] != head {
		t.Fatalf("path %v does not go from 4.16.0 to %s", path, head)
	}
	checkPath(t, []*release.Graph{graphs[release.GraphKey{Channel: "stable-4.18", Type: release.TypeOCP, Arch: "amd64"}]}, path)
	if got := versions(p1, "amd64"); !equal(got, path) {
		t.Errorf("plan %v differs from its path %v", got, path)
	}
	p2, err := release.NewPlan(graphs, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !equal(versions(p2, "amd64"), versions(p1, "amd64")) {
		t.Error("two plans of the same input differ")
	}
}

func TestRealChannelsUpgradePath416To418(t *testing.T) {
	client, _ := realGraphs(t, "stable-4.16", "stable-4.17", "stable-4.18")
	spec := release.Spec{Channels: []release.ChannelSpec{
		{Name: "stable-4.16", MinVersion: "4.16.10", MaxVersion: "4.16.10"},
		{Name: "stable-4.18"},
	}}
	graphs, err := release.FetchGraphs(ctx, client, spec)
	if err != nil {
		t.Fatal(err)
	}
	p, err := release.NewPlan(graphs, spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Warnings) != 0 {
		t.Fatalf("warnings: %v", p.Warnings)
	}
	path := pathOf(t, p, "upgrade path ")
	var walked []*release.Graph
	for _, ch := range []string{"stable-4.16", "stable-4.17", "stable-4.18"} {
		g := graphs[release.GraphKey{Channel: ch, Type: release.TypeOCP, Arch: "amd64"}]
		if g == nil {
			t.Fatalf("graph of %s not fetched", ch)
		}
		walked = append(walked, g)
	}
	checkPath(t, walked, path)
	t.Logf("path: %v", path)
	var minors []string
	for _, v := range path {
		minors = append(minors, v[:strings.LastIndex(v, ".")])
	}
	mustContain(t, strings.Join(minors, " "), "4.16", "4.17", "4.18")
}

func TestRealChannelVersionNotInChannel(t *testing.T) {
	client, _ := realGraphs(t, "stable-4.18")
	spec := release.Spec{Channels: []release.ChannelSpec{{Name: "stable-4.18", MinVersion: "4.18.99"}}}
	graphs, err := release.FetchGraphs(ctx, client, spec)
	if err != nil {
		t.Fatal(err)
	}
	_, err = release.NewPlan(graphs, spec)
	if err == nil {
		t.Fatal("no error")
	}
	mustContain(t, err.Error(), "4.18.99 is not in channel stable-4.18", "4.18.52", "162 releases")
}

func TestDiscoverChannelsRealData(t *testing.T) {
	client, built := realGraphs(t, "candidate-4.18", "fast-4.18", "stable-4.18", "eus-4.18")
	got, err := release.DiscoverChannels(ctx, client, "4.18", "x86_64")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		names = append(names, s.Channel)
		if want := lastVersion(t, built[s.Channel].Versions()); s.Head != want {
			t.Errorf("%s head %s, want %s", s.Channel, s.Head, want)
		}
		if len(s.Versions) != len(built[s.Channel].Versions()) || s.Arch != "amd64" {
			t.Errorf("%s: %d versions arch %s", s.Channel, len(s.Versions), s.Arch)
		}
	}
	if !equal(names, []string{"candidate-4.18", "fast-4.18", "stable-4.18", "eus-4.18"}) {
		t.Errorf("channels %v", names)
	}
}
