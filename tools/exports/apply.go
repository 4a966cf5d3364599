package main

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// lowerCamel unexports a name: URL -> url, IDMS -> idms, HTTPClient ->
// httpClient, IDs -> ids, SHA256Sum -> sha256Sum, Foo -> foo.
func lowerCamel(name string) string {
	runes := []rune(name)
	first := -1 // index of the first lower-case letter
	for i, r := range runes {
		if unicode.IsLower(r) {
			first = i
			break
		}
	}
	n := 0 // how many leading runes to lower
	switch {
	case first < 0:
		n = len(runes)
	case first <= 1:
		n = 1
	case runes[first] == 's' && (first+1 == len(runes) || !unicode.IsLower(runes[first+1])):
		n = first // an initialism's plural: IDs, URLsFor
	default:
		n = first - 1 // HTTPClient: the C starts the next word
	}
	for i := 0; i < n; i++ {
		runes[i] = unicode.ToLower(runes[i])
	}
	return string(runes)
}

// plan picks the new name of every unneeded export and the reason to skip
// when it would collide.
func (a *analysis) plan() {
	for _, e := range a.sorted() {
		if !a.unneeded(e) {
			continue
		}
		e.newName = lowerCamel(e.ident)
		e.skip = a.collision(e)
		if e.skip == "" {
			if e.kind == "method" {
				m := e.pkg.pendingMethods[e.recv]
				if m == nil {
					m = map[string]bool{}
					e.pkg.pendingMethods[e.recv] = m
				}
				m[e.newName] = true
			} else {
				e.pkg.pending[e.newName] = true
			}
		}
	}
}

// scopeAt is the innermost scope of a package variant at pos.
func scopeAt(info *types.Info, files []*ast.File, pos token.Pos) *types.Scope {
	for _, f := range files {
		if f.FileStart <= pos && pos <= f.FileEnd {
			if fs := info.Scopes[f]; fs != nil {
				if s := fs.Innermost(pos); s != nil {
					return s
				}
				return fs
			}
		}
	}
	return nil
}

func (a *analysis) collision(e *export) string {
	nn := e.newName
	if nn == e.ident {
		return "its name has no upper-case first letter to lower"
	}
	if token.IsKeyword(nn) || types.Universe.Lookup(nn) != nil || nn == "init" || nn == "main" || nn == "_" {
		return fmt.Sprintf("%q is a keyword or predeclared identifier", nn)
	}
	if e.pkg.ignoredIdents[nn] {
		return fmt.Sprintf("a file of the package this build leaves out names %q", nn)
	}
	if e.kind == "method" {
		return a.methodCollision(e)
	}
	if e.pkg.pending[nn] {
		return fmt.Sprintf("another export of the package is renamed to %q", nn)
	}
	for _, v := range e.pkg.variants {
		if obj := v.Types.Scope().Lookup(nn); obj != nil {
			return fmt.Sprintf("the package already declares %q (%s)", nn, a.pos(obj.Pos()))
		}
		for _, f := range v.Syntax {
			if fs := v.TypesInfo.Scopes[f]; fs != nil && fs.Lookup(nn) != nil {
				return fmt.Sprintf("%s imports %q", a.rel(a.fset.Position(f.Pos()).Filename), nn)
			}
		}
	}
	for pos := range e.occurrences {
		for _, v := range e.pkg.variants {
			s := scopeAt(v.TypesInfo, v.Syntax, pos)
			if s == nil {
				continue
			}
			if _, obj := s.LookupParent(nn, pos); obj != nil {
				return fmt.Sprintf("%q would be shadowed at %s by %s", nn, a.pos(pos), a.pos(obj.Pos()))
			}
		}
	}
	return ""
}

// embeds reports whether t (or what it points to) is target or embeds it
// at any depth.
func embeds(t types.Type, target *types.TypeName, seen map[types.Type]bool) bool {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	t = types.Unalias(t)
	if seen[t] {
		return false
	}
	seen[t] = true
	if n, ok := t.(*types.Named); ok {
		if n.Origin().Obj() == target {
			return true
		}
	}
	st, ok := t.Underlying().(*types.Struct)
	if !ok {
		return false
	}
	for i := 0; i < st.NumFields(); i++ {
		if f := st.Field(i); f.Embedded() && embeds(f.Type(), target, seen) {
			return true
		}
	}
	return false
}

func (a *analysis) methodCollision(e *export) string {
	nn := e.newName
	if a.ifaceMethods[nn] {
		return fmt.Sprintf("an interface type has a method %q", nn)
	}
	if e.pkg.pendingMethods[e.recv][nn] {
		return fmt.Sprintf("another method of %s is renamed to %q", e.recv.Name(), nn)
	}
	obj, _, _ := types.LookupFieldOrMethod(e.recv.Type(), true, e.pkg.plain.Types, nn)
	if obj != nil {
		return fmt.Sprintf("%s already has a field or method %q", e.recv.Name(), nn)
	}
	a.indexSelections(e.pkg)
	for _, sel := range e.pkg.selsByName[nn] {
		if embeds(sel.sel.Recv(), e.recv, map[types.Type]bool{}) {
			return fmt.Sprintf("%s selects %q from a type that embeds %s", a.pos(sel.pos), nn, e.recv.Name())
		}
	}
	// Every selection of the method, however promoted, must not find nn.
	for pos := range e.occurrences {
		if sel := e.pkg.selByPos[pos]; sel != nil {
			if obj, _, _ := types.LookupFieldOrMethod(sel.Recv(), true, e.pkg.plain.Types, nn); obj != nil {
				return fmt.Sprintf("at %s the receiver already has a field or method %q", a.pos(pos), nn)
			}
		}
	}
	for _, v := range e.pkg.variants {
		// Also check every struct type of the package that embeds the
		// receiver: one with its own field or method nn hides the renamed
		// method, one without would gain it.
		scope := v.Types.Scope()
		for _, name := range scope.Names() {
			tn, ok := scope.Lookup(name).(*types.TypeName)
			if !ok || tn == e.recv || !embeds(tn.Type(), e.recv, map[types.Type]bool{}) {
				continue
			}
			if obj, _, _ := types.LookupFieldOrMethod(tn.Type(), true, v.Types, nn); obj != nil {
				return fmt.Sprintf("%s embeds %s and has a field or method %q", tn.Name(), e.recv.Name(), nn)
			}
		}
	}
	return ""
}

type edit struct {
	offset int
	old    string
	new    string
}

// apply renames, in the files of the declaring packages, every unneeded
// export whose new name does not collide. It returns the changed files.
func (a *analysis) apply() ([]string, error) {
	edits := map[string]map[int]edit{} // file -> offset -> edit
	add := func(pos token.Pos, old, new string) {
		p := a.fset.Position(pos)
		m := edits[p.Filename]
		if m == nil {
			m = map[int]edit{}
			edits[p.Filename] = m
		}
		m[p.Offset] = edit{p.Offset, old, new}
	}
	for _, e := range a.exports {
		if e.newName == "" || e.skip != "" {
			continue
		}
		e.renamed = true
		for pos := range e.occurrences {
			add(pos, e.ident, e.newName)
		}
		if e.doc != nil && len(e.doc.List) > 0 {
			c := e.doc.List[0]
			text := c.Text
			i := 2 // after // or /*
			for i < len(text) && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n') {
				i++
			}
			if strings.HasPrefix(text[i:], e.ident) {
				rest := text[i+len(e.ident):]
				r, _ := utf8.DecodeRuneInString(rest)
				if rest == "" || !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_') {
					add(c.Slash+token.Pos(i), e.ident, e.newName)
				}
			}
		}
	}
	a.commentMentions(add)
	a.qualifiedMentions(add)
	var changed []string
	for file, m := range edits {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		list := make([]edit, 0, len(m))
		for _, ed := range m {
			list = append(list, ed)
		}
		sort.Slice(list, func(i, j int) bool { return list[i].offset > list[j].offset })
		for i, ed := range list {
			if i > 0 && ed.offset+len(ed.old) > list[i-1].offset {
				return nil, fmt.Errorf("%s:%d: overlapping edits", file, ed.offset)
			}
			if !strings.HasPrefix(string(data[ed.offset:]), ed.old) {
				return nil, fmt.Errorf("%s:%d: expected %q", file, ed.offset, ed.old)
			}
			data = append(data[:ed.offset:ed.offset], append([]byte(ed.new), data[ed.offset+len(ed.old):]...)...)
		}
		if err := os.WriteFile(file, data, 0o644); err != nil {
			return nil, err
		}
		changed = append(changed, file)
	}
	sort.Strings(changed)
	return changed, nil
}

type selection struct {
	pos token.Pos
	sel *types.Selection
}

func (a *analysis) indexSelections(pi *pkgInfo) {
	if pi.selByPos != nil {
		return
	}
	pi.selByPos = map[token.Pos]*types.Selection{}
	pi.selsByName = map[string][]selection{}
	for _, v := range pi.variants {
		for id, sel := range v.TypesInfo.Selections {
			pi.selByPos[id.Sel.Pos()] = sel
			pi.selsByName[id.Sel.Name] = append(pi.selsByName[id.Sel.Name], selection{id.Sel.Pos(), sel})
		}
	}
}

func (a *analysis) rel(file string) string {
	if r, err := filepath.Rel(a.dir, file); err == nil {
		return r
	}
	return file
}

// pos is a position relative to the module's directory.
func (a *analysis) pos(p token.Pos) string {
	pp := a.fset.Position(p)
	pp.Filename = a.rel(pp.Filename)
	return pp.String()
}

// identLike: a name that reads as an identifier, not a word, in prose: at
// least 6 characters and two upper-case letters (ChunkName, FileIDMS; not
// Write, Tool or GiB).
func identLike(name string) bool {
	upper := 0
	for _, r := range name {
		if unicode.IsUpper(r) {
			upper++
		}
	}
	return len(name) >= 6 && upper >= 2
}

// commentMentions renames, in the comments of each declaring package (its
// test files too), the mentions of a renamed export that can only mean it:
// Recv.Method for a method; for a package-level name, the bare name when it
// reads as an identifier (identLike) and nothing else in the package's
// files is named so (a field, a local, another package's export).
func (a *analysis) commentMentions(add func(pos token.Pos, old, new string)) {
	byPkg := map[*pkgInfo][]*export{}
	for _, e := range a.exports {
		if e.renamed {
			byPkg[e.pkg] = append(byPkg[e.pkg], e)
		}
	}
	for pi, list := range byPkg {
		files := map[string]*ast.File{}
		for _, v := range pi.variants {
			for _, f := range v.Syntax {
				files[a.fset.File(f.Pos()).Name()] = f
			}
		}
		// Names some identifier other than a renamed export's occurrence has.
		renamedAt := map[token.Pos]bool{}
		for _, e := range list {
			for pos := range e.occurrences {
				renamedAt[pos] = true
			}
		}
		other := map[string]bool{}
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok && !renamedAt[id.Pos()] {
					other[id.Name] = true
				}
				return true
			})
		}
		type mention struct{ old, new string }
		var mentions []mention
		for _, e := range list {
			if e.kind == "method" {
				mentions = append(mentions, mention{e.recv.Name() + "." + e.ident, e.recv.Name() + "." + e.newName})
			} else if identLike(e.ident) && !other[e.ident] {
				mentions = append(mentions, mention{e.ident, e.newName})
			}
		}
		for _, f := range files {
			for _, cg := range f.Comments {
				for _, c := range cg.List {
					for _, m := range mentions {
						for i := 0; ; {
							j := strings.Index(c.Text[i:], m.old)
							if j < 0 {
								break
							}
							at := i + j
							i = at + len(m.old)
							before, _ := utf8.DecodeLastRuneInString(c.Text[:at])
							after, _ := utf8.DecodeRuneInString(c.Text[i:])
							if isIdentRune(before) || isIdentRune(after) {
								continue
							}
							add(c.Slash+token.Pos(at), m.old, m.new)
						}
					}
				}
			}
		}
	}
}

func isIdentRune(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// qualifiedMentions renames, in the comments of every loaded file, the
// mentions <path>.<Name> of a renamed export (path relative to the module,
// when it has a slash), and <package>.<Name> in files of the package, its
// tests, and the packages importing it.
func (a *analysis) qualifiedMentions(add func(pos token.Pos, old, new string)) {
	var renamed []*export
	for _, e := range a.exports {
		if e.renamed {
			renamed = append(renamed, e)
		}
	}
	done := map[string]bool{}
	for _, p := range a.roots {
		for _, f := range p.Syntax {
			name := a.fset.File(f.Pos()).Name()
			if done[name] {
				continue
			}
			done[name] = true
			for _, e := range renamed {
				quals := []string{}
				if strings.Contains(e.pkg.rel, "/") {
					quals = append(quals, e.pkg.rel)
				}
				if _, imports := p.Imports[e.pkg.path]; imports || strings.TrimSuffix(p.PkgPath, "_test") == e.pkg.path {
					quals = append(quals, e.pkg.name)
				}
				for _, q := range quals {
					old := q + "." + e.name
					for _, cg := range f.Comments {
						for _, c := range cg.List {
							for i := 0; ; {
								j := strings.Index(c.Text[i:], old)
								if j < 0 {
									break
								}
								at := i + j
								i = at + len(old)
								before, _ := utf8.DecodeLastRuneInString(c.Text[:at])
								after, _ := utf8.DecodeRuneInString(c.Text[i:])
								if isIdentRune(before) || before == '.' || before == '/' || isIdentRune(after) {
									continue
								}
								start := at + len(q) + 1
								if e.kind == "method" {
									start += len(e.recv.Name()) + 1
								}
								add(c.Slash+token.Pos(start), e.ident, e.newName)
							}
						}
					}
				}
			}
		}
	}
}
