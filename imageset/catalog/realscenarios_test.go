package catalog

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/internal/fbctest"
)

// vers turns "2.5.0 … 2.5.3"-style lists into bundle names of prefix.
func vers(prefix string, versions ...string) []string {
	out := make([]string, len(versions))
	for i, v := range versions {
		out[i] = prefix + ".v" + v
	}
	slices.Sort(out)
	return out
}

func span(prefix, minor string, from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, prefix+".v"+minor+"."+strconv.Itoa(i))
	}
	slices.Sort(out)
	return out
}

// TestFilterRealScenarios pins exactly what is kept (no fewer, no more) for
// selections of the real catalogs that fall between bundles, cross channel
// boundaries or land on skips-only and skipRange graphs; checkFiltered has
// the result judged by opm too.
func TestFilterRealScenarios(t *testing.T) {
	t.Parallel()
	c := fbctest.RealCatalog(t)
	const inf, odh = "infinispan-operator", "opendatahub-operator"
	cases := []struct {
		name     string
		pkg      PackageSpec
		channels map[string][]string // channel → exact kept entries
		heads    map[string]string
		warn     []string
	}{
		{
			name:     "minVersion between two bundles starts at the next one",
			pkg:      PackageSpec{Name: "infinispan", Channels: []ChannelSpec{{Name: "stable", MinVersion: "2.4.99"}}},
			channels: map[string][]string{"stable": span(inf, "2.5", 0, 14)},
			heads:    map[string]string{"stable": inf + ".v2.5.14"},
		},
		{
			name:     "maxVersion between two bundles makes the last one below it the head",
			pkg:      PackageSpec{Name: "infinispan", Channels: []ChannelSpec{{Name: "stable", MaxVersion: "2.4.99"}}},
			channels: map[string][]string{"stable": append(span(inf, "2.3", 0, 8), span(inf, "2.4", 0, 18)...)},
			heads:    map[string]string{"stable": inf + ".v2.4.18"},
			warn:     []string{"head is now " + inf + ".v2.4.18"},
		},
		{
			name:     "a range inside a skips-only region keeps the bundle that skips it",
			pkg:      PackageSpec{Name: "infinispan", Channels: []ChannelSpec{{Name: "stable", MinVersion: "2.3.5", MaxVersion: "2.3.6"}}},
			channels: map[string][]string{"stable": vers(inf, "2.3.5", "2.3.6", "2.3.8")},
			heads:    map[string]string{"stable": inf + ".v2.3.8"},
			warn:     []string{"kept outside the selected versions for the upgrade path: " + inf + ".v2.3.8"},
		},
		{
			name:     "a package range across channels drops the channels it misses",
			pkg:      PackageSpec{Name: "infinispan", MinVersion: "2.4.0"},
			channels: map[string][]string{"2.4.x": span(inf, "2.4", 0, 18), "stable": append(span(inf, "2.4", 0, 18), span(inf, "2.5", 0, 14)...), "2.2.x": nil, "2.3.x": nil},
			heads:    map[string]string{"2.4.x": inf + ".v2.4.18", "stable": inf + ".v2.5.14"},
			warn:     []string{"channels 2.2.x, 2.3.x dropped"},
		},
		{
			name:     "replaces and skipRange on every entry",
			pkg:      PackageSpec{Name: "sailoperator", Channels: []ChannelSpec{{Name: "stable", MinVersion: "1.28.0", MaxVersion: "1.29.1"}}},
			channels: map[string][]string{"stable": vers("sailoperator", "1.28.0", "1.28.1", "1.28.2", "1.28.3", "1.29.0", "1.29.1")},
			heads:    map[string]string{"stable": "sailoperator.v1.29.1"},
		},
		{
			name:     "a minVersion that is only in another channel",
			pkg:      PackageSpec{Name: "opendatahub-operator", Channels: []ChannelSpec{{Name: "fast", MinVersion: "1.5.0", MaxVersion: "2.10.0"}}},
			channels: map[string][]string{"fast": vers(odh, "2.10.0")},
			heads:    map[string]string{"fast": odh + ".v2.10.0"},
		},
		{
			name:     "skips and skipRange on most entries, from minVersion to the head",
			pkg:      PackageSpec{Name: "opendatahub-operator", Channels: []ChannelSpec{{Name: "fast", MinVersion: "2.28.0"}}},
			channels: map[string][]string{"fast": vers(odh, "2.28.0", "2.29.0", "2.30.0", "2.31.0", "2.32.0", "2.33.0", "2.34.0", "2.35.0")},
			heads:    map[string]string{"fast": odh + ".v2.35.0"},
		},
		{
			name:     "bundles: a skipped bundle off the replaces chain becomes the head",
			pkg:      PackageSpec{Name: "clusterpulse", DefaultChannel: "fast-v0", Channels: []ChannelSpec{{Name: "fast-v0"}}, Bundles: []string{"clusterpulse.v0.2.1"}},
			channels: map[string][]string{"fast-v0": vers("clusterpulse", "0.2.1")},
			heads:    map[string]string{"fast-v0": "clusterpulse.v0.2.1"},
			warn:     []string{"head is now clusterpulse.v0.2.1"},
		},
		{
			name:     "maxVersion below a head that only skips keeps that head",
			pkg:      PackageSpec{Name: "kubernaut-operator", Channels: []ChannelSpec{{Name: "candidate-v1", MaxVersion: "1.3.3"}}},
			channels: map[string][]string{"candidate-v1": vers("kubernaut-operator", "1.3.2", "1.3.3", "1.3.4")},
			heads:    map[string]string{"candidate-v1": "kubernaut-operator.v1.3.4"},
			warn:     []string{"kept outside the selected versions for the upgrade path: kubernaut-operator.v1.3.4"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, rep, err := Filter(c, FilterSpec{Packages: []PackageSpec{tc.pkg}, SkipDependencies: true})
			if err != nil {
				t.Fatalf("Filter: %v", err)
			}
			checkFiltered(t, c, out, rep)
			for ch, want := range tc.channels {
				got := entryNames(out, tc.pkg.Name, ch)
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Errorf("%s: kept %v, want %v", ch, got, want)
				}
			}
			pr := rep.Package(tc.pkg.Name)
			for ch, head := range tc.heads {
				if pr.channel(ch) == nil || pr.channel(ch).Head != head {
					t.Errorf("%s: head is not %s: %+v", ch, head, pr.channel(ch))
				}
			}
			w := strings.Join(allWarnings(rep), "\n")
			for _, want := range tc.warn {
				if !strings.Contains(w, want) {
					t.Errorf("no warning mentions %q:\n%s", want, w)
				}
			}
		})
	}
}
