package release_test

import (
	"errors"
	"math/rand"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/imageset/release"
	"github.com/gapmirror/gapmirror/internal/releasetest"
)

// chain416 is stable-4.16 with 4.15 releases in front (as real channels
// have) and each release updating to the next.
func chain416() *releasetest.Graph {
	vs := append([]string{"4.15.8", "4.15.9"}, seq("4.16.", 6)...)
	g := releasetest.NewGraph("amd64", vs...)
	for i := 0; i+1 < len(vs); i++ {
		g.Edge(vs[i], vs[i+1])
	}
	return g
}

func TestPlanVersionSelection(t *testing.T) {
	graphs := graphsOf(t, map[string]*releasetest.Graph{"stable-4.16": chain416()})
	cases := []struct {
		name string
		ch   release.ChannelSpec
		want []string
		why  string
		warn string
	}{
		{name: "head by default", ch: release.ChannelSpec{Name: "stable-4.16"},
			want: []string{"4.16.5"}, why: "mirror.platform.channels[0] stable-4.16: channel head"},
		{name: "full", ch: release.ChannelSpec{Name: "stable-4.16", Full: true},
			want: []string{"4.15.8", "4.15.9", "4.16.0", "4.16.1", "4.16.2", "4.16.3", "4.16.4", "4.16.5"}, why: "full channel"},
		{name: "min and max", ch: release.ChannelSpec{Name: "stable-4.16", MinVersion: "4.16.1", MaxVersion: "4.16.3"},
			want: []string{"4.16.1", "4.16.2", "4.16.3"}, why: "versions 4.16.1 to 4.16.3"},
		{name: "min and max with full", ch: release.ChannelSpec{Name: "stable-4.16", MinVersion: "4.16.1", MaxVersion: "4.16.2", Full: true},
			want: []string{"4.16.1", "4.16.2"}},
		{name: "only min goes to the head", ch: release.ChannelSpec{Name: "stable-4.16", MinVersion: "4.16.3"},
			want: []string{"4.16.3", "4.16.4", "4.16.5"}, why: "to the channel head 4.16.5"},
		{name: "only max starts at the channel's first release", ch: release.ChannelSpec{Name: "stable-4.16", MaxVersion: "4.16.1"},
			want: []string{"4.15.8", "4.15.9", "4.16.0", "4.16.1"}, why: "first release 4.15.8",
			warn: "maxVersion without minVersion starts at the channel's first release 4.15.8"},
		{name: "min equals max", ch: release.ChannelSpec{Name: "stable-4.16", MinVersion: "4.16.2", MaxVersion: "4.16.2"},
			want: []string{"4.16.2"}},
		{name: "shortest path on a chain", ch: release.ChannelSpec{Name: "stable-4.16", MinVersion: "4.16.3", ShortestPath: true},
			want: []string{"4.16.3", "4.16.4", "4.16.5"}, why: "shortest upgrade path 4.16.3 → 4.16.4 → 4.16.5"},
		{name: "shortest path of the head alone", ch: release.ChannelSpec{Name: "stable-4.16", ShortestPath: true},
			want: []string{"4.16.5"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := release.NewPlan(graphs, release.Spec{Channels: []release.ChannelSpec{c.ch}})
			if err != nil {
				t.Fatal(err)
			}
			if got := versions(p, "amd64"); !equal(got, c.want) {
				t.Errorf("versions = %v, want %v", got, c.want)
			}
			for _, r := range p.Releases {
				if !equal(r.Channels, []string{"stable-4.16"}) || len(r.Why) != 1 {
					t.Errorf("%s: channels %v why %v", r.Version, r.Channels, r.Why)
				}
				if c.why != "" {
					mustContain(t, r.Why[0], c.why)
				}
			}
			warnings := strings.Join(p.Warnings, "\n")
			if c.warn == "" && warnings != "" {
				t.Errorf("unexpected warnings: %s", warnings)
			}
			if c.warn != "" {
				mustContain(t, warnings, c.warn)
			}
		})
	}
}

func TestPlanReleaseFields(t *testing.T) {
	g := chain416()
	p, err := release.NewPlan(graphsOf(t, map[string]*releasetest.Graph{"stable-4.16": g}),
		release.Spec{Channels: []release.ChannelSpec{{Name: "stable-4.16"}}})
	if err != nil {
		t.Fatal(err)
	}
	r := find(t, p, "amd64", "4.16.5")
	if r.Payload != g.Payload("4.16.5") || r.Digest != releasetest.PayloadDigest("amd64", "4.16.5") {
		t.Errorf("payload %s digest %s", r.Payload, r.Digest)
	}
	if r.Repository() != releasetest.DefaultRepository || r.Tag() != "4.16.5-x86_64" || r.Type != release.TypeOCP {
		t.Errorf("repository %s tag %s type %s", r.Repository(), r.Tag(), r.Type)
	}
}

func TestPlanErrors(t *testing.T) {
	g := chain416()
	g.Edge("4.16.0", "4.16.2") // keep 4.16.1 → 4.16.0 impossible, but give a shortcut
	tagged := releasetest.NewGraph("amd64", "4.16.0").SetPayload("4.16.0", "quay.io/openshift-release-dev/ocp-release:4.16.0-x86_64")
	graphs := graphsOf(t, map[string]*releasetest.Graph{"stable-4.16": g, "stable-tagged-4.16": tagged})
	graphs[release.GraphKey{Channel: "stable-9.99", Type: release.TypeOCP, Arch: "amd64"}] = &release.Graph{Channel: "stable-9.99", Arch: "amd64"}

	cases := []struct {
		name string
		spec release.Spec
		is   error
		want []string
	}{
		{"version not in channel",
			release.Spec{Channels: []release.ChannelSpec{{Name: "stable-4.16", MinVersion: "4.16.9"}}}, nil,
			[]string{"mirror.platform.channels[0].minVersion 4.16.9 is not in channel stable-4.16 (arch amd64)", "nearest versions: 4.16.3, 4.16.4, 4.16.5", "4.15.8 to 4.16.5"}},
		{"max not in channel",
			release.Spec{Channels: []release.ChannelSpec{{Name: "stable-4.16", MaxVersion: "4.15.10"}}}, nil,
			[]string{"maxVersion 4.15.10 is not in channel stable-4.16", "4.15.9, 4.16.0"}},
		{"min greater than max",
			release.Spec{Channels: []release.ChannelSpec{{Name: "stable-4.16", MinVersion: "4.16.4", MaxVersion: "4.16.1"}}}, nil,
			[]string{"mirror.platform.channels[0]", "minVersion 4.16.4 is newer than maxVersion 4.16.1"}},
		{"not a version",
			release.Spec{Channels: []release.ChannelSpec{{Name: "stable-4.16", MinVersion: "4.16"}}}, nil,
			[]string{`minVersion "4.16" is not a full semantic version`, "X.Y.Z"}},
		{"no path backwards",
			release.Spec{Channels: []release.ChannelSpec{{Name: "stable-4.16", MinVersion: "4.16.1", MaxVersion: "4.16.1", ShortestPath: true}, {Name: "stable-4.16", MinVersion: "4.16.2", MaxVersion: "4.16.1", ShortestPath: true}}}, nil,
			[]string{"channels[1]", "newer than maxVersion"}},
		{"unknown channel",
			release.Spec{Channels: []release.ChannelSpec{{Name: "stable-9.99"}}}, release.ErrNoReleases,
			[]string{"channel stable-9.99 has no releases for arch amd64"}},
		{"graph not fetched",
			release.Spec{Channels: []release.ChannelSpec{{Name: "stable-4.16"}}, Architectures: []string{"arm64"}}, nil,
			[]string{"no update graph for channel stable-4.16 (arch arm64)"}},
		{"payload by tag",
			release.Spec{Channels: []release.ChannelSpec{{Name: "stable-tagged-4.16"}}}, nil,
			[]string{"release 4.16.0", "not pinned by digest"}},
		{"empty name and bad type",
			release.Spec{Channels: []release.ChannelSpec{{Name: ""}, {Name: "x", Type: "rhel"}}}, nil,
			[]string{"channels[0].name is empty", `channels[1].type "rhel" is unknown`}},
		{"bad architecture",
			release.Spec{Channels: []release.ChannelSpec{{Name: "stable-4.16"}}, Architectures: []string{"amd64", "mips"}}, nil,
			[]string{"mirror.platform.architectures[1]", "mips"}},
		{"every error at once",
			release.Spec{Channels: []release.ChannelSpec{{Name: "stable-4.16", MinVersion: "4.16.77"}, {Name: "stable-9.99"}}}, nil,
			[]string{"4.16.77", "stable-9.99"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := release.NewPlan(graphs, c.spec)
			if err == nil {
				t.Fatalf("no error; plan %v", versions(p, "amd64"))
			}
			mustContain(t, err.Error(), c.want...)
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("error is not %v", c.is)
			}
		})
	}
}

// diamond has several shortest paths from 4.16.0 to 4.16.6 (all of three
// updates) and a longer one.
var diamond = [][2]string{
	{"4.16.0", "4.16.1"}, {"4.16.0", "4.16.2"},
	{"4.16.1", "4.16.5"}, {"4.16.2", "4.16.5"}, {"4.16.2", "4.16.4"}, {"4.16.1", "4.16.3"},
	{"4.16.3", "4.16.6"}, {"4.16.4", "4.16.6"}, {"4.16.5", "4.16.6"},
	{"4.16.0", "4.16.7"}, {"4.16.7", "4.16.8"}, {"4.16.8", "4.16.9"}, {"4.16.9", "4.16.6"},
}

func TestShortestPathIsShortestAndDeterministic(t *testing.T) {
	spec := release.Spec{Channels: []release.ChannelSpec{{Name: "stable-4.16", MinVersion: "4.16.0", MaxVersion: "4.16.6", ShortestPath: true}}}
	want := []string{"4.16.0", "4.16.2", "4.16.5", "4.16.6"}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 20; i++ {
		// Shuffle node and edge order: the path must not depend on them.
		vs := seq("4.16.", 10)
		rng.Shuffle(len(vs), func(a, b int) { vs[a], vs[b] = vs[b], vs[a] })
		edges := append([][2]string(nil), diamond...)
		rng.Shuffle(len(edges), func(a, b int) { edges[a], edges[b] = edges[b], edges[a] })
		g := releasetest.NewGraph("amd64", vs...)
		for _, e := range edges {
			g.Edge(e[0], e[1])
		}
		p, err := release.NewPlan(graphsOf(t, map[string]*releasetest.Graph{"stable-4.16": g}), spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := versions(p, "amd64"); !equal(got, want) {
			t.Fatalf("round %d: path %v, want %v", i, got, want)
		}
		mustContain(t, p.Releases[0].Why[0], "shortest upgrade path 4.16.0 → 4.16.2 → 4.16.5 → 4.16.6")
	}
}

func TestShortestPathMissing(t *testing.T) {
	g := releasetest.NewGraph("amd64", seq("4.16.", 6)...).
		Edge("4.16.0", "4.16.1").Edge("4.16.1", "4.16.2").Edge("4.16.4", "4.16.5")
	spec := release.Spec{Channels: []release.ChannelSpec{{Name: "stable-4.16", MinVersion: "4.16.0", MaxVersion: "4.16.5", ShortestPath: true}}}
	_, err := release.NewPlan(graphsOf(t, map[string]*releasetest.Graph{"stable-4.16": g}), spec)
	if err == nil {
		t.Fatal("no error")
	}
	mustContain(t, err.Error(), "no upgrade path from 4.16.0 to 4.16.5 in channel stable-4.16",
		"4.16 releases are reachable from 4.16.0 (4.16.0, 4.16.1, 4.16.2) but none of them updates to 4.16.5")
}

// threeMinors builds stable-4.16, stable-4.17 and stable-4.18 where the only
// way from 4.16.1 to 4.18.1 is 4.16.1 → 4.16.2 → 4.17.0 → 4.17.1 → 4.18.0 →
// 4.18.1.
func threeMinors() map[string]*releasetest.Graph {
	return map[string]*releasetest.Graph{
		"stable-4.16": releasetest.NewGraph("amd64", "4.16.0", "4.16.1", "4.16.2").
			Edge("4.16.0", "4.16.1").Edge("4.16.1", "4.16.2"),
		"stable-4.17": releasetest.NewGraph("amd64", "4.16.1", "4.16.2", "4.17.0", "4.17.1").
			Edge("4.16.1", "4.16.2").Edge("4.16.2", "4.17.0").Edge("4.17.0", "4.17.1"),
		"stable-4.18": releasetest.NewGraph("amd64", "4.17.0", "4.17.1", "4.18.0", "4.18.1").
			Edge("4.17.0", "4.17.1").Edge("4.17.1", "4.18.0").Edge("4.18.0", "4.18.1"),
	}
}

func TestMultiChannelUpgradePath(t *testing.T) {
	client, _ := graphServer(t, threeMinors())
	spec := release.Spec{Channels: []release.ChannelSpec{
		{Name: "stable-4.16", MinVersion: "4.16.1", MaxVersion: "4.16.1"},
		{Name: "stable-4.18"},
	}}
	required, optional, err := spec.GraphKeys()
	if err != nil {
		t.Fatal(err)
	}
	if len(required) != 2 || len(optional) != 1 || optional[0].Channel != "stable-4.17" {
		t.Errorf("graph keys: required %v optional %v", required, optional)
	}
	graphs, err := release.FetchGraphs(ctx, client, spec)
	if err != nil {
		t.Fatal(err)
	}
	p, err := release.NewPlan(graphs, spec)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"4.16.1", "4.16.2", "4.17.0", "4.17.1", "4.18.0", "4.18.1"}
	if got := versions(p, "amd64"); !equal(got, want) {
		t.Fatalf("versions %v, want %v", got, want)
	}
	r := find(t, p, "amd64", "4.17.0")
	if !equal(r.Channels, []string{"stable-4.17"}) {
		t.Errorf("4.17.0 channels %v", r.Channels)
	}
	mustContain(t, r.Why[0], "upgrade path 4.16.1 → 4.16.2 → 4.17.0 → 4.17.1 → 4.18.0 → 4.18.1", "stable-4.16 → stable-4.17 → stable-4.18")
	head := find(t, p, "amd64", "4.18.1")
	if len(head.Why) != 2 {
		t.Errorf("4.18.1 should be both the stable-4.18 head and on the path: %v", head.Why)
	}
	if len(p.Warnings) != 0 {
		t.Errorf("warnings: %v", p.Warnings)
	}
}

func TestMultiChannelMissingHop(t *testing.T) {
	in := threeMinors()
	in["stable-4.18"] = releasetest.NewGraph("amd64", "4.17.0", "4.17.1", "4.18.0", "4.18.1").
		Edge("4.17.0", "4.17.1").Edge("4.18.0", "4.18.1")
	spec := release.Spec{Channels: []release.ChannelSpec{
		{Name: "stable-4.16", MinVersion: "4.16.1", MaxVersion: "4.16.1"},
		{Name: "stable-4.18"},
	}}
	p, err := release.NewPlan(graphsOf(t, in), spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := versions(p, "amd64"); !equal(got, []string{"4.16.1", "4.18.1"}) {
		t.Errorf("versions %v: the channels' own selections must stay", got)
	}
	if len(p.Warnings) != 1 {
		t.Fatalf("warnings %v", p.Warnings)
	}
	mustContain(t, p.Warnings[0], "no upgrade path from 4.16.1 (stable-4.16) to 4.18.1 (stable-4.18)",
		"the hop from 4.17 to 4.18 is missing", "newest release reachable from 4.16.1 is 4.17.1")
}

func TestMultiChannelIntermediateChannelAbsent(t *testing.T) {
	// eus-4.17 does not exist: the path goes through eus-4.18's graph,
	// which carries 4.16 and 4.17 releases.
	eus := map[string]*releasetest.Graph{
		"eus-4.16": releasetest.NewGraph("amd64", "4.16.0", "4.16.1").Edge("4.16.0", "4.16.1"),
		"eus-4.18": releasetest.NewGraph("amd64", "4.16.1", "4.17.3", "4.18.0").Edge("4.16.1", "4.17.3").Edge("4.17.3", "4.18.0"),
	}
	client, _ := graphServer(t, eus)
	spec := release.Spec{Channels: []release.ChannelSpec{{Name: "eus-4.16", MinVersion: "4.16.0"}, {Name: "eus-4.18"}}}
	graphs, err := release.FetchGraphs(ctx, client, spec)
	if err != nil {
		t.Fatal(err)
	}
	p, err := release.NewPlan(graphs, spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := versions(p, "amd64"); !equal(got, []string{"4.16.0", "4.16.1", "4.17.3", "4.18.0"}) {
		t.Errorf("versions %v", got)
	}
	mustContain(t, find(t, p, "amd64", "4.17.3").Why[0], "no releases for arch amd64 in eus-4.17")
}

func TestMultiChannelSkipsOKD(t *testing.T) {
	in := threeMinors()
	graphs := graphsOf(t, in)
	okd := parse(t, "stable-4", releasetest.NewGraph("amd64", "4.15.0"))
	graphs[release.GraphKey{Channel: "stable-4", Type: release.TypeOKD, Arch: "amd64"}] = okd
	spec := release.Spec{Channels: []release.ChannelSpec{
		{Name: "stable-4", Type: release.TypeOKD},
		{Name: "stable-4.18"},
	}}
	p, err := release.NewPlan(graphs, spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := versions(p, "amd64"); !equal(got, []string{"4.15.0", "4.18.1"}) {
		t.Errorf("versions %v", got)
	}
	if r := find(t, p, "amd64", "4.15.0"); r.Type != release.TypeOKD || r.Tag() != "4.15.0" {
		t.Errorf("OKD release type %s tag %s", r.Type, r.Tag())
	}
}

func TestConditionalEdges(t *testing.T) {
	risk := releasetest.Risk{Name: "EtcdSlow", URL: "https://issues.example/ETCD-1", Message: "etcd may be slow"}
	g := releasetest.NewGraph("amd64", "4.16.0", "4.16.1", "4.16.2", "4.16.3").
		Edge("4.16.0", "4.16.1").
		ConditionalEdge("4.16.1", "4.16.2", risk).
		Edge("4.16.2", "4.16.3").
		// The same update, recommended unconditionally, wins over its risky twin.
		Edge("4.16.0", "4.16.2").ConditionalEdge("4.16.0", "4.16.2", releasetest.Risk{Name: "Ignored"})
	graphs := graphsOf(t, map[string]*releasetest.Graph{"stable-4.16": g})
	spec := release.Spec{Channels: []release.ChannelSpec{{Name: "stable-4.16", MinVersion: "4.16.1", MaxVersion: "4.16.3", ShortestPath: true}}}

	_, err := release.NewPlan(graphs, spec)
	if err == nil {
		t.Fatal("a path through a conditional update was used without IncludeConditional")
	}
	mustContain(t, err.Error(), "no upgrade path from 4.16.1 to 4.16.3", "a path exists through conditional updates (known risks: EtcdSlow)")

	spec.IncludeConditional = true
	p, err := release.NewPlan(graphs, spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := versions(p, "amd64"); !equal(got, []string{"4.16.1", "4.16.2", "4.16.3"}) {
		t.Errorf("versions %v", got)
	}
	if len(p.ConditionalUpdates) != 1 {
		t.Fatalf("conditional updates %+v", p.ConditionalUpdates)
	}
	cu := p.ConditionalUpdates[0]
	if cu.From != "4.16.1" || cu.To != "4.16.2" || cu.Channel != "stable-4.16" || cu.Arch != "amd64" || len(cu.Risks) != 1 || cu.Risks[0].Name != "EtcdSlow" {
		t.Errorf("conditional update %+v", cu)
	}
	mustContain(t, strings.Join(p.Warnings, "\n"), "conditional update 4.16.1 → 4.16.2", "EtcdSlow (https://issues.example/ETCD-1)")

	// From 4.16.0 the unconditional 4.16.0 → 4.16.2 is taken: no risk named.
	spec.Channels[0].MinVersion = "4.16.0"
	p, err = release.NewPlan(graphs, spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := versions(p, "amd64"); !equal(got, []string{"4.16.0", "4.16.2", "4.16.3"}) || len(p.ConditionalUpdates) != 0 {
		t.Errorf("versions %v conditional %+v", got, p.ConditionalUpdates)
	}
}

func TestConditionalEdgesAcrossChannels(t *testing.T) {
	in := threeMinors()
	in["stable-4.18"] = releasetest.NewGraph("amd64", "4.17.0", "4.17.1", "4.18.0", "4.18.1").
		Edge("4.17.0", "4.17.1").ConditionalEdge("4.17.1", "4.18.0", releasetest.Risk{Name: "OVNRestart"}).Edge("4.18.0", "4.18.1")
	spec := release.Spec{Channels: []release.ChannelSpec{
		{Name: "stable-4.16", MinVersion: "4.16.1", MaxVersion: "4.16.1"},
		{Name: "stable-4.18"},
	}}
	p, err := release.NewPlan(graphsOf(t, in), spec)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, strings.Join(p.Warnings, "\n"), "the hop from 4.17 to 4.18 is missing", "known risks: OVNRestart")

	spec.IncludeConditional = true
	p, err = release.NewPlan(graphsOf(t, in), spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := versions(p, "amd64"); len(got) != 6 {
		t.Errorf("versions %v", got)
	}
	if len(p.ConditionalUpdates) != 1 || p.ConditionalUpdates[0].Risks[0].Name != "OVNRestart" || p.ConditionalUpdates[0].Channel != "stable-4.18" {
		t.Errorf("conditional updates %+v", p.ConditionalUpdates)
	}
}

func TestPlanEveryArchitecture(t *testing.T) {
	archs := []string{"amd64", "arm64", "ppc64le", "s390x", "multi"}
	in := map[string]*releasetest.Graph{}
	gs := releasetest.NewGraphServer()
	for _, a := range archs {
		g := releasetest.NewGraph(a, "4.18.0", "4.18.1").Edge("4.18.0", "4.18.1")
		if err := gs.Put("stable-4.18", g); err != nil {
			t.Fatal(err)
		}
		in[a] = g
	}
	url, closeFn := serve(gs)
	defer closeFn()
	client := &release.GraphClient{OCPURL: url}
	spec := release.Spec{Channels: []release.ChannelSpec{{Name: "stable-4.18"}}, Architectures: []string{"x86_64", "aarch64", "ppc64le", "s390x", "multi", "amd64"}}
	graphs, err := release.FetchGraphs(ctx, client, spec)
	if err != nil {
		t.Fatal(err)
	}
	p, err := release.NewPlan(graphs, spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Releases) != len(archs) {
		t.Fatalf("releases %+v", p.Releases)
	}
	wantTags := map[string]string{"amd64": "4.18.1-x86_64", "arm64": "4.18.1-aarch64", "ppc64le": "4.18.1-ppc64le", "s390x": "4.18.1-s390x", "multi": "4.18.1-multi"}
	for i, r := range p.Releases {
		if i > 0 && p.Releases[i-1].Arch >= r.Arch {
			t.Errorf("releases not sorted by arch: %s before %s", p.Releases[i-1].Arch, r.Arch)
		}
		if r.Digest != releasetest.PayloadDigest(r.Arch, "4.18.1") || r.Payload != in[r.Arch].Payload("4.18.1") {
			t.Errorf("%s: digest %s payload %s", r.Arch, r.Digest, r.Payload)
		}
		if r.Tag() != wantTags[r.Arch] {
			t.Errorf("%s: tag %s", r.Arch, r.Tag())
		}
	}
}

func TestFetchGraphsUnknownChannel(t *testing.T) {
	for _, status := range []int{0, 404} {
		client, gs := graphServer(t, nil)
		gs.MissingStatus = status
		_, err := release.FetchGraphs(ctx, client, release.Spec{Channels: []release.ChannelSpec{{Name: "stable-9.99"}}, Architectures: []string{"s390x"}})
		if err == nil || !errors.Is(err, release.ErrNoReleases) {
			t.Fatalf("status %d: error %v", status, err)
		}
		mustContain(t, err.Error(), "channel stable-9.99 has no releases for arch s390x")
	}
}

func TestFetchGraphsUnreachable(t *testing.T) {
	client, _ := graphServer(t, nil)
	url, closeFn := serve(releasetest.NewGraphServer())
	closeFn()
	client.OCPURL = url
	_, err := release.FetchGraphs(ctx, client, release.Spec{Channels: []release.ChannelSpec{{Name: "stable-4.18"}}})
	if err == nil {
		t.Fatal("no error")
	}
	mustContain(t, err.Error(), url, "stable-4.18", "amd64")
}

func TestEUSSpanWarning(t *testing.T) {
	g := releasetest.NewGraph("amd64", "4.16.0", "4.17.0", "4.18.0").Edge("4.16.0", "4.17.0").Edge("4.17.0", "4.18.0")
	p, err := release.NewPlan(graphsOf(t, map[string]*releasetest.Graph{"eus-4.18": g}),
		release.Spec{Channels: []release.ChannelSpec{{Name: "eus-4.18", MinVersion: "4.16.0"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Warnings) != 1 {
		t.Fatalf("warnings %v", p.Warnings)
	}
	mustContain(t, p.Warnings[0], "EUS channel spanning 4.16.0 to 4.18.0", "ocpupgradegraph")
}
