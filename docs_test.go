package gapmirror

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocs keeps the README a first-hour guide: at most 250 lines, `make
// demo` and `make test` its first two commands, a table of contents; and
// every relative link of the README and docs/*.md names a file and heading
// that exist.
func TestDocs(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(readme), "\n")
	if len(lines) > 251 {
		t.Errorf("README.md has %d lines: keep it to 250, move detail into docs/<topic>.md", len(lines)-1)
	}
	var commands []string
	for _, l := range lines {
		if strings.HasPrefix(l, "make ") {
			commands = append(commands, strings.Fields(l)[1])
		}
	}
	if len(commands) < 2 || commands[0] != "demo" || commands[1] != "test" {
		t.Errorf("README.md's first commands are %v: `make demo` and `make test` come first", commands)
	}
	if !strings.Contains(string(readme), "\n## Contents\n") {
		t.Error("README.md has no table of contents (## Contents)")
	}

	pages, _ := filepath.Glob("docs/*.md")
	files := append([]string{"README.md"}, pages...)
	anchors := map[string]map[string]bool{}
	for _, f := range files {
		anchors[f] = headings(t, f)
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, f := range files {
		data, _ := os.ReadFile(f)
		for _, m := range link.FindAllStringSubmatch(string(data), -1) {
			target, anchor, _ := strings.Cut(m[1], "#")
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path := f
			if target != "" {
				path = filepath.Clean(filepath.Join(filepath.Dir(f), target))
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s: link %s: %v", f, m[1], err)
				continue
			}
			if a, ok := anchors[path]; ok && anchor != "" && !a[anchor] {
				t.Errorf("%s: link %s: %s has no such heading", f, m[1], path)
			}
		}
	}
}

// TestDocsGoInstall: every `go install` of gapmirror the README and
// docs/*.md show carries CGO_ENABLED=0 and the Makefile's build tags,
// without which containers/image compiles its gpgme (cgo) code and the
// build fails.
func TestDocsGoInstall(t *testing.T) {
	mk, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^TAGS\s*:=\s*(.+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile has no TAGS := line")
	}
	tags := `-tags "` + strings.TrimSpace(string(m[1])) + `"`
	pages, _ := filepath.Glob("docs/*.md")
	n := 0
	for _, f := range append([]string{"README.md"}, pages...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range strings.Split(string(data), "\n") {
			if !strings.Contains(l, "go install ") || !strings.Contains(l, "gapmirror/cmd/gapmirror") {
				continue
			}
			n++
			if !strings.Contains(l, "CGO_ENABLED=0 go install "+tags+" github.com/gapmirror/gapmirror/cmd/gapmirror@") {
				t.Errorf("%s:%d: a go install without CGO_ENABLED=0 and %s fails (gpgme needs cgo): %s", f, i+1, tags, l)
			}
		}
	}
	if n == 0 {
		t.Error("no `go install` of gapmirror in README.md or docs/*.md: the README documents one")
	}
}

// headings returns the GitHub anchors of a markdown file's headings.
func headings(t *testing.T, file string) map[string]bool {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	fence := false
	drop := regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "```") {
			fence = !fence
		}
		if fence || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(l, "#")))
		out[strings.ReplaceAll(drop.ReplaceAllString(h, ""), " ", "-")] = true
	}
	return out
}
