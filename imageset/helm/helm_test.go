package helm_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gapmirror/gapmirror/imageset/helm"
	"github.com/gapmirror/gapmirror/internal/helmtest"
)

func images(t *testing.T, c helmtest.Chart, paths ...string) []string {
	t.Helper()
	var extra []helm.ImagePath
	for _, p := range paths {
		ip, err := helm.CompileImagePath(p)
		if err != nil {
			t.Fatal(err)
		}
		extra = append(extra, ip)
	}
	found, err := helm.Images(t.Context(), c.Archive(), extra)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range found {
		out = append(out, f.Image+" "+f.Object)
	}
	return out
}

func TestImagesAliasedSubChartAndEnv(t *testing.T) {
	got := images(t, helmtest.Web("1.0.0", "reg.example", "v1"), "{.spec.template.spec.containers[*].env[*].value}")
	want := []string{
		"reg.example/apps/init:v1 Deployment/web-web",
		"reg.example/apps/operand:v1 Deployment/web-web",
		"reg.example/apps/web:v1 Deployment/web-web",
		"reg.example/apps/worker:v1 Deployment/web-worker",
	}
	if !slices.Equal(got, want) {
		t.Errorf("images:\n got %q\nwant %q", got, want)
	}
	// Without the user's path the env-var operand is not an image field.
	got = images(t, helmtest.Web("1.0.0", "reg.example", "v1"))
	if slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "operand") }) || len(got) != 3 {
		t.Errorf("built-in paths only: %q", got)
	}
}

func TestImagesCronJobAndPod(t *testing.T) {
	if got := images(t, helmtest.Jobs("0.1.0", "reg.example/apps/cleanup:v1")); !slices.Equal(got, []string{"reg.example/apps/cleanup:v1 CronJob/cleanup"}) {
		t.Errorf("CronJob: %q", got)
	}
	if got := images(t, helmtest.Pod("p", "0.1.0", "reg.example/apps/p:v1")); !slices.Equal(got, []string{"reg.example/apps/p:v1 Pod/p"}) {
		t.Errorf("Pod: %q", got)
	}
}

func TestRenderErrorNamesTemplate(t *testing.T) {
	_, err := helm.Images(t.Context(), helmtest.NeedsValues("bad", "0.1.0").Archive(), nil)
	if err == nil || !strings.Contains(err.Error(), "templates/pod.yaml") || !strings.Contains(err.Error(), "set image.tag") {
		t.Errorf("want the template and its message, got %v", err)
	}
}

func TestCompileImagePath(t *testing.T) {
	if _, err := helm.CompileImagePath(".spec.containers[*].env[*].value"); err != nil {
		t.Errorf("braces are optional: %v", err)
	}
	if _, err := helm.CompileImagePath("{.spec.containers[*"); err == nil {
		t.Error("a broken expression was accepted")
	}
}

func TestLooksLikeImage(t *testing.T) {
	for s, want := range map[string]bool{
		"quay.io/org/app:v1":                        true,
		"org/app@sha256:" + strings.Repeat("a", 64): true,
		"registry:5000/app:v2":                      true,
		"true":                                      false,
		"8080":                                      false,
		"redis:6379":                                false,
		"https://example.com/api":                   false,
		"quay.io/org/app":                           false,
		"":                                          false,
	} {
		if got := helm.LooksLikeImage(s); got != want {
			t.Errorf("LooksLikeImage(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestRepositoryIndexAndDownload(t *testing.T) {
	web1, web2, rc := helmtest.Web("1.0.0", "r", "a"), helmtest.Web("1.10.0", "r", "b"), helmtest.Web("2.0.0-rc.1", "r", "c")
	repo := helmtest.Serve(t, web1, web2, rc, helmtest.Jobs("0.1.0", "r/x:y"))
	r := helm.Repository{URL: repo.URL() + "/", Client: http.DefaultClient}
	ix, _, err := r.Index(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	latest, err := ix.Version("web", "")
	if err != nil || latest.Version != "1.10.0" {
		t.Errorf("latest web = %v, %v; want 1.10.0 (semantic order, pre-releases skipped)", latest.Version, err)
	}
	if _, err := ix.Version("web", "9.9.9"); err == nil || !strings.Contains(err.Error(), "1.0.0, 1.10.0, 2.0.0-rc.1") {
		t.Errorf("unknown version: %v", err)
	}
	if _, err := ix.Version("nope", ""); err == nil || !strings.Contains(err.Error(), "jobs, web") {
		t.Errorf("unknown chart: %v", err)
	}
	if n := len(ix.All()); n != 4 {
		t.Errorf("All: %d versions, want 4", n)
	}
	data, err := r.Download(context.Background(), latest)
	if err != nil || helm.Digest(data) != "sha256:"+web2.Digest() {
		t.Errorf("download: %v", err)
	}
	latest.Digest = strings.Repeat("0", 64)
	if _, err := r.Download(context.Background(), latest); err == nil || !strings.Contains(err.Error(), "the index says") {
		t.Errorf("digest mismatch not caught: %v", err)
	}
}

// TestRepositoryBasicAuth: credentials in the repository URL are sent as
// basic auth, for the index and for charts on the same host.
func TestRepositoryBasicAuth(t *testing.T) {
	repo := helmtest.Serve(t, helmtest.Pod("p", "0.1.0", "reg.example/apps/p:v1"))
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if u, p, ok := req.BasicAuth(); !ok || u != "me" || p != "pw" {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		repo.Server.Config.Handler.ServeHTTP(w, req)
	}))
	defer gate.Close()
	r := helm.Repository{URL: strings.Replace(gate.URL, "http://", "http://me:pw@", 1), Client: http.DefaultClient}
	ix, _, err := r.Index(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cv, err := ix.Version("p", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Download(context.Background(), cv); err != nil {
		t.Errorf("chart download without the repository's credentials: %v", err)
	}
	r.URL = gate.URL
	if _, _, err := r.Index(context.Background()); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("no credentials: %v", err)
	}
}

// TestImagesPackagedAliasedSubChart: the same sub-chart twice under two
// aliases, packaged as a .tgz in charts/ as `helm dependency build` leaves
// it, each alias with its own values.
func TestImagesPackagedAliasedSubChart(t *testing.T) {
	sub := helmtest.Pod("sub", "0.1.0", "reg.example/apps/default:v0")
	parent := helmtest.New("parent", "1.0.0", `dependencies:
- name: sub
  version: 0.1.0
  alias: first
- name: sub
  version: 0.1.0
  alias: second
- name: sub
  version: 0.1.0
  alias: unused
  condition: unused.enabled
`, map[string]string{
		"values.yaml":          "first:\n  image: reg.example/apps/one:v1\nsecond:\n  image: reg.example/apps/two:v1\nunused:\n  enabled: false\n  image: reg.example/apps/never:v1\n",
		"charts/sub-0.1.0.tgz": string(sub.Archive()),
	})
	got := images(t, parent)
	want := []string{"reg.example/apps/one:v1 Pod/first", "reg.example/apps/two:v1 Pod/second"}
	if !slices.Equal(got, want) {
		t.Errorf("images:\n got %q\nwant %q", got, want)
	}
}

// TestPackageIsStable: a chart directory packs into the same bytes on every
// run, whatever the file times, and the result loads as the same chart.
func TestPackageIsStable(t *testing.T) {
	chart := helmtest.Pod("mine", "0.3.0", "quay.io/org/app:v1")
	src := chart.Archive()
	dir := chart.WriteDir(t, t.TempDir())
	a, err := helm.Package(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	// helm's own packaging stamps the time of day; and the files are touched later.
	now := time.Now().Add(time.Hour)
	if err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, now, now)
	}); err != nil {
		t.Fatal(err)
	}
	later, err := helm.Package(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, later) {
		t.Errorf("packing the same chart twice gives different bytes")
	}
	x, y := retimed(t, src, time.Unix(1, 0)), retimed(t, src, time.Now())
	rx, err := helm.Repack(x)
	if err != nil {
		t.Fatal(err)
	}
	ry, err := helm.Repack(y)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(x, y) || !bytes.Equal(rx, ry) {
		t.Errorf("archives differing only in file times repack differently")
	}
	re, err := helm.LoadArchive(a)
	if err != nil || re.Name() != "mine" || re.Metadata.Version != "0.3.0" || len(re.Templates) != 1 {
		t.Fatalf("packed chart does not load as the chart: %v", err)
	}
	if _, err := helm.Repack([]byte("not gzip")); err == nil {
		t.Errorf("Repack accepts garbage")
	}
}

// retimed is tgz with every entry stamped at.
func retimed(t *testing.T, tgz []byte, at time.Time) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.ModTime = at
	tw := tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		body, _ := io.ReadAll(tr)
		h.ModTime = at
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write(body)
	}
	_ = tw.Close()
	_ = zw.Close()
	return buf.Bytes()
}
