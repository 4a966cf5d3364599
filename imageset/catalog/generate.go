package catalog

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/gapmirror/gapmirror/imageset/fbc"
)

// GenSpec describes a synthetic catalog for tests and benchmarks. Zero
// fields take the defaults noted.
type GenSpec struct {
	// Seed makes the catalog; equal specs give equal catalogs.
	Seed uint64
	// Packages is the number of packages (default 3).
	Packages int
	// Bundles is the number of bundles per package (default 12).
	Bundles int
	// Channels is the number of channels per package (default 3): "stable"
	// (every release), "fast" (releases and release candidates), then one
	// channel per recent minor ("stable-1.4") or, lacking minors, windows
	// ("candidate-N").
	Channels int
	// SkipRatio is the share of entries that skip their predecessor and
	// replace the one before it (default 0.15; negative for none).
	SkipRatio float64
	// SkipRangeRatio is the share of entries with a skipRange over the
	// earlier versions of their minor (default 0.3; negative for none).
	SkipRangeRatio float64
	// PrereleaseRatio is the share of minors that ship a release candidate
	// first, only in "fast" (default 0.2; negative for none).
	PrereleaseRatio float64
	// DependencyRatio is the share of bundles (of packages after the first)
	// requiring an earlier package, by olm.package.required or
	// olm.gvk.required (default 0.1; negative for none).
	DependencyRatio float64
	// Deprecations adds an olm.deprecations blob to every third package.
	Deprecations bool
	// Others adds a blob of a custom schema to every package.
	Others bool
	// RelatedImages is the number of related images per bundle besides the
	// operator image (default 2); operand images are shared within a minor.
	RelatedImages int
	// ObjectBytes adds an olm.bundle.object of about this size to each bundle.
	ObjectBytes int
	// Registry is the host of every image (default "registry.example.com").
	Registry string
}

// customSchema is the schema of the blobs GenSpec.Others adds.
const customSchema = "example.com.release-notes"

func (s GenSpec) withDefaults() GenSpec {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	ratio := func(v *float64, d float64) {
		switch {
		case *v == 0:
			*v = d
		case *v < 0:
			*v = 0
		case *v > 1:
			*v = 1
		}
	}
	def(&s.Packages, 3)
	def(&s.Bundles, 12)
	def(&s.Channels, 3)
	if s.RelatedImages == 0 {
		s.RelatedImages = 2
	}
	s.RelatedImages = max(s.RelatedImages, 0)
	ratio(&s.SkipRatio, 0.15)
	ratio(&s.SkipRangeRatio, 0.3)
	ratio(&s.PrereleaseRatio, 0.2)
	ratio(&s.DependencyRatio, 0.1)
	if s.Registry == "" {
		s.Registry = "registry.example.com"
	}
	return s
}

// GenPackageName is the name Generate gives package i.
func GenPackageName(i int) string { return fmt.Sprintf("operator-%03d", i) }

// Generate builds a synthetic, valid catalog: packages with several channels
// sharing bundles, upgrade graphs with replaces, skips and skipRange,
// release candidates, dependencies between packages, deprecations and custom
// blobs. It is deterministic for a given spec.
func Generate(spec GenSpec) (*fbc.Catalog, error) {
	spec = spec.withDefaults()
	rng := rand.New(rand.NewPCG(spec.Seed, 0x9e3779b97f4a7c15))
	var pkgs []*fbc.Package
	var versionsOf [][]string
	for pi := range spec.Packages {
		p, versions := genPackage(spec, rng, pi, versionsOf)
		pkgs = append(pkgs, p)
		versionsOf = append(versionsOf, versions)
	}
	return fbc.NewCatalog(pkgs, nil)
}

type genVersion struct {
	major, minor, patch int
	rc                  bool
}

func (v genVersion) String() string {
	if v.rc {
		return fmt.Sprintf("%d.%d.%d-rc.1", v.major, v.minor, v.patch)
	}
	return fmt.Sprintf("%d.%d.%d", v.major, v.minor, v.patch)
}

func genPackage(spec GenSpec, rng *rand.Rand, pi int, versionsOf [][]string) (*fbc.Package, []string) {
	name := GenPackageName(pi)
	// Versions, oldest first.
	var versions []genVersion
	cur := genVersion{major: 1}
	for len(versions) < spec.Bundles {
		versions = append(versions, cur)
		switch x := rng.Float64(); {
		case x < 0.04:
			cur = genVersion{major: cur.major + 1}
		case x < 0.25:
			cur = genVersion{major: cur.major, minor: cur.minor + 1}
		default:
			cur = genVersion{major: cur.major, minor: cur.minor, patch: cur.patch + 1}
		}
		if cur.patch == 0 && rng.Float64() < spec.PrereleaseRatio && len(versions) < spec.Bundles {
			rc := cur
			rc.rc = true
			versions = append(versions, rc)
		}
	}
	bundleName := func(v genVersion) string { return name + ".v" + v.String() }

	p := &fbc.Package{Name: name, DefaultChannel: "stable", Description: "Synthetic operator " + name}
	var names []string
	for i, v := range versions {
		b := &fbc.Bundle{Package: name, Name: bundleName(v), Image: genImage(spec, name+"/bundle", v.String())}
		props := []fbc.Property{
			genProperty(fbc.PropertyPackage, map[string]string{"packageName": name, "version": v.String()}),
			genProperty(fbc.PropertyGVK, fbc.GVK{Group: name + ".example.com", Version: "v1", Kind: "Widget"}),
		}
		if v.major >= 2 {
			props = append(props, genProperty(fbc.PropertyGVK, fbc.GVK{Group: name + ".example.com", Version: "v2", Kind: "Widget"}))
		}
		if pi > 0 && rng.Float64() < spec.DependencyRatio {
			dep := rng.IntN(pi)
			depName := GenPackageName(dep)
			if rng.IntN(2) == 0 {
				dv := versionsOf[dep][rng.IntN(len(versionsOf[dep]))]
				props = append(props, genProperty(fbc.PropertyPackageRequired, fbc.PackageRequirement{PackageName: depName, VersionRange: ">=" + dv}))
			} else {
				props = append(props, genProperty(fbc.PropertyGVKRequired, fbc.GVK{Group: depName + ".example.com", Version: "v1", Kind: "Widget"}))
			}
		}
		props = append(props, genProperty(fbc.PropertyCSVMetadata, map[string]any{
			"displayName": "Operator " + name,
			"installModes": []map[string]any{
				{"type": "OwnNamespace", "supported": true},
				{"type": "AllNamespaces", "supported": i%2 == 0},
			},
		}))
		if spec.ObjectBytes > 0 {
			doc := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q},"data":{"pad":%q}}`, b.Name, strings.Repeat("x", spec.ObjectBytes))
			props = append(props, genProperty(fbc.PropertyBundleObject, map[string]string{"data": base64.StdEncoding.EncodeToString([]byte(doc))}))
		}
		b.Properties = props
		b.RelatedImages = []fbc.RelatedImage{{Name: "operator", Image: genImage(spec, name+"/operator", v.String())}}
		for k := range spec.RelatedImages {
			b.RelatedImages = append(b.RelatedImages, fbc.RelatedImage{
				Name:  fmt.Sprintf("operand-%d", k),
				Image: genImage(spec, fmt.Sprintf("%s/operand-%d", name, k), fmt.Sprintf("%d.%d", v.major, v.minor)),
			})
		}
		b.RelatedImages = append(b.RelatedImages, fbc.RelatedImage{Name: "bundle", Image: b.Image})
		p.Bundles = append(p.Bundles, b)
		names = append(names, v.String())
	}

	// Channels: stable (releases), fast (everything), then per-minor or window channels.
	var releases []genVersion
	for _, v := range versions {
		if !v.rc {
			releases = append(releases, v)
		}
	}
	type chanDef struct {
		name    string
		members []genVersion
	}
	defs := []chanDef{{"stable", releases}}
	if spec.Channels >= 2 {
		defs = append(defs, chanDef{"fast", versions})
	}
	var minors [][]genVersion
	for _, v := range releases {
		if n := len(minors); n > 0 && minors[n-1][0].major == v.major && minors[n-1][0].minor == v.minor {
			minors[n-1] = append(minors[n-1], v)
		} else {
			minors = append(minors, []genVersion{v})
		}
	}
	for k := 2; k < spec.Channels; k++ {
		if mi := len(minors) - (k - 1); mi >= 0 {
			m := minors[mi]
			defs = append(defs, chanDef{fmt.Sprintf("stable-%d.%d", m[0].major, m[0].minor), m})
			continue
		}
		lo := rng.IntN(len(releases))
		hi := lo + 1 + rng.IntN(len(releases)-lo)
		defs = append(defs, chanDef{fmt.Sprintf("candidate-%d", k), releases[lo:hi]})
	}
	indexOf := map[string]int{}
	for i, v := range versions {
		indexOf[v.String()] = i
	}
	for _, d := range defs {
		ch := &fbc.Channel{Package: name, Name: d.name}
		lastSkip := true
		for i, v := range d.members {
			e := fbc.ChannelEntry{Name: bundleName(v)}
			switch {
			case i == 0:
				if j := indexOf[v.String()]; j > 0 {
					e.Replaces = bundleName(versions[j-1]) // a bundle outside the channel
				}
				lastSkip = true
			case i >= 2 && !lastSkip && rng.Float64() < spec.SkipRatio:
				e.Replaces = bundleName(d.members[i-2])
				e.Skips = []string{bundleName(d.members[i-1])}
				lastSkip = true
			default:
				e.Replaces = bundleName(d.members[i-1])
				lastSkip = false
			}
			if v.patch > 0 && !v.rc && rng.Float64() < spec.SkipRangeRatio {
				e.SkipRange = fmt.Sprintf(">=%d.%d.0 <%s", v.major, v.minor, v)
			}
			ch.Entries = append(ch.Entries, e)
		}
		p.Channels = append(p.Channels, ch)
	}

	if spec.Deprecations && pi%3 == 0 {
		d := &fbc.Deprecations{Package: name}
		if pi%9 == 0 {
			d.Entries = append(d.Entries, fbc.DeprecationEntry{Reference: fbc.DeprecationReference{Schema: fbc.SchemaPackage}, Message: name + " is end of life"})
		}
		if len(defs) >= 2 {
			d.Entries = append(d.Entries, fbc.DeprecationEntry{Reference: fbc.DeprecationReference{Schema: fbc.SchemaChannel, Name: defs[1].name}, Message: "use stable"})
		}
		for _, v := range versions[:min(2, len(versions))] {
			d.Entries = append(d.Entries, fbc.DeprecationEntry{Reference: fbc.DeprecationReference{Schema: fbc.SchemaBundle, Name: bundleName(v)}, Message: "upgrade to a newer version"})
		}
		p.Deprecations = d
	}
	if spec.Others {
		raw, _ := json.Marshal(map[string]string{"schema": customSchema, "package": name, "name": name + "-notes", "notes": "synthetic"})
		p.Others = append(p.Others, &fbc.Blob{Schema: customSchema, Package: name, Name: name + "-notes", Raw: raw})
	}
	return p, names
}

func genProperty(typ string, v any) fbc.Property {
	raw, _ := json.Marshal(v) // plain maps and structs always marshal
	return fbc.Property{Type: typ, Value: raw}
}

func genImage(spec GenSpec, repo, key string) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%d/%s/%s", spec.Seed, repo, key))
	return fmt.Sprintf("%s/%s@sha256:%s", spec.Registry, repo, hex.EncodeToString(sum[:]))
}
