package release_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/imageset/release"
	"github.com/gapmirror/gapmirror/internal/releasetest"
)

func TestGraphArch(t *testing.T) {
	cases := []struct{ in, graph, tag string }{
		{"amd64", "amd64", "x86_64"},
		{"x86_64", "amd64", "x86_64"},
		{"arm64", "arm64", "aarch64"},
		{"aarch64", "arm64", "aarch64"},
		{"ppc64le", "ppc64le", "ppc64le"},
		{"s390x", "s390x", "s390x"},
		{"multi", "multi", "multi"},
		{" AMD64 ", "amd64", "x86_64"},
	}
	for _, c := range cases {
		got, err := release.GraphArch(c.in)
		if err != nil || got != c.graph {
			t.Errorf("GraphArch(%q) = %q, %v; want %q", c.in, got, err, c.graph)
		}
		if tag := release.TagArch(got); tag != c.tag {
			t.Errorf("TagArch(%q) = %q, want %q", got, tag, c.tag)
		}
	}
	if _, err := release.GraphArch("i386"); err == nil || !strings.Contains(err.Error(), "amd64, arm64, ppc64le, s390x, multi") {
		t.Errorf("GraphArch(i386) error = %v, want the list of architectures", err)
	}
}

func TestGraphClientFetches(t *testing.T) {
	g := releasetest.NewGraph("arm64", "4.18.0", "4.18.1", "4.18.2").
		Edge("4.18.0", "4.18.1").Edge("4.18.1", "4.18.2").
		ConditionalEdge("4.18.0", "4.18.2", releasetest.Risk{Name: "Boom", URL: "https://example.invalid/boom", Message: "it breaks"})
	var gotQuery, gotAccept string
	gs := releasetest.NewGraphServer()
	if err := gs.Put("stable-4.18", g); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotQuery, gotAccept = r.URL.RawQuery, r.Header.Get("Accept")
		gs.ServeHTTP(w, r)
	}))
	defer srv.Close()

	c := &release.GraphClient{HTTPClient: srv.Client(), OCPURL: srv.URL + "/graph?id=x"}
	got, err := c.Graph(ctx, release.GraphKey{Channel: "stable-4.18", Type: release.TypeOCP, Arch: "arm64"})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, gotQuery, "channel=stable-4.18", "arch=arm64", "id=x")
	if gotAccept != "application/json" {
		t.Errorf("Accept = %q", gotAccept)
	}
	if got.Channel != "stable-4.18" || got.Arch != "arm64" || len(got.Nodes) != 3 || len(got.Edges) != 2 {
		t.Errorf("graph = %s/%s %d nodes %d edges", got.Channel, got.Arch, len(got.Nodes), len(got.Edges))
	}
	if len(got.ConditionalEdges) != 1 || got.ConditionalEdges[0].Risks[0].Name != "Boom" || len(got.ConditionalEdges[0].Risks[0].MatchingRules) != 1 {
		t.Errorf("conditional edges = %+v", got.ConditionalEdges)
	}
	if h, ok := got.Head(); !ok || h.Version != "4.18.2" || h.Payload != g.Payload("4.18.2") {
		t.Errorf("head = %+v", h)
	}
	if len(got.Raw) == 0 {
		t.Error("Raw is empty")
	}
}

func TestGraphClientURL(t *testing.T) {
	t.Setenv(release.EnvUpdateURLOverride, "")
	c := &release.GraphClient{}
	if u := c.URL(release.TypeOCP); u != release.DefaultOCPGraphURL {
		t.Errorf("default OCP URL = %s", u)
	}
	if u := c.URL(release.TypeOKD); u != release.DefaultOKDGraphURL {
		t.Errorf("default OKD URL = %s", u)
	}
	t.Setenv(release.EnvUpdateURLOverride, "https://osus.example/graph")
	if u := c.URL(release.TypeOCP); u != "https://osus.example/graph" {
		t.Errorf("OCP URL with %s = %s", release.EnvUpdateURLOverride, u)
	}
	if u := c.URL(release.TypeOKD); u != release.DefaultOKDGraphURL {
		t.Errorf("OKD URL must ignore %s, got %s", release.EnvUpdateURLOverride, u)
	}
	c.OCPURL = "https://flag.example/graph"
	if u := c.URL(release.TypeOCP); u != "https://flag.example/graph" {
		t.Errorf("OCP URL with option = %s", u)
	}
}

func TestGraphClientOKDUsesOKDURL(t *testing.T) {
	var path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.Path
		_, _ = w.Write([]byte(`{"nodes":[],"edges":[]}`))
	}))
	defer srv.Close()
	c := &release.GraphClient{HTTPClient: srv.Client(), OCPURL: srv.URL + "/ocp", OKDURL: srv.URL + "/okd"}
	if _, err := c.Graph(ctx, release.GraphKey{Channel: "stable-4", Type: release.TypeOKD, Arch: "amd64"}); err != nil {
		t.Fatal(err)
	}
	if path != "/okd" {
		t.Errorf("OKD channel fetched from %s, want /okd", path)
	}
}

func TestGraphClientErrors(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL + "/graph"
	closed.Close()

	cases := []struct {
		name    string
		handler http.HandlerFunc
		url     string
		is      error
		want    []string
	}{
		{
			name:    "404 means no releases",
			handler: func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) },
			is:      release.ErrNoReleases,
			want:    []string{"channel stable-9.99 has no releases for arch amd64", "404"},
		},
		{
			name: "server error",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "upstream down", http.StatusServiceUnavailable)
			},
			want: []string{"stable-9.99", "amd64", "503", "upstream down", "retry later"},
		},
		{
			name:    "not JSON",
			handler: func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("<html>login</html>")) },
			want:    []string{"not JSON", "<html>login</html>", "stable-9.99"},
		},
		{
			name: "inconsistent graph",
			handler: func(w http.ResponseWriter, r *http.Request) {
				_, _ = w.Write([]byte(`{"nodes":[{"version":"4.1.0","payload":"x@sha256:1"}],"edges":[[0,5]]}`))
			},
			want: []string{"edges[0]", "stable-9.99"},
		},
		{
			name: "unreachable",
			url:  closedURL,
			want: []string{closedURL, "stable-9.99", "amd64", release.EnvUpdateURLOverride},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			url := c.url
			client := http.DefaultClient
			if c.handler != nil {
				srv := httptest.NewServer(c.handler)
				defer srv.Close()
				url, client = srv.URL+"/graph", srv.Client()
			}
			gc := &release.GraphClient{HTTPClient: client, OCPURL: url}
			_, err := gc.Graph(ctx, release.GraphKey{Channel: "stable-9.99", Type: release.TypeOCP, Arch: "amd64"})
			if err == nil {
				t.Fatal("no error")
			}
			mustContain(t, err.Error(), c.want...)
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("error %v is not %v", err, c.is)
			}
		})
	}
}

func TestParseGraphRejects(t *testing.T) {
	cases := []struct{ name, doc, want string }{
		{"bad version", `{"nodes":[{"version":"four","payload":"p@sha256:1"}]}`, `"four" is not a semantic version`},
		{"duplicate", `{"nodes":[{"version":"4.1.0","payload":"p"},{"version":"4.1.0","payload":"p"}]}`, "already appears"},
		{"no payload", `{"nodes":[{"version":"4.1.0","payload":""}]}`, "has no payload"},
		{"edge out of range", `{"nodes":[{"version":"4.1.0","payload":"p"}],"edges":[[0,1]]}`, "edges[0]"},
		{"conditional edge to unknown", `{"nodes":[{"version":"4.1.0","payload":"p"}],"conditionalEdges":[{"edges":[{"from":"4.1.0","to":"4.1.1"}],"risks":[]}]}`, "4.1.1 is not a node"},
		{"not json", `{`, "not valid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := release.ParseGraph([]byte(c.doc), "stable-4.1", "amd64")
			if err == nil {
				t.Fatal("no error")
			}
			mustContain(t, err.Error(), c.want, "stable-4.1")
		})
	}
}

func TestSaveAndLoadGraph(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "graphs")
	g := parse(t, "stable-4.18", releasetest.NewGraph("amd64", "4.18.0", "4.18.1").Edge("4.18.0", "4.18.1"))
	if err := release.SaveGraph(dir, g); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "amd64-stable-4.18.json"))
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != string(g.Raw) {
		t.Error("saved file differs from the served document")
	}
	back, err := release.LoadGraph(dir, "stable-4.18", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	if !equal(back.Versions(), []string{"4.18.0", "4.18.1"}) || back.Channel != "stable-4.18" || back.Arch != "amd64" {
		t.Errorf("loaded %s/%s %v", back.Channel, back.Arch, back.Versions())
	}

	_, err = release.LoadGraph(dir, "stable-4.19", "amd64")
	if !errors.Is(err, release.ErrGraphNotSaved) {
		t.Errorf("missing graph error = %v, want ErrGraphNotSaved", err)
	}
	mustContain(t, err.Error(), "stable-4.19", "amd64-stable-4.19.json")

	if err := release.SaveGraph(dir, &release.Graph{Channel: "../x", Arch: "amd64"}); err == nil {
		t.Error("SaveGraph accepted a channel name that escapes the directory")
	}

	// A saved graph larger than any update service serves (64 MiB; a
	// sparse 1 TiB file here) is refused by its size, not read.
	huge := filepath.Join(dir, "amd64-stable-4.20.json")
	if err := os.WriteFile(huge, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, 1<<40); err != nil {
		t.Fatal(err)
	}
	_, err = release.LoadGraph(dir, "stable-4.20", "amd64")
	if err == nil {
		t.Fatal("a 1 TiB saved graph was loaded")
	}
	mustContain(t, err.Error(), huge, "1099511627776 bytes, more than the 67108864", "remove it")
}

// A plan made from graphs saved during a connected run is identical when
// made offline from the saved files.
func TestPlanOfflineFromSavedGraphs(t *testing.T) {
	in := map[string]*releasetest.Graph{
		"stable-4.16": releasetest.NewGraph("amd64", "4.16.0", "4.16.1", "4.16.2").GenerateEdges(),
		"stable-4.17": releasetest.NewGraph("amd64", "4.16.1", "4.16.2", "4.17.0", "4.17.1").GenerateEdges(),
		"stable-4.18": releasetest.NewGraph("amd64", "4.17.0", "4.17.1", "4.18.0").GenerateEdges(),
	}
	client, _ := graphServer(t, in)
	spec := release.Spec{Channels: []release.ChannelSpec{
		{Name: "stable-4.16", MinVersion: "4.16.0"},
		{Name: "stable-4.18"},
	}}
	dir := t.TempDir()
	online, err := release.FetchGraphs(ctx, release.SavingGraphSource{Source: client, Dir: dir}, spec)
	if err != nil {
		t.Fatal(err)
	}
	p1, err := release.NewPlan(online, spec)
	if err != nil {
		t.Fatal(err)
	}
	offline, err := release.FetchGraphs(ctx, release.GraphDir(dir), spec)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := release.NewPlan(offline, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !equal(versions(p1, "amd64"), versions(p2, "amd64")) || strings.Join(p1.Warnings, "\n") != strings.Join(p2.Warnings, "\n") {
		t.Errorf("online %v / offline %v", versions(p1, "amd64"), versions(p2, "amd64"))
	}
	if _, err := os.Stat(filepath.Join(dir, "amd64-stable-4.17.json")); err != nil {
		t.Errorf("intermediate channel graph not saved: %v", err)
	}
	// Without the saved graphs, the offline run says what is missing.
	_, err = release.FetchGraphs(ctx, release.GraphDir(t.TempDir()), spec)
	if !errors.Is(err, release.ErrGraphNotSaved) {
		t.Errorf("FetchGraphs from an empty dir: %v", err)
	}
}
