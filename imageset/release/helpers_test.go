package release_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/imageset/release"
	"github.com/gapmirror/gapmirror/internal/releasetest"
)

// graphServer serves the given graphs (channel → graph) on 127.0.0.1 and
// returns a client pointed at it.
func graphServer(t *testing.T, graphs map[string]*releasetest.Graph) (*release.GraphClient, *releasetest.GraphServer) {
	t.Helper()
	gs := releasetest.NewGraphServer()
	for ch, g := range graphs {
		if err := gs.Put(ch, g); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(gs)
	t.Cleanup(srv.Close)
	return &release.GraphClient{HTTPClient: srv.Client(), OCPURL: srv.URL + "/graph", OKDURL: srv.URL + "/okd"}, gs
}

// parse turns a built graph into a release.Graph.
func parse(t *testing.T, channel string, g *releasetest.Graph) *release.Graph {
	t.Helper()
	data, err := g.JSON()
	if err != nil {
		t.Fatal(err)
	}
	out, err := release.ParseGraph(data, channel, g.Arch)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// graphsOf parses built graphs into a release.Graphs for OpenShift channels.
func graphsOf(t *testing.T, in map[string]*releasetest.Graph) release.Graphs {
	t.Helper()
	out := release.Graphs{}
	for ch, g := range in {
		out[release.GraphKey{Channel: ch, Type: release.TypeOCP, Arch: g.Arch}] = parse(t, ch, g)
	}
	return out
}

// versions lists the plan's release versions for one architecture.
func versions(p *release.Plan, arch string) []string {
	var out []string
	for _, r := range p.Releases {
		if r.Arch == arch {
			out = append(out, r.Version)
		}
	}
	return out
}

// find returns the planned release of a version and architecture.
func find(t *testing.T, p *release.Plan, arch, version string) release.Release {
	t.Helper()
	for _, r := range p.Releases {
		if r.Arch == arch && r.Version == version {
			return r
		}
	}
	t.Fatalf("release %s (%s) not in plan %v", version, arch, versions(p, arch))
	return release.Release{}
}

// mustContain fails unless s contains every part.
func mustContain(t *testing.T, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("%q\n  does not contain %q", s, p)
		}
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// seq returns "prefix0" … "prefix<n-1>".
func seq(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}

// serve starts h on 127.0.0.1 and returns its graph URL and a stop function.
func serve(h http.Handler) (string, func()) {
	srv := httptest.NewServer(h)
	return srv.URL + "/graph", srv.Close
}

var ctx = context.Background()
