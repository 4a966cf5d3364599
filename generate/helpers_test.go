package generate

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/gapmirror/gapmirror/imageset"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// testMeta is the Meta every golden file is rendered with.
var testMeta = Meta{ToolVersion: "v0.0.0-test", CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600))}

const testRoot = "registry.airgap:5000/mirror"

// dg returns a fake sha256 digest made of one repeated hex character.
func dg(c string) string { return "sha256:" + strings.Repeat(c, 64) }

// img builds a Set image.
func img(kind imageset.Kind, origin, destination string) imageset.Image {
	return imageset.Image{Origin: origin, Destination: destination, Kind: kind, Source: origin, Digest: dg("0")}
}

func newSet(images ...imageset.Image) *imageset.Set {
	return &imageset.Set{FormatVersion: imageset.SetFormatVersion, Images: images}
}

// assertGolden compares files, rendered one after the other under a header
// line each, with testdata/<name>.golden, after checking every document.
func assertGolden(t *testing.T, name string, files Files) {
	t.Helper()
	var buf bytes.Buffer
	for _, n := range files.names() {
		checkDocuments(t, n, files[n])
		fmt.Fprintf(&buf, "# ==== %s ====\n", n)
		buf.Write(files[n])
	}
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run go test ./generate -run %s -update to create it): %v", t.Name(), err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("output differs from %s (run with -update to accept):\n--- got ---\n%s\n--- want ---\n%s", path, buf.Bytes(), want)
	}
}

// checkDocuments parses every YAML document of a generated file back and
// requires apiVersion, kind and metadata.name.
func checkDocuments(t *testing.T, file string, data []byte) {
	t.Helper()
	docs := splitDocuments(data)
	if strings.HasSuffix(file, ".json") {
		// A v1 List: each item is one object.
		var list struct {
			Kind  string            `json:"kind"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(data, &list); err != nil || list.Kind != "List" {
			t.Errorf("%s: not a JSON v1 List: %v", file, err)
		}
		docs = nil
		for _, it := range list.Items {
			docs = append(docs, it)
		}
	}
	if len(docs) == 0 {
		t.Errorf("%s: no YAML document", file)
	}
	for i, doc := range docs {
		var obj struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name        string            `json:"name"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Errorf("%s document %d: %v", file, i, err)
			continue
		}
		if obj.APIVersion == "" || obj.Kind == "" || obj.Metadata.Name == "" {
			t.Errorf("%s document %d lacks apiVersion, kind or metadata.name:\n%s", file, i, doc)
		}
		if obj.Metadata.Annotations[annotationCreatedBy] == "" {
			t.Errorf("%s document %d lacks the %s annotation", file, i, annotationCreatedBy)
		}
		if strings.Contains(obj.Metadata.Annotations[annotationCreatedBy], " ") && obj.Metadata.Annotations[annotationToolVersion] == "" {
			t.Errorf("%s document %d names a version in %s but lacks %s", file, i, annotationCreatedBy, annotationToolVersion)
		}
	}
}

// mustFail asserts err is non-nil and mentions every fragment.
func mustFail(t *testing.T, err error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error mentioning %q, got none", fragments)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not mention %q", err, f)
		}
	}
}
