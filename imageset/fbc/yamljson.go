package fbc

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"

	"github.com/gapmirror/gapmirror/imageset/yamlbudget"
)

// yamlConverter turns YAML nodes into JSON the way sigs.k8s.io/yaml does:
// keys become strings, merge keys are expanded, scalars keep their YAML type.
// Every node converted, and every mapping merged, is charged to budget, so
// that aliases cannot expand a hostile file past what it holds plus
// yamlbudget.AliasNodes.
type yamlConverter struct {
	budget *yamlbudget.Budget
}

func newYAMLConverter() *yamlConverter {
	return &yamlConverter{budget: yamlbudget.New(yamlbudget.AliasNodes)}
}

// fields converts a mapping node into the top-level fields of a blob.
func (c *yamlConverter) fields(n *yaml.Node) (fields, error) {
	f := make(fields, len(n.Content)/2)
	err := c.eachPair(n, func(key string, v *yaml.Node) error {
		if _, ok := f[key]; ok {
			return nil
		}
		raw, err := c.appendJSON(nil, v, 0)
		if err != nil {
			return fmt.Errorf("field %q: %w", key, err)
		}
		f[key] = raw
		return nil
	})
	return f, err
}

// eachPair calls fn for every key of a mapping, later explicit keys first
// overriding earlier ones, then keys from merge keys ("<<") not set explicitly.
func (c *yamlConverter) eachPair(n *yaml.Node, fn func(key string, v *yaml.Node) error) error {
	n = resolveAlias(n)
	type pair struct {
		key string
		v   *yaml.Node
	}
	pairs := make([]pair, 0, len(n.Content)/2)
	index := make(map[string]int, len(n.Content)/2)
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolveAlias(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: mapping keys must be scalars", k.Line)
		}
		if k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if j, ok := index[k.Value]; ok {
			pairs[j].v = v
			continue
		}
		index[k.Value] = len(pairs)
		pairs = append(pairs, pair{k.Value, v})
	}
	for _, m := range merges {
		m = resolveAlias(m)
		var sources []*yaml.Node
		switch m.Kind {
		case yaml.MappingNode:
			sources = []*yaml.Node{m}
		case yaml.SequenceNode:
			sources = m.Content
		default:
			return fmt.Errorf("line %d: a merge key needs a mapping or a list of mappings", m.Line)
		}
		for _, src := range sources {
			if err := c.budget.Spend(1); err != nil {
				return fmt.Errorf("line %d: %w", src.Line, err)
			}
			src = resolveAlias(src)
			if src.Kind != yaml.MappingNode {
				return fmt.Errorf("line %d: a merge key needs a mapping or a list of mappings", src.Line)
			}
			err := c.eachPair(src, func(key string, v *yaml.Node) error {
				if _, ok := index[key]; !ok {
					index[key] = len(pairs)
					pairs = append(pairs, pair{key, v})
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	for _, p := range pairs {
		if err := fn(p.key, p.v); err != nil {
			return err
		}
	}
	return nil
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// appendJSON appends the JSON form of n to buf.
func (c *yamlConverter) appendJSON(buf []byte, n *yaml.Node, depth int) ([]byte, error) {
	if err := c.budget.Spend(1); err != nil {
		return nil, fmt.Errorf("line %d: %w", n.Line, err)
	}
	if depth > 10_000 {
		return nil, fmt.Errorf("line %d: document nested more than 10000 levels deep (aliases?)", n.Line)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return append(buf, "null"...), nil
		}
		return c.appendJSON(buf, n.Content[0], depth+1)
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, fmt.Errorf("line %d: unknown alias", n.Line)
		}
		return c.appendJSON(buf, n.Alias, depth+1)
	case yaml.MappingNode:
		buf = append(buf, '{')
		first := true
		err := c.eachPair(n, func(key string, v *yaml.Node) error {
			if !first {
				buf = append(buf, ',')
			}
			first = false
			buf = appendJSONString(buf, key)
			buf = append(buf, ':')
			var err error
			buf, err = c.appendJSON(buf, v, depth+1)
			return err
		})
		if err != nil {
			return nil, err
		}
		return append(buf, '}'), nil
	case yaml.SequenceNode:
		buf = append(buf, '[')
		for i, item := range n.Content {
			if i > 0 {
				buf = append(buf, ',')
			}
			var err error
			if buf, err = c.appendJSON(buf, item, depth+1); err != nil {
				return nil, err
			}
		}
		return append(buf, ']'), nil
	case yaml.ScalarNode:
		return appendScalar(buf, n)
	default:
		return nil, fmt.Errorf("line %d: unexpected YAML node", n.Line)
	}
}

func appendScalar(buf []byte, n *yaml.Node) ([]byte, error) {
	switch n.ShortTag() {
	case "!!null":
		return append(buf, "null"...), nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return strconv.AppendBool(buf, b), nil
	case "!!int":
		if i, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
			return strconv.AppendInt(buf, i, 10), nil
		}
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		out, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return append(buf, out...), nil
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("line %d: %q has no JSON form", n.Line, n.Value)
		}
		return strconv.AppendFloat(buf, f, 'g', -1, 64), nil
	default:
		return appendJSONString(buf, n.Value), nil
	}
}

// appendJSONString appends s as a JSON string, replacing invalid UTF-8.
func appendJSONString(buf []byte, s string) []byte {
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch b {
			case '"', '\\':
				buf = append(buf, '\\', b)
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			buf = append(buf, s[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}
