package sigstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/types"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
	"github.com/gapmirror/gapmirror/transfer"
)

// signatureTestOptions reach the test registries over plain HTTP, with an
// empty registries.conf and auth file of the test's own.
func signatureTestOptions(t *testing.T) transfer.RegistryOptions {
	conf, auth := registrytest.ClientFiles(t)
	return transfer.RegistryOptions{TLSVerify: types.OptionalBoolFalse, RegistriesConf: conf, AuthFile: auth}
}

// TestNoChangeChecksShareOneClient: on a no-change rerun, the mirror's
// existence checks, the upstream signature lookups and tag resolutions cost
// one request per image each, not a ping (GET /v2/) and a HEAD per image as a
// containers/image client per lookup did; and they still tell present
// from absent (a changed tag is copied, a missing signature is none).
func TestNoChangeChecksShareOneClient(t *testing.T) {
	ctx := context.Background()
	up := registrytest.Start(t, registrytest.Options{})
	dst := registrytest.Start(t, registrytest.Options{})
	set := &imageset.Set{}
	const n = 12
	for i := 0; i < n; i++ {
		img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(uint64(100+i), 4<<10)}})
		if err != nil {
			t.Fatal(err)
		}
		repo := fmt.Sprintf("ns/app-%d", i)
		if err := imagebuilder.Push(ctx, imagebuilder.Target{URL: up.URL()}, repo, "v1", img); err != nil {
			t.Fatal(err)
		}
		set.Images = append(set.Images, imageset.Image{Source: up.Host() + "/" + repo + "@" + img.Digest.String(), Origin: up.Host() + "/" + repo + ":v1",
			Digest: img.Digest.String(), Destination: repo + ":v1", Kind: imageset.KindAdditional})
	}
	src := transfer.NewUpstream(signatureTestOptions(t))
	mir, err := transfer.NewMirror(dst.Host()+"/m", signatureTestOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if res := transfer.Copy(ctx, set, src, mir, transfer.Options{ParallelImages: 4}); res.Err() != nil {
		t.Fatal(res.Err())
	}

	// The rerun, with fresh clients as a new process has.
	src = transfer.NewUpstream(signatureTestOptions(t))
	mir, err = transfer.NewMirror(dst.Host()+"/m", signatureTestOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	onDst := registrytest.NewRequestCounter()
	dst.SetWrap(onDst.Wrap)
	res := transfer.Copy(ctx, set, src, mir, transfer.Options{ParallelImages: 4})
	if res.Err() != nil {
		t.Fatal(res.Err())
	}
	if len(res.Skipped) != n {
		t.Errorf("rerun skipped %d images, want %d", len(res.Skipped), n)
	}
	if got := onDst.N["HEAD manifest"]; got != n {
		t.Errorf("rerun: %d manifest HEADs on the mirror, want %d (%v)", got, n, onDst.N)
	}
	// Without the workspace's records the run is a first push as far as it
	// knows: it reads the catalog once, which lists every repository.
	if got := onDst.Total(); got != n+2 || onDst.N["GET catalog"] != 1 {
		t.Errorf("rerun: %d requests on the mirror, want %d, one per image, one ping and one catalog reading (%v)", got, n+2, onDst.N)
	}

	onUp := registrytest.NewRequestCounter()
	up.SetWrap(onUp.Wrap)
	for _, img := range set.Images {
		named, err := reference.ParseNormalizedNamed(img.Source)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := lookupSignature(ctx, src, nil, signatureLookup{repo: named.Name(), manifest: digest.Digest(img.Digest)})
		if err != nil || sig != "" {
			t.Fatalf("signature of %s: %q, %v; want none", img.Source, sig, err)
		}
	}
	if got := onUp.Total(); got != n+1 {
		t.Errorf("%d signature lookups cost %d requests upstream, want %d, one per lookup and one ping (%v)", n, got, n+1, onUp.N)
	}

	// Resolving a tag upstream: one GET, and the digest it names.
	onUp.N = map[string]int{}
	for _, img := range set.Images {
		named, err := reference.ParseNormalizedNamed(img.Origin)
		if err != nil {
			t.Fatal(err)
		}
		if d, err := src.ResolveDigest(ctx, named); err != nil || d.String() != img.Digest {
			t.Fatalf("ResolveDigest(%s) = %s, %v; want %s", named, d, err, img.Digest)
		}
	}
	if got := onUp.Total(); got != n {
		t.Errorf("resolving %d tags cost %d requests upstream, want %d (%v)", n, got, n, onUp.N)
	}

	// A tag that now names something else is not taken for present.
	moved := set.Images[0]
	moved.Digest = set.Images[1].Digest
	if has, err := mir.HasManifest(ctx, moved, digest.Digest(moved.Digest)); err != nil || has {
		t.Errorf("HasManifest of a moved tag: %v, %v; want false", has, err)
	}
	missing := set.Images[0]
	missing.Destination = "ns/never-copied:v1"
	if has, err := mir.HasManifest(ctx, missing, digest.Digest(missing.Digest)); err != nil || has {
		t.Errorf("HasManifest of a repository never copied: %v, %v; want false", has, err)
	}
}
