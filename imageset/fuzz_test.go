package imageset

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gapmirror/gapmirror/internal/fuzzguard"
)

// configSeeds adds the configuration fixtures, and inputs meant to hurt
// (aliases that multiply, through the fields the decoder follows and through
// merge keys; deep nesting), to f. kind and section are the configuration's
// kind and content section (mirror or delete).
func configSeeds(f *testing.F, pattern, kind, section string) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "config", pattern))
	for _, p := range files {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("kind: " + kind + "\napiVersion: mirror.openshift.io/v2alpha1\n" + section + ":\n  additionalImages:\n  - name: registry.example/a:1\n"))
	// Both refused by the decoder's alias budget (TestAliasBombRefused).
	f.Add(aliasBomb(kind, section, 300))
	f.Add(mistakeBomb(kind, section, 300))
	f.Add(mergeBomb(kind, section, 24, 6))
	f.Add([]byte(strings.Repeat("[", 5000)))
}

// aliasBomb is a configuration of kind whose section nests aliases through
// operators, packages and channels: fanout aliases at each level stand for
// about fanout³ channels, written in a few KiB (fanout 300: 27 million
// channels in 4 KiB). Line 7 holds the packages of the first operator, the
// first of them anchored and the others aliases of it; each "- *o" that
// follows is on a line of its own.
func aliasBomb(kind, section string, fanout int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "kind: %s\napiVersion: mirror.openshift.io/v2alpha1\n%s:\n  operators:\n", kind, section)
	fmt.Fprintf(&b, "  - &o\n    catalog: registry.example/catalog:1\n")
	fmt.Fprintf(&b, "    packages: [&p {name: p, channels: [&c {name: stable},%s]},%s]\n", aliases("c", fanout), aliases("p", fanout))
	b.WriteString(strings.Repeat("  - *o\n", fanout))
	return []byte(b.String())
}

// mistakeBomb is a configuration of kind whose packages and channels each
// alias the first fanout times, within the alias budget (fanout 300: 90,000
// channels), and every channel misspells its name: two errors a channel
// (the misspelt field, the missing name), each to be checked against the
// others' paths.
func mistakeBomb(kind, section string, fanout int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "kind: %s\napiVersion: mirror.openshift.io/v2alpha1\n%s:\n  operators:\n", kind, section)
	fmt.Fprintf(&b, "  - catalog: registry.example/catalog:1\n    packages: [&p {name: p, channels: [&c {nme: stable},%s]},%s]\n", aliases("c", fanout), aliases("p", fanout))
	return []byte(b.String())
}

// aliases is n aliases of anchor name, comma-separated: "*c,*c,…".
func aliases(name string, n int) string {
	return strings.TrimSuffix(strings.Repeat("*"+name+",", n), ",")
}

// mergeBomb is a configuration of kind whose release channels merge
// mappings that merge mappings (<<: [*m0, *m0, …]), levels deep: the
// decoder would visit fanout^levels mappings for one channel.
func mergeBomb(kind, section string, fanout, levels int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "kind: %s\napiVersion: mirror.openshift.io/v2alpha1\n%s:\n  platform:\n    channels:\n", kind, section)
	fmt.Fprintf(&b, "    - &m0 {name: stable-4.18}\n")
	for l := 1; l <= levels; l++ {
		refs := strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*m%d, ", l-1), fanout), ", ")
		fmt.Fprintf(&b, "    - &m%d {<<: [%s], name: stable-4.%d}\n", l, refs, 18+l)
	}
	return []byte(b.String())
}

// parsed runs parse on data; a hang or a panic fails the input.
func parsed(t *testing.T, data []byte, parse func([]byte) error) {
	fuzzguard.Within(t, func() { _ = parse(data) })
}

func FuzzParseImageSetConfiguration(f *testing.F) {
	configSeeds(f, "isc-*.yaml", imageSetConfigurationKind, "mirror")
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
	configSeeds(f, "disc*.yaml", DeleteImageSetConfigurationKind, "delete")
	f.Fuzz(func(t *testing.T, data []byte) {
		parsed(t, data, func(b []byte) error {
			_, err := parseDeleteImageSetConfiguration(b, "disc.yaml")
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
			_, err := unmarshalSet(b)
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

// TestConfigTooLargeRefusedBeforeReading: a configuration file larger than
// 4 MiB is refused by its size, before it is read (a sparse terabyte here:
// reading it would take minutes and the memory of the machine).
func TestConfigTooLargeRefusedBeforeReading(t *testing.T) {
	for _, load := range []struct {
		kind string
		load func(string) error
	}{
		{imageSetConfigurationKind, func(p string) error { _, err := LoadImageSetConfiguration(p); return err }},
		{DeleteImageSetConfigurationKind, func(p string) error { _, err := LoadDeleteImageSetConfiguration(p); return err }},
	} {
		path := filepath.Join(t.TempDir(), "huge.yaml")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(1 << 40); err != nil {
			t.Fatal(err)
		}
		f.Close()
		start := time.Now()
		err = load.load(path)
		var errs FieldErrors
		if !errors.As(err, &errs) || len(errs) != 1 || errs[0].File != path ||
			!strings.Contains(errs[0].Msg, "file is 1099511627776 bytes, more than a "+load.kind+" can be (4194304)") {
			t.Errorf("%s: a 1 TiB file: %v", load.kind, err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%s: refusing a 1 TiB file took %v: was it read?", load.kind, took)
		}
	}
}

// TestAliasBombRefused: a 4 KiB configuration whose aliases nest through
// mirror.operators, packages and channels stands for 27 million channels
// (such a file took 33 s and 1.1 GiB before the decoder had a budget). It is
// refused early, within a bound of time and memory, naming the file, the line
// and the field path of the outermost alias being expanded (here a package
// of the first operator: each already stands for 300 channels); so are merge
// keys that merge merges, and the same in a DeleteImageSetConfiguration,
// through the files' loaders. These are the fuzz targets' seeds meant to hurt.
// TestManyMistakesReportedBriefly: a configuration whose aliases repeat one
// mistake 90,000 times is refused with every error found (once took
// minutes: each validation error was compared with every decode error), and
// its message lists the first hundred.
func TestManyMistakesReportedBriefly(t *testing.T) {
	_, err := ParseImageSetConfiguration(mistakeBomb(imageSetConfigurationKind, "mirror", 300), "isc.yaml")
	var errs FieldErrors
	// Each channel's two errors, and each package after the first is a duplicate.
	if want := 2*301*301 + 300; !errors.As(err, &errs) || len(errs) != want {
		t.Fatalf("want %d FieldErrors, got %d: %.300v", want, len(errs), err)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != shownErrors+1 || !strings.HasPrefix(lines[0], "isc.yaml:6: mirror.operators[0].packages[0].channels[0]") {
		t.Fatalf("want the first %d problems and a last line, got %d lines starting %q", shownErrors, len(lines), lines[0])
	}
	if want := fmt.Sprintf("and %d more problems: fix the ones above and run again", len(errs)-shownErrors); lines[shownErrors] != want {
		t.Fatalf("last line %q, want %q", lines[shownErrors], want)
	}
}

func TestAliasBombRefused(t *testing.T) {
	cases := []struct {
		name, kind string
		data       []byte
		line       int
		path       string
	}{
		{"operators", imageSetConfigurationKind, aliasBomb(imageSetConfigurationKind, "mirror", 300), 7, "mirror.operators[0].packages["},
		{"delete operators", DeleteImageSetConfigurationKind, aliasBomb(DeleteImageSetConfigurationKind, "delete", 300), 7, "delete.operators[0].packages["},
		// 24^6 = 191 million merges. Lines 7 to 12 are &m1 to &m6, each
		// merging 24 of the one before: &m4 is the first whose merges
		// (24³ mappings) exceed the allowance.
		{"merge keys", imageSetConfigurationKind, mergeBomb(imageSetConfigurationKind, "mirror", 24, 6), 10, "mirror.platform.channels[4]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if len(c.data) > 4500 {
				t.Fatalf("the bomb is %d bytes, meant to be at most about 4 KiB", len(c.data))
			}
			path := filepath.Join(t.TempDir(), "bomb.yaml")
			if err := os.WriteFile(path, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			var err error
			if c.kind == imageSetConfigurationKind {
				_, err = LoadImageSetConfiguration(path)
			} else {
				_, err = LoadDeleteImageSetConfiguration(path)
			}
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d bytes refused in %v, %d MiB allocated: %v", len(c.data), took, allocated>>20, err)

			var errs FieldErrors
			if !errors.As(err, &errs) || len(errs) != 1 {
				t.Fatalf("want one FieldError, got %v", err)
			}
			e := errs[0]
			if e.File != path || !strings.HasPrefix(e.Path, c.path) || !strings.Contains(e.Msg, "alias bomb") ||
				!strings.Contains(e.Msg, fmt.Sprintf("aliases may add at most %d", configAliasNodes)) {
				t.Errorf("error = %v; want %s, a path under %s and the alias budget", e, path, c.path)
			}
			if e.Line != c.line {
				t.Errorf("error at line %d, want %d (the first alias that expands past the budget): %v", e.Line, c.line, e)
			}
			// Generous for a loaded 2-core machine: the refusal costs
			// about configAliasNodes node visits, tenths of a second.
			if took > 5*time.Second || allocated > 256<<20 {
				t.Errorf("refusing took %v and %d MiB: the budget does not stop the expansion early", took, allocated>>20)
			}
		})
	}
}

// TestLiteralNodesAreNotAliases: a configuration that writes out more nodes
// than the alias allowance, without aliases (35,000 additional images, over
// 105,000 nodes), loads: only nodes reached through aliases count against it.
// Reusing a list through aliases within the allowance loads too.
func TestLiteralNodesAreNotAliases(t *testing.T) {
	var b strings.Builder
	b.WriteString(iscHeader + "mirror:\n  additionalImages:\n")
	for i := range 35_000 {
		fmt.Fprintf(&b, "  - name: registry.example/app-%d:1\n", i)
	}
	c, err := ParseImageSetConfiguration([]byte(b.String()), "big.yaml")
	if err != nil {
		t.Fatalf("35,000 additional images written out: %.500v", err)
	}
	if len(c.Mirror.AdditionalImages) != 35_000 {
		t.Fatalf("got %d additional images", len(c.Mirror.AdditionalImages))
	}

	doc := iscHeader + "mirror:\n  operators:\n  - catalog: registry.example/catalog:v4.17\n    packages: &pkgs\n"
	for i := range 500 {
		doc += fmt.Sprintf("    - name: p%d\n      channels: [{name: stable}, {name: fast}]\n", i)
	}
	for _, v := range []string{"v4.18", "v4.19", "v4.20"} {
		doc += "  - catalog: registry.example/catalog:" + v + "\n    packages: *pkgs\n"
	}
	c, err = ParseImageSetConfiguration([]byte(doc), "reuse.yaml")
	if err != nil {
		t.Fatalf("a package list reused by three more catalogs: %.500v", err)
	}
	if n := len(c.Mirror.Operators); n != 4 || len(c.Mirror.Operators[3].Packages) != 500 || c.Mirror.Operators[3].Packages[499].Channels[1].Name != "fast" {
		t.Fatalf("operators = %d, last = %+v", n, c.Mirror.Operators[n-1].Packages[:1])
	}
}
