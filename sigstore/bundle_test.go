package sigstore

import (
	"errors"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/internal/cosigntest"
)

// TestVerifyBundle: a bundle built as cosign v3 signs an image verifies
// with its key, offline; a tampered payload or signature, another key,
// another image, an attestation instead of a signature and a bundle that
// is not one are refused, each saying why.
func TestVerifyBundle(t *testing.T) {
	key, other := cosigntest.NewKey("publisher"), cosigntest.NewKey("someone else")
	trusted := []publicKey{{Key: key.Public(), From: "keyPath cosign.pub"}}
	image := digest.FromString("image manifest")
	elsewhere := digest.FromString("another image's manifest")
	good, err := cosigntest.SignBundle(key, image)
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyBundle(good, image, trusted); err != nil {
		t.Fatalf("a good bundle: %v", err)
	}
	// One of several keys is enough.
	if err := verifyBundle(good, image, append([]publicKey{{Key: other.Public(), From: "keyPaths[0]"}}, trusted...)); err != nil {
		t.Fatalf("a good bundle, second key of two: %v", err)
	}

	payload, err := cosigntest.TamperPayload(good, elsewhere)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := cosigntest.TamperSignature(good)
	if err != nil {
		t.Fatal(err)
	}
	byOther, err := cosigntest.SignBundle(other, image)
	if err != nil {
		t.Fatal(err)
	}
	forOther, err := cosigntest.SignBundle(key, elsewhere)
	if err != nil {
		t.Fatal(err)
	}
	st, err := cosigntest.Statement(image, cosigntest.SLSAProvenanceType, map[string]any{"builder": "x"})
	if err != nil {
		t.Fatal(err)
	}
	attestation, err := cosigntest.SignStatement(key, st)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		bundle []byte
		keys   []publicKey
		want   []string
	}{
		{"tampered payload", payload, trusted, []string{"does not verify with the policy's key", "keyPath cosign.pub", "offline"}},
		{"tampered signature", sig, trusted, []string{"does not verify with the policy's key", "no transparency log"}},
		{"another key", byOther, trusted, []string{"does not verify with the policy's key"}},
		{"another image", forOther, trusted, []string{"it signs " + elsewhere.String(), "not this image's manifest " + image.String()}},
		{"attestation", attestation, trusted, []string{"an attestation of predicate " + cosigntest.SLSAProvenanceType}},
		{"not a bundle", []byte(`{"mediaType":"application/json"}`), trusted, []string{"not a Sigstore bundle"}},
		{"no key", good, nil, []string{"no key"}},
	} {
		err := verifyBundle(c.bundle, image, c.keys)
		t.Logf("%s: %v", c.name, err)
		if !errors.Is(err, errBundleRefused) {
			t.Errorf("%s: %v, want a refusal", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.name, err, w)
			}
		}
	}
}
