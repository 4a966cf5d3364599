package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.podman.io/image/v5/types"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/catalog"
	"github.com/gapmirror/gapmirror/internal/registrytest"
	"github.com/gapmirror/gapmirror/mirror"
	"github.com/gapmirror/gapmirror/sections"
	"github.com/gapmirror/gapmirror/transfer"
)

// TestMain lets the test binary play the filter child, as the bench binary
// does, so the smoke test below measures real processes.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}

// TestCatalogScenarioSmoke runs scenario C on a tiny generated catalog: the
// child filters it, the launcher reports its time and peak RSS.
func TestCatalogScenarioSmoke(t *testing.T) {
	b := &bench{dir: t.TempDir()}
	var err error
	if b.log, err = os.Create(filepath.Join(b.dir, "gapmirror.log")); err != nil {
		t.Fatal(err)
	}
	defer b.log.Close()
	c, err := catalog.Generate(catalog.GenSpec{Seed: 1, Packages: 3, Bundles: 20})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(b.dir, "catalog")
	if err := c.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	r, err := b.measure(context.Background(), "smoke", mustExecutable(t), nil, []string{childEnv + "=gen-select", childDirEnv + "=" + dir})
	if err != nil {
		t.Fatal(err)
	}
	if r.wall <= 0 || r.maxRSS < 1<<20 || r.phases["bundles"] != 60 || r.phases["kept"] <= 0 || r.phases["kept"] >= 60 {
		t.Errorf("child run: wall %v, max RSS %d, phases %v", r.wall, r.maxRSS, r.phases)
	}
	if _, err := b.measure(context.Background(), "smoke", mustExecutable(t), nil, []string{childEnv + "=gen-select", childDirEnv + "=" + filepath.Join(b.dir, "missing")}); err == nil {
		t.Error("a failing child is not reported")
	}
	// The whole scenario, without real catalogs, on 200 generated bundles.
	if err := b.catalogScenario(context.Background(), filepath.Join(b.dir, "no-real-catalogs"), 200, 1); err != nil {
		t.Fatal(err)
	}
}

func mustExecutable(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSmallImagesAreSmallAndDistinct(t *testing.T) {
	images := smallImages(500)
	seen := map[string]bool{}
	for _, si := range images {
		if si.size < 20<<10 || si.size > 100<<10 {
			t.Errorf("%s:%s has %d bytes, want 20–100 KiB", si.repo, si.tag, si.size)
		}
		ref := si.repo + ":" + si.tag
		if seen[ref] {
			t.Errorf("%s appears twice", ref)
		}
		seen[ref] = true
	}
}

func TestPlainCopy(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "copy")
	files := map[string]string{"sha256/aa": "first", "sha256/bb": "second blob"}
	for name, data := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, n, err := plainCopy(src, dst, true)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len("first")+len("second blob")) {
		t.Errorf("copied %d bytes, want %d", n, len("first")+len("second blob"))
	}
	for name, data := range files {
		got, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || string(got) != data {
			t.Errorf("%s: got %q, %v; want %q", name, got, err, data)
		}
	}
}

func TestTail(t *testing.T) {
	if got := tail("a\nb\nc\n", 2); got != "b\nc" {
		t.Errorf("tail = %q, want %q", got, "b\nc")
	}
	if got := tail("a", 5); got != "a" {
		t.Errorf("tail = %q, want %q", got, "a")
	}
}

// TestMixedScenarioSmoke builds scenario E's upstream at a tiny size (a
// few images of each kind) from a generated catalog and, when present, the
// real catalogs, and resolves its configuration with gapmirror's
// mirror-to-disk dry run in process: the plan must hold exactly the images
// the bench expects, kind by kind, with nothing failed.
func TestMixedScenarioSmoke(t *testing.T) {
	for _, tc := range []struct{ name, catalogs string }{
		{"generated", filepath.Join(t.TempDir(), "absent")},
		{"real", "../../shared/realdata/catalogs/v4.18"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := os.Stat(tc.catalogs); tc.name == "real" && err != nil {
				t.Skipf("real catalogs not available at %s (shared workspace data, not part of the repository): %v", tc.catalogs, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			up, err := registrytest.New(ctx, registrytest.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer up.Close()
			dir := t.TempDir()
			m, err := buildMixed(ctx, up, dir, tc.catalogs, tinyMixed)
			if err != nil {
				t.Fatal(err)
			}
			defer m.close()
			t.Logf("%s; %s", m.source, m.describe(0))
			if m.kinds["bundle"] == 0 || m.kinds["related"] == 0 || m.kinds["multi-arch related"] == 0 ||
				m.kinds["bundle"]+m.kinds["related"] > tinyMixed.OperatorImages || m.kinds["additional"] != tinyMixed.Additional ||
				m.kinds["release"] != tinyMixed.Releases || m.kinds["component"] != tinyMixed.Releases*tinyMixed.Components {
				t.Errorf("built %v, want bundles, related images (some multi-arch) up to %d in all, %d additional images, %d releases of %d components",
					m.kinds, tinyMixed.OperatorImages, tinyMixed.Additional, tinyMixed.Releases, tinyMixed.Components)
			}

			isc := filepath.Join(dir, "isc.yaml")
			if err := os.WriteFile(isc, []byte(m.config), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := imageset.LoadImageSetConfiguration(isc)
			if err != nil {
				t.Fatalf("%v\n%s", err, m.config)
			}
			flags := map[string]string{}
			for i := 0; i+1 < len(m.flags); i += 2 {
				flags[m.flags[i]] = m.flags[i+1]
			}
			regsConf := filepath.Join(dir, "registries.conf")
			if err := os.WriteFile(regsConf, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			trip := &mirror.Trip{Config: cfg, ConfigPath: isc, StoreDir: filepath.Join(dir, "store"), DryRun: true,
				Upstream: transfer.RegistryOptions{TLSVerify: types.OptionalBoolFalse, RegistriesConf: regsConf, AuthFile: filepath.Join(dir, "absent-auth.json")},
				Log:      slog.New(slog.NewTextHandler(io.Discard, nil)), Out: io.Discard,
				Releases: sections.ReleaseOptions{GraphURL: flags["--graph-url"], SignatureURL: flags["--release-signature-url"],
					SignatureKeys: []string{flags["--release-signature-key"]}, GraphDataURL: flags["--graph-data-url"], GraphBaseImage: flags["--graph-base-image"]},
			}
			report, err := trip.MirrorToDisk(ctx, filepath.Join(dir, "archive"))
			if err != nil {
				t.Fatal(err)
			}
			if err := report.Err(); err != nil {
				t.Fatalf("the dry run failed: %v", err)
			}
			got := map[string]int{}
			total := 0
			for _, img := range report.Set.Images {
				if img.Kind == imageset.KindSignature {
					continue
				}
				got[string(img.Kind)]++
				total++
			}
			want := map[string]int{
				string(imageset.KindOperatorCatalog): 1, string(imageset.KindOperatorBundle): m.kinds["bundle"],
				string(imageset.KindOperatorRelated): m.kinds["related"], string(imageset.KindRelease): m.kinds["release"],
				string(imageset.KindReleaseComponent): m.kinds["component"], string(imageset.KindReleaseGraph): 1,
				string(imageset.KindAdditional): m.kinds["additional"],
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("the dry run plans %d images of kind %s, the bench built %d", got[k], k, v)
				}
			}
			if total != m.want {
				t.Errorf("the dry run plans %d images (%v), the bench expects %d", total, got, m.want)
			}
		})
	}
}

func TestParseWAN(t *testing.T) {
	for _, tc := range []struct {
		in    string
		delay time.Duration
		rate  float64 // bytes per second
	}{
		{"40ms:200mbit", 40 * time.Millisecond, 25e6},
		{"20ms:1gbit", 20 * time.Millisecond, 125e6},
		{"0s:512kbit", 0, 64e3},
		{"100ms:1.5Gbit/s", 100 * time.Millisecond, 187.5e6},
		{"5ms:10mbps", 5 * time.Millisecond, 1.25e6},
	} {
		delay, rate, err := parseWAN(tc.in)
		if err != nil || delay != tc.delay || rate != tc.rate {
			t.Errorf("parseWAN(%q) = %v, %v, %v; want %v, %v", tc.in, delay, rate, err, tc.delay, tc.rate)
		}
	}
	for in, want := range map[string]string{
		"40ms":           "no colon",
		"40ms:200":       "not a number of bit",
		"40ms:200MiB":    "not a number of bit",
		"forty:200mbit":  "is not a duration",
		"-5ms:200mbit":   "outside 0 to 10s",
		"40ms:1bit":      "outside 8kbit to 100gbit",
		"40ms:200mbit:x": "not a number of bit",
	} {
		_, _, err := parseWAN(in)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "40ms:200mbit or 20ms:1gbit") {
			t.Errorf("parseWAN(%q): %v, want an error saying %q and giving an example", in, err, want)
		}
	}
}

func TestParallelImages(t *testing.T) {
	for want, args := range map[int][]string{
		defaultParallelImages: {"mirror", "-c", "isc.yaml"},
		16:                    {"mirror", "--parallel-images", "16", "file:///x"},
		4:                     {"mirror", "--parallel-images=4"},
	} {
		if got := parallelImages(args); got != want {
			t.Errorf("parallelImages(%q) = %d, want %d", args, got, want)
		}
	}
}
