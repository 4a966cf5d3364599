package fbc

import (
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"
)

// TestParseVersionRange checks the OLM v1 range syntax against the table of
// the OLM v1 documentation (olm-and-releases-from-seeds.md §3.4).
func TestParseVersionRange(t *testing.T) {
	cases := []struct {
		rng string
		in  []string
		out []string
	}{
		{">1.11.1", []string{"1.11.2", "2.0.0"}, []string{"1.11.1", "1.0.0"}},
		{">=1.11, <1.13", []string{"1.11.0", "1.12.9"}, []string{"1.10.9", "1.13.0"}},
		{">=1.11 <1.13", []string{"1.11.0", "1.12.9"}, []string{"1.13.0"}},
		{">1.15, <1.17", []string{"1.16.0"}, []string{"1.15.0", "1.17.0"}},
		{"1.14.x", []string{"1.14.0", "1.14.9"}, []string{"1.13.9", "1.15.0"}},
		{"1.11.x", []string{"1.11.0"}, []string{"1.12.0"}},
		{">=1.12.X", []string{"1.12.0", "5.0.0"}, []string{"1.11.9"}},
		{"<=2.x", []string{"2.9.9", "0.1.0"}, []string{"3.0.0"}},
		{"*", []string{"0.0.0", "9.9.9"}, nil},
		{"~1.11.0", []string{"1.11.0", "1.11.9"}, []string{"1.12.0"}},
		{"~1", []string{"1.0.0", "1.9.9"}, []string{"2.0.0", "0.9.0"}},
		{"~1.12", []string{"1.12.0", "1.12.9"}, []string{"1.13.0"}},
		{"~1.12.x", []string{"1.12.0"}, []string{"1.13.0"}},
		{"~1.x", []string{"1.0.0", "1.99.0"}, []string{"2.0.0"}},
		{"^0", []string{"0.0.0", "0.9.9"}, []string{"1.0.0"}},
		{"^0.0", []string{"0.0.0", "0.0.9"}, []string{"0.1.0"}},
		{"^0.0.3", []string{"0.0.3"}, []string{"0.0.2", "0.0.4"}},
		{"^0.2", []string{"0.2.0", "0.2.9"}, []string{"0.3.0"}},
		{"^0.2.3", []string{"0.2.3", "0.2.9"}, []string{"0.2.2", "0.3.0"}},
		{"^1.2.x", []string{"1.2.0", "1.9.0"}, []string{"1.1.9", "2.0.0"}},
		{"^1.2.3", []string{"1.2.3", "1.9.0"}, []string{"1.2.2", "2.0.0"}},
		{"^2.x", []string{"2.0.0", "2.9.0"}, []string{"3.0.0"}},
		{"^2.3", []string{"2.3.0", "2.9.0"}, []string{"2.2.9", "3.0.0"}},
		{"1.11.1", []string{"1.11.1"}, []string{"1.11.2"}},
		{"!=1.2.3", []string{"1.2.4"}, []string{"1.2.3"}},
		{"<1.0 || >=2.1.x", []string{"0.9.0", "2.1.0", "3.0.0"}, []string{"1.5.0", "2.0.9"}},
		{"1.2 - 1.4", []string{"1.2.0", "1.4.9"}, []string{"1.5.0"}},
		// As in OLM v1, prereleases match only ranges that name one.
		{">=1.0.0", []string{"1.0.0"}, []string{"1.1.0-rc.1"}},
		{">=1.1.0-0", []string{"1.1.0-rc.1", "1.1.0"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.rng, func(t *testing.T) {
			r, err := ParseVersionRange(tc.rng)
			if err != nil {
				t.Fatalf("ParseVersionRange(%q): %v", tc.rng, err)
			}
			for _, v := range tc.in {
				if !r.Contains(semver.MustParse(v)) {
					t.Errorf("%q should contain %s", tc.rng, v)
				}
			}
			for _, v := range tc.out {
				if r.Contains(semver.MustParse(v)) {
					t.Errorf("%q should not contain %s", tc.rng, v)
				}
			}
		})
	}
	for _, bad := range []string{"", ">>1.0", "1.0.0 ||", "banana"} {
		if _, err := ParseVersionRange(bad); err == nil {
			t.Errorf("ParseVersionRange(%q) succeeded, want an error", bad)
		}
	}
}

// TestParseSkipRange checks the OLM v0 (blang) dialect used by skipRange and
// olm.package.required, including the wildcard forms seen in real catalogs.
func TestParseSkipRange(t *testing.T) {
	cases := []struct {
		rng string
		in  []string
		out []string
	}{
		{">=4.1.0 <4.1.2", []string{"4.1.0", "4.1.1"}, []string{"4.0.9", "4.1.2"}},
		{">=2.1.x <2.2.1", []string{"2.1.0", "2.2.0"}, []string{"2.0.9", "2.2.1"}},
		{"> 1.0.0 !1.2.1", []string{"1.1.0", "1.2.2"}, []string{"1.0.0", "1.2.1"}},
		{"<2.0.0 || >=3.0.0", []string{"1.0.0", "3.0.0"}, []string{"2.5.0"}},
		{">=1.0.0 <2.0.0", []string{"1.5.0-rc.1"}, []string{"1.0.0-rc.1"}}, // plain precedence
		{"1.2.x", []string{"1.2.0", "1.2.9"}, []string{"1.3.0", "1.1.9"}},
		{"<=1.2.x", []string{"1.2.9"}, []string{"1.3.0"}},
		{">1.2.x", []string{"1.3.0"}, []string{"1.2.9"}},
		{"<1.x", []string{"0.9.9"}, []string{"1.0.0"}},
		{"!=1.2.x", []string{"1.1.9", "1.3.0"}, []string{"1.2.5"}},
		{"==1.0.0", []string{"1.0.0"}, []string{"1.0.1"}},
		{">=1.2", []string{"1.2.0"}, []string{"1.1.9"}},
		{">2.0.0", []string{"2.22.3"}, []string{"2.0.0"}},
	}
	for _, tc := range cases {
		t.Run(tc.rng, func(t *testing.T) {
			r, err := ParseSkipRange(tc.rng)
			if err != nil {
				t.Fatalf("ParseSkipRange(%q): %v", tc.rng, err)
			}
			for _, v := range tc.in {
				if !r.Contains(semver.MustParse(v)) {
					t.Errorf("%q should contain %s", tc.rng, v)
				}
			}
			for _, v := range tc.out {
				if r.Contains(semver.MustParse(v)) {
					t.Errorf("%q should not contain %s", tc.rng, v)
				}
			}
		})
	}
	for _, bad := range []string{"", "||", ">=1.0.0 ||", "~1.2.3", ">=a.b.c", "1.x.3"} {
		if _, err := ParseSkipRange(bad); err == nil {
			t.Errorf("ParseSkipRange(%q) succeeded, want an error", bad)
		}
	}
	if (Range{}).Contains(semver.MustParse("1.0.0")) {
		t.Error("the zero Range contains a version")
	}
	r, _ := ParseSkipRange(">=1.0.0")
	if r.Contains(nil) || !strings.Contains(r.String(), ">=1.0.0") {
		t.Errorf("Range(%q): nil handling or String broken", r)
	}
}
