package fbc

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// packageFile is the name of the file each package folder gets; OthersFile
// holds, at the root, the blobs that name no package.
const (
	packageFile = "catalog.json"
	OthersFile  = "others.json"
)

// WriteFiles renders the catalog as FBC, calling fn once per file with its
// slash-separated path relative to the catalog root and its content:
// "<package>/catalog.json" for every package in name order (the olm.package
// blob, channels by name, bundles by name, olm.deprecations, then other blobs
// by schema and name), and "others.json" for blobs that name no package, if
// any. The output is deterministic: equal catalogs give equal bytes.
func (c *Catalog) WriteFiles(fn func(name string, data []byte) error) error {
	for _, name := range c.names {
		if err := checkPathName(name); err != nil {
			return err
		}
		if name == OthersFile && len(c.others) > 0 {
			return fmt.Errorf("package %q clashes with the file for package-less blobs", name)
		}
		data, err := c.pkgs[name].render()
		if err != nil {
			return fmt.Errorf("rendering package %q: %w", name, err)
		}
		if err := fn(name+"/"+packageFile, data); err != nil {
			return err
		}
	}
	if len(c.others) == 0 {
		return nil
	}
	var buf bytes.Buffer
	enc := newEncoder(&buf)
	for _, o := range sortedBlobs(c.others) {
		if err := enc.Encode(o); err != nil {
			return fmt.Errorf("rendering %s blob from %s: %w", o.Schema, o.Pos, err)
		}
	}
	return fn(OthersFile, buf.Bytes())
}

// WriteDir writes the catalog under dir with WriteFiles. dir is created if
// missing and must otherwise be empty, since opm would read any stale file
// left there.
func (c *Catalog) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating catalog directory: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("reading catalog directory: %w", err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("catalog directory %s is not empty: write the catalog to a new or empty directory", dir)
	}
	return c.WriteFiles(func(name string, data []byte) error {
		target := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return fmt.Errorf("writing catalog: %w", err)
		}
		if err := os.WriteFile(target, data, 0o644); err != nil {
			return fmt.Errorf("writing catalog: %w", err)
		}
		return nil
	})
}

// render writes every blob of the package, in the documented order.
func (p *Package) render() ([]byte, error) {
	var buf bytes.Buffer
	enc := newEncoder(&buf)
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	for _, ch := range p.Channels {
		if err := enc.Encode(ch); err != nil {
			return nil, fmt.Errorf("channel %q: %w", ch.Name, err)
		}
	}
	for _, b := range p.Bundles {
		if err := enc.Encode(b); err != nil {
			return nil, fmt.Errorf("bundle %q: %w", b.Name, err)
		}
	}
	if p.Deprecations != nil {
		if err := enc.Encode(p.Deprecations); err != nil {
			return nil, fmt.Errorf("deprecations: %w", err)
		}
	}
	for _, o := range sortedBlobs(p.Others) {
		if err := enc.Encode(o); err != nil {
			return nil, fmt.Errorf("%s blob from %s: %w", o.Schema, o.Pos, err)
		}
	}
	return buf.Bytes(), nil
}

func newEncoder(buf *bytes.Buffer) *json.Encoder {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "    ")
	return enc
}

func sortedBlobs(blobs []*Blob) []*Blob {
	out := slices.Clone(blobs)
	slices.SortStableFunc(out, func(a, b *Blob) int {
		return cmp.Or(cmp.Compare(a.Schema, b.Schema), cmp.Compare(a.Name, b.Name), bytes.Compare(a.Raw, b.Raw))
	})
	return out
}

// checkPathName refuses package names that cannot be a single folder name.
func checkPathName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) || strings.ContainsRune(name, 0) {
		return fmt.Errorf("package name %q cannot be used as a folder name", name)
	}
	return nil
}
