package helm

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/distribution/reference"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"
)

// builtinImagePaths are where pod specs keep images: workloads with a pod
// template, bare pods, and CronJobs (which oc-mirror misses).
var builtinImagePaths = []string{
	"{.spec.template.spec.initContainers[*].image}",
	"{.spec.template.spec.containers[*].image}",
	"{.spec.initContainers[*].image}",
	"{.spec.containers[*].image}",
	"{.spec.jobTemplate.spec.template.spec.initContainers[*].image}",
	"{.spec.jobTemplate.spec.template.spec.containers[*].image}",
}

// Load reads a chart from a directory or a .tgz file.
func Load(p string) (*chart.Chart, error) {
	ch, err := loader.Load(p)
	if err != nil {
		return nil, fmt.Errorf("cannot load chart %s: %w", p, err)
	}
	return ch, nil
}

// LoadArchive reads a chart from the bytes of a .tgz.
func LoadArchive(data []byte) (*chart.Chart, error) {
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("not a helm chart archive: %w", err)
	}
	return ch, nil
}

// Repack rewrites a chart archive with every time zeroed (tar entries and
// the gzip header), keeping names, modes, contents and their order.
func Repack(tgz []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return nil, fmt.Errorf("not a chart archive: %w", err)
	}
	tr := tar.NewReader(zr)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("not a chart archive: %w", err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("not a chart archive: %w", err)
		}
		out := &tar.Header{Name: h.Name, Mode: h.Mode, Size: int64(len(body)), Typeflag: h.Typeflag, Linkname: h.Linkname, ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(out); err != nil {
			return nil, err
		}
		if _, err := tw.Write(body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ImagePath is a compiled JSONPath expression locating images in rendered objects.
type ImagePath struct {
	expr string
	jp   *jsonpath.JSONPath
	// user paths may point at values that are not images (all env vars).
	user bool
}

// CompileImagePath parses a JSONPath expression such as
// {.spec.template.spec.containers[*].env[*].value}; braces are optional.
func CompileImagePath(expr string) (ImagePath, error) {
	return compile(expr, true)
}

func compile(expr string, user bool) (ImagePath, error) {
	e := strings.TrimSpace(expr)
	if !strings.Contains(e, "{") {
		e = "{" + e + "}"
	}
	jp := jsonpath.New("imagePath").AllowMissingKeys(true)
	if err := jp.Parse(e); err != nil {
		return ImagePath{}, fmt.Errorf("%q is not a JSONPath expression: %w", expr, err)
	}
	return ImagePath{expr: e, jp: jp, user: user}, nil
}

// Found is one image reference a rendered chart names.
type Found struct {
	Image string
	// Object is Kind/name of the rendered object, e.g. "CronJob/cleanup".
	Object string
	// Template is the chart file that rendered it.
	Template string
}

// Images renders the chart archive (.tgz) with its default values (no
// cluster access, as `helm template` does) and returns every image its
// objects name under the built-in paths and the extra ones, each once, in a
// stable order. A value at an extra path counts only if it looks like an
// image reference.
func Images(ctx context.Context, tgz []byte, extra []ImagePath) ([]Found, error) {
	docs, err := render(ctx, tgz)
	if err != nil {
		return nil, err
	}
	paths := make([]ImagePath, 0, len(builtinImagePaths)+len(extra))
	for _, e := range builtinImagePaths {
		p, err := compile(e, false)
		if err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	paths = append(paths, extra...)
	seen := map[string]bool{}
	var out []Found
	for _, d := range docs {
		for _, p := range paths {
			results, err := p.jp.FindResults(d.Object)
			if err != nil {
				// A path that meets a value of another shape (a string where it expects a list) finds nothing there.
				continue
			}
			for _, rs := range results {
				for _, v := range rs {
					s, ok := stringValue(v)
					if !ok || s == "" || (p.user && !LooksLikeImage(s)) {
						continue
					}
					key := s + "\x00" + d.Name()
					if seen[key] {
						continue
					}
					seen[key] = true
					out = append(out, Found{Image: s, Object: d.Name(), Template: d.Template})
				}
			}
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Image < out[b].Image })
	return out, nil
}

func stringValue(v reflect.Value) (string, bool) {
	for v.IsValid() && (v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) {
		if v.IsNil() {
			return "", false
		}
		v = v.Elem()
	}
	if !v.IsValid() || v.Kind() != reflect.String {
		return "", false
	}
	return strings.TrimSpace(v.String()), true
}

// LooksLikeImage tells image references from other strings found at a
// user's path (env values such as "true", "8080" or a URL): it wants a
// valid reference with a registry or namespace part and a tag or digest.
func LooksLikeImage(s string) bool {
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return false
	}
	name := s
	if i := strings.IndexAny(s, "@"); i >= 0 {
		name = s[:i]
	}
	if !strings.Contains(name, "/") {
		return false
	}
	_, tagged := named.(reference.Tagged)
	_, digested := named.(reference.Digested)
	return tagged || digested
}

// document is one object of a rendered chart.
type document struct {
	Template string
	Object   map[string]any
}

// Name is Kind/name of the object.
func (d document) Name() string {
	kind, _ := d.Object["kind"].(string)
	name := ""
	if md, ok := d.Object["metadata"].(map[string]any); ok {
		name, _ = md["name"].(string)
	}
	return kind + "/" + name
}

var docSep = regexp.MustCompile(`(?m)^---[ \t]*(?:#.*)?$`)

// render renders the chart with its default values, as `helm template`
// would for a first install (Template), and parses every object it produces.
func render(ctx context.Context, tgz []byte) ([]document, error) {
	files, err := Template(ctx, tgz)
	if err != nil {
		return nil, err
	}
	var docs []document
	for _, n := range slices.Sorted(maps.Keys(files)) {
		if !strings.HasSuffix(n, ".yaml") && !strings.HasSuffix(n, ".yml") && !strings.HasSuffix(n, ".json") {
			continue // NOTES.txt and other text
		}
		for _, part := range docSep.Split(files[n], -1) {
			if strings.TrimSpace(part) == "" {
				continue
			}
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(part), &obj); err != nil {
				return nil, fmt.Errorf("template %s renders YAML that does not parse: %w", n, err)
			}
			if obj == nil {
				continue // only comments
			}
			docs = append(docs, expandList(n, obj)...)
		}
	}
	return docs, nil
}

// expandList returns the items of a kind: List object, else the object.
func expandList(template string, obj map[string]any) []document {
	items, ok := obj["items"].([]any)
	if kind, _ := obj["kind"].(string); !ok || !strings.HasSuffix(kind, "List") {
		return []document{{Template: template, Object: obj}}
	}
	var out []document
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			out = append(out, document{Template: template, Object: m})
		}
	}
	return out
}
