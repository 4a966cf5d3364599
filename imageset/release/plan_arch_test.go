package release_test

import (
	"testing"

	"github.com/gapmirror/gapmirror/imageset/release"
	"github.com/gapmirror/gapmirror/internal/releasetest"
)

// TestPlanReleaseMissingForOneArchitecture: the multi graph of stable-4.18
// lags the amd64 one (4.18.3 is not published for multi yet). The head of
// each architecture is its own graph's head; a range naming 4.18.3 stops
// the plan with the architecture that lacks it and its nearest versions,
// rather than mirroring amd64 alone or a different multi range.
func TestPlanReleaseMissingForOneArchitecture(t *testing.T) {
	amd := releasetest.NewGraph("amd64", "4.18.1", "4.18.2", "4.18.3").GenerateEdges()
	multi := releasetest.NewGraph("multi", "4.18.1", "4.18.2").GenerateEdges()
	graphs := release.Graphs{
		{Channel: "stable-4.18", Type: release.TypeOCP, Arch: "amd64"}: parse(t, "stable-4.18", amd),
		{Channel: "stable-4.18", Type: release.TypeOCP, Arch: "multi"}: parse(t, "stable-4.18", multi),
	}
	archs := []string{"amd64", "multi"}

	p, err := release.NewPlan(graphs, release.Spec{Channels: []release.ChannelSpec{{Name: "stable-4.18"}}, Architectures: archs})
	if err != nil {
		t.Fatal(err)
	}
	if got := versions(p, "amd64"); !equal(got, []string{"4.18.3"}) {
		t.Errorf("amd64 head %v", got)
	}
	if got := versions(p, "multi"); !equal(got, []string{"4.18.2"}) {
		t.Errorf("multi head %v", got)
	}
	if r := find(t, p, "multi", "4.18.2"); r.Tag() != "4.18.2-multi" || r.Digest != releasetest.PayloadDigest("multi", "4.18.2") {
		t.Errorf("multi release tag %s digest %s", r.Tag(), r.Digest)
	}

	for _, ch := range []release.ChannelSpec{
		{Name: "stable-4.18", MinVersion: "4.18.3"},
		{Name: "stable-4.18", MinVersion: "4.18.1", MaxVersion: "4.18.3", ShortestPath: true},
	} {
		p, err := release.NewPlan(graphs, release.Spec{Channels: []release.ChannelSpec{ch}, Architectures: archs})
		if err == nil {
			t.Fatalf("%+v: no error; amd64 %v multi %v", ch, versions(p, "amd64"), versions(p, "multi"))
		}
		mustContain(t, err.Error(), "4.18.3 is not in channel stable-4.18 (arch multi)", "4.18.1, 4.18.2")
	}
}
