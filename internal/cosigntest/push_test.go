package cosigntest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

func pushImage(t *testing.T, target imagebuilder.Target) ocispec.Descriptor {
	t.Helper()
	img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(1, 512)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := imagebuilder.Push(context.Background(), target, "apps/app", "v1", img); err != nil {
		t.Fatal(err)
	}
	return ocispec.Descriptor{MediaType: img.MediaType, Digest: img.Digest, Size: int64(len(img.Manifest))}
}

// TestPushTagSchema: on distribution, every referrer lands by digest and
// the subject's sha256-<hex> index lists each once, pushes merged, not
// replaced; a second push of the same referrer adds nothing.
func TestPushTagSchema(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	target := imagebuilder.Target{URL: reg.URL(), Client: reg.Client()}
	subject := pushImage(t, target)
	refs, err := All(NewKey("publisher"), subject)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := PushAll(ctx, target, "apps/app", refs, true); err != nil {
		t.Fatal(err)
	}
	if err := Push(ctx, target, "apps/app", refs[0], true); err != nil {
		t.Fatal(err)
	}
	data, _, err := reg.Manifest("apps/app", tagSchemaTag(subject))
	if err != nil {
		t.Fatal(err)
	}
	var idx ocispec.Index
	if err := json.Unmarshal(data, &idx); err != nil {
		t.Fatal(err)
	}
	// The SBOM's signature is listed under the SBOM's own tag.
	if len(idx.Manifests) != 4 {
		t.Fatalf("referrers index lists %d manifests, want 4: %s", len(idx.Manifests), data)
	}
	for i, m := range idx.Manifests {
		if m.Digest != refs[i].Digest || m.ArtifactType != refs[i].ArtifactType {
			t.Errorf("index entry %d: %s %s, want %s %s", i, m.Digest, m.ArtifactType, refs[i].Digest, refs[i].ArtifactType)
		}
		if _, err := reg.ManifestDigest("apps/app", m.Digest.String()); err != nil {
			t.Errorf("referrer %s: %v", m.Digest, err)
		}
	}
	if _, _, err := reg.Manifest("apps/app", tagSchemaTag(refs[2].Descriptor())); err != nil {
		t.Errorf("the SBOM's referrers index: %v", err)
	}
}

// TestPushReferrersAPI: on a registry with the referrers API the subject's
// referrers are listed without a tag schema index.
func TestPushReferrersAPI(t *testing.T) {
	host := registrytest.StartReferrersAPI(t).Host()
	target := imagebuilder.Target{URL: host}
	subject := pushImage(t, target)
	refs, err := All(NewKey("publisher"), subject)
	if err != nil {
		t.Fatal(err)
	}
	if err := PushAll(context.Background(), target, "apps/app", refs, false); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + host + "/v2/apps/app/referrers/" + subject.Digest.String())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var idx ocispec.Index
	if err := json.Unmarshal(data, &idx); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("referrers: %s %v: %s", resp.Status, err, data)
	}
	if len(idx.Manifests) != 4 {
		t.Errorf("referrers API lists %d, want 4: %s", len(idx.Manifests), data)
	}
	if resp, err := http.Get("http://" + host + "/v2/apps/app/manifests/" + tagSchemaTag(subject)); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("a tag schema index was written beside the referrers API: %s", resp.Status)
		}
	}
}

// TestKeyDeterministic: a name always derives the same key, two names two.
func TestKeyDeterministic(t *testing.T) {
	a, b := NewKey("a"), NewKey("b")
	if string(a.PublicKeyPEM()) != string(NewKey("a").PublicKeyPEM()) || string(a.PublicKeyPEM()) == string(b.PublicKeyPEM()) {
		t.Error("keys are not derived from their names alone")
	}
}
