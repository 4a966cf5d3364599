package fbc

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"runtime"
	"strings"
	"sync"

	yaml "go.yaml.in/yaml/v3"
)

// LoadFS reads the file-based catalog whose root directory is root inside
// fsys ("." for the whole file system; a leading "/" is ignored, so the
// catalog image label value "/configs" works as is).
//
// Like opm, it walks the tree recursively, skips files excluded by
// .indexignore files (gitignore patterns, each file scoped to its directory),
// and reads every other file: .json files as a stream of JSON objects,
// .yaml/.yml files as multi-document YAML, other files by their first byte
// ("{" means JSON). Bundle objects given by reference (olm.bundle.object
// {"ref": path}) are read and inlined, so the catalog can be written
// elsewhere. Malformed input is an error naming the file and line.
func LoadFS(fsys fs.FS, root string) (*Catalog, error) {
	if fsys == nil {
		return nil, fmt.Errorf("no file system to load the catalog from")
	}
	root = path.Clean("/" + strings.ReplaceAll(root, "\\", "/"))[1:]
	if root == "" {
		root = "."
	}
	tree := fsys
	if root != "." {
		sub, err := fs.Sub(fsys, root)
		if err != nil {
			return nil, fmt.Errorf("catalog root %q: %w", root, err)
		}
		tree = sub
	}
	info, err := fs.Stat(tree, ".")
	if err != nil {
		return nil, fmt.Errorf("catalog root %q: %w", root, err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("catalog root %q is not a directory", root)
	}
	matcher, err := newIgnoreMatcher(tree)
	if err != nil {
		return nil, fmt.Errorf("reading %s files under %q: %w", indexIgnoreFile, root, err)
	}
	var files []string
	err = fs.WalkDir(tree, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("walking catalog %q: %w", path.Join(root, p), err)
		}
		if d.IsDir() || matcher.ignored(p, false) {
			return nil
		}
		files = append(files, p)
		return nil
	})
	if err != nil {
		return nil, err
	}

	loaded := make([]loadedFile, len(files))
	workers := min(runtime.GOMAXPROCS(0), len(files))
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				loaded[i] = loadFile(tree, root, files[i])
			}
		}()
	}
	for i := range files {
		next <- i
	}
	close(next)
	wg.Wait()
	return assemble(loaded)
}

// loadedFile holds the blobs read from one file.
type loadedFile struct {
	packages     []*Package
	channels     []*Channel
	bundles      []*Bundle
	deprecations []*Deprecations
	others       []*Blob
	err          error
}

// assemble groups blobs by package and builds the catalog.
func assemble(loaded []loadedFile) (*Catalog, error) {
	var errs problems
	pkgs := map[string]*Package{}
	var order []*Package
	for _, lf := range loaded {
		if lf.err != nil {
			var se *SourceError
			if errors.As(lf.err, &se) {
				errs.add(se.Pos, se.Err)
			} else {
				errs.add(Position{}, lf.err)
			}
			continue
		}
		for _, p := range lf.packages {
			if prev, ok := pkgs[p.Name]; ok && p.Name != "" {
				errs.add(p.Pos, fmt.Errorf("package %q is defined twice (first at %s): remove one of the %s blobs", p.Name, prev.Pos, SchemaPackage))
				continue
			}
			pkgs[p.Name] = p
			order = append(order, p)
		}
	}
	owner := func(kind, name, pkg string, pos Position) *Package {
		if pkg == "" {
			errs.add(pos, fmt.Errorf("%s %q has no package field", kind, name))
			return nil
		}
		p := pkgs[pkg]
		if p == nil {
			errs.add(pos, fmt.Errorf("%s %q names package %q, which has no %s blob in the catalog", kind, name, pkg, SchemaPackage))
		}
		return p
	}
	var others []*Blob
	for _, lf := range loaded {
		for _, ch := range lf.channels {
			if p := owner(SchemaChannel, ch.Name, ch.Package, ch.Pos); p != nil {
				p.Channels = append(p.Channels, ch)
			}
		}
		for _, b := range lf.bundles {
			if p := owner(SchemaBundle, b.Name, b.Package, b.Pos); p != nil {
				p.Bundles = append(p.Bundles, b)
			}
		}
		for _, d := range lf.deprecations {
			p := owner(SchemaDeprecations, "", d.Package, d.Pos)
			switch {
			case p == nil:
			case p.Deprecations != nil:
				errs.add(d.Pos, fmt.Errorf("package %q has a second %s blob (first at %s): merge them", d.Package, SchemaDeprecations, p.Deprecations.Pos))
			default:
				p.Deprecations = d
			}
		}
		for _, o := range lf.others {
			if p := pkgs[o.Package]; p != nil && o.Package != "" {
				p.Others = append(p.Others, o)
			} else {
				others = append(others, o)
			}
		}
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	return NewCatalog(order, others)
}

// loadFile reads the blobs of one file.
func loadFile(tree fs.FS, root, rel string) loadedFile {
	display := rel
	if root != "." {
		display = path.Join(root, rel)
	}
	data, err := fs.ReadFile(tree, rel)
	if err != nil {
		return loadedFile{err: fmt.Errorf("reading catalog file %s: %w", display, err)}
	}
	r := &blobReader{tree: tree, dir: path.Dir(rel)}
	switch ext := strings.ToLower(path.Ext(rel)); {
	case ext == ".json":
		err = r.readJSON(data, display)
	case ext == ".yaml" || ext == ".yml":
		err = r.readYAML(data, display)
	case firstByte(data) == '{':
		err = r.readJSON(data, display)
	default:
		err = r.readYAML(data, display)
	}
	r.out.err = err
	return r.out
}

func firstByte(data []byte) byte {
	trimmed := bytes.TrimLeft(data, " \t\r\n\ufeff")
	if len(trimmed) == 0 {
		return 0
	}
	return trimmed[0]
}

// blobReader reads the blobs of one file and types them by schema.
type blobReader struct {
	tree fs.FS
	dir  string
	out  loadedFile
}

// readJSON reads a stream of JSON objects.
func (r *blobReader) readJSON(data []byte, file string) error {
	lines := newLineIndex(data)
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		start := skipSpace(data, dec.InputOffset())
		if start >= int64(len(data)) {
			return nil
		}
		pos := Position{File: file, Line: lines.line(start), Offset: start}
		if data[start] != '{' {
			return &SourceError{Pos: pos, Err: fmt.Errorf("expected a JSON object (a catalog blob), found %.20q", data[start:])}
		}
		var f fields
		if err := dec.Decode(&f); err != nil {
			off := start
			var se *json.SyntaxError
			if errors.As(err, &se) {
				off = se.Offset - 1 // the offset counts the bad byte itself
			}
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				off = int64(len(data))
				err = fmt.Errorf("unexpected end of file inside a JSON object")
			}
			return &SourceError{Pos: Position{File: file, Line: lines.line(off), Offset: off}, Err: fmt.Errorf("malformed JSON: %w", err)}
		}
		if err := r.blob(f, data[start:dec.InputOffset()], pos); err != nil {
			return err
		}
	}
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// readYAML reads a multi-document YAML stream.
func (r *blobReader) readYAML(data []byte, file string) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	conv := newYAMLConverter()
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			pos := Position{File: file, Offset: -1}
			msg := err.Error()
			if m := yamlLine.FindStringSubmatch(msg); m != nil {
				fmt.Sscan(m[1], &pos.Line)
				msg = msg[len(m[0]):]
			}
			return &SourceError{Pos: pos, Err: fmt.Errorf("malformed YAML: %s", msg)}
		}
		if len(doc.Content) == 0 {
			continue
		}
		conv.budget.Add(&doc)
		n := resolveAlias(doc.Content[0])
		pos := Position{File: file, Line: n.Line, Offset: -1}
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
			continue
		}
		if n.Kind != yaml.MappingNode {
			return &SourceError{Pos: pos, Err: fmt.Errorf("expected a YAML mapping (a catalog blob), found a %s", kindName(n))}
		}
		f, err := conv.fields(n)
		if err != nil {
			return &SourceError{Pos: pos, Err: err}
		}
		if err := r.blob(f, nil, pos); err != nil {
			return err
		}
	}
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return fmt.Sprintf("scalar %q", n.Value)
	default:
		return "non-mapping node"
	}
}

// blob types one blob by its schema. raw is the blob's JSON when read from JSON.
func (r *blobReader) blob(f fields, raw []byte, pos Position) error {
	var schema string
	if v, ok := f["schema"]; ok {
		if err := json.Unmarshal(v, &schema); err != nil {
			return &SourceError{Pos: pos, Err: fmt.Errorf("field \"schema\" is not a string: %s", v)}
		}
	}
	fail := func(err error) error {
		return &SourceError{Pos: pos, Err: fmt.Errorf("%s blob: %w", schema, err)}
	}
	switch schema {
	case "":
		return &SourceError{Pos: pos, Err: fmt.Errorf("blob has no \"schema\" field: every catalog object needs one (%s, %s, %s, %s or a custom schema)", SchemaPackage, SchemaChannel, SchemaBundle, SchemaDeprecations)}
	case SchemaPackage:
		p := &Package{Pos: pos}
		if err := p.fromFields(f); err != nil {
			return fail(err)
		}
		r.out.packages = append(r.out.packages, p)
	case SchemaChannel:
		c := &Channel{Pos: pos}
		if err := c.fromFields(f); err != nil {
			return fail(err)
		}
		r.out.channels = append(r.out.channels, c)
	case SchemaBundle:
		b := &Bundle{Pos: pos}
		if err := b.fromFields(f); err != nil {
			return fail(err)
		}
		if err := r.inlineObjects(b); err != nil {
			return fail(fmt.Errorf("bundle %q: %w", b.Name, err))
		}
		r.out.bundles = append(r.out.bundles, b)
	case SchemaDeprecations:
		d := &Deprecations{Pos: pos}
		if err := d.fromFields(f); err != nil {
			return fail(err)
		}
		r.out.deprecations = append(r.out.deprecations, d)
	default:
		o := &Blob{Schema: schema, Pos: pos}
		if v, ok := f["package"]; ok {
			if err := json.Unmarshal(v, &o.Package); err != nil || o.Package == "" {
				return fail(fmt.Errorf("field \"package\" must be a non-empty string, got %s", v))
			}
		}
		if v, ok := f["name"]; ok {
			_ = json.Unmarshal(v, &o.Name) // a name that is not a string only affects sorting
		}
		if raw != nil {
			o.Raw = append(json.RawMessage(nil), raw...)
		} else {
			data, err := marshal(f)
			if err != nil {
				return fail(err)
			}
			o.Raw = data
		}
		r.out.others = append(r.out.others, o)
	}
	return nil
}

// inlineObjects replaces olm.bundle.object references to files by the files' content.
func (r *blobReader) inlineObjects(b *Bundle) error {
	for i, p := range b.Properties {
		if p.Type != PropertyBundleObject {
			continue
		}
		var v struct {
			Ref string `json:"ref"`
		}
		if err := json.Unmarshal(p.Value, &v); err != nil || v.Ref == "" {
			continue
		}
		name := path.Clean(path.Join(r.dir, v.Ref))
		data, err := fs.ReadFile(r.tree, name)
		if err != nil {
			return fmt.Errorf("properties[%d] (%s) refers to %q: %w", i, p.Type, v.Ref, err)
		}
		value, err := json.Marshal(map[string]string{"data": base64.StdEncoding.EncodeToString(data)})
		if err != nil {
			return err
		}
		b.Properties[i].Value = value
	}
	return nil
}

func skipSpace(data []byte, off int64) int64 {
	for off < int64(len(data)) {
		switch data[off] {
		case ' ', '\t', '\r', '\n':
			off++
		default:
			return off
		}
	}
	return off
}

// lineCounter maps byte offsets to 1-based line numbers, counting forward
// from the last offset asked for (blobs come in file order).
type lineCounter struct {
	data []byte
	off  int64
	ln   int
}

func newLineIndex(data []byte) *lineCounter { return &lineCounter{data: data, ln: 1} }

func (lc *lineCounter) line(off int64) int {
	off = min(max(off, 0), int64(len(lc.data)))
	if off < lc.off {
		lc.off, lc.ln = 0, 1
	}
	lc.ln += bytes.Count(lc.data[lc.off:off], []byte{'\n'})
	lc.off = off
	return lc.ln
}
