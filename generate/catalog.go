package generate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	"sigs.k8s.io/yaml"

	"github.com/gapmirror/gapmirror/imageset"
)

// catalogSourceNamespace makes a CatalogSource available to all namespaces.
const catalogSourceNamespace = "openshift-marketplace"

// maxNameLen bounds generated catalog names: a CatalogSource name becomes a
// Service name, which is a DNS-1035 label of at most 63 characters.
const maxNameLen = 63

// suffixLen is how many characters of a tag or digest go into a derived
// catalog name, as oc-mirror does.
const suffixLen = 12

var dns1035Label = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

// Catalog is one mirrored operator catalog to write a CatalogSource and a
// ClusterCatalog for.
type Catalog struct {
	// Name is the object name; empty derives cs-<repo>-<tag> and
	// cc-<repo>-<tag> from Image the way oc-mirror does.
	Name string
	// Image is the mirrored catalog reference, normally by tag, e.g.
	// registry.airgap:5000/mirror/redhat/redhat-operator-index:v4.18.
	Image string
	// Digest is the mirrored catalog's manifest digest (sha256:…).
	Digest string
	// Template is a CatalogSource YAML (targetCatalogSourceTemplate) whose
	// other fields the generated CatalogSource keeps; nil for none. A run
	// passes the copy its Plan carries, so nothing is read from disk.
	Template []byte
	// TemplatePath names the template in messages. When Template is nil,
	// the template is read from this file (empty: no template).
	TemplatePath string
	// Origin is the catalog as the configuration names it; only for messages.
	Origin string
}

// catalogSource is an operators.coreos.com/v1alpha1 CatalogSource.
type catalogSource struct {
	typeMeta
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		SourceType string `json:"sourceType"`
		Image      string `json:"image"`
	} `json:"spec"`
}

// clusterCatalog is an olm.operatorframework.io/v1 ClusterCatalog.
type clusterCatalog struct {
	typeMeta
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		Source struct {
			Type  string `json:"type"`
			Image struct {
				Ref string `json:"ref"`
			} `json:"image"`
		} `json:"source"`
	} `json:"spec"`
}

// CatalogsFromSet returns one Catalog for every operator catalog image of
// set as mirrored under root, sorted by image. Callers add a Template
// (gapmirror's run: the one its Plan carries for the catalog's digest).
func CatalogsFromSet(set *imageset.Set, root string) ([]Catalog, error) {
	if set == nil {
		return nil, nil
	}
	r, err := normaliseRoot(root)
	if err != nil {
		return nil, err
	}
	var out []Catalog
	for _, img := range set.Images {
		if img.Kind != imageset.KindOperatorCatalog {
			continue
		}
		out = append(out, Catalog{Image: r + "/" + img.Destination, Digest: img.Digest, Origin: img.Origin})
	}
	slices.SortFunc(out, func(a, b Catalog) int { return strings.Compare(a.Image, b.Image) })
	return out, nil
}

// CatalogSource returns the file cs-<name>.yaml holding the CatalogSource for
// c, built on its template when it has one.
func CatalogSource(c Catalog, meta Meta) (Files, error) {
	ref, err := parseCatalogImage(c)
	if err != nil {
		return nil, err
	}
	name, err := catalogName(c, "cs-", ref)
	if err != nil {
		return nil, err
	}
	image := c.Image
	if _, tagged := ref.(reference.Tagged); !tagged {
		if _, digested := ref.(reference.Digested); !digested {
			d, err := catalogDigest(c, ref)
			if err != nil {
				return nil, err
			}
			image = ref.Name() + "@" + d.String()
		}
	}

	var data []byte
	if c.Template != nil || c.TemplatePath != "" {
		raw := c.Template
		if raw == nil {
			if raw, err = os.ReadFile(c.TemplatePath); err != nil {
				return nil, fmt.Errorf("CatalogSource template (targetCatalogSourceTemplate): %w", err)
			}
		}
		data, err = catalogSourceFromTemplate(raw, c.TemplatePath, name, image, meta)
		if err != nil {
			return nil, err
		}
	} else {
		var cs catalogSource
		cs.typeMeta = typeMeta{APIVersion: "operators.coreos.com/v1alpha1", Kind: "CatalogSource"}
		cs.Metadata = objectMeta{Name: name, Namespace: catalogSourceNamespace, Annotations: meta.annotations()}
		cs.Spec.SourceType = "grpc"
		cs.Spec.Image = image
		data, err = yaml.Marshal(cs)
		if err != nil {
			return nil, fmt.Errorf("rendering CatalogSource %s: %w", name, err)
		}
	}
	return Files{"cs-" + strings.TrimPrefix(name, "cs-") + ".yaml": data}, nil
}

// ClusterCatalog returns the file cc-<name>.yaml holding the ClusterCatalog
// for c; its image is pinned by digest.
func ClusterCatalog(c Catalog, meta Meta) (Files, error) {
	ref, err := parseCatalogImage(c)
	if err != nil {
		return nil, err
	}
	name, err := catalogName(c, "cc-", ref)
	if err != nil {
		return nil, err
	}
	d, err := catalogDigest(c, ref)
	if err != nil {
		return nil, err
	}
	var cc clusterCatalog
	cc.typeMeta = typeMeta{APIVersion: "olm.operatorframework.io/v1", Kind: "ClusterCatalog"}
	cc.Metadata = objectMeta{Name: name, Annotations: meta.annotations()}
	cc.Spec.Source.Type = "Image"
	cc.Spec.Source.Image.Ref = ref.Name() + "@" + d.String()
	data, err := yaml.Marshal(cc)
	if err != nil {
		return nil, fmt.Errorf("rendering ClusterCatalog %s: %w", name, err)
	}
	return Files{"cc-" + strings.TrimPrefix(name, "cc-") + ".yaml": data}, nil
}

// parseCatalogImage parses c.Image, which must name its registry.
func parseCatalogImage(c Catalog) (reference.Named, error) {
	img := strings.TrimPrefix(c.Image, "docker://")
	ref, err := reference.ParseNamed(img)
	if err != nil {
		return nil, fmt.Errorf("catalog %s: mirrored image %q is not a full image reference (registry/repository:tag): %w", c.label(), c.Image, err)
	}
	return ref, nil
}

// catalogDigest returns the digest of the mirrored catalog, from c.Digest or
// the image reference.
func catalogDigest(c Catalog, ref reference.Named) (digest.Digest, error) {
	var fromRef digest.Digest
	if d, ok := ref.(reference.Digested); ok {
		fromRef = d.Digest()
	}
	if c.Digest == "" {
		if fromRef == "" {
			return "", fmt.Errorf("catalog %s: no digest known for %s: the mirror step must record the catalog's digest", c.label(), c.Image)
		}
		return fromRef, nil
	}
	d, err := digest.Parse(c.Digest)
	if err != nil {
		return "", fmt.Errorf("catalog %s: digest %q: %w", c.label(), c.Digest, err)
	}
	if fromRef != "" && fromRef != d {
		return "", fmt.Errorf("catalog %s: image %s and digest %s disagree", c.label(), c.Image, c.Digest)
	}
	return d, nil
}

// catalogName returns c.Name, checked, or prefix+<last path component>-<suffix>
// where suffix is the first 12 characters of the tag (else of the digest's
// hex, else "0"), made a DNS-1035 label of at most 63 characters.
func catalogName(c Catalog, prefix string, ref reference.Named) (string, error) {
	if c.Name != "" {
		if len(c.Name) > maxNameLen || !dns1035Label.MatchString(c.Name) {
			return "", fmt.Errorf("catalog %s: name %q must be at most %d lower-case letters, digits and '-', starting with a letter and not ending with '-'", c.label(), c.Name, maxNameLen)
		}
		return c.Name, nil
	}
	var suffix string
	if t, ok := ref.(reference.Tagged); ok {
		suffix = t.Tag()
	} else if d, ok := ref.(reference.Digested); ok {
		suffix = d.Digest().Encoded()
	} else if d, err := digest.Parse(c.Digest); err == nil {
		suffix = d.Encoded()
	}
	if len(suffix) > suffixLen {
		suffix = suffix[:suffixLen]
	}
	suffix = strings.Trim(toLabel(suffix), "-")
	if suffix == "" {
		suffix = "0"
	}
	path := reference.Path(ref)
	repo := strings.Trim(toLabel(path[strings.LastIndex(path, "/")+1:]), "-")
	if room := maxNameLen - len(prefix) - 1 - len(suffix); len(repo) > room {
		repo = strings.TrimRight(repo[:room], "-")
	}
	name := prefix + repo + "-" + suffix
	if repo == "" {
		name = prefix + suffix
	}
	if !dns1035Label.MatchString(name) {
		return "", fmt.Errorf("catalog %s: cannot derive a valid name from %s (got %q): set a name for it", c.label(), c.Image, name)
	}
	return name, nil
}

func (c Catalog) label() string {
	if c.Origin != "" {
		return c.Origin
	}
	return c.Image
}

// toLabel lower-cases s and replaces every character that may not appear in
// a DNS-1035 label with '-'.
func toLabel(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		default:
			return '-'
		}
	}, s)
}

// serverSetMetadata lists metadata fields the API server owns; a template
// copied from a live cluster must not carry them.
var serverSetMetadata = []string{"creationTimestamp", "resourceVersion", "uid", "generation", "managedFields", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"}

// catalogSourceFromTemplate renders the CatalogSource in the template raw
// (named path in messages) with name, image, sourceType grpc and, when it
// has none, the openshift-marketplace namespace; every other field is kept.
func catalogSourceFromTemplate(raw []byte, path, name, image string, meta Meta) ([]byte, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("CatalogSource template %s (targetCatalogSourceTemplate): %s", path, fmt.Sprintf(format, args...))
	}
	docs := splitDocuments(raw)
	if len(docs) != 1 {
		return nil, fail("must hold exactly one CatalogSource, found %d YAML documents", len(docs))
	}
	js, err := yaml.YAMLToJSON(docs[0])
	if err != nil {
		return nil, fail("not valid YAML: %v", err)
	}
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, fail("must be a YAML mapping (a CatalogSource object)")
	}
	if v := obj["apiVersion"]; v != "operators.coreos.com/v1alpha1" {
		return nil, fail("apiVersion is %v, want operators.coreos.com/v1alpha1", v)
	}
	if v := obj["kind"]; v != "CatalogSource" {
		return nil, fail("kind is %v, want CatalogSource", v)
	}
	metadata, err := objectField(obj, "metadata")
	if err != nil {
		return nil, fail("%v", err)
	}
	spec, err := objectField(obj, "spec")
	if err != nil {
		return nil, fail("%v", err)
	}
	if st, ok := spec["sourceType"]; ok && st != nil && st != "grpc" && st != "" {
		return nil, fail("spec.sourceType is %v: only grpc catalogs can serve a mirrored image; remove it or set grpc", st)
	}
	if cm, ok := spec["configMap"]; ok && cm != "" && cm != nil {
		return nil, fail("spec.configMap is set: a catalog served from an image must not name a ConfigMap; remove spec.configMap")
	}
	if a, ok := spec["address"]; ok && a != "" && a != nil {
		return nil, fail("spec.address is set: the mirrored image replaces it; remove spec.address")
	}
	if v, ok := metadata["annotations"]; ok && v != nil {
		if _, isMap := v.(map[string]any); !isMap {
			return nil, fail("metadata.annotations must be a mapping")
		}
	}

	delete(obj, "status")
	for _, f := range serverSetMetadata {
		delete(metadata, f)
	}
	metadata["name"] = name
	if ns, _ := metadata["namespace"].(string); ns == "" {
		metadata["namespace"] = catalogSourceNamespace
	}
	annotations, _ := metadata["annotations"].(map[string]any)
	if annotations == nil {
		annotations = map[string]any{}
	}
	for k, v := range meta.annotations() {
		annotations[k] = v
	}
	metadata["annotations"] = annotations
	spec["sourceType"] = "grpc"
	spec["image"] = image

	data, err := yaml.Marshal(obj)
	if err != nil {
		return nil, fail("rendering: %v", err)
	}
	return data, nil
}

// objectField returns obj[key] as a mapping, creating it when absent.
func objectField(obj map[string]any, key string) (map[string]any, error) {
	v, ok := obj[key]
	if !ok || v == nil {
		m := map[string]any{}
		obj[key] = m
		return m, nil
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		return nil, fmt.Errorf("%s must be a mapping", key)
	}
	return m, nil
}
