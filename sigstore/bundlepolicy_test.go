package sigstore

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/distribution/reference"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/signature"

	"github.com/gapmirror/gapmirror/internal/cosigntest"
)

// TestBundleRule: the requirements of an image's scope are found as
// containers/image finds them, and turned into keys bundles are verified
// with (keyPath relative to the policy, keyData); requirements a bundle
// cannot satisfy offline say why.
func TestBundleRule(t *testing.T) {
	dir := t.TempDir()
	key := cosigntest.NewKey("publisher")
	if err := os.WriteFile(filepath.Join(dir, "cosign.pub"), key.PublicKeyPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	keyData := base64.StdEncoding.EncodeToString(key.PublicKeyPEM())
	policy, err := signature.NewPolicyFromBytes([]byte(`{"default":[{"type":"reject"}],"transports":{"docker":{
		"quay.io/org":[{"type":"sigstoreSigned","keyPath":"` + filepath.Join(dir, "cosign.pub") + `","signedIdentity":{"type":"matchRepository"}}],
		"quay.io/org/data":[{"type":"sigstoreSigned","keyData":"` + keyData + `"},{"type":"insecureAcceptAnything"}],
		"quay.io/org/keyless":[{"type":"sigstoreSigned","fulcio":{"caData":"` + keyData + `","oidcIssuer":"https://issuer","subjectEmail":"a@b"},"rekorPublicKeyData":"` + keyData + `"}],
		"quay.io/org/gpg":[{"type":"signedBy","keyType":"GPGKeys","keyPath":"/k.gpg"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		image  string
		keys   []string // each requirement's key sources
		unable string
	}{
		{"quay.io/org/app:v1", []string{"keyPath " + filepath.Join(dir, "cosign.pub")}, ""},
		{"quay.io/org/data:v1", []string{"keyData"}, ""},
		{"quay.io/org/keyless:v1", nil, "fulcio"},
		{"quay.io/org/gpg:v1", nil, `"signedBy"`},
		{"docker.io/library/busybox:latest", nil, `"reject"`},
	} {
		named, err := reference.ParseNormalizedNamed(c.image)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := docker.NewReference(named)
		if err != nil {
			t.Fatal(err)
		}
		rule := newBundleRule(requirementsFor(policy, ref), dir)
		if c.unable != "" {
			if !strings.Contains(rule.unable, c.unable) {
				t.Errorf("%s: unable %q, want it to say %s", c.image, rule.unable, c.unable)
			}
			continue
		}
		if rule.unable != "" || len(rule.requirements) != len(c.keys) {
			t.Errorf("%s: %+v, want keys %v", c.image, rule, c.keys)
			continue
		}
		for i, keys := range rule.requirements {
			if len(keys) != 1 || keys[0].From != c.keys[i] || !key.Public().Equal(keys[0].Key) {
				t.Errorf("%s: requirement %d: %+v, want the key from %s", c.image, i, keys, c.keys[i])
			}
		}
	}
}
