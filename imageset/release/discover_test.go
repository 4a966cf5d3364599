package release_test

import (
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/imageset/release"
	"github.com/gapmirror/gapmirror/internal/releasetest"
)

func TestCandidateChannels(t *testing.T) {
	cases := []struct {
		minor string
		want  string
	}{
		{"4.18", "candidate-4.18 fast-4.18 stable-4.18 eus-4.18"},
		{"4.17", "candidate-4.17 fast-4.17 stable-4.17"},
		{"4.4", "candidate-4.4 fast-4.4 stable-4.4"},
		{"v4.16.3", "candidate-4.16 fast-4.16 stable-4.16 eus-4.16"},
		{"5.0", "candidate-5.0 fast-5.0 stable-5.0 eus-5.0"},
	}
	for _, c := range cases {
		got, err := release.CandidateChannels(c.minor)
		if err != nil || strings.Join(got, " ") != c.want {
			t.Errorf("CandidateChannels(%s) = %v, %v; want %s", c.minor, got, err, c.want)
		}
	}
	for _, bad := range []string{"4", "four.18", "4.18.1.2"} {
		if _, err := release.CandidateChannels(bad); err == nil || !strings.Contains(err.Error(), "X.Y") {
			t.Errorf("CandidateChannels(%q) error = %v", bad, err)
		}
	}
}

func TestDiscoverChannelsSkipsMissing(t *testing.T) {
	client, _ := graphServer(t, map[string]*releasetest.Graph{
		"stable-4.17": releasetest.NewGraph("arm64", "4.16.9", "4.17.0", "4.17.2", "4.17.10"),
	})
	got, err := release.DiscoverChannels(ctx, client, "4.17", "aarch64")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Channel != "stable-4.17" || got[0].Head != "4.17.10" || got[0].Arch != "arm64" ||
		strings.Join(got[0].Versions, " ") != "4.16.9 4.17.0 4.17.2 4.17.10" {
		t.Errorf("summaries %+v", got)
	}
	if _, err := release.DiscoverChannels(ctx, client, "4.17", "sparc"); err == nil {
		t.Error("unknown architecture accepted")
	}
}
