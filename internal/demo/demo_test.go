package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/catalog"
	"github.com/gapmirror/gapmirror/internal/fixtures"
)

// TestDemo runs the whole demo, as make demo does, with a gapmirror built
// for the test: every trip and every check must pass. It takes about ten
// seconds (most of it linking gapmirror); -short skips it.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the demo builds and runs gapmirror")
	}
	bin := filepath.Join(t.TempDir(), "gapmirror")
	// The tags of the Makefile: gapmirror builds without cgo only with them.
	build := exec.Command("go", "build", "-tags", "containers_image_openpgp containers_image_storage_stub containers_image_docker_daemon_stub",
		"-o", bin, "../../cmd/gapmirror")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building gapmirror: %v\n%s", err, out)
	}

	var out bytes.Buffer
	d := &demo{out: &console{w: &out}, bin: bin, dir: t.TempDir()}
	err := d.run(context.Background())
	d.close()
	if err != nil || d.problems > 0 {
		t.Fatalf("demo: %v, %d problem(s):\n%s", err, d.problems, out.String())
	}
	for _, want := range []string{
		"✓ additional images: 12 of 12 at both prefixes",
		"✓ operator catalog:  rebuilt",
		"✓ releases:          4.18.1 and 4.18.3 of 3",
		"4.18.2 not mirrored",
		"✓ rerun: 0 images copied",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestDestination(t *testing.T) {
	d := digest.FromString("jq")
	tests := []struct {
		name     string
		ex       example
		prefix   string
		wantRepo string
		wantTag  string
	}{
		{"path and tag kept", example{Repo: "team-b/payments/api", Tag: "2.0.0"}, "from-disk", "from-disk/team-b/payments/api", "2.0.0"},
		{"targetRepo and targetTag", example{Repo: "library/busybox", Tag: "1.36", TargetRepo: "tools/busybox", TargetTag: "stable"}, "direct", "direct/tools/busybox", "stable"},
		{"by digest", example{Repo: "tools/jq", Tag: "1.7", ByDigest: true, Digest: d}, "m", "m/tools/jq", "sha256-" + d.Encoded()},
		{"no prefix", example{Repo: "a/b", Tag: "v1"}, "", "a/b", "v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo, tag := tt.ex.destination(tt.prefix)
			if repo != tt.wantRepo || tag != tt.wantTag {
				t.Errorf("destination(%q) = %s:%s, want %s:%s", tt.prefix, repo, tag, tt.wantRepo, tt.wantTag)
			}
		})
	}
}

func TestConfigListsEveryExample(t *testing.T) {
	exs := examples()
	for _, ex := range exs {
		ex.Digest = digest.FromString(ex.Repo + ex.Tag)
	}
	ops := &operators{src: &fixtures.Catalog{Ref: "127.0.0.1:5000/" + catalogRepo + ":" + catalogTag}, filter: catalog.FilterSpec{Packages: []catalog.PackageSpec{
		{Name: "operator-001"},
		{Name: "operator-003", Channels: []catalog.ChannelSpec{{Name: "stable", MinVersion: "1.0.1", MaxVersion: "1.1.0"}}},
	}}}
	isc := config("127.0.0.1:5000", exs, (&releases{}).config()+ops.config())

	// gapmirror reads it as the demo means it.
	cfg, err := imageset.ParseImageSetConfiguration([]byte(isc), configFile)
	if err != nil {
		t.Fatalf("gapmirror does not accept the configuration: %v\n%s", err, isc)
	}
	m := cfg.Mirror
	if len(m.AdditionalImages) != len(exs) || len(m.Operators) != 1 || len(m.Operators[0].Packages) != 2 || m.Operators[0].Catalog != ops.src.Ref {
		t.Errorf("configuration has %d additional images and operators %+v:\n%s", len(m.AdditionalImages), m.Operators, isc)
	}
	if ch := m.Platform.Channels; !m.Platform.Graph || len(ch) != 1 || ch[0].Name != releaseChannel || !ch[0].ShortestPath ||
		ch[0].MinVersion != shortestPath[0] || ch[0].MaxVersion != shortestPath[len(shortestPath)-1] {
		t.Errorf("configuration's platform is %+v:\n%s", m.Platform, isc)
	}
	for _, ex := range exs {
		if !strings.Contains(isc, "- name: "+ex.source("127.0.0.1:5000")+"\n") {
			t.Errorf("configuration does not list %s:\n%s", ex.source("127.0.0.1:5000"), isc)
		}
	}
	for _, want := range []string{"targetRepo: tools/busybox", "targetTag: stable", "@sha256:", "blockedImages:"} {
		if !strings.Contains(isc, want) {
			t.Errorf("configuration lacks %q:\n%s", want, isc)
		}
	}
}

func TestShellQuote(t *testing.T) {
	tests := map[string]string{
		"--src-tls-verify=false":    "--src-tls-verify=false",
		"docker://127.0.0.1:5000/a": "docker://127.0.0.1:5000/a",
		"{{.Digest}}":               "'{{.Digest}}'",
		"it's":                      `'it'\''s'`,
		"":                          "''",
	}
	for in, want := range tests {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestCounts(t *testing.T) {
	out := "image set resolved\nmirror-to-mirror: 14 images: 0 copied, 12 already at the destination, 2 built by gapmirror, 0 failed\n"
	copied, there, failed, ok := counts(out)
	if !ok || copied != 0 || there != 14 || failed != 0 {
		t.Errorf("counts = %d, %d, %d, %v; want 0, 14, 0, true", copied, there, failed, ok)
	}
	if _, _, _, ok := counts("no summary"); ok {
		t.Error("counts found a summary in output without one")
	}
}
