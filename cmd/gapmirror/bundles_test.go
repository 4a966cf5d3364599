package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/internal/cosigntest"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// TestSecurePolicyBundles: with --secure-policy and a policy requiring
// sigstoreSigned with the publisher's key, an image with no tag-scheme
// signature whose cosign v3 bundle (an OCI 1.1 referrer, beside an
// attestation, an SBOM and a Notation signature) verifies with the key is
// mirrored; one whose bundle was tampered with, and one whose bundle
// another key signed, are refused, the refusal naming the image, the
// referrer and why. On a source with the referrers API
// (go-containerregistry's registry) and one without it (distribution: the
// referrers tag schema).
func TestSecurePolicyBundles(t *testing.T) {
	t.Parallel()
	for _, api := range []bool{true, false} {
		name := "tag schema"
		if api {
			name = "referrers API"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, registrytest.Options{})
			target, host := w.upTarget(), w.up.Host()
			if api {
				host = cosigntest.StartReferrersRegistry(t)
				target = imagebuilder.Target{URL: host}
			}
			ctx := context.Background()
			key := cosigntest.NewKey("publisher")
			push := func(repo string, seed uint64) ocispec.Descriptor {
				img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(seed, 4<<10)}})
				must(t, err)
				must(t, imagebuilder.Push(ctx, target, repo, "v1", img))
				w.images = append(w.images, example{Ref: host + "/" + repo + ":v1", Repo: repo, Tag: "v1", Digest: img.Digest})
				return ocispec.Descriptor{MediaType: img.MediaType, Digest: img.Digest, Size: int64(len(img.Manifest))}
			}
			// Signed: cosign sign, cosign attest, an SBOM, a Notation signature.
			signed := push("apps/signed", 1)
			all, err := cosigntest.All(key, signed)
			must(t, err)
			must(t, cosigntest.PushAll(ctx, target, "apps/signed", all, !api))
			// Tampered: the signature's bundle changed after signing.
			tamperedImg := push("apps/tampered", 2)
			good, err := cosigntest.SignBundle(key, tamperedImg.Digest)
			must(t, err)
			bad, err := cosigntest.TamperSignature(good)
			must(t, err)
			tampered, err := cosigntest.BundleReferrer(tamperedImg, bad, cosigntest.SignPredicateType)
			must(t, err)
			must(t, cosigntest.Push(ctx, target, "apps/tampered", tampered, !api))
			// Signed by a key the policy does not trust.
			otherImg := push("apps/other-key", 3)
			byOther, err := cosigntest.Signature(cosigntest.NewKey("someone else"), otherImg)
			must(t, err)
			must(t, cosigntest.Push(ctx, target, "apps/other-key", byOther, !api))

			keyPath := filepath.Join(w.dir, "cosign.pub")
			must(t, os.WriteFile(keyPath, key.PublicKeyPEM(), 0o644))
			policy := filepath.Join(w.dir, "policy.json")
			must(t, os.WriteFile(policy, []byte(`{"default":[{"type":"reject"}],"transports":{"docker":{"`+host+`":[`+
				`{"type":"sigstoreSigned","keyPath":"`+keyPath+`","signedIdentity":{"type":"matchRepository"}}]}}}`), 0o644))

			code, out, errOut := w.gapmirror("mirror", "-c", w.isc(""), "--secure-policy", "--policy", policy,
				"--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/m")
			if code != 8 {
				t.Fatalf("exit %d (want 8: two images refused), summary:\n%s\nstderr:\n%s", code, out, errOut)
			}
			for _, want := range []string{
				"apps/tampered:v1", "cosign bundle referrer " + tampered.Digest.String(), "does not verify with the policy's key", "offline",
				"apps/other-key:v1", "cosign bundle referrer " + byOther.Digest.String(),
				"refused by the signature policy",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("the summary does not say %q:\n%s", want, out)
				}
			}
			for _, ex := range w.images {
				_, err := w.dst.ManifestDigest("m/"+ex.Repo, ex.Tag)
				if ok := ex.Repo == "apps/signed"; ok != (err == nil) {
					t.Errorf("%s: accepted %v, at the mirror: %v", ex.Ref, ok, err)
				}
			}
			w.assertComplete(w.dst, "m/apps/signed", signed.Digest)
		})
	}
}
