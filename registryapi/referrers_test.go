package registryapi

import (
	"context"
	"errors"
	"slices"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/types"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// TestReferrers: the referrers of an image, of one of its platform
// manifests and of a referrer are listed through the referrers API where
// the registry serves it (go-containerregistry's registry) and through the
// referrers tag schema where it does not (distribution), filtered by
// artifactType either way; a subject without referrers has none, and the
// tag schema index is merged, never clobbered, when added to.
func TestReferrers(t *testing.T) {
	t.Run("api", func(t *testing.T) {
		reg := registrytest.StartReferrersAPI(t)
		testReferrers(t, reg.Host(), reg.URL(), false)
	})
	t.Run("tag schema", func(t *testing.T) {
		reg := registrytest.Start(t, registrytest.Options{})
		testReferrers(t, reg.Host(), reg.URL(), true)
	})
}

func testReferrers(t *testing.T, host, u string, wantFallback bool) {
	ctx := context.Background()
	target := imagebuilder.Target{URL: u}
	idx, err := imagebuilder.BuildIndex(imagebuilder.IndexSpec{Images: []imagebuilder.ImageSpec{
		{Platform: imagebuilder.Platform{OS: "linux", Architecture: "amd64"}, Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(1, 512)}},
		{Platform: imagebuilder.Platform{OS: "linux", Architecture: "arm64"}, Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(2, 512)}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	const repo = "ns/app"
	if err := imagebuilder.PushIndex(ctx, target, repo, "v1", idx); err != nil {
		t.Fatal(err)
	}
	bundle, _ := imagebuilder.Referrer(idx.Descriptor(), imagebuilder.SigstoreBundleType, "", []byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}`), nil)
	att, _ := imagebuilder.Referrer(idx.Descriptor(), imagebuilder.InTotoType, "", []byte(`{"_type":"https://in-toto.io/Statement/v1"}`), nil)
	sbom, _ := imagebuilder.Referrer(idx.Images[0].Descriptor(), imagebuilder.SPDXType, "", []byte(`{"spdxVersion":"SPDX-2.3"}`), nil)
	sbomSig, _ := imagebuilder.Referrer(ociDesc(sbom), imagebuilder.NotationType, "application/jose+json", []byte(`{"payload":"x"}`), nil)
	for _, r := range []*imagebuilder.Image{bundle, att, sbom, sbomSig} {
		if err := imagebuilder.PushReferrer(ctx, target, repo, r); err != nil {
			t.Fatal(err)
		}
	}
	c, err := NewClient(host, &types.SystemContext{DockerInsecureSkipTLSVerify: types.OptionalBoolTrue, AuthFilePath: t.TempDir() + "/none.json"})
	if err != nil {
		t.Fatal(err)
	}
	check := func(subject digest.Digest, artifactType string, want ...*imagebuilder.Image) {
		t.Helper()
		refs, fallback, err := c.Referrers(ctx, repo, subject, artifactType)
		if err != nil || fallback != wantFallback {
			t.Fatalf("referrers of %s (%q): fallback %v, %v; want fallback %v", subject, artifactType, fallback, err, wantFallback)
		}
		var got, exp []string
		for _, r := range refs {
			got = append(got, r.Digest.String())
		}
		for _, w := range want {
			exp = append(exp, w.Digest.String())
		}
		slices.Sort(got)
		slices.Sort(exp)
		if !slices.Equal(got, exp) || refs == nil {
			t.Errorf("referrers of %s (%q): %v; want %v", subject, artifactType, got, exp)
		}
	}
	check(idx.Digest, "", bundle, att)
	check(idx.Digest, imagebuilder.SigstoreBundleType, bundle)
	check(idx.Images[0].Digest, "", sbom)
	check(sbom.Digest, "", sbomSig)
	check(idx.Images[1].Digest, "")
	check(digest.FromString("nothing here"), "")
	// distribution's 404 is an unrouted path's: the rest of the run reads
	// the tag schema straight away.
	if c.noReferrersAPI.Load() != wantFallback {
		t.Errorf("the client took the registry to lack the referrers API: %v", c.noReferrersAPI.Load())
	}
	// A list the API answered tells that it is there: pushing a referrer
	// to this host needs no probe.
	if c.referrersAPI.Load() == wantFallback {
		t.Errorf("after listing referrers, the client knows the API is there: %v", c.referrersAPI.Load())
	}
	if api, err := c.HasReferrersAPI(ctx, repo, idx.Digest); err != nil || api == wantFallback {
		t.Errorf("HasReferrersAPI: %v, %v", api, err)
	}

	// Adding to the tag schema index keeps what is there.
	if !wantFallback {
		return
	}
	extra, _ := imagebuilder.Referrer(idx.Descriptor(), imagebuilder.SPDXType, "", []byte(`{"spdxVersion":"SPDX-2.3","name":"extra"}`), nil)
	if err := imagebuilder.Push(ctx, target, repo, "", extra); err != nil {
		t.Fatal(err)
	}
	desc, err := ReferrerDescriptor(extra.Manifest, extra.MediaType)
	if err != nil || desc.ArtifactType != imagebuilder.SPDXType {
		t.Fatalf("descriptor of a referrer: %+v, %v", desc, err)
	}
	old, _ := ReferrerDescriptor(bundle.Manifest, "")
	old.Annotations = map[string]string{"changed": "no"} // an entry already there is not replaced
	for range 2 {
		if err := c.AddFallbackReferrers(ctx, repo, idx.Digest, []v1.Descriptor{desc, old}); err != nil {
			t.Fatal(err)
		}
	}
	check(idx.Digest, "", bundle, att, extra)
	refs, _, _ := c.Referrers(ctx, repo, idx.Digest, "")
	for _, r := range refs {
		if r.Annotations["changed"] != "" {
			t.Errorf("an entry of the index was replaced: %+v", r)
		}
	}
	// A subject tagged by its own digest (as oc-mirror tags an image
	// named by digest) keeps its tag.
	if err := imagebuilder.PushManifest(ctx, target, repo, FallbackTag(idx.Images[1].Digest), idx.Images[1].MediaType, idx.Images[1].Manifest); err != nil {
		t.Fatal(err)
	}
	check(idx.Images[1].Digest, "")
	if err := c.AddFallbackReferrers(ctx, repo, idx.Images[1].Digest, []v1.Descriptor{desc}); !errors.Is(err, ErrFallbackTagTaken) {
		t.Errorf("referrers index over the subject's own tag: %v", err)
	}
}

func ociDesc(img *imagebuilder.Image) ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: img.MediaType, Digest: img.Digest, Size: int64(len(img.Manifest))}
}
