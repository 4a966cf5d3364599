package sections

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/catalog"
	"github.com/gapmirror/gapmirror/imageset/catalogimage"
	"github.com/gapmirror/gapmirror/imageset/fbc"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/ocistore"
	"github.com/gapmirror/gapmirror/transfer"
	"github.com/gapmirror/gapmirror/workspace"
)

// realCatalogDir holds real community catalogs in the shared workspace
// next to the repository (not part of it).
const realCatalogDir = "../../shared/realdata/catalogs/v4.18"

// catalogImageSpec is an opm-style catalog image holding files under /configs.
func catalogImageSpec(p imagebuilder.Platform, files map[string][]byte) imagebuilder.ImageSpec {
	configs := map[string][]byte{}
	for name, data := range files {
		configs["configs/"+name] = data
	}
	return imagebuilder.ImageSpec{
		Platform:   p,
		Layers:     []imagebuilder.LayerSpec{imagebuilder.RandomLayer(1, 4096), imagebuilder.FileLayer(configs)},
		Labels:     map[string]string{catalogimage.ConfigsLabel: "/configs"},
		Entrypoint: []string{"/bin/opm"},
		Cmd:        []string{"serve", "/configs", "--cache-dir=/tmp/cache"},
	}
}

// TestLayoutWithSeveralPlatformImages: an OCI layout naming one image per
// platform (no index) is read as one multi-platform catalog.
func TestLayoutWithSeveralPlatformImages(t *testing.T) {
	files := map[string][]byte{"foo/catalog.json": []byte(`{"schema":"olm.package","name":"foo","defaultChannel":"stable"}
{"schema":"olm.channel","package":"foo","name":"stable","entries":[{"name":"foo.v1.0.0"}]}
{"schema":"olm.bundle","package":"foo","name":"foo.v1.0.0","image":"quay.example.com/foo/bundle@sha256:` + strings.Repeat("1", 64) + `","properties":[{"type":"olm.package","value":{"packageName":"foo","version":"1.0.0"}}]}
`)}
	layout := filepath.Join(t.TempDir(), "layout")
	for _, arch := range []string{"amd64", "arm64"} {
		img, err := imagebuilder.Build(catalogImageSpec(imagebuilder.Platform{OS: "linux", Architecture: arch}, files))
		if err != nil {
			t.Fatal(err)
		}
		if err := imagebuilder.WriteLayout(layout, arch, img); err != nil {
			t.Fatal(err)
		}
	}
	store, err := ocistore.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	ci, err := FetchCatalog(context.Background(), "oci://"+layout, nil, store, transfer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := store.ReadBlob(ci.Digest)
	if err != nil {
		t.Fatal(err)
	}
	var idx ocispec.Index
	if err := json.Unmarshal(data, &idx); err != nil || len(idx.Manifests) != 2 || idx.MediaType != ocispec.MediaTypeImageIndex {
		t.Fatalf("want an index over the two platform images, got %s (%v)", data, err)
	}
	c, err := ci.Load(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got := c.PackageNames(); len(got) != 1 || got[0] != "foo" {
		t.Errorf("packages %v, want [foo]", got)
	}
	// The gathered index is a blob of the store like any other: an archive
	// of the rebuilt catalog carries it.
	if _, err := transfer.StoreBlobs(store, imageset.Image{Digest: ci.Digest.String()}); err != nil {
		t.Errorf("store cannot walk the gathered index: %v", err)
	}
}

// TestRealCatalogContribution filters real community catalogs packed into
// a catalog image and checks the Set: the rebuilt catalog and exactly the
// images of the kept bundles, each by digest, with who needs it. Tag-only
// references cannot be pinned without registry access and must be
// reported as failures naming their bundles, not dropped silently.
func TestRealCatalogContribution(t *testing.T) {
	if _, err := os.Stat(realCatalogDir); err != nil {
		t.Skipf("real catalogs not available at %s (shared workspace data, not part of the repository): %v", realCatalogDir, err)
	}
	files := map[string][]byte{}
	entries, err := os.ReadDir(realCatalogDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(realCatalogDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = data
	}
	layout := filepath.Join(t.TempDir(), "real-index")
	img, err := imagebuilder.Build(catalogImageSpec(imagebuilder.Platform{}, files))
	if err != nil {
		t.Fatal(err)
	}
	if err := imagebuilder.WriteLayout(layout, "v4.18", img); err != nil {
		t.Fatal(err)
	}
	src, err := fbc.LoadFS(os.DirFS(realCatalogDir), ".")
	if err != nil {
		t.Fatal(err)
	}
	oc := imageset.OperatorCatalog{Catalog: "oci://" + layout, TargetCatalog: "community/real-index", TargetTag: "v4.18", Packages: []imageset.Package{
		{Name: "apicurio-registry-3"},
		{Name: "dell-csm-operator"},
		{Name: "hive-operator"},
		{Name: "infinispan", Channels: []imageset.Channel{{Name: src.Package("infinispan").DefaultChannel}}},
		{Name: "kubernaut-operator"},
	}}
	want, _, err := catalog.Filter(src, FilterSpec(oc))
	if err != nil {
		t.Fatal(err)
	}

	store, err := ocistore.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	r := &imageset.Resolving{Set: &imageset.Set{}, Resolution: &imageset.Resolution{}, Parallel: 4}
	ops := &operators{trip: quietEnv(), store: store, plan: &workspace.Plan{}}
	cfg := &imageset.ImageSetConfiguration{Mirror: imageset.Mirror{Operators: []imageset.OperatorCatalog{oc}}}
	if err := ops.Contribute(context.Background(), cfg, r); err != nil {
		t.Fatal(err)
	}

	byOrigin := map[string]imageset.Image{}
	for _, img := range r.Set.Images {
		byOrigin[img.Origin] = img
	}
	failed := map[string]imageset.Unresolved{}
	for _, f := range r.Resolution.Failed {
		failed[f.Origin] = f
	}
	cat, ok := byOrigin[oc.Catalog]
	if !ok || !cat.Built || cat.Destination != "community/real-index:v4.18" || cat.Kind != imageset.KindOperatorCatalog {
		t.Errorf("catalog entry %+v, want a built catalog at community/real-index:v4.18", cat)
	}
	refs := want.RelatedImages()
	if len(refs) < 5 {
		t.Fatalf("the selection needs only %d images: pick bigger packages", len(refs))
	}
	for _, ref := range refs {
		named, err := reference.ParseNormalizedNamed(ref.Image)
		if err != nil {
			continue // reported as a warning
		}
		origin := reference.TagNameOnly(named).String()
		if _, byDigest := named.(reference.Canonical); !byDigest {
			f, ok := failed[origin]
			if !ok || !strings.Contains(f.Why, "bundle "+ref.Users[0].Bundle) {
				t.Errorf("tag-only %s: want a failure naming bundle %s, got %+v", origin, ref.Users[0].Bundle, f)
			}
			continue
		}
		img, ok := byOrigin[origin]
		if !ok {
			t.Errorf("%s (needed by %s) is not in the set", origin, ref.Users[0].Bundle)
			continue
		}
		wantKind := imageset.KindOperatorRelated
		if ref.Bundle {
			wantKind = imageset.KindOperatorBundle
		}
		if img.Kind != wantKind || !strings.HasPrefix(img.Source, named.Name()+"@sha256:") || img.DestinationTag() != imageset.DigestTag(named.(reference.Canonical).Digest()) {
			t.Errorf("%s: got %+v", origin, img)
		}
		if !strings.Contains(strings.Join(img.Why, "\n"), "package "+ref.Users[0].Package+" bundle "+ref.Users[0].Bundle) {
			t.Errorf("%s: why %v does not name bundle %s", origin, img.Why, ref.Users[0].Bundle)
		}
	}
	if got, wantN := len(r.Set.Images)+len(r.Resolution.Failed), len(refs)+1; got != wantN {
		t.Errorf("%d images in the set and %d failed, want %d in all (the catalog and its %d images)", len(r.Set.Images), len(r.Resolution.Failed), wantN, len(refs))
	}

	t.Logf("%d images in the set, %d tag-only references reported, %d warnings", len(r.Set.Images), len(r.Resolution.Failed), len(r.Resolution.Warnings))

	// The rebuilt catalog holds exactly the kept bundles.
	rebuilt, err := (&CatalogImage{Origin: "rebuilt", Digest: digest.Digest(cat.Digest), Blobs: store}).Load(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range want.PackageNames() {
		if rebuilt.Package(p) == nil || len(rebuilt.Package(p).Bundles) != len(want.Package(p).Bundles) {
			t.Errorf("rebuilt catalog: package %s differs from the filter's result", p)
		}
	}
	if len(rebuilt.PackageNames()) != len(want.PackageNames()) {
		t.Errorf("rebuilt catalog has packages %v, want %v", rebuilt.PackageNames(), want.PackageNames())
	}
}

func quietEnv() *Env {
	return &Env{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Copy: transfer.Options{Retries: -1}}
}
