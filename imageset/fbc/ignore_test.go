package fbc

import (
	"testing"
	"testing/fstest"
)

func TestIndexIgnore(t *testing.T) {
	fsys := fstest.MapFS{
		".indexignore":          {Data: []byte("# opm's documented example\n**/*\n!*.json\n!*.yaml\n**/objects/*.json\n**/objects/*.yaml\n")},
		"packageB/.indexignore": {Data: []byte("notes/\n!keep.yaml\n/local-only.yaml\n")},
	}
	m, err := newIgnoreMatcher(fsys)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]bool{
		"packageA/index.yaml":              false,
		"packageA/index.json":              false,
		"README.md":                        true,
		"packageA/objects/csv.yaml":        true,
		"packageB/index.yaml":              false,
		"packageB/objects/crd.json":        true,
		"packageB/notes/a.yaml":            true,  // dir-only pattern of packageB
		"packageA/notes/a.yaml":            false, // packageB's patterns do not apply here
		"packageB/objects/keep.yaml":       false, // re-included later
		"packageB/local-only.yaml":         true,  // anchored to packageB
		"packageB/sub/local-only.yaml":     false,
		".indexignore":                     true,
		"packageB/.indexignore":            true,
		"packageC/deprecations.yaml":       false,
		"packageC/Dockerfile":              true,
		"packageC/nested/deep/catalog.yml": true, // *.yml is not re-included
	}
	for p, want := range cases {
		if got := m.ignored(p, false); got != want {
			t.Errorf("ignored(%q) = %v, want %v", p, got, want)
		}
	}
}
