package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"
)

// pkgInfo is one package of the module that declares exports: its plain
// variant and, when it has in-package tests, its test variant (the same
// non-test files again plus the _test.go files of package foo).
type pkgInfo struct {
	path     string // import path
	rel      string // path relative to the module ("" for the root)
	name     string // package name
	plain    *packages.Package
	variants []*packages.Package // plain first
	ignored  []*ast.File         // files of the directory this build leaves out
	// ignoredIdents are all identifiers named in ignored files.
	ignoredIdents map[string]bool
	// pending are the package-level new names taken by renames so far;
	// pendingMethods the same per receiver type.
	pending        map[string]bool
	pendingMethods map[*types.TypeName]map[string]bool
	selByPos       map[token.Pos]*types.Selection
	selsByName     map[string][]selection
}

// use is how one other package uses an export.
type use struct {
	testOnly bool // every use is in a _test.go file
}

type export struct {
	key   string // declaration position: file:offset
	pkg   *pkgInfo
	name  string // Foo, or T.Foo for a method
	ident string // Foo
	kind  string // type, func, var, const, method
	obj   types.Object
	recv  *types.TypeName // for a method

	users map[string]*use // other packages (relative path) that use it
	apiOf []string        // needed exports whose type or signature names it
	kept  []string        // other reasons it stays exported
	// ignoredUsers are packages whose build-constrained files name it.
	ignoredUsers []string

	needed bool
	// occurrences are the identifiers (declaration and uses) in the
	// declaring package's files, deduplicated by position.
	occurrences map[token.Pos]*ast.Ident
	doc         *ast.CommentGroup

	newName string
	skip    string // why -apply leaves it exported although unneeded
	renamed bool
}

type analysis struct {
	dir     string
	module  string
	fset    *token.FileSet
	roots   []*packages.Package
	pkgs    map[string]*pkgInfo // by import path
	exports []*export
	byKey   map[string]*export
	// ifaceMethods are the method names of every interface type found in
	// the loaded packages and their dependencies.
	ifaceMethods map[string]bool
}

// alwaysInterfaceNames are method names that satisfy interfaces checked
// dynamically (errors, fmt, encoding, io, sort, net/http) whether or not a
// named interface type of a loaded package declares them.
var alwaysInterfaceNames = []string{
	"String", "GoString", "Format", "Error", "Unwrap", "Is", "As",
	"MarshalJSON", "UnmarshalJSON", "MarshalYAML", "UnmarshalYAML", "MarshalText", "UnmarshalText",
	"IsZero", "ServeHTTP", "Read", "Write", "Close", "Len", "Less", "Swap",
}

func readModulePath(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`), nil
		}
	}
	return "", fmt.Errorf("%s/go.mod: no module line", dir)
}

func analyze(dir, tags string) (*analysis, error) {
	module, err := readModulePath(dir)
	if err != nil {
		return nil, err
	}
	a := &analysis{
		dir:          dir,
		module:       module,
		fset:         token.NewFileSet(),
		pkgs:         map[string]*pkgInfo{},
		byKey:        map[string]*export{},
		ifaceMethods: map[string]bool{},
	}
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedImports | packages.NeedTypes |
			packages.NeedSyntax | packages.NeedTypesInfo | packages.NeedModule,
		Dir:        dir,
		Tests:      true,
		Fset:       a.fset,
		BuildFlags: []string{"-tags", tags},
		Env:        append(os.Environ(), "CGO_ENABLED=0"),
	}
	roots, err := packages.Load(cfg, "./...")
	if err != nil {
		return nil, err
	}
	nerr := 0
	packages.Visit(roots, nil, func(p *packages.Package) {
		for _, e := range p.Errors {
			if nerr < 20 {
				fmt.Fprintln(os.Stderr, e)
			}
			nerr++
		}
	})
	if nerr > 0 {
		return nil, fmt.Errorf("%d errors loading packages: the module must build and vet first", nerr)
	}
	for _, p := range roots {
		if strings.HasSuffix(p.ID, ".test") && p.Name == "main" && p.PkgPath == strings.TrimSuffix(p.ID, ".test") {
			continue // the generated test main
		}
		a.roots = append(a.roots, p)
	}
	a.collectPackages()
	a.collectExports()
	a.collectInterfaceNames(roots)
	a.collectUses()
	a.collectIgnored()
	a.collectEmbedded()
	a.closure()
	a.plan()
	return a, nil
}

func (a *analysis) relPath(path string) string {
	if path == a.module {
		return "."
	}
	return strings.TrimPrefix(path, a.module+"/")
}

func (a *analysis) inModule(path string) bool {
	return path == a.module || strings.HasPrefix(path, a.module+"/")
}

// isTestVariant: "p [p.test]" with PkgPath p.
func isTestVariant(p *packages.Package) bool {
	return p.ID != p.PkgPath && !strings.HasSuffix(p.PkgPath, "_test")
}

func (a *analysis) collectPackages() {
	for _, p := range a.roots {
		if !a.inModule(p.PkgPath) || p.Name == "main" || p.PkgPath == a.module || strings.HasSuffix(p.PkgPath, "_test") {
			continue
		}
		pi := a.pkgs[p.PkgPath]
		if pi == nil {
			pi = &pkgInfo{path: p.PkgPath, rel: a.relPath(p.PkgPath), name: p.Name,
				ignoredIdents: map[string]bool{}, pending: map[string]bool{},
				pendingMethods: map[*types.TypeName]map[string]bool{}}
			a.pkgs[p.PkgPath] = pi
		}
		if isTestVariant(p) {
			pi.variants = append(pi.variants, p)
		} else {
			pi.plain = p
			pi.variants = append([]*packages.Package{p}, pi.variants...)
		}
	}
	for path, pi := range a.pkgs {
		if pi.plain == nil {
			delete(a.pkgs, path)
		}
	}
}

func skipFile(f *ast.File, name string) bool {
	return strings.HasSuffix(name, "_test.go") || ast.IsGenerated(f) ||
		strings.Contains(filepath.ToSlash(name), "/testdata/")
}

func (a *analysis) posKey(pos token.Pos) string {
	p := a.fset.Position(pos)
	return fmt.Sprintf("%s:%d", p.Filename, p.Offset)
}

// declFiles are the files of the plain variant that declare exports.
func (a *analysis) declFiles(pi *pkgInfo) map[string]*ast.File {
	out := map[string]*ast.File{}
	for _, f := range pi.plain.Syntax {
		name := a.fset.File(f.Pos()).Name()
		if !skipFile(f, name) {
			out[name] = f
		}
	}
	return out
}

func (a *analysis) collectExports() {
	for _, pi := range a.pkgs {
		files := a.declFiles(pi)
		inFiles := func(pos token.Pos) bool {
			return files[a.fset.File(pos).Name()] != nil
		}
		docs := docComments(files)
		scope := pi.plain.Types.Scope()
		add := func(e *export) {
			e.key = a.posKey(e.obj.Pos())
			e.users = map[string]*use{}
			e.occurrences = map[token.Pos]*ast.Ident{}
			e.doc = docs[e.obj.Pos()]
			a.exports = append(a.exports, e)
			a.byKey[e.key] = e
		}
		for _, name := range scope.Names() {
			obj := scope.Lookup(name)
			if !inFiles(obj.Pos()) {
				continue
			}
			if obj.Exported() {
				kind := ""
				switch obj.(type) {
				case *types.TypeName:
					kind = "type"
				case *types.Func:
					kind = "func"
				case *types.Var:
					kind = "var"
				case *types.Const:
					kind = "const"
				}
				add(&export{pkg: pi, name: name, ident: name, kind: kind, obj: obj})
			}
			tn, ok := obj.(*types.TypeName)
			if !ok || tn.IsAlias() {
				continue
			}
			named, ok := tn.Type().(*types.Named)
			if !ok || types.IsInterface(named) {
				continue
			}
			for i := 0; i < named.NumMethods(); i++ {
				m := named.Method(i)
				if m.Exported() && inFiles(m.Pos()) {
					add(&export{pkg: pi, name: tn.Name() + "." + m.Name(), ident: m.Name(), kind: "method", obj: m, recv: tn})
				}
			}
		}
	}
}

// docComments maps the position of each declared name to the doc comment
// that describes it alone.
func docComments(files map[string]*ast.File) map[token.Pos]*ast.CommentGroup {
	out := map[token.Pos]*ast.CommentGroup{}
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Doc != nil {
					out[d.Name.Pos()] = d.Doc
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					doc := (*ast.CommentGroup)(nil)
					switch s := s.(type) {
					case *ast.TypeSpec:
						doc = s.Doc
						if doc == nil && !d.Lparen.IsValid() {
							doc = d.Doc
						}
						if doc != nil {
							out[s.Name.Pos()] = doc
						}
					case *ast.ValueSpec:
						doc = s.Doc
						if doc == nil && !d.Lparen.IsValid() {
							doc = d.Doc
						}
						if doc != nil {
							for _, n := range s.Names {
								out[n.Pos()] = doc
							}
						}
					}
				}
			}
		}
	}
	return out
}

func origin(obj types.Object) types.Object {
	switch o := obj.(type) {
	case *types.Func:
		return o.Origin()
	case *types.Var:
		return o.Origin()
	}
	return obj
}

// collectInterfaceNames gathers the method names of every interface type of
// the loaded packages (any expression's type, so anonymous interfaces in
// function bodies too) and of their dependencies (the types reachable from
// their package-level declarations).
func (a *analysis) collectInterfaceNames(all []*packages.Package) {
	for _, n := range alwaysInterfaceNames {
		a.ifaceMethods[n] = true
	}
	seen := map[types.Type]bool{}
	var walk func(t types.Type)
	addIface := func(it *types.Interface) {
		for i := 0; i < it.NumMethods(); i++ {
			a.ifaceMethods[it.Method(i).Name()] = true
		}
	}
	walk = func(t types.Type) {
		if t == nil || seen[t] {
			return
		}
		seen[t] = true
		switch t := t.(type) {
		case *types.Named:
			walk(t.Underlying())
			for i := 0; i < t.NumMethods(); i++ {
				walk(t.Method(i).Type())
			}
		case *types.Alias:
			walk(types.Unalias(t))
		case *types.Interface:
			addIface(t)
			for i := 0; i < t.NumMethods(); i++ {
				walk(t.Method(i).Type())
			}
			for i := 0; i < t.NumEmbeddeds(); i++ {
				walk(t.EmbeddedType(i))
			}
		case *types.Struct:
			for i := 0; i < t.NumFields(); i++ {
				walk(t.Field(i).Type())
			}
		default:
			eachComponent(t, walk)
		}
	}
	packages.Visit(all, nil, func(p *packages.Package) {
		if p.Types != nil {
			scope := p.Types.Scope()
			for _, name := range scope.Names() {
				walk(scope.Lookup(name).Type())
			}
		}
		if p.TypesInfo != nil {
			for _, tv := range p.TypesInfo.Types {
				walk(tv.Type)
			}
			for _, obj := range p.TypesInfo.Defs {
				if obj != nil {
					walk(obj.Type())
				}
			}
		}
	})
}

func (a *analysis) collectUses() {
	for _, p := range a.roots {
		user := p.PkgPath
		pi := a.pkgs[user]
		record := func(id *ast.Ident, obj types.Object) {
			if obj == nil || obj.Pkg() == nil || !a.inModule(obj.Pkg().Path()) {
				return
			}
			e := a.byKey[a.posKey(origin(obj).Pos())]
			if e == nil || e.ident != id.Name {
				return
			}
			if user == e.pkg.path {
				e.occurrences[id.Pos()] = id
				return
			}
			file := a.fset.File(id.Pos()).Name()
			u := e.users[a.relPath(user)]
			if u == nil {
				u = &use{testOnly: true}
				e.users[a.relPath(user)] = u
			}
			if !strings.HasSuffix(file, "_test.go") {
				u.testOnly = false
			}
		}
		for id, obj := range p.TypesInfo.Uses {
			record(id, obj)
		}
		if pi != nil {
			for id, obj := range p.TypesInfo.Defs {
				record(id, obj)
			}
		}
	}
}

// collectIgnored parses the files the build configuration leaves out
// (other GOOS, other tags) of every loaded package: an export named in one
// of its own package stays, and so does one another package's such file
// selects from its package, since renaming would break those builds.
func (a *analysis) collectIgnored() {
	fset := token.NewFileSet()
	done := map[string]bool{}
	methodSels := map[string][]string{} // selector name -> packages of ignored files
	for _, p := range a.roots {
		for _, name := range p.IgnoredFiles {
			if done[name] || !strings.HasSuffix(name, ".go") || strings.Contains(filepath.ToSlash(name), "/testdata/") {
				continue
			}
			done[name] = true
			f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
			if err != nil {
				fmt.Fprintf(os.Stderr, "warning: %v\n", err)
				continue
			}
			pkgPath := p.PkgPath
			if f.Name.Name != p.Name && strings.HasSuffix(f.Name.Name, "_test") {
				pkgPath = p.PkgPath + "_test"
			}
			if pi := a.pkgs[pkgPath]; pi != nil {
				pi.ignored = append(pi.ignored, f)
				ast.Inspect(f, func(n ast.Node) bool {
					if id, ok := n.(*ast.Ident); ok {
						pi.ignoredIdents[id.Name] = true
					}
					return true
				})
				continue
			}
			// Another package's file: the imports it selects from.
			imports := map[string]string{} // local name -> path
			for _, imp := range f.Imports {
				path := strings.Trim(imp.Path.Value, `"`)
				local := ""
				if imp.Name != nil {
					local = imp.Name.Name
				} else if pi := a.pkgs[path]; pi != nil {
					local = pi.name
				} else {
					local = path[strings.LastIndex(path, "/")+1:]
				}
				imports[local] = path
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok {
					if path, ok := imports[x.Name]; ok {
						if pi := a.pkgs[path]; pi != nil {
							if obj := pi.plain.Types.Scope().Lookup(sel.Sel.Name); obj != nil {
								if e := a.byKey[a.posKey(obj.Pos())]; e != nil {
									e.ignoredUsers = append(e.ignoredUsers, a.relPath(pkgPath))
								}
							}
						}
					}
				}
				methodSels[sel.Sel.Name] = append(methodSels[sel.Sel.Name], a.relPath(pkgPath))
				return true
			})
		}
	}
	for _, e := range a.exports {
		if e.pkg.ignoredIdents[e.ident] {
			e.kept = append(e.kept, "named in a file of its package this build leaves out")
		}
		if e.kind == "method" {
			for _, u := range methodSels[e.ident] {
				if !contains(e.ignoredUsers, u) {
					e.ignoredUsers = append(e.ignoredUsers, u)
				}
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// collectEmbedded keeps every exported type embedded in a struct: its name
// is the field's name.
func (a *analysis) collectEmbedded() {
	for _, p := range a.roots {
		for _, f := range p.Syntax {
			ast.Inspect(f, func(n ast.Node) bool {
				st, ok := n.(*ast.StructType)
				if !ok || st.Fields == nil {
					return true
				}
				for _, fld := range st.Fields.List {
					if len(fld.Names) > 0 {
						continue
					}
					t := p.TypesInfo.TypeOf(fld.Type)
					if ptr, ok := t.(*types.Pointer); ok {
						t = ptr.Elem()
					}
					var obj types.Object
					switch t := t.(type) {
					case *types.Named:
						obj = t.Origin().Obj()
					case *types.Alias:
						obj = t.Obj()
					}
					if obj == nil {
						continue
					}
					if e := a.byKey[a.posKey(obj.Pos())]; e != nil && e.kind == "type" {
						why := "embedded in a struct (its name is the field's)"
						if !contains(e.kept, why) {
							e.kept = append(e.kept, why)
						}
					}
				}
				return true
			})
		}
	}
}

// closure marks needed every export another package uses, and every
// export in the type or signature of a needed export.
func (a *analysis) closure() {
	var queue []*export
	mark := func(e *export) {
		if !e.needed {
			e.needed = true
			queue = append(queue, e)
		}
	}
	for _, e := range a.exports {
		if len(e.users) > 0 || len(e.ignoredUsers) > 0 {
			mark(e)
		}
	}
	var from *export
	seen := map[types.Type]bool{}
	var walk func(t types.Type)
	markObj := func(obj types.Object) {
		e := a.byKey[a.posKey(obj.Pos())]
		if e == nil || e == from {
			return
		}
		via := from.pkg.rel + "." + from.name
		if !contains(e.apiOf, via) {
			e.apiOf = append(e.apiOf, via)
		}
		mark(e)
	}
	walk = func(t types.Type) {
		if t == nil || seen[t] {
			return
		}
		seen[t] = true
		switch t := t.(type) {
		case *types.Named:
			markObj(t.Origin().Obj())
			if ta := t.TypeArgs(); ta != nil {
				for i := 0; i < ta.Len(); i++ {
					walk(ta.At(i))
				}
			}
		case *types.Alias:
			markObj(t.Obj())
			if ta := t.TypeArgs(); ta != nil {
				for i := 0; i < ta.Len(); i++ {
					walk(ta.At(i))
				}
			}
		case *types.Interface:
			for i := 0; i < t.NumExplicitMethods(); i++ {
				walk(t.ExplicitMethod(i).Type())
			}
			for i := 0; i < t.NumEmbeddeds(); i++ {
				walk(t.EmbeddedType(i))
			}
		case *types.Struct:
			for i := 0; i < t.NumFields(); i++ {
				if f := t.Field(i); f.Exported() || f.Embedded() {
					walk(f.Type())
				}
			}
		default:
			eachComponent(t, walk)
		}
	}
	for len(queue) > 0 {
		e := queue[0]
		queue = queue[1:]
		from = e
		clear(seen)
		switch e.kind {
		case "type":
			tn := e.obj.(*types.TypeName)
			if tn.IsAlias() {
				walk(types.Unalias(tn.Type()))
				if al, ok := tn.Type().(*types.Alias); ok {
					walk(al.Rhs())
				}
				continue
			}
			named := tn.Type().(*types.Named)
			if tp := named.TypeParams(); tp != nil {
				for i := 0; i < tp.Len(); i++ {
					walk(tp.At(i).Constraint())
				}
			}
			walk(named.Underlying())
			// Its methods that may satisfy an interface are part of it.
			for i := 0; i < named.NumMethods(); i++ {
				m := named.Method(i)
				if m.Exported() && a.ifaceMethods[m.Name()] {
					walk(m.Type())
				}
			}
		default:
			walk(e.obj.Type())
		}
	}
}

func (a *analysis) keptReasons(e *export) []string {
	var out []string
	if e.kind == "method" && a.ifaceMethods[e.ident] {
		out = append(out, "an interface type has a method of this name")
	}
	out = append(out, e.kept...)
	if why, ok := excluded[e.pkg.rel+"."+e.name]; ok {
		out = append(out, "excluded: "+why)
	}
	return out
}

// unneeded: neither needed nor kept for another reason.
func (a *analysis) unneeded(e *export) bool {
	return !e.needed && len(a.keptReasons(e)) == 0
}

func sortedUsers(e *export) []string {
	var out []string
	for u := range e.users {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}

// eachComponent calls visit with the types t is built of, for the kinds
// both walks (interface names, the API of an export) treat alike:
// pointers, containers, signatures, tuples, type parameters, unions.
func eachComponent(t types.Type, visit func(types.Type)) {
	switch t := t.(type) {
	case *types.Pointer:
		visit(t.Elem())
	case *types.Slice:
		visit(t.Elem())
	case *types.Array:
		visit(t.Elem())
	case *types.Map:
		visit(t.Key())
		visit(t.Elem())
	case *types.Chan:
		visit(t.Elem())
	case *types.Signature:
		if tp := t.TypeParams(); tp != nil {
			for i := 0; i < tp.Len(); i++ {
				visit(tp.At(i).Constraint())
			}
		}
		visit(t.Params())
		visit(t.Results())
	case *types.Tuple:
		for i := 0; i < t.Len(); i++ {
			visit(t.At(i).Type())
		}
	case *types.TypeParam:
		visit(t.Constraint())
	case *types.Union:
		for i := 0; i < t.Len(); i++ {
			visit(t.Term(i).Type())
		}
	}
}
