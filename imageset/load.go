package imageset

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gapmirror/gapmirror/imageset/spelling"
	"github.com/gapmirror/gapmirror/imageset/yamlbudget"
)

// FieldError is one problem in a configuration file, located by file, line
// and field path (e.g. mirror.operators[0].packages[1].channels).
type FieldError struct {
	File string
	Line int
	Path string
	Msg  string
}

// Error formats the problem as "file:line: path: message".
func (e FieldError) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	case e.File != "":
		fmt.Fprintf(&b, "%s: ", e.File)
	case e.Line > 0:
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// FieldErrors is every problem found in a configuration, in file order.
type FieldErrors []FieldError

// shownErrors is how many problems Error lists: aliases can repeat one
// mistake tens of thousands of times, and the first ones say what to fix.
const shownErrors = 100

// Error lists the problems one per line, the first shownErrors of them.
func (es FieldErrors) Error() string {
	lines := make([]string, 0, min(len(es), shownErrors)+1)
	for _, e := range es[:min(len(es), shownErrors)] {
		lines = append(lines, e.Error())
	}
	if more := len(es) - shownErrors; more > 0 {
		lines = append(lines, fmt.Sprintf("and %d more problems: fix the ones above and run again", more))
	}
	return strings.Join(lines, "\n")
}

// LoadImageSetConfiguration reads, strictly decodes and validates an ImageSetConfiguration file.
func LoadImageSetConfiguration(path string) (*ImageSetConfiguration, error) {
	data, err := readConfig(path, imageSetConfigurationKind)
	if err != nil {
		return nil, err
	}
	return ParseImageSetConfiguration(data, path)
}

// readConfig reads a configuration file, refusing one larger than
// maxConfigBytes before reading it whole (by its size, or while reading
// when it has none, as a pipe).
func readConfig(path, kind string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", kind, err)
	}
	defer f.Close()
	tooLarge := func(size string) error {
		return FieldErrors{{File: path, Msg: fmt.Sprintf("file is %s bytes, more than a %s can be (%d): is it the right file?", size, kind, maxConfigBytes)}}
	}
	if info, err := f.Stat(); err == nil && info.Mode().IsRegular() && info.Size() > maxConfigBytes {
		return nil, tooLarge(strconv.FormatInt(info.Size(), 10))
	}
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", kind, path, err)
	}
	if len(data) > maxConfigBytes {
		return nil, tooLarge("over " + strconv.Itoa(maxConfigBytes))
	}
	return data, nil
}

// ParseImageSetConfiguration strictly decodes and validates an ImageSetConfiguration;
// filename is only used in error messages.
func ParseImageSetConfiguration(data []byte, filename string) (*ImageSetConfiguration, error) {
	var c ImageSetConfiguration
	src, errs, err := decodeDocument(data, filename, iscDocument, &c)
	if err != nil {
		return nil, err
	}
	c.src = src
	normaliseNames(&c.Mirror.Platform.Release, c.Mirror.Operators, c.Mirror.AdditionalImages, c.Mirror.BlockedImages)
	if errs = mergeErrors(errs, c.validate()); len(errs) > 0 {
		return nil, errs
	}
	return &c, nil
}

// LoadDeleteImageSetConfiguration reads, strictly decodes and validates a DeleteImageSetConfiguration file.
func LoadDeleteImageSetConfiguration(path string) (*DeleteImageSetConfiguration, error) {
	data, err := readConfig(path, DeleteImageSetConfigurationKind)
	if err != nil {
		return nil, err
	}
	return parseDeleteImageSetConfiguration(data, path)
}

// parseDeleteImageSetConfiguration strictly decodes and validates a DeleteImageSetConfiguration;
// filename is only used in error messages.
func parseDeleteImageSetConfiguration(data []byte, filename string) (*DeleteImageSetConfiguration, error) {
	var c DeleteImageSetConfiguration
	src, errs, err := decodeDocument(data, filename, discDocument, &c)
	if err != nil {
		return nil, err
	}
	c.src = src
	normaliseNames(&c.Delete.Platform.Release, c.Delete.Operators, c.Delete.AdditionalImages, c.Delete.BlockedImages)
	if errs = mergeErrors(errs, c.validate()); len(errs) > 0 {
		return nil, errs
	}
	return &c, nil
}

// source remembers where a configuration came from: its file and the line of every field path.
type source struct {
	file  string
	lines map[string]int
}

func (s *source) fileName() string {
	if s == nil {
		return ""
	}
	return s.file
}

// line returns the line of path, or of its closest recorded parent.
func (s *source) line(path string) int {
	if s == nil {
		return 0
	}
	for {
		if l, ok := s.lines[path]; ok {
			return l
		}
		if path == "" {
			return 0
		}
		path = parentPath(path)
	}
}

// parentPath drops the last ".field" or "[i]" of a field path.
func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndex(p, "["); i >= 0 {
			return p[:i]
		}
	}
	if i := strings.LastIndex(p, "."); i >= 0 {
		return p[:i]
	}
	return ""
}

// documentSpec describes one configuration kind for the decoder.
type documentSpec struct {
	kind    string
	section string // required top-level content key
	// wrongKind explains what to do when the other kind is given.
	wrongKind map[string]string
	// misplaced explains top-level keys that belong elsewhere.
	misplaced map[string]string
}

const storageConfigHint = "an oc-mirror v1 setting; gapmirror keeps its state in the workspace (--workspace) or next to the archive: remove it"

var iscDocument = documentSpec{
	kind:    imageSetConfigurationKind,
	section: "mirror",
	wrongKind: map[string]string{
		DeleteImageSetConfigurationKind: "this file says what to delete from a mirror, not what to mirror: run it with `gapmirror delete -c FILE`",
	},
	misplaced: map[string]string{
		"delete":        "an ImageSetConfiguration has no delete: section; to delete images write a DeleteImageSetConfiguration (kind: DeleteImageSetConfiguration) and run `gapmirror delete`",
		"storageConfig": storageConfigHint,
	},
}

var discDocument = documentSpec{
	kind:    DeleteImageSetConfigurationKind,
	section: "delete",
	wrongKind: map[string]string{
		imageSetConfigurationKind: "`gapmirror delete` needs a DeleteImageSetConfiguration (kind: DeleteImageSetConfiguration with a delete: section); to mirror this file run `gapmirror mirror -c FILE`",
	},
	misplaced: map[string]string{
		"mirror":        "a DeleteImageSetConfiguration lists what to delete under delete:, not mirror:",
		"archiveSize":   "a DeleteImageSetConfiguration writes no archive: remove archiveSize",
		"storageConfig": storageConfigHint,
	},
}

// decodeDocument parses data as exactly one YAML document and decodes it into
// out against spec. Problems in the content come back as FieldErrors in errs;
// err is set when the document cannot be decoded at all.
func decodeDocument(data []byte, filename string, spec documentSpec, out any) (*source, FieldErrors, error) {
	root, err := singleDocument(data, filename, spec.kind)
	if err != nil {
		return nil, nil, err
	}
	d := &decoder{src: &source{file: filename, lines: map[string]int{"": root.Line}}, misplaced: spec.misplaced, budget: yamlbudget.New(configAliasNodes)}
	d.budget.Add(root)
	if root.Kind != yaml.MappingNode {
		d.fail(root, "", "expected a mapping with kind, apiVersion and %s, got %s", spec.section, describe(root))
		return nil, nil, d.errs
	}
	kindKey, kindNode := lookup(root, "kind")
	switch kind := scalarValue(kindNode); {
	case kindNode == nil:
		d.fail(root, "kind", "missing: set kind: %s", spec.kind)
	case kind == spec.kind:
	case spec.wrongKind[kind] != "":
		d.fail(kindKey, "kind", "%s: %s", kind, spec.wrongKind[kind])
		return nil, nil, d.errs
	default:
		d.fail(kindKey, "kind", "%q is not supported here: set kind: %s", kind, spec.kind)
		return nil, nil, d.errs
	}
	apiKey, apiNode := lookup(root, "apiVersion")
	switch api := scalarValue(apiNode); {
	case apiNode == nil:
		d.fail(root, "apiVersion", "missing: set apiVersion: %s", APIVersion)
	case api == APIVersion:
	case api == apiVersionV1:
		d.fail(apiKey, "apiVersion", "%s is oc-mirror v1's format; gapmirror reads oc-mirror v2's: set apiVersion: %s, remove storageConfig (gapmirror keeps its state in the workspace), and fix any other field reported below (if the file was written for oc-mirror v2, changing apiVersion is enough)", apiVersionV1, APIVersion)
	default:
		d.fail(apiKey, "apiVersion", "%q is not supported: set apiVersion: %s", api, APIVersion)
	}
	if k, _ := lookup(root, spec.section); k == nil {
		d.fail(root, spec.section, "missing: a %s needs a %s: section", spec.kind, spec.section)
	}
	d.decode(root, reflect.ValueOf(out).Elem(), "")
	if d.expanded != nil {
		return nil, nil, FieldErrors{*d.expanded}
	}
	return d.src, d.errs, nil
}

// configAliasNodes is how many nodes aliases may add to a configuration (a
// hand-written one reuses a list of packages or channels a few times) before
// the file is refused as an alias bomb, early: decoding and validating cost
// microseconds per node.
const configAliasNodes = 100_000

// maxConfigBytes bounds a configuration file: a hand-written one is a few
// KiB; a mistaken one (an archive, a catalog) is refused before parsing.
const maxConfigBytes = 4 << 20

// singleDocument parses data and returns the root node of its only document.
func singleDocument(data []byte, filename, kind string) (*yaml.Node, error) {
	if len(data) > maxConfigBytes {
		return nil, FieldErrors{{File: filename, Msg: fmt.Sprintf("file is %d bytes, more than a %s can be (%d): is it the right file?", len(data), kind, maxConfigBytes)}}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, FieldErrors{{File: filename, Msg: fmt.Sprintf("file is empty: expected a %s (kind, apiVersion and content)", kind)}}
		}
		return nil, syntaxError(data, filename, err)
	}
	root := documentRoot(&doc)
	if root == nil {
		return nil, FieldErrors{{File: filename, Line: doc.Line, Msg: fmt.Sprintf("document is empty: expected a %s (kind, apiVersion and content)", kind)}}
	}
	for {
		var next yaml.Node
		err := dec.Decode(&next)
		if errors.Is(err, io.EOF) {
			return root, nil
		}
		if err != nil {
			return nil, syntaxError(data, filename, err)
		}
		if extra := documentRoot(&next); extra != nil {
			return nil, FieldErrors{{File: filename, Line: extra.Line, Msg: "a second YAML document starts here: a configuration file holds exactly one document; move it to its own file"}}
		}
	}
}

// documentRoot returns the content of a document node, or nil when it is empty.
func documentRoot(doc *yaml.Node) *yaml.Node {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return nil
	}
	return root
}

var yamlLineError = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError turns a YAML parser error into a FieldError carrying its line.
func syntaxError(data []byte, filename string, err error) error {
	msg := err.Error()
	if m := yamlLineError.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		detail := m[2]
		if lines := bytes.Split(data, []byte("\n")); line >= 1 && line <= len(lines) && bytes.ContainsRune(lines[line-1], '\t') {
			detail += " (this line has a tab: indent YAML with spaces)"
		}
		return FieldErrors{{File: filename, Line: line, Msg: "invalid YAML: " + detail}}
	}
	return FieldErrors{{File: filename, Msg: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")}}
}

// lookup returns the key and value nodes of key in a mapping node.
func lookup(m *yaml.Node, key string) (k, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], resolve(m.Content[i+1])
		}
	}
	return nil, nil
}

func scalarValue(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

// resolve follows aliases to the anchored node.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// decoder walks a YAML node tree against a Go type (fields named by json
// tags), filling the value and collecting every unknown field and type error.
type decoder struct {
	src       *source
	misplaced map[string]string
	errs      FieldErrors

	budget *yamlbudget.Budget
	// alias is the outermost alias being followed and aliasPath its field
	// path, where an expansion that exceeds the budget is reported.
	alias     *yaml.Node
	aliasPath string
	// expanded is set once the budget is exceeded; decoding stops there.
	expanded *FieldError
}

// spend charges nodes visits to the budget; once it is exceeded it records
// the error (at the outermost alias being followed, else at n) and returns
// false, as it does for every later call.
func (d *decoder) spend(n *yaml.Node, path string, nodes int) bool {
	if d.expanded != nil {
		return false
	}
	err := d.budget.Spend(nodes)
	if err == nil {
		return true
	}
	if d.alias != nil {
		n, path = d.alias, d.aliasPath
	}
	d.expanded = &FieldError{File: d.src.file, Line: n.Line, Path: path, Msg: err.Error()}
	return false
}

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	d.errs = append(d.errs, FieldError{File: d.src.file, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode && d.alias == nil {
		d.alias, d.aliasPath = n, path
		defer func() { d.alias = nil }()
	}
	if !d.spend(n, path, 1) {
		return
	}
	n = resolve(n)
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		v.SetZero()
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		d.decodeSlice(n, v, path)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.fail(n, path, "expected a string, got %s", describe(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		var b bool
		// Decode also accepts YAML 1.1 yes/no/on/off, as oc-mirror does.
		if n.Kind != yaml.ScalarNode || n.Decode(&b) != nil {
			d.fail(n, path, "expected true or false, got %s", describe(n))
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		var i int64
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&i) != nil {
			d.fail(n, path, "expected a whole number, got %s", describe(n))
			return
		}
		v.SetInt(i)
	default:
		d.fail(n, path, "cannot decode into %s", v.Type())
	}
}

func (d *decoder) decodeSlice(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		hint := ""
		if n.Kind == yaml.MappingNode && v.Type().Elem().Kind() == reflect.Struct {
			hint = ` (start each entry with "- ")`
		}
		if n.Kind == yaml.ScalarNode {
			hint = fmt.Sprintf(` (write it as a list: "- %s")`, n.Value)
		}
		d.fail(n, path, "expected a list, got %s%s", describe(n), hint)
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		d.src.lines[p] = item.Line
		d.decode(item, s.Index(i), p)
	}
	v.Set(s)
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "expected a mapping (field: value), got %s", describe(n))
		return
	}
	fields := fieldsOf(v.Type())
	seen := map[string]int{}
	for _, kv := range d.mappingPairs(n, path) {
		k, val := kv[0], kv[1]
		if k.Kind != yaml.ScalarNode {
			d.fail(k, path, "expected a field name, got %s", describe(k))
			continue
		}
		p := joinPath(path, k.Value)
		if msg, ok := d.misplaced[k.Value]; ok && path == "" {
			d.fail(k, p, "%s", msg)
			continue
		}
		idx, ok := fields.index[k.Value]
		if !ok {
			if s := suggest(k.Value, fields.names); s != "" {
				d.fail(k, p, "unknown field (did you mean %q?)", s)
			} else {
				d.fail(k, p, "unknown field (known fields here: %s)", strings.Join(fields.names, ", "))
			}
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.fail(k, p, "duplicate field (first set at line %d)", first)
			continue
		}
		seen[k.Value] = k.Line
		d.src.lines[p] = k.Line
		d.decode(val, v.Field(idx), p)
	}
}

// mappingPairs returns the key/value pairs of a mapping, expanding YAML merge
// keys (<<: *anchor); explicit keys win over merged ones. Each merged mapping
// is charged to the budget (merges of merges multiply like aliases).
func (d *decoder) mappingPairs(n *yaml.Node, path string) [][2]*yaml.Node {
	var explicit, merged [][2]*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			sources := []*yaml.Node{v}
			if r := resolve(v); r.Kind == yaml.SequenceNode {
				sources = r.Content
			}
			for _, s := range sources {
				outer := s.Kind == yaml.AliasNode && d.alias == nil
				if outer {
					d.alias, d.aliasPath = s, path
				}
				ok := d.spend(s, path, 1)
				if r := resolve(s); ok && r.Kind == yaml.MappingNode {
					merged = append(merged, d.mappingPairs(r, path)...)
				}
				if outer {
					d.alias = nil
				}
				if !ok || d.expanded != nil {
					return nil
				}
			}
			continue
		}
		explicit = append(explicit, [2]*yaml.Node{k, v})
	}
	have := map[string]bool{}
	for _, kv := range explicit {
		have[kv[0].Value] = true
	}
	for _, kv := range merged {
		if !have[kv[0].Value] {
			have[kv[0].Value] = true
			explicit = append(explicit, kv)
		}
	}
	return explicit
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// describe says what a node is, for "expected X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!int", "!!float":
			return "the number " + n.Value
		case "!!bool":
			return "the boolean " + n.Value
		default:
			return strconv.Quote(n.Value)
		}
	}
	return "an unsupported YAML node"
}

// structFields maps json field names of a struct type to field indexes.
type structFields struct {
	index map[string]int
	names []string
}

func fieldsOf(t reflect.Type) structFields {
	f := structFields{index: map[string]int{}}
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		f.index[name] = i
		f.names = append(f.names, name)
	}
	return f
}

// suggest returns the candidate closest to word when it is a likely typo of it.
func suggest(word string, candidates []string) string {
	best, bestDist := "", -1
	lw := strings.ToLower(word)
	for _, c := range candidates {
		if d := spelling.Distance(lw, strings.ToLower(c)); bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	if bestDist >= 0 && bestDist <= 1+len(word)/4 {
		return best
	}
	return ""
}

// mergeErrors combines decode and validation errors, drops validation errors
// at or under a path that already failed to decode, and sorts them by line.
func mergeErrors(decodeErrs, validateErrs FieldErrors) FieldErrors {
	failed := make(map[string]bool, len(decodeErrs))
	for _, e := range decodeErrs {
		if e.Path != "" {
			failed[e.Path] = true
		}
	}
	all := append(FieldErrors(nil), decodeErrs...)
	for _, v := range validateErrs {
		if !underAny(v.Path, failed) {
			all = append(all, v)
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Line < all[j].Line })
	return all
}

// underAny reports whether path, or a field or list entry it is under, is
// in failed. It looks up path's ancestors rather than comparing every
// failed path: aliases can make tens of thousands of both.
func underAny(path string, failed map[string]bool) bool {
	if len(failed) == 0 {
		return false
	}
	for i := len(path); i > 0; i-- {
		if (i == len(path) || path[i] == '.' || path[i] == '[') && failed[path[:i]] {
			return true
		}
	}
	return false
}
