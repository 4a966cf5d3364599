package main

import (
	"fmt"
	"sort"
	"strings"
)

// usedBy describes who needs an export, or why it stays exported.
func (a *analysis) usedBy(e *export) string {
	var users, parts []string
	for _, u := range sortedUsers(e) {
		s := u
		if e.users[u].testOnly {
			s += " (tests only)"
		}
		users = append(users, s)
	}
	for _, u := range e.ignoredUsers {
		users = append(users, u+" (a build-constrained file)")
	}
	if len(users) > 0 {
		parts = append(parts, strings.Join(users, ", "))
	}
	if len(e.apiOf) > 0 {
		api := append([]string(nil), e.apiOf...)
		sort.Strings(api)
		if len(api) > 5 {
			api = append(api[:5], fmt.Sprintf("%d more", len(e.apiOf)-5))
		}
		parts = append(parts, "(in the API of "+strings.Join(api, ", ")+")")
	}
	if !e.needed {
		for _, k := range a.keptReasons(e) {
			parts = append(parts, "kept: "+k)
		}
		if len(parts) == 0 {
			if e.skip != "" {
				parts = append(parts, "**unneeded**; not renamed: "+e.skip)
			} else {
				parts = append(parts, fmt.Sprintf("**unneeded** (→ `%s`)", e.newName))
			}
		}
	}
	return strings.Join(parts, "; ")
}

type counts struct{ total, needed, kept, unneeded, collide int }

func (a *analysis) count(e *export, c *counts) {
	c.total++
	switch {
	case e.needed:
		c.needed++
	case !a.unneeded(e):
		c.kept++
	default:
		c.unneeded++
		if e.skip != "" {
			c.collide++
		}
	}
}

func (a *analysis) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Exports of %s\n\n", a.module)
	b.WriteString("What each package exports (package-level types, funcs, vars and consts with exported names in\n" +
		"non-test files, and exported methods of its named types; struct fields are left out) and which\n" +
		"other packages use each. A package's own `_test.go` files do not count; its external test package\n" +
		"`foo_test` does. *Needed*: another package uses it, or it is in the type or signature of a needed\n" +
		"export (\"in the API of\"). *Kept*: no other package uses it, but it stays exported: a method whose\n" +
		"name an interface type has (it may satisfy one), a type embedded in a struct (its name is the\n" +
		"field's), a name a build-constrained file uses, or an exclusion in the tool. *Unneeded*: the rest\n" +
		"(`-apply` unexports them unless the new name collides).\n\n")
	rels := make([]string, 0, len(a.pkgs))
	byPkg := map[string][]*export{}
	for _, e := range a.sorted() {
		byPkg[e.pkg.rel] = append(byPkg[e.pkg.rel], e)
	}
	for _, pi := range a.pkgs {
		rels = append(rels, pi.rel)
	}
	sort.Strings(rels)
	b.WriteString("## Summary\n\n| package | exports | needed | kept | unneeded | of which the new name collides |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	var all counts
	for _, rel := range rels {
		var c counts
		for _, e := range byPkg[rel] {
			a.count(e, &c)
			a.count(e, &all)
		}
		fmt.Fprintf(&b, "| [%s](#%s) | %d | %d | %d | %d | %d |\n", rel, anchor(rel), c.total, c.needed, c.kept, c.unneeded, c.collide)
	}
	fmt.Fprintf(&b, "| **all** | %d | %d | %d | %d | %d |\n\n", all.total, all.needed, all.kept, all.unneeded, all.collide)
	for _, rel := range rels {
		fmt.Fprintf(&b, "## %s\n\n", rel)
		if len(byPkg[rel]) == 0 {
			b.WriteString("Exports nothing.\n\n")
			continue
		}
		b.WriteString("| export | kind | used by |\n| --- | --- | --- |\n")
		for _, e := range byPkg[rel] {
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", e.name, e.kind, strings.ReplaceAll(a.usedBy(e), "|", `\|`))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

type jsonRecord struct {
	Package string            `json:"package"`
	Name    string            `json:"name"`
	Kind    string            `json:"kind"`
	Users   map[string]string `json:"users,omitempty"` // package -> "" or "tests only"
	InAPIOf []string          `json:"inAPIOf,omitempty"`
	Needed  bool              `json:"needed"`
	Kept    []string          `json:"kept,omitempty"`
	NewName string            `json:"newName,omitempty"`
	Skip    string            `json:"renameSkipped,omitempty"`
	Renamed bool              `json:"renamed,omitempty"`
}

func (a *analysis) jsonRecords() []jsonRecord {
	var out []jsonRecord
	for _, e := range a.sorted() {
		r := jsonRecord{Package: e.pkg.rel, Name: e.name, Kind: e.kind, InAPIOf: e.apiOf, Needed: e.needed,
			NewName: e.newName, Skip: e.skip, Renamed: e.renamed}
		if !e.needed {
			r.Kept = a.keptReasons(e)
		}
		if len(e.users)+len(e.ignoredUsers) > 0 {
			r.Users = map[string]string{}
			for u, x := range e.users {
				r.Users[u] = ""
				if x.testOnly {
					r.Users[u] = "tests only"
				}
			}
			for _, u := range e.ignoredUsers {
				r.Users[u] = "build-constrained file"
			}
		}
		out = append(out, r)
	}
	return out
}
