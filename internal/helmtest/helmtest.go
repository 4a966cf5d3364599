// Package helmtest builds small helm charts and serves them as a chart
// repository on 127.0.0.1, for tests.
package helmtest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Chart is a chart as its files: paths relative to the chart root
// ("Chart.yaml", "templates/x.yaml", "charts/sub/Chart.yaml").
type Chart struct {
	Name    string
	Version string
	Files   map[string]string
}

// New is a chart with Chart.yaml filled in; extra is appended to Chart.yaml
// (e.g. a dependencies list), files are added as given.
func New(name, version, extra string, files map[string]string) Chart {
	all := map[string]string{"Chart.yaml": fmt.Sprintf("apiVersion: v2\nname: %s\nversion: %s\n%s", name, version, extra)}
	for k, v := range files {
		all[k] = v
	}
	return Chart{Name: name, Version: version, Files: all}
}

// Archive is the chart as a .tgz, byte for byte the same on every call
// (fixed times, sorted entries) so digests are stable.
func (c Chart) Archive() []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, n := range slices.Sorted(maps.Keys(c.Files)) {
		body := []byte(c.Files[n])
		hdr := &tar.Header{Name: c.Name + "/" + n, Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(1700000000, 0), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			panic(err) // writing to memory cannot fail
		}
		if _, err := tw.Write(body); err != nil {
			panic(err)
		}
	}
	if err := tw.Close(); err != nil {
		panic(err)
	}
	if err := gz.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// WriteDir writes the chart's files under dir/<name> and returns that path.
func (c Chart) WriteDir(t testing.TB, dir string) string {
	t.Helper()
	root := filepath.Join(dir, c.Name)
	for n, body := range c.Files {
		p := filepath.Join(root, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// Digest is the hex sha256 of the chart archive, as index.yaml gives it.
func (c Chart) Digest() string {
	sum := sha256.Sum256(c.Archive())
	return hex.EncodeToString(sum[:])
}

// Repo is a chart repository served over plain HTTP on 127.0.0.1.
type Repo struct {
	Server   *httptest.Server
	mu       sync.Mutex
	requests map[string]int
	files    map[string][]byte
}

// Serve starts a repository holding the charts, with an index.yaml that
// gives each chart's digest and a relative URL charts/<name>-<version>.tgz.
func Serve(t testing.TB, charts ...Chart) *Repo {
	t.Helper()
	return serve(t, false, charts)
}

// ServeTLS is Serve over HTTPS with httptest's self-signed certificate
// (Server.Certificate()).
func ServeTLS(t testing.TB, charts ...Chart) *Repo {
	t.Helper()
	return serve(t, true, charts)
}

func serve(t testing.TB, useTLS bool, charts []Chart) *Repo {
	t.Helper()
	r := &Repo{requests: map[string]int{}, files: map[string][]byte{}}
	var idx strings.Builder
	idx.WriteString("apiVersion: v1\nentries:\n")
	byName := map[string][]Chart{}
	var names []string
	for _, c := range charts {
		if _, ok := byName[c.Name]; !ok {
			names = append(names, c.Name)
		}
		byName[c.Name] = append(byName[c.Name], c)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&idx, "  %s:\n", n)
		for _, c := range byName[n] {
			file := fmt.Sprintf("charts/%s-%s.tgz", c.Name, c.Version)
			r.files["/"+file] = c.Archive()
			fmt.Fprintf(&idx, "  - apiVersion: v2\n    name: %s\n    version: %s\n    digest: %s\n    urls:\n    - %s\n", c.Name, c.Version, c.Digest(), file)
			if strings.Contains(c.Files["Chart.yaml"], "\ntype: library") {
				idx.WriteString("    type: library\n")
			}
		}
	}
	r.files["/index.yaml"] = []byte(idx.String())
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests[req.URL.Path]++
		r.mu.Unlock()
		data, ok := r.files[req.URL.Path]
		if !ok {
			http.NotFound(w, req)
			return
		}
		_, _ = w.Write(data)
	}))
	if useTLS {
		r.Server.StartTLS()
	} else {
		r.Server.Start()
	}
	t.Cleanup(r.Server.Close)
	return r
}

// URL is the repository root.
func (r *Repo) URL() string { return r.Server.URL }

// Count is how many times path was requested.
func (r *Repo) Count(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[path]
}
