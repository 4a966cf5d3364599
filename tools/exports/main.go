// Command exportstool lists what each package of a Go module exports and
// which other packages use each export, and (with -apply) unexports every
// export no other package needs.
//
//	go run . -dir /work/main -report /work/exports.md [-json /work/exports.json]
//	go run . -dir /work/main -apply [-report ...]
//
// An export is a package-level type, func, var or const with an exported
// name, declared in a non-test, non-generated file outside testdata/, or an
// exported method of such a package's named (non-interface) types. Struct
// fields are never considered (encoding/json and YAML read them).
//
// An export is needed when another package uses it (an external test
// package foo_test counts as another package; foo's own _test.go files do
// not), when it appears in the type or signature of a needed export, when a
// file this build configuration leaves out (build constraints) names it,
// when it is a method whose name some interface type has (it may satisfy an
// interface), when it is a type embedded in a struct (renaming it would
// rename the field), or when it is excluded below. -apply renames every
// other export to lower camel case unless the new name would collide.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// buildTags are gapmirror's build tags (Makefile TAGS).
const buildTags = "containers_image_openpgp containers_image_storage_stub containers_image_docker_daemon_stub"

// excluded are exports kept exported whatever the analysis says, keyed by
// "<import path relative to the module>.<Name>" or "<path>.<Type>.<Method>",
// each with the reason. Empty: on gapmirror at c9db89a every rename the
// analysis allowed built, vetted and passed the tests (nothing reads these
// names by reflection or from strings).
var excluded = map[string]string{}

func main() {
	dir := flag.String("dir", ".", "the module's directory")
	report := flag.String("report", "", "write a markdown report to this file")
	jsonOut := flag.String("json", "", "write the analysis as JSON to this file")
	apply := flag.Bool("apply", false, "unexport every unneeded export (rewrites files in -dir, then gofmt)")
	tags := flag.String("tags", buildTags, "build tags")
	flag.Parse()
	if *report == "" && *jsonOut == "" && !*apply {
		fmt.Fprintln(os.Stderr, "nothing to do: give -report FILE, -json FILE and/or -apply")
		os.Exit(2)
	}
	abs, err := filepath.Abs(*dir)
	check(err)
	start := time.Now()
	a, err := analyze(abs, *tags)
	check(err)
	fmt.Fprintf(os.Stderr, "analyzed %d packages, %d exports in %v\n", len(a.pkgs), len(a.exports), time.Since(start).Round(time.Millisecond))

	if *apply {
		changed, err := a.apply()
		check(err)
		if len(changed) > 0 {
			args := append([]string{"-w"}, changed...)
			out, err := exec.Command("gofmt", args...).CombinedOutput()
			if err != nil {
				fmt.Fprintf(os.Stderr, "gofmt: %v\n%s", err, out)
				os.Exit(1)
			}
		}
		renamed, skipped := 0, 0
		for _, e := range a.exports {
			if e.renamed {
				renamed++
			} else if e.skip != "" {
				skipped++
			}
		}
		fmt.Fprintf(os.Stderr, "renamed %d exports in %d files; %d unneeded exports left exported because the new name collides\n", renamed, len(changed), skipped)
		for _, e := range a.sorted() {
			if !e.renamed && e.skip != "" {
				fmt.Fprintf(os.Stderr, "  kept %s.%s: %s\n", e.pkg.rel, e.name, e.skip)
			}
		}
		mentions, err := a.rewriteDocs()
		check(err)
		if len(mentions) > 0 {
			fmt.Fprintln(os.Stderr, "renamed in the docs:")
			for _, m := range mentions {
				fmt.Fprintln(os.Stderr, "  "+m)
			}
		}
	}
	if *report != "" {
		check(os.WriteFile(*report, []byte(a.markdown()), 0o644))
	}
	if *jsonOut != "" {
		data, err := json.MarshalIndent(a.jsonRecords(), "", "  ")
		check(err)
		check(os.WriteFile(*jsonOut, append(data, '\n'), 0o644))
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func (a *analysis) sorted() []*export {
	out := append([]*export(nil), a.exports...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].pkg.rel != out[j].pkg.rel {
			return out[i].pkg.rel < out[j].pkg.rel
		}
		return out[i].name < out[j].name
	})
	return out
}

// rewriteDocs renames, in README.md and docs/*.md, every mention of a
// renamed export as <package>.<Name> (or <path>.<Name>), and returns them.
func (a *analysis) rewriteDocs() ([]string, error) {
	files := []string{filepath.Join(a.dir, "README.md")}
	more, _ := filepath.Glob(filepath.Join(a.dir, "docs", "*.md"))
	files = append(files, more...)
	var out []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := strings.Split(string(data), "\n")
		changed := false
		for i, line := range lines {
			for _, e := range a.exports {
				if !e.renamed {
					continue
				}
				for _, q := range qualifiers(e.pkg) {
					old := q + "." + e.name
					new := q + "." + e.newNameQualified()
					if l := replaceWord(line, old, new); l != line {
						line = l
						changed = true
						rel, _ := filepath.Rel(a.dir, f)
						out = append(out, fmt.Sprintf("%s:%d: %s -> %s", rel, i+1, old, new))
					}
				}
			}
			lines[i] = line
		}
		if changed {
			if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// qualifiers are the ways prose names a package: its import path relative
// to the module, when that has a slash, and its name.
func qualifiers(pi *pkgInfo) []string {
	if strings.Contains(pi.rel, "/") {
		return []string{pi.rel, pi.name}
	}
	return []string{pi.name}
}

// newNameQualified is the new Name or Type.Method.
func (e *export) newNameQualified() string {
	if e.kind == "method" {
		return e.recv.Name() + "." + e.newName
	}
	return e.newName
}

// replaceWord replaces old in s where neither an identifier character nor a
// dot (a longer qualified name) touches it.
func replaceWord(s, old, new string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, old)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		end := i + len(old)
		if (i > 0 && (isIdentByte(s[i-1]) || s[i-1] == '.' || s[i-1] == '/')) || (end < len(s) && isIdentByte(s[end])) {
			b.WriteString(s[:end])
		} else {
			b.WriteString(s[:i] + new)
		}
		s = s[end:]
	}
}

func isIdentByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= 0x80
}
