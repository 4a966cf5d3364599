package gapmirror

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/gapmirror/gapmirror/"

// allowedImports is docs/architecture.md's table: the gapmirror packages
// each production package may import.
var allowedImports = map[string][]string{
	"backoff":               nil,
	"companion":             nil,
	"gctarget":              nil,
	"imageset/spelling":     nil,
	"imageset/yamlbudget":   nil,
	"imageset/fbc":          {"imageset/yamlbudget"},
	"imageset/catalog":      {"imageset/fbc", "imageset/spelling"},
	"imageset/layer":        nil,
	"imageset/catalogimage": {"imageset/layer"},
	"imageset/release":      {"backoff", "imageset/layer", "imageset/spelling"},
	"imageset/helm":         {"companion"},
	"imageset":              {"imageset/helm", "imageset/release", "imageset/spelling", "imageset/yamlbudget"},
	"registryapi":           nil,
	"archive":               {"imageset"},
	"archivesign":           {"archive"},
	"generate":              {"imageset"},
	"prune":                 {"archive", "imageset", "imageset/catalog", "imageset/fbc", "imageset/release", "ocistore", "registryapi", "sections", "transfer", "workspace"},
	"failure":               {"imageset/release", "registryapi"},
	"ocistore":              {"archive", "failure"},
	"transfer":              {"archive", "backoff", "failure", "imageset", "ocistore", "registryapi"},
	"progress":              {"failure", "imageset", "transfer"},
	"sigstore":              {"failure", "imageset", "ocistore", "transfer"},
	"workspace":             {"archive", "imageset", "imageset/release"},
	"sections":              {"archive", "companion", "generate", "imageset", "imageset/catalog", "imageset/catalogimage", "imageset/fbc", "imageset/helm", "imageset/release", "ocistore", "registryapi", "transfer", "workspace"},
	"mirror":                {"archive", "archivesign", "failure", "generate", "imageset", "imageset/catalog", "imageset/catalogimage", "imageset/release", "ocistore", "progress", "prune", "registryapi", "sections", "sigstore", "transfer", "workspace"},
	"serve":                 nil,
	"audit":                 {"failure", "generate", "imageset", "imageset/catalogimage", "imageset/fbc", "registryapi", "transfer", "workspace"},
	"cmd/gapmirror":         {"archive", "archivesign", "audit", "companion", "imageset", "imageset/catalog", "imageset/helm", "imageset/release", "failure", "gctarget", "mirror", "ocistore", "progress", "prune", "sections", "serve", "transfer", "workspace"},
}

// productionImports returns the gapmirror packages the non-test Go files
// of dir import.
func productionImports(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if rest, ok := strings.CutPrefix(p, module); ok && !slices.Contains(out, rest) {
				out = append(out, rest)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestLayers: every production package imports only what
// docs/architecture.md allows, every package is in the table, and nothing
// the binary is built from reaches test support under internal/.
func TestLayers(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		switch {
		case path == ".":
			return nil
		case strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || path == "internal" || path == "bench" || path == "tools" || path == "docs":
			return filepath.SkipDir
		}
		imports := productionImports(t, path)
		allowed, known := allowedImports[filepath.ToSlash(path)]
		if !known {
			if len(imports) > 0 || hasGo(t, path) {
				t.Errorf("package %s is not in docs/architecture.md's table (and allowedImports here): add it with what it may import", path)
			}
			return nil
		}
		for _, imp := range imports {
			if !slices.Contains(allowed, imp) {
				t.Errorf("%s imports %s, which docs/architecture.md does not allow it", path, imp)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// The closure of the binary: no internal/ package.
	seen := map[string]bool{}
	var walk func(pkg string)
	walk = func(pkg string) {
		if seen[pkg] {
			return
		}
		seen[pkg] = true
		if strings.HasPrefix(pkg, "internal/") {
			t.Errorf("the gapmirror binary depends on %s (test support)", pkg)
			return
		}
		for _, imp := range productionImports(t, filepath.FromSlash(pkg)) {
			walk(imp)
		}
	}
	walk("cmd/gapmirror")
}

func hasGo(t *testing.T, dir string) bool {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	return len(files) > 0
}

// maxPackageLines is the most non-test lines a production package may
// hold: a package that grows past it holds more than one stage (see
// docs/architecture.md) and is to be cut by responsibility.
const maxPackageLines = 4000

// TestPackageSize: no production package outgrows maxPackageLines, and
// the trips (mirror), which only wire the stages, stay under 3,000.
func TestPackageSize(t *testing.T) {
	limits := map[string]int{"mirror": 3000}
	for pkg := range allowedImports {
		files, err := filepath.Glob(filepath.Join(filepath.FromSlash(pkg), "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		lines := 0
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			lines += strings.Count(string(data), "\n")
		}
		limit := maxPackageLines
		if l, ok := limits[pkg]; ok {
			limit = l
		}
		if lines > limit {
			t.Errorf("package %s has %d non-test lines, over its limit of %d: cut it by responsibility (docs/architecture.md)", pkg, lines, limit)
		}
	}
}
