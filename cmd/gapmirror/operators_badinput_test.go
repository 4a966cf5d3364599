package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/imageset/catalog"
	"github.com/gapmirror/gapmirror/imageset/fbc"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// smallSpec is a catalog of 3 packages of 4 bundles without operands.
var smallSpec = catalog.GenSpec{Seed: 5, Packages: 3, Bundles: 4, RelatedImages: -1, DependencyRatio: -1}

// TestOperatorBadInput: every way a catalog entry can be wrong fails the
// run before anything is copied, with the configuration field path, the
// catalog and what to do.
func TestOperatorBadInput(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	good := w.pushCatalog("catalogs/good", "v1", catalogOptions{Spec: smallSpec, Single: true})
	noLabel := w.pushCatalog("catalogs/nolabel", "v1", catalogOptions{Spec: smallSpec, Single: true, Labels: map[string]string{"vendor": "example"}})
	malformed := w.pushCatalog("catalogs/malformed", "v1", catalogOptions{Spec: smallSpec, Single: true, Files: map[string][]byte{
		"configs/ok/catalog.json":     []byte(`{"schema":"olm.package","name":"ok","defaultChannel":"stable"}` + "\n"),
		"configs/broken/catalog.json": []byte("{\"schema\":\"olm.package\",\"name\":\"broken\"}\n{\"schema\":\"olm.channel\",\n  \"name\": oops\n}\n"),
	}})
	versions := catalog.Packages(good.Cat)[1].Channels[0].Versions
	badTemplate := filepath.Join(w.dir, "bad-template.yaml")
	must(t, os.WriteFile(badTemplate, []byte("apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: x\nspec:\n  configMap: my-catalog\n"), 0o644))

	cases := []struct {
		name string
		body string
		want []string
	}{
		{"unknown package", `  - catalog: ` + good.Ref + `
    packages:
    - name: operator-000
    - name: operator-0001
`, []string{`mirror.operators[0].packages[1] (package "operator-0001") is not in the catalog`, `"operator-001"`, good.Ref}},
		{"unknown channel", `  - catalog: ` + good.Ref + `
    packages:
    - name: operator-001
      channels:
      - name: stabel
`, []string{`mirror.operators[0].packages[0].channels[0] (package "operator-001" channel "stabel") does not exist`, `did you mean "stable"`, good.Ref}},
		{"min above max", `  - catalog: ` + good.Ref + `
    packages:
    - name: operator-001
      minVersion: ` + versions[2] + `
      maxVersion: ` + versions[0] + `
`, []string{"mirror.operators[0].packages[0].maxVersion", "is lower than minVersion"}},
		{"range selects nothing", `  - catalog: ` + good.Ref + `
    packages:
    - name: operator-001
      versionRange: ">=99.0.0"
`, []string{`mirror.operators[0].packages[0] (package "operator-001"): versionRange ">=99.0.0" selects no bundle`, "widen the range", good.Ref}},
		{"default channel filtered out", `  - catalog: ` + good.Ref + `
    packages:
    - name: operator-002
      channels:
      - name: fast
`, []string{`mirror.operators[0].packages[0] (package "operator-002"): the default channel "stable" was filtered out`, "set defaultChannel", good.Ref}},
		{"catalog without configs label", `  - catalog: ` + noLabel.Ref + "\n",
			[]string{"mirror.operators[0]", noLabel.Ref, "has no label operators.operatorframework.io.index.configs.v1"}},
		{"malformed FBC", `  - catalog: ` + good.Ref + `
  - catalog: ` + malformed.Ref + "\n",
			[]string{"mirror.operators[1]", malformed.Ref, "malformed", "broken/catalog.json:3"}},
		{"blocked catalog", `  - catalog: ` + good.Ref + `
  blockedImages:
  - name: catalogs/good
`, []string{"mirror.operators[0].catalog", "is blocked by mirror.blockedImages[0]"}},
		{"bad CatalogSource template", `  - catalog: ` + good.Ref + `
    targetCatalogSourceTemplate: ` + badTemplate + "\n",
			[]string{"mirror.operators[0].targetCatalogSourceTemplate", badTemplate, "spec.configMap is set"}},
		{"catalog missing upstream", `  - catalog: ` + w.up.Host() + `/catalogs/nothere:v1
`, []string{"mirror.operators[0].catalog", "catalogs/nothere:v1", "does not exist",
			// Fetched beside the pins first, then again by the operators
			// section, which reports it: the log says so.
			"reading operator catalog again catalog=" + w.up.Host() + "/catalogs/nothere:v1 firstTry="}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			isc := w.writeISC(fmt.Sprintf("bad-%d.yaml", i), "  operators:\n"+c.body)
			code, out, errOut := w.gapmirror("mirror", "-c", isc, "--dry-run", "--workspace", "file://"+filepath.Join(w.dir, "ws-bad"), "docker://"+w.dst.Host()+"/bad")
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if out != "" {
				t.Errorf("a failed resolution printed a plan:\n%s", out)
			}
			for _, want := range c.want {
				if !strings.Contains(errOut, want) {
					t.Errorf("error lacks %q:\n%s", want, errOut)
				}
			}
		})
	}
}

// TestOperatorRelatedImageMissing: a related image missing upstream (one
// by digest, one by tag) fails with the bundles that need it named, exit
// code 4, and every other image is mirrored.
func TestOperatorRelatedImageMissing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	ghostDigest := w.up.Host() + "/ghost/by-digest@sha256:" + strings.Repeat("ab", 32)
	ghostTag := w.up.Host() + "/ghost/by-tag:v9"
	// A related image named by tag only that does exist: pinned, with a warning.
	helper, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(77, 2048)}})
	must(t, err)
	must(t, imagebuilder.Push(context.Background(), imagebuilder.Target{URL: w.up.URL()}, "tagged/helper", "v1", helper))
	oc := w.pushCatalog("catalogs/ghosts", "v1", catalogOptions{Spec: smallSpec, Single: true, Mutate: func(c *fbc.Catalog) {
		for _, b := range c.Package("operator-001").Bundles {
			b.RelatedImages = append(b.RelatedImages, fbc.RelatedImage{Name: "ghost-digest", Image: ghostDigest}, fbc.RelatedImage{Name: "ghost-tag", Image: ghostTag})
		}
		for _, b := range c.Package("operator-000").Bundles {
			b.RelatedImages = append(b.RelatedImages, fbc.RelatedImage{Name: "helper", Image: w.up.Host() + "/tagged/helper:v1"})
		}
	}})
	isc := w.writeISC("isc.yaml", "  operators:\n  - catalog: "+oc.Ref+"\n    packages:\n    - name: operator-000\n    - name: operator-001\n")
	code, out, errOut := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/m")
	if code != 4 {
		t.Errorf("exit %d, want 4 (operator images failed)", code)
	}
	head := catalog.Packages(oc.Cat)[1].Channels[0].Head
	for _, want := range []string{
		"  " + ghostTag + " (needed by package operator-001 bundle " + head + " in catalog " + oc.Ref + ")",
		ghostDigest,
		"(needed by operator catalog " + oc.Ref + ": package operator-001 bundle " + head + ")",
		"2 failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "error: 2 images or charts failed") {
		t.Errorf("stderr does not end with the failure count:\n%s", errOut)
	}
	if !strings.Contains(errOut, "names "+w.up.Host()+"/tagged/helper:v1 by tag only: mirrored as "+helper.Digest.String()) {
		t.Errorf("no warning about the related image named by tag only:\n%s", errOut)
	}
	if d, err := w.dst.ManifestDigest("m/tagged/helper", "v1"); err != nil || d != helper.Digest {
		t.Errorf("tag-only related image at the mirror: %s, %v; want %s", d, err, helper.Digest)
	}
	itms := readFile(t, filepath.Join(w.dir, "ws", "working-dir", "cluster-resources", "itms-gapmirror.yaml"))
	if !strings.Contains(itms, w.up.Host()+"/tagged") {
		t.Errorf("ITMS does not map the tag-only related image:\n%s", itms)
	}
	kept, _, err := catalog.Filter(oc.Cat, catalog.FilterSpec{Packages: []catalog.PackageSpec{{Name: "operator-000"}, {Name: "operator-001"}}})
	must(t, err)
	for _, p := range kept.PackageNames() {
		for _, b := range kept.Package(p).Bundles {
			var keep []fbc.RelatedImage
			for _, ri := range b.RelatedImages {
				if !strings.Contains(ri.Image, "/ghost/") {
					keep = append(keep, ri)
				}
			}
			b.RelatedImages = keep
		}
	}
	if n := w.checkImages(w.dst, "m", kept, "/tagged/"); n == 0 {
		t.Errorf("no image of the catalog was mirrored")
	}
	if _, err := w.dst.ManifestDigest("m/catalogs/ghosts", "v1"); err != nil {
		t.Errorf("the catalog itself was not mirrored: %v", err)
	}
}
