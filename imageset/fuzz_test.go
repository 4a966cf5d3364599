package imageset

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// configSeeds adds the configuration fixtures, and inputs meant to hurt
// (aliases that multiply, deep nesting), to f.
func configSeeds(f *testing.F, pattern string) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "config", pattern))
	for _, p := range files {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("kind: ImageSetConfiguration\napiVersion: mirror.openshift.io/v2alpha1\nmirror:\n  additionalImages:\n  - name: registry.example/a:1\n"))
	f.Add([]byte("a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"))
	f.Add([]byte(strings.Repeat("[", 5000)))
}

// parsed runs parse on data and fails on a hang; panics fail the fuzzer.
func parsed(t *testing.T, data []byte, parse func([]byte) error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = parse(data)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("parsing %d bytes took more than 10s", len(data))
	}
}

func FuzzParseImageSetConfiguration(f *testing.F) {
	configSeeds(f, "isc-*.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		parsed(t, data, func(b []byte) error {
			c, err := ParseImageSetConfiguration(b, "isc.yaml")
			if err == nil {
				// What parses must also pin and redact without trouble.
				_, err = MarshalYAML(Redacted(c))
			}
			return err
		})
	})
}

func FuzzParseDeleteImageSetConfiguration(f *testing.F) {
	configSeeds(f, "disc*.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		parsed(t, data, func(b []byte) error {
			_, err := ParseDeleteImageSetConfiguration(b, "disc.yaml")
			return err
		})
	})
}

// The image set travels in every archive index and run record.
func FuzzUnmarshalSet(f *testing.F) {
	f.Add([]byte(`{"formatVersion":1,"images":[{"source":"r.example/a:1","destination":"a:1","digest":"sha256:` + strings.Repeat("0", 64) + `","kind":"additional"}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		parsed(t, data, func(b []byte) error {
			_, err := UnmarshalSet(b)
			return err
		})
	})
}

// TestConfigTooLarge: a 10 MB file is refused before it is parsed.
func TestConfigTooLarge(t *testing.T) {
	data := []byte("kind: ImageSetConfiguration\n# " + strings.Repeat("x", 10<<20) + "\n")
	_, err := ParseImageSetConfiguration(data, "big.yaml")
	if err == nil || !strings.Contains(err.Error(), "big.yaml") || !strings.Contains(err.Error(), "right file") {
		t.Fatalf("10 MB configuration: %v", err)
	}
}
