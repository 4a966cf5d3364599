package archivesign

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/verify"
)

// Keys cosign wrote, from cosign's pkg/cosign/keys_test.go (password "hello").
// COSIGN labeled RSA key
const pemcosignkey = `-----BEGIN ENCRYPTED COSIGN PRIVATE KEY-----
eyJrZGYiOnsibmFtZSI6InNjcnlwdCIsInBhcmFtcyI6eyJOIjozMjc2OCwiciI6
OCwicCI6MX0sInNhbHQiOiJ4WWdoc09JTUxUWGNOT0RsclNIOUNKc1FlOVFnZmN1
cmUrMXlLdHh1TlkwPSJ9LCJjaXBoZXIiOnsibmFtZSI6Im5hY2wvc2VjcmV0Ym94
Iiwibm9uY2UiOiI0cS9PSlVmaXJkSUkrUjZ0ajZBMmcyQ0JqL25xdFNicCJ9LCJj
aXBoZXJ0ZXh0IjoiKzB4Q3NzcFN0WStBczdKanJpOWtsbHBWd2JhcUI4ZWJNdWto
eS9aVE1MSXRsL3B1YS9jWVJvbytLRGxMWWdmOW1kSjk4K1FnQW9oTktoYnJPMTcw
MHdBY1JTMjFDOE4zQUNJRUVZaWpOMllBNnMraGJSbkhjUnd4eGhDMDFtb2FvL0dO
Y1pmbEJheXZMV3pXblo4d2NDZ2ZpT1o1VXlRTEFJMHh0dnR6dEh3cTdDV1Vhd3V4
RlhlNDZzck9TUE9SNHN6bytabWErUGovSFE9PSJ9
-----END ENCRYPTED COSIGN PRIVATE KEY-----`

// SIGSTORE labeled key
const pemsigstorekey = `-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----
eyJrZGYiOnsibmFtZSI6InNjcnlwdCIsInBhcmFtcyI6eyJOIjozMjc2OCwiciI6
OCwicCI6MX0sInNhbHQiOiI3T3VGd2VsbWZZNXVId2NoaURSc210anNwZ2ZlZjFG
Mk5lOGFDTjVLYVpZPSJ9LCJjaXBoZXIiOnsibmFtZSI6Im5hY2wvc2VjcmV0Ym94
Iiwibm9uY2UiOiJQNHk4OGhCb3ZTa09MbXN0bFVBaGJwdDJ0K2xTNUxQSCJ9LCJj
aXBoZXJ0ZXh0IjoiMnB1QzdyZldJOWh3bnJlQ2s4aUZDRlVwQlRrSzRJNlIvbFBF
cnBDekpXUGpJWXl4eGVIL1A2VW52cFJHdVhla1NNb3JMdGhLamdoQ1JlNy82NDVH
QWtoVm1LRC92eEF0S2EvbE1abENSQ3FlekJGUFd1dzNpeFRtZ2xhb2J1ZFVSbUVs
bmNGOGlZbzBTMVl6Y1ZOMVFwY2J2c0dNcUlYRzVlbmdteGp5dCtBcXlyZTF0Q0Y0
V01tU1BlaEljNlBqd2h1Q2xHaVpJUWRvTGc9PSJ9
-----END ENCRYPTED SIGSTORE PRIVATE KEY-----`

// sign signs data with the key file at p and checks the bundle with the
// public key as cosign verify-blob --key would.
func signAndVerify(t *testing.T, p string, password string) {
	t.Helper()
	s, err := LoadSigner(p, func() ([]byte, error) { return []byte(password), nil })
	if err != nil {
		t.Fatal(err)
	}
	data := []byte(`{"formatVersion":3}` + "\n")
	b, err := s.Sign(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := s.GetPublicKeyPem()
	if err != nil {
		t.Fatal(err)
	}
	pubPath := filepath.Join(t.TempDir(), "cosign.pub")
	if err := os.WriteFile(pubPath, []byte(pub), 0o644); err != nil {
		t.Fatal(err)
	}
	v, err := LoadVerifier(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	var bb bundle.Bundle
	if err := bb.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	if _, err := v.v.Verify(&bb, verify.NewPolicy(verify.WithArtifact(bytes.NewReader(data)), verify.WithKey())); err != nil {
		t.Errorf("%s: the bundle does not verify: %v", p, err)
	}
	if _, err := v.v.Verify(&bb, verify.NewPolicy(verify.WithArtifact(strings.NewReader("other")), verify.WithKey())); err == nil {
		t.Errorf("%s: the bundle verifies other data", p)
	}
	if v.Fingerprint() != s.fingerprint() {
		t.Errorf("fingerprints differ: %s, %s", v.Fingerprint(), s.fingerprint())
	}
}

// TestKeys: the keys generate-key-pair makes, keys cosign made (SIGSTORE
// and older COSIGN labels, ECDSA and RSA) and unencrypted PKCS#8 and EC
// keys all sign bundles their public key verifies; a wrong password is
// refused, saying so.
func TestKeys(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	priv, pub, err := GenerateKeyPair([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	if !Encrypted(priv) || !bytes.HasPrefix(pub, []byte("-----BEGIN PUBLIC KEY-----")) {
		t.Errorf("generated keys: private encrypted %v, public %q", Encrypted(priv), pub)
	}
	generated := write("gen.key", priv)
	signAndVerify(t, generated, "pw")
	signAndVerify(t, write("sigstore.key", []byte(pemsigstorekey)), "hello")
	signAndVerify(t, write("cosign-rsa.key", []byte(pemcosignkey)), "hello")

	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	signAndVerify(t, write("pkcs8.key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), "")
	ec, _ := x509.MarshalECPrivateKey(k)
	signAndVerify(t, write("ec.key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ec})), "")

	_, err = LoadSigner(generated, func() ([]byte, error) { return []byte("wrong"), nil })
	if err == nil || !strings.Contains(err.Error(), "cannot be decrypted") || !strings.Contains(err.Error(), "COSIGN_PASSWORD") {
		t.Errorf("wrong password: %v", err)
	}
	if _, err := LoadVerifier(generated); err == nil || !strings.Contains(err.Error(), "is a private key") {
		t.Errorf("a private key as --verify-key: %v", err)
	}
}

func TestBundleName(t *testing.T) {
	for in, want := range map[string]string{"mirror_000001.tar": "mirror_000001.sigstore.json", "mirror_0002_000001.tar": "mirror_0002_000001.sigstore.json"} {
		if got := bundleName(in); got != want {
			t.Errorf("BundleName(%s) = %s, want %s", in, got, want)
		}
	}
}
