package fbc

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// Schemas of the blobs OLM defines.
const (
	SchemaPackage      = "olm.package"
	SchemaChannel      = "olm.channel"
	SchemaBundle       = "olm.bundle"
	SchemaDeprecations = "olm.deprecations"
)

// Property types of bundles that this package reads.
const (
	PropertyPackage         = "olm.package"
	PropertyGVK             = "olm.gvk"
	PropertyPackageRequired = "olm.package.required"
	PropertyGVKRequired     = "olm.gvk.required"
	PropertyBundleObject    = "olm.bundle.object"
	PropertyCSVMetadata     = "olm.csv.metadata"
	PropertyConstraint      = "olm.constraint"
)

// Position is where a blob starts in the catalog tree.
type Position struct {
	// File is the file's path inside the file system given to LoadFS.
	File string
	// Line is the 1-based line the blob starts on (0 when unknown).
	Line int
	// Offset is the byte offset the blob starts at, for JSON files (-1 when unknown).
	Offset int64
}

// String renders the position as file:line, adding the byte offset for JSON.
func (p Position) String() string {
	switch {
	case p.File == "":
		return "(in memory)"
	case p.Line > 0 && p.Offset >= 0:
		return fmt.Sprintf("%s:%d (byte %d)", p.File, p.Line, p.Offset)
	case p.Line > 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	default:
		return p.File
	}
}

// SourceError is a problem found at a known place in the catalog tree.
type SourceError struct {
	Pos Position
	Err error
}

// Error renders the position, then the problem.
func (e *SourceError) Error() string { return e.Pos.String() + ": " + e.Err.Error() }

// Unwrap returns the problem.
func (e *SourceError) Unwrap() error { return e.Err }

// fields is the unknown part of a JSON object, kept verbatim.
type fields map[string]json.RawMessage

// Package is one olm.package blob together with the channels, bundles,
// deprecations and other blobs that name it.
type Package struct {
	Name           string
	DefaultChannel string
	Description    string
	// Channels are sorted by name.
	Channels []*Channel
	// Bundles are sorted by name.
	Bundles []*Bundle
	// Deprecations is the package's olm.deprecations blob, or nil.
	Deprecations *Deprecations
	// Others are blobs of other schemas whose package field names this package.
	Others []*Blob
	// Pos is where the olm.package blob was read.
	Pos Position

	extra   fields
	bundles map[string]*Bundle
}

// Channel is one olm.channel blob: an update stream and its upgrade edges.
type Channel struct {
	Package string
	Name    string
	Entries []ChannelEntry
	Pos     Position

	extra fields
}

// ChannelEntry is one bundle of a channel and the edges that lead to it.
type ChannelEntry struct {
	Name      string
	Replaces  string
	Skips     []string
	SkipRange string

	extra fields
}

// Bundle is one olm.bundle blob: one version of an operator.
type Bundle struct {
	Package       string
	Name          string
	Image         string
	Properties    []Property
	RelatedImages []RelatedImage
	Pos           Position

	extra fields
	// Derived from Properties by index.
	version      *semver.Version
	provides     []GVK
	requiresPkgs []PackageRequirement
	requiresGVKs []GVK
}

// Property is one typed property of a bundle; Value is kept verbatim.
type Property struct {
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

// RelatedImage is an image a bundle needs besides its own bundle image.
type RelatedImage struct {
	Name  string `json:"name,omitempty"`
	Image string `json:"image"`
}

// GVK is a Kubernetes API group, version and kind, as in olm.gvk properties.
type GVK struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

// String renders the GVK as group/version Kind.
func (g GVK) String() string { return g.Group + "/" + g.Version + " " + g.Kind }

// PackageRequirement is an olm.package.required property: another package in a version range.
type PackageRequirement struct {
	PackageName  string `json:"packageName"`
	VersionRange string `json:"versionRange"`
}

// Deprecations is an olm.deprecations blob: support notices for a package, its channels and bundles.
type Deprecations struct {
	Package string
	Entries []DeprecationEntry
	Pos     Position

	extra fields
}

// DeprecationEntry is one notice of an olm.deprecations blob.
type DeprecationEntry struct {
	Reference DeprecationReference
	Message   string

	extra fields
}

// DeprecationReference says what a deprecation entry is about: the package
// (Schema olm.package, no Name), a channel or a bundle (by Name).
type DeprecationReference struct {
	Schema string `json:"schema"`
	Name   string `json:"name,omitempty"`
}

// Blob is a blob of a schema this package does not interpret, kept verbatim.
type Blob struct {
	Schema  string
	Package string
	Name    string
	Raw     json.RawMessage
	Pos     Position
}

// Version is the bundle's version from its olm.package property (nil if missing or invalid).
func (b *Bundle) Version() *semver.Version { return b.version }

// VersionString is the bundle's version, or "" when it has none.
func (b *Bundle) VersionString() string {
	if b.version == nil {
		return ""
	}
	return b.version.Original()
}

// GVKs are the APIs the bundle provides (olm.gvk properties).
func (b *Bundle) GVKs() []GVK { return b.provides }

// RequiredPackages are the bundle's olm.package.required properties.
func (b *Bundle) RequiredPackages() []PackageRequirement { return b.requiresPkgs }

// RequiredGVKs are the bundle's olm.gvk.required properties.
func (b *Bundle) RequiredGVKs() []GVK { return b.requiresGVKs }

// PropertyValues returns the raw values of every property of type typ, in order.
func (b *Bundle) PropertyValues(typ string) []json.RawMessage {
	var out []json.RawMessage
	for _, p := range b.Properties {
		if p.Type == typ {
			out = append(out, p.Value)
		}
	}
	return out
}

// Channel returns the package's channel called name, or nil.
func (p *Package) Channel(name string) *Channel {
	for _, ch := range p.Channels {
		if ch.Name == name {
			return ch
		}
	}
	return nil
}

// Bundle returns the package's bundle called name, or nil.
func (p *Package) Bundle(name string) *Bundle {
	if p.bundles != nil {
		return p.bundles[name]
	}
	for _, b := range p.Bundles {
		if b.Name == name {
			return b
		}
	}
	return nil
}

// ChannelNames returns the names of the package's channels, sorted.
func (p *Package) ChannelNames() []string {
	names := make([]string, len(p.Channels))
	for i, ch := range p.Channels {
		names[i] = ch.Name
	}
	slices.Sort(names)
	return names
}

// Entry returns the channel's entry for the bundle called name, or nil.
func (c *Channel) Entry(name string) *ChannelEntry {
	for i := range c.Entries {
		if c.Entries[i].Name == name {
			return &c.Entries[i]
		}
	}
	return nil
}

// index derives the bundle's version and dependency data from its properties.
func (b *Bundle) index() error {
	b.version, b.provides, b.requiresPkgs, b.requiresGVKs = nil, nil, nil, nil
	var pkgProps int
	for i, p := range b.Properties {
		if p.Type == "" {
			return fmt.Errorf("properties[%d] has no type", i)
		}
		if len(p.Value) == 0 || string(p.Value) == "null" {
			return fmt.Errorf("properties[%d] (%s) has no value", i, p.Type)
		}
		switch p.Type {
		case PropertyPackage:
			pkgProps++
			var v struct {
				PackageName string `json:"packageName"`
				Version     string `json:"version"`
			}
			if err := json.Unmarshal(p.Value, &v); err != nil {
				return fmt.Errorf("properties[%d] (%s): %w", i, p.Type, err)
			}
			if v.PackageName != b.Package {
				return fmt.Errorf("properties[%d] (%s) names package %q, but the bundle belongs to package %q", i, p.Type, v.PackageName, b.Package)
			}
			ver, err := semver.StrictNewVersion(v.Version)
			if err != nil {
				return fmt.Errorf("properties[%d] (%s): version %q is not semantic versioning (major.minor.patch): %w", i, p.Type, v.Version, err)
			}
			b.version = ver
		case PropertyGVK, PropertyGVKRequired:
			var g GVK
			if err := json.Unmarshal(p.Value, &g); err != nil {
				return fmt.Errorf("properties[%d] (%s): %w", i, p.Type, err)
			}
			if g.Version == "" || g.Kind == "" {
				return fmt.Errorf("properties[%d] (%s): version and kind must be set, got %q", i, p.Type, g.String())
			}
			if p.Type == PropertyGVK {
				b.provides = append(b.provides, g)
			} else {
				b.requiresGVKs = append(b.requiresGVKs, g)
			}
		case PropertyPackageRequired:
			var r PackageRequirement
			if err := json.Unmarshal(p.Value, &r); err != nil {
				return fmt.Errorf("properties[%d] (%s): %w", i, p.Type, err)
			}
			if r.PackageName == "" {
				return fmt.Errorf("properties[%d] (%s): packageName must be set", i, p.Type)
			}
			if _, err := ParseSkipRange(r.VersionRange); err != nil {
				return fmt.Errorf("properties[%d] (%s): versionRange: %w", i, p.Type, err)
			}
			b.requiresPkgs = append(b.requiresPkgs, r)
		}
	}
	if pkgProps != 1 {
		return fmt.Errorf("a bundle needs exactly one %s property, found %d", PropertyPackage, pkgProps)
	}
	return nil
}

// ---- JSON ----

func (f fields) take(key string, into any) error {
	raw, ok := f[key]
	if !ok {
		return nil
	}
	delete(f, key)
	if string(raw) == "null" {
		return nil
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("field %q: %w", key, err)
	}
	return nil
}

// object builds the JSON object of a blob: the unknown fields, then the known ones.
func (f fields) object(known map[string]any) ([]byte, error) {
	out := make(map[string]any, len(f)+len(known))
	for k, v := range f {
		out[k] = v
	}
	for k, v := range known {
		if v == nil {
			continue
		}
		out[k] = v
	}
	return marshal(out)
}

func marshal(v any) ([]byte, error) {
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return []byte(strings.TrimSuffix(sb.String(), "\n")), nil
}

func decodeFields(data []byte) (fields, error) {
	var f fields
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	if f == nil {
		return nil, fmt.Errorf("expected a JSON object")
	}
	return f, nil
}

func nonEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// UnmarshalJSON reads an olm.package blob, keeping unknown fields.
func (p *Package) UnmarshalJSON(data []byte) error {
	f, err := decodeFields(data)
	if err != nil {
		return err
	}
	return p.fromFields(f)
}

func (p *Package) fromFields(f fields) error {
	delete(f, "schema")
	if err := f.take("name", &p.Name); err != nil {
		return err
	}
	if err := f.take("defaultChannel", &p.DefaultChannel); err != nil {
		return err
	}
	if err := f.take("description", &p.Description); err != nil {
		return err
	}
	p.extra = f
	return nil
}

// MarshalJSON writes the olm.package blob (without its channels and bundles).
func (p *Package) MarshalJSON() ([]byte, error) {
	return p.extra.object(map[string]any{
		"schema":         SchemaPackage,
		"name":           p.Name,
		"defaultChannel": p.DefaultChannel,
		"description":    nonEmpty(p.Description),
	})
}

// UnmarshalJSON reads an olm.channel blob, keeping unknown fields.
func (c *Channel) UnmarshalJSON(data []byte) error {
	f, err := decodeFields(data)
	if err != nil {
		return err
	}
	return c.fromFields(f)
}

func (c *Channel) fromFields(f fields) error {
	delete(f, "schema")
	if err := f.take("package", &c.Package); err != nil {
		return err
	}
	if err := f.take("name", &c.Name); err != nil {
		return err
	}
	if err := f.take("entries", &c.Entries); err != nil {
		return err
	}
	c.extra = f
	return nil
}

// MarshalJSON writes the olm.channel blob.
func (c *Channel) MarshalJSON() ([]byte, error) {
	entries := c.Entries
	if entries == nil {
		entries = []ChannelEntry{}
	}
	return c.extra.object(map[string]any{
		"schema":  SchemaChannel,
		"package": c.Package,
		"name":    c.Name,
		"entries": entries,
	})
}

// UnmarshalJSON reads a channel entry, keeping unknown fields.
func (e *ChannelEntry) UnmarshalJSON(data []byte) error {
	f, err := decodeFields(data)
	if err != nil {
		return err
	}
	return e.fromFields(f)
}

func (e *ChannelEntry) fromFields(f fields) error {
	if err := f.take("name", &e.Name); err != nil {
		return err
	}
	if err := f.take("replaces", &e.Replaces); err != nil {
		return err
	}
	if err := f.take("skips", &e.Skips); err != nil {
		return err
	}
	if err := f.take("skipRange", &e.SkipRange); err != nil {
		return err
	}
	if len(f) > 0 {
		e.extra = f
	}
	return nil
}

// MarshalJSON writes the channel entry.
func (e ChannelEntry) MarshalJSON() ([]byte, error) {
	var skips any
	if len(e.Skips) > 0 {
		skips = e.Skips
	}
	return e.extra.object(map[string]any{
		"name":      e.Name,
		"replaces":  nonEmpty(e.Replaces),
		"skips":     skips,
		"skipRange": nonEmpty(e.SkipRange),
	})
}

// UnmarshalJSON reads an olm.bundle blob, keeping unknown fields.
func (b *Bundle) UnmarshalJSON(data []byte) error {
	f, err := decodeFields(data)
	if err != nil {
		return err
	}
	return b.fromFields(f)
}

func (b *Bundle) fromFields(f fields) error {
	delete(f, "schema")
	if err := f.take("package", &b.Package); err != nil {
		return err
	}
	if err := f.take("name", &b.Name); err != nil {
		return err
	}
	if err := f.take("image", &b.Image); err != nil {
		return err
	}
	if err := f.take("properties", &b.Properties); err != nil {
		return err
	}
	if err := f.take("relatedImages", &b.RelatedImages); err != nil {
		return err
	}
	b.extra = f
	return nil
}

// MarshalJSON writes the olm.bundle blob.
func (b *Bundle) MarshalJSON() ([]byte, error) {
	props := b.Properties
	if props == nil {
		props = []Property{}
	}
	var related any
	if len(b.RelatedImages) > 0 {
		related = b.RelatedImages
	}
	return b.extra.object(map[string]any{
		"schema":        SchemaBundle,
		"package":       b.Package,
		"name":          b.Name,
		"image":         nonEmpty(b.Image),
		"properties":    props,
		"relatedImages": related,
	})
}

// UnmarshalJSON reads an olm.deprecations blob, keeping unknown fields.
func (d *Deprecations) UnmarshalJSON(data []byte) error {
	f, err := decodeFields(data)
	if err != nil {
		return err
	}
	return d.fromFields(f)
}

func (d *Deprecations) fromFields(f fields) error {
	delete(f, "schema")
	if err := f.take("package", &d.Package); err != nil {
		return err
	}
	if err := f.take("entries", &d.Entries); err != nil {
		return err
	}
	d.extra = f
	return nil
}

// MarshalJSON writes the olm.deprecations blob.
func (d *Deprecations) MarshalJSON() ([]byte, error) {
	return d.extra.object(map[string]any{
		"schema":  SchemaDeprecations,
		"package": d.Package,
		"entries": d.Entries,
	})
}

// UnmarshalJSON reads a deprecation entry, keeping unknown fields.
func (e *DeprecationEntry) UnmarshalJSON(data []byte) error {
	f, err := decodeFields(data)
	if err != nil {
		return err
	}
	return e.fromFields(f)
}

func (e *DeprecationEntry) fromFields(f fields) error {
	if err := f.take("reference", &e.Reference); err != nil {
		return err
	}
	if err := f.take("message", &e.Message); err != nil {
		return err
	}
	if len(f) > 0 {
		e.extra = f
	}
	return nil
}

// MarshalJSON writes the deprecation entry.
func (e DeprecationEntry) MarshalJSON() ([]byte, error) {
	return e.extra.object(map[string]any{
		"reference": e.Reference,
		"message":   e.Message,
	})
}

// MarshalJSON writes the blob as it was read.
func (b *Blob) MarshalJSON() ([]byte, error) {
	if len(b.Raw) == 0 {
		return []byte("{}"), nil
	}
	return b.Raw, nil
}
