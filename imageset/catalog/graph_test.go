package catalog

import (
	"slices"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/internal/opmtest"
)

// channelGraph builds the graph of one fixture channel of package "p".
func channelGraph(t *testing.T, spec string) *graph {
	t.Helper()
	f := &fixture{}
	p := f.pkg("p", "c", "c: "+spec)
	f.catalog(t)
	return newGraph(p, p.Channels[0])
}

// TestGraphLevels checks the level of small channels, and, when opm is
// built, that opm validate agrees: a valid channel passes, an invalid one
// fails, and legacy ones (kept from the filter only when the source is
// legacy too) get the verdict written in the case, since gapmirror stays
// stricter than opm v1.65.0 on names outside the channel.
func TestGraphLevels(t *testing.T) {
	cases := []struct {
		name      string
		spec      string
		level     int
		why       string
		opmAccept bool // opm v1.65.0's verdict on legacy channels
	}{
		{"replaces chain", "1.0.0; 1.1.0>1.0.0; 1.2.0>1.1.0", levelStrict, "", true},
		{"tail replaces a bundle outside the channel", "1.1.0>1.0.0; 1.2.0>1.1.0", levelStrict, "", true},
		{"skipped leaf", "1.0.0; 1.1.0>1.0.0; 1.2.0>1.0.0!1.1.0", levelStrict, "", true},
		{"leaf replacing the tail's outside bundle", "1.1.0>1.0.0; 1.1.5>1.0.0; 1.2.0>1.1.0!1.1.5", levelStrict, "", true},
		{"two heads", "1.0.0; 1.1.0", levelInvalid, "multiple channel heads: p.v1.0.0, p.v1.1.0", false},
		{"cycle", "1.0.0>1.1.0; 1.1.0>1.0.0", levelInvalid, "no channel head", false},
		{"stranded", "1.0.0; 1.1.0>1.0.0; 1.2.0>1.1.0!1.1.0; 0.9.0; 1.3.0>1.2.0!0.9.0,1.0.0", levelStrict, "", true},
		{"entries skipped by an entry off the chain", "0.1.1; 0.2.0; 0.2.3>0.1.1!0.1.1,0.2.0; 0.3.0>0.2.3!0.2.3", levelStrict, "", true},
		{"chain broken by an entry off the chain (newer opm only)", "1.0.0; 1.1.0>1.0.0; 1.1.5!1.1.0; 1.2.0>1.1.0!1.1.5", levelLegacy, `stranded entries (neither on the replaces chain from head "p.v1.2.0" nor skipped by it): p.v1.0.0`, false},
		{"leaf replacing another outside bundle", "1.1.0; 1.1.5>0.9.0; 1.2.0>1.1.0!1.1.5", levelLegacy, "p.v0.9.0 (replaced, but not in the channel)", true},
		{"outside bundle both replaced and skipped", "1.1.0>1.0.0!1.0.0", levelLegacy, "both replaced and skipped", true},
		{"stranded everywhere", "0.9.0; 1.0.0>0.9.0; 1.1.0>0.8.0!1.0.0", levelInvalid, "stranded entries (neither on the replaces chain from head \"p.v1.1.0\" nor skipped): p.v0.9.0", false},
	}
	opm := opmtest.Oracle(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := channelGraph(t, tc.spec)
			level, err := g.level(g.all())
			if level != tc.level {
				t.Fatalf("level %d (%v), want %d", level, err, tc.level)
			}
			if tc.why != "" && (err == nil || !strings.Contains(err.Error(), tc.why)) {
				t.Errorf("reason %v, want it to mention %q", err, tc.why)
			}
			if opm == "" {
				return
			}
			if (level == levelStrict) != tc.opmAccept && level != levelLegacy {
				t.Fatalf("case inconsistent: level %d with opmAccept %v", level, tc.opmAccept)
			}
			f := &fixture{}
			f.pkg("p", "c", "c: "+tc.spec)
			dir := t.TempDir()
			if err := f.catalog(t).WriteDir(dir); err != nil {
				t.Fatal(err)
			}
			oerr := opmtest.ValidateErr(opm, dir)
			if accepted := oerr == nil; accepted != tc.opmAccept {
				t.Errorf("opm validate accepted=%v, want %v: %v", accepted, tc.opmAccept, oerr)
			}
		})
	}
}

// TestGraphWalks checks the OLM v0 and v1 upgrade semantics on the example
// of the OLM v1 documentation: 1.0.0 reaches 3.0.0 under v1 (through
// 2.0.0's skipRange) but not under v0 (skipRange counts only on the head).
func TestGraphWalks(t *testing.T) {
	g := channelGraph(t, "1.0.0; 2.0.0~>=1.0.0 <2.0.0; 3.0.0!2.0.0")
	head := g.index["p.v3.0.0"]
	if got := g.strandedV0(g.all(), head); !slices.Equal(got, []string{"p.v1.0.0"}) {
		t.Errorf("v0 stranded %v; 2.0.0 is skipped, so its skipRange does not count", got)
	}
	if got := g.strandedV1(g.all(), head); len(got) != 0 {
		t.Errorf("v1 stranded %v", got)
	}

	g = channelGraph(t, "1.0.0; 1.1.0>1.0.0; 1.5.0~>=1.0.0 <1.5.0; 2.0.0>1.5.0~>=1.0.0 <2.0.0")
	head = g.index["p.v2.0.0"]
	if got := g.strandedV0(g.all(), head); len(got) != 0 {
		t.Errorf("the head's skipRange reaches everything under v0; stranded %v", got)
	}
	// v1 picks the highest successor: 1.0.0 goes to 2.0.0 directly.
	if got := g.strandedV1(g.all(), head); len(got) != 0 {
		t.Errorf("v1 stranded %v", got)
	}

	g = channelGraph(t, "1.0.0; 1.1.0>1.0.0; 0.5.0>1.1.0")
	if got := g.strandedV1(g.all(), g.index["p.v0.5.0"]); len(got) != 0 {
		t.Errorf("a downgrade edge is still a successor for v1: %v", got)
	}
}

func TestGraphKeep(t *testing.T) {
	cases := []struct {
		name    string
		spec    string
		want    []string
		kept    []string
		head    string
		level   int
		failure string
	}{
		{"head only", "1.0.0; 1.1.0>1.0.0", []string{"1.1.0"}, []string{"1.1.0"}, "1.1.0", levelStrict, ""},
		{"old bundle pulls the chain", "1.0.0; 1.1.0>1.0.0; 1.2.0>1.1.0", []string{"1.0.0", "1.2.0"}, []string{"1.0.0", "1.1.0", "1.2.0"}, "1.2.0", levelStrict, ""},
		{"new head below the source head", "1.0.0; 1.1.0>1.0.0; 1.2.0>1.1.0", []string{"1.0.0", "1.1.0"}, []string{"1.0.0", "1.1.0"}, "1.1.0", levelStrict, ""},
		{"skipped leaf keeps what it replaces", "1.0.0; 1.1.0>1.0.0; 1.2.0>1.0.0!1.1.0", []string{"1.1.0", "1.2.0"}, []string{"1.0.0", "1.1.0", "1.2.0"}, "1.2.0", levelStrict, ""},
		{"leaf with the tail's outside bundle", "1.1.0>1.0.0; 1.1.5>1.0.0; 1.2.0>1.1.0!1.1.5", []string{"1.1.5", "1.2.0"}, []string{"1.1.0", "1.1.5", "1.2.0"}, "1.2.0", levelStrict, ""},
		{"head above a skipped selection", "1.0.0; 1.1.0>1.0.0; 1.2.0>1.0.0!1.1.0", []string{"1.1.0"}, []string{"1.1.0"}, "1.1.0", levelStrict, ""},
		{"a skipping entry keeps what it replaces", "0.1.1; 0.2.0; 0.2.3>0.1.1!0.1.1,0.2.0; 0.3.0>0.2.3!0.2.3", []string{"0.2.0", "0.3.0"}, []string{"0.1.1", "0.2.0", "0.2.3", "0.3.0"}, "0.3.0", levelStrict, ""},
		{"dropping the entry that breaks the chain", "1.0.0; 1.1.0>1.0.0; 1.1.5!1.1.0; 1.2.0>1.1.0!1.1.5", []string{"1.0.0", "1.2.0"}, []string{"1.0.0", "1.1.0", "1.2.0"}, "1.2.0", levelStrict, ""},
		{"legacy graph", "1.0.0; 1.1.0>1.0.0; 1.1.5!1.1.0; 1.2.0>1.1.0!1.1.5", []string{"1.0.0", "1.1.5", "1.2.0"}, []string{"1.0.0", "1.1.0", "1.1.5", "1.2.0"}, "1.2.0", levelLegacy, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := channelGraph(t, tc.spec)
			var want []int
			for _, v := range tc.want {
				want = append(want, g.index["p.v"+v])
			}
			level, _ := g.level(g.all())
			heads := g.heads(g.all())
			kept, head, outLevel, err := g.keep(want, heads[0], level)
			if err != nil {
				t.Fatalf("keep: %v", err)
			}
			if got := g.namesOf(g.members(kept)); !slices.Equal(got, names("p", tc.kept...)) {
				t.Errorf("kept %v, want %v", got, names("p", tc.kept...))
			}
			if g.names[head] != "p.v"+tc.head || outLevel != tc.level {
				t.Errorf("head %s level %d, want p.v%s level %d", g.names[head], outLevel, tc.head, tc.level)
			}
		})
	}
}
