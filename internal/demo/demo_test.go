package main

import (
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
)

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
	isc := config("127.0.0.1:5000", exs)
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
	out := "image set resolved\nmirror-to-mirror: 0 images copied, 12 already there, 0 failed; 0 blobs\n"
	copied, there, failed, ok := counts(out)
	if !ok || copied != 0 || there != 12 || failed != 0 {
		t.Errorf("counts = %d, %d, %d, %v; want 0, 12, 0, true", copied, there, failed, ok)
	}
	if _, _, _, ok := counts("no summary"); ok {
		t.Error("counts found a summary in output without one")
	}
}
