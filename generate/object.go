package generate

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Annotations gapmirror puts on every object it generates.
const (
	// annotationCreatedBy names the tool (and version) that wrote the object;
	// it also marks files in cluster-resources/ as gapmirror's own.
	annotationCreatedBy = "gapmirror.io/created-by"
	// annotationCreatedAt is when the object was written (RFC 3339, UTC).
	annotationCreatedAt = "gapmirror.io/created-at"
	// annotationToolVersion is the gapmirror version alone, for tools that
	// compare versions (oc-mirror writes its version the same way).
	annotationToolVersion = "gapmirror.io/tool-version"
)

// Meta is what generated objects say about the run that wrote them. Zero
// values leave the matching annotation out, so golden files stay stable.
type Meta struct {
	// ToolVersion is gapmirror's version, e.g. "v0.3.1".
	ToolVersion string
	// CreatedAt is the time of the run.
	CreatedAt time.Time
}

// annotations returns the gapmirror annotations for meta.
func (m Meta) annotations() map[string]string {
	by := "gapmirror"
	if m.ToolVersion != "" {
		by += " " + m.ToolVersion
	}
	a := map[string]string{annotationCreatedBy: by}
	if m.ToolVersion != "" {
		a[annotationToolVersion] = m.ToolVersion
	}
	if !m.CreatedAt.IsZero() {
		a[annotationCreatedAt] = m.CreatedAt.UTC().Format(time.RFC3339)
	}
	return a
}

// typeMeta is the apiVersion/kind header of every object.
type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// objectMeta is the part of Kubernetes metadata gapmirror writes.
type objectMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// marshalDocuments renders objects as one multi-document YAML stream, each
// document introduced by "---".
func marshalDocuments[T any](objs []T) ([]byte, error) {
	var buf bytes.Buffer
	for _, obj := range objs {
		data, err := yaml.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("rendering YAML: %w", err)
		}
		buf.WriteString("---\n")
		buf.Write(data)
	}
	return buf.Bytes(), nil
}

// splitDocuments cuts a YAML stream at "---" separator lines and returns the
// documents that hold more than comments and blank lines.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	var cur []string
	flush := func() {
		doc := strings.Join(cur, "\n")
		cur = cur[:0]
		for _, line := range strings.Split(doc, "\n") {
			t := strings.TrimSpace(line)
			if t != "" && !strings.HasPrefix(t, "#") {
				docs = append(docs, []byte(doc+"\n"))
				return
			}
		}
	}
	for _, line := range strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n") {
		if line == "---" || strings.HasPrefix(line, "--- ") || strings.HasPrefix(line, "---\t") {
			flush()
			continue
		}
		if line == "..." {
			continue
		}
		cur = append(cur, line)
	}
	flush()
	return docs
}
