package release_test

import (
	"bytes"
	"crypto"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/gapmirror/gapmirror/imageset/release"
	"github.com/gapmirror/gapmirror/internal/releasetest"
)

const releaseRepo = "quay.io/openshift-release-dev/ocp-release"

// testRelease is a planned release with a generated digest.
func testRelease(version string) release.Release {
	d := releasetest.PayloadDigest("amd64", version)
	return release.Release{Version: version, Arch: "amd64", Type: release.TypeOCP, Payload: releaseRepo + "@" + d, Digest: d}
}

func newKey(t *testing.T, seed string) *releasetest.Key {
	t.Helper()
	k, err := releasetest.NewKey(seed)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func sign(t *testing.T, k *releasetest.Key, digest, ref string) []byte {
	t.Helper()
	s, err := k.SignRelease(digest, ref)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestKeysAreDeterministic(t *testing.T) {
	a, b, c := newKey(t, "trusted"), newKey(t, "trusted"), newKey(t, "other")
	if a.Fingerprint() != b.Fingerprint() || string(a.PublicKey()) != string(b.PublicKey()) {
		t.Error("the same seed gave two keys")
	}
	if a.Fingerprint() == c.Fingerprint() {
		t.Error("two seeds gave the same key")
	}
	if !strings.HasSuffix(a.Fingerprint(), a.KeyID()) {
		t.Errorf("key ID %s is not the end of fingerprint %s", a.KeyID(), a.Fingerprint())
	}
}

func TestVerifySignatures(t *testing.T) {
	trusted, other := newKey(t, "trusted"), newKey(t, "other")
	keyring, err := release.NewKeyring(trusted.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	defer keyring.Close()
	r := testRelease("4.18.1")
	tag := releaseRepo + ":4.18.1-x86_64"
	good := sign(t, trusted, r.Digest, tag)
	forged := sign(t, other, r.Digest, tag)
	otherDigest := sign(t, trusted, releasetest.PayloadDigest("amd64", "4.18.2"), tag)
	wrongIdentity := sign(t, trusted, r.Digest, "quay.io/evil/ocp-release:4.18.1-x86_64")
	notSimpleSigning, err := trusted.Sign([]byte(`{"critical":{"type":"cosign container image signature","image":{"docker-manifest-digest":"` + r.Digest + `"},"identity":{"docker-reference":"` + tag + `"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	unknownCritical, err := trusted.Sign([]byte(`{"critical":{"type":"atomic container signature","image":{"docker-manifest-digest":"` + r.Digest + `"},"identity":{"docker-reference":"` + tag + `"},"extra":1},"optional":{}}`))
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name     string
		sigs     [][]byte
		status   release.VerdictStatus
		index    int
		problems []string
	}{
		{"valid", [][]byte{good}, release.StatusVerified, 1, nil},
		{"missing", nil, release.StatusRefused, 0, []string{"no signature found"}},
		{"unknown key", [][]byte{forged}, release.StatusRefused, 0, []string{"signature-1 is made with an unknown key " + other.KeyID(), trusted.Fingerprint()}},
		{"another digest", [][]byte{otherDigest}, release.StatusRefused, 0, []string{"signature-1 signs another digest " + releasetest.PayloadDigest("amd64", "4.18.2"), "the release is " + r.Digest}},
		{"wrong identity", [][]byte{wrongIdentity}, release.StatusRefused, 0, []string{"wrong identity", "quay.io/evil/ocp-release:4.18.1-x86_64", releaseRepo}},
		{"garbage", [][]byte{[]byte("not a signature")}, release.StatusRefused, 0, []string{"signature-1 is malformed: not an OpenPGP signed message"}},
		{"not simple signing", [][]byte{notSimpleSigning}, release.StatusRefused, 0, []string{"is malformed", "cosign container image signature"}},
		{"unknown critical field", [][]byte{unknownCritical}, release.StatusRefused, 0, []string{"is malformed", "extra"}},
		{"second signature valid", [][]byte{forged, good}, release.StatusVerified, 2, nil},
		{"every problem named", [][]byte{forged, otherDigest}, release.StatusRefused, 0, []string{"signature-1 is made with an unknown key", "signature-2 signs another digest"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := keyring.Check(r, c.sigs)
			if v.Status != c.status || v.Index != c.index {
				t.Fatalf("status %s index %d, want %s %d (reason %q)", v.Status, v.Index, c.status, c.index, v.Reason)
			}
			if len(v.Signatures) != len(c.sigs) {
				t.Errorf("%d signatures returned, %d given", len(v.Signatures), len(c.sigs))
			}
			if c.status == release.StatusVerified {
				if v.Err() != nil || v.Fingerprint != trusted.Fingerprint() || v.SignedReference != tag {
					t.Errorf("err %v fingerprint %s reference %s", v.Err(), v.Fingerprint, v.SignedReference)
				}
				valid := v.Valid()
				if len(valid) != 1 || valid[0].Index != c.index || string(valid[0].Data) != string(good) {
					t.Errorf("valid signatures %+v", valid)
				}
				return
			}
			err := v.Err()
			if err == nil || !errors.Is(err, release.ErrReleaseNotVerified) {
				t.Fatalf("Err() = %v", err)
			}
			mustContain(t, err.Error(), append([]string{"release 4.18.1", r.Digest, "refused"}, c.problems...)...)
			if len(v.Valid()) != 0 {
				t.Error("a refused release has valid signatures")
			}
		})
	}
}

func TestAcceptIdentities(t *testing.T) {
	trusted := newKey(t, "trusted")
	keyring, err := release.NewKeyring(trusted.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	d := releasetest.PayloadDigest("amd64", "4.18.1")
	r := release.Release{Version: "4.18.1", Payload: "registry.internal:5000/openshift/release-images@" + d, Digest: d}
	sigs := [][]byte{sign(t, trusted, d, releaseRepo+":4.18.1-x86_64")}
	if v := keyring.Check(r, sigs); v.Status != release.StatusRefused {
		t.Errorf("upstream identity accepted for a mirrored payload without AcceptIdentities")
	}
	if v := keyring.Check(r, sigs, releaseRepo); v.Status != release.StatusVerified {
		t.Errorf("status %s: %s", v.Status, v.Reason)
	}
}

func TestVerifierWithSignatureStore(t *testing.T) {
	trusted, other := newKey(t, "trusted"), newKey(t, "other")
	keyring, err := release.NewKeyring(trusted.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	good, bad, unsigned := testRelease("4.18.1"), testRelease("4.18.2"), testRelease("4.18.3")
	store := releasetest.NewSignatureServer()
	store.Put(good.Digest, sign(t, other, good.Digest, releaseRepo+":4.18.1-x86_64"), sign(t, trusted, good.Digest, releaseRepo+":4.18.1-x86_64"))
	store.Put(bad.Digest, sign(t, other, bad.Digest, releaseRepo+":4.18.2-x86_64"))
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		store.ServeHTTP(w, r)
	}))
	defer srv.Close()

	v := &release.Verifier{Keyring: keyring, Source: &release.SignatureStore{URL: srv.URL + "/pub/signatures/", HTTPClient: srv.Client()}, Concurrency: 1}
	verdicts := v.VerifyAll(ctx, []release.Release{good, bad, unsigned})
	if len(verdicts) != 3 {
		t.Fatalf("%d verdicts", len(verdicts))
	}
	if verdicts[0].Release.Version != "4.18.1" || verdicts[0].Status != release.StatusVerified || verdicts[0].Index != 2 {
		t.Errorf("4.18.1: %s index %d %s", verdicts[0].Status, verdicts[0].Index, verdicts[0].Reason)
	}
	mustContain(t, paths[0], "/pub/signatures/sha256="+strings.TrimPrefix(good.Digest, "sha256:")+"/signature-1")
	if verdicts[1].Status != release.StatusRefused {
		t.Errorf("4.18.2: %s", verdicts[1].Status)
	}
	mustContain(t, verdicts[1].Reason, "release 4.18.2", "unknown key")
	if verdicts[2].Status != release.StatusRefused {
		t.Errorf("4.18.3: %s", verdicts[2].Status)
	}
	mustContain(t, verdicts[2].Reason, "release 4.18.3", "no signature found at "+srv.URL+"/pub/signatures/sha256=", "/signature-1")
}

func TestVerifierUnreachableStore(t *testing.T) {
	keyring, err := release.NewKeyring(newKey(t, "trusted").PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	r := testRelease("4.18.1")
	v := (&release.Verifier{Keyring: keyring, Source: &release.SignatureStore{URL: url}}).Verify(ctx, r)
	if v.Status != release.StatusRefused {
		t.Fatalf("status %s", v.Status)
	}
	mustContain(t, v.Err().Error(), "release 4.18.1", "could not be fetched", url, release.EnvSignatureURL)

	// A store that fails is not "no signature".
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) }))
	defer failing.Close()
	_, err = (&release.SignatureStore{URL: failing.URL, HTTPClient: failing.Client()}).Signatures(ctx, r.Digest)
	if err == nil {
		t.Fatal("HTTP 500 from the store was taken as no signature")
	}
	mustContain(t, err.Error(), "500", "signature-1")
}

// TestVerifierStoreFailsAfterAGoodSignature: a store that answers
// signature-1, a trusted signature of the release, and then fails on
// signature-2 has proved the release: it is verified, with the signature
// read; a store failing after an untrusted signature-1 still refuses it
// with the failure.
func TestVerifierStoreFailsAfterAGoodSignature(t *testing.T) {
	trusted, other := newKey(t, "trusted"), newKey(t, "other")
	keyring, err := release.NewKeyring(trusted.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	good, bad := testRelease("4.18.1"), testRelease("4.18.2")
	store := releasetest.NewSignatureServer()
	store.Put(good.Digest, sign(t, trusted, good.Digest, releaseRepo+":4.18.1-x86_64"))
	store.Put(bad.Digest, sign(t, other, bad.Digest, releaseRepo+":4.18.2-x86_64"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/signature-2") {
			http.Error(w, "boom", http.StatusServiceUnavailable)
			return
		}
		store.ServeHTTP(w, r)
	}))
	defer srv.Close()
	v := &release.Verifier{Keyring: keyring, Source: &release.SignatureStore{URL: srv.URL, HTTPClient: srv.Client()}}
	got := v.Verify(ctx, good)
	if got.Status != release.StatusVerified || got.Index != 1 || len(got.Valid()) != 1 || got.Err() != nil {
		t.Fatalf("4.18.1: %s index %d %d valid: %s", got.Status, got.Index, len(got.Valid()), got.Reason)
	}
	got = v.Verify(ctx, bad)
	if got.Status != release.StatusRefused {
		t.Fatalf("4.18.2: %s", got.Status)
	}
	mustContain(t, got.Err().Error(), "release 4.18.2", "could not be fetched", "signature-2", "503")
}

func TestVerifierSkip(t *testing.T) {
	r := testRelease("4.18.1")
	store := releasetest.NewSignatureServer()
	store.Put(r.Digest, []byte("whatever"))
	srv := httptest.NewServer(store)
	defer srv.Close()
	v := (&release.Verifier{Skip: true, Source: &release.SignatureStore{URL: srv.URL, HTTPClient: srv.Client()}}).Verify(ctx, r)
	if v.Status != release.StatusSkipped || v.Err() != nil {
		t.Fatalf("status %s err %v", v.Status, v.Err())
	}
	mustContain(t, v.Reason, "WARNING", "release 4.18.1", "NOT verified", "skipped")
	if len(v.Signatures) != 1 || v.Signatures[0].Verified || len(v.Valid()) != 0 {
		t.Errorf("signatures %+v", v.Signatures)
	}
}

func TestVerifierNeedsKeys(t *testing.T) {
	store := releasetest.NewSignatureServer()
	srv := httptest.NewServer(store)
	defer srv.Close()
	v := (&release.Verifier{Source: &release.SignatureStore{URL: srv.URL, HTTPClient: srv.Client()}}).Verify(ctx, testRelease("4.18.1"))
	if v.Status != release.StatusRefused {
		t.Fatalf("status %s", v.Status)
	}
	mustContain(t, v.Reason, "no trusted release signing key")
}

func TestSignatureStoreURL(t *testing.T) {
	t.Setenv(release.EnvSignatureURL, "")
	s := &release.SignatureStore{}
	d := releasetest.PayloadDigest("amd64", "4.18.1")
	if got, want := s.Location(d), release.DefaultSignatureURL+"/sha256="+strings.TrimPrefix(d, "sha256:"); got != want {
		t.Errorf("location %s, want %s", got, want)
	}
	t.Setenv(release.EnvSignatureURL, "https://okd.example/sigs/")
	if got := s.BaseURL(); got != "https://okd.example/sigs" {
		t.Errorf("base URL with %s = %s", release.EnvSignatureURL, got)
	}
	s.URL = "https://flag.example/sigs"
	if got := s.BaseURL(); got != "https://flag.example/sigs" {
		t.Errorf("base URL with option = %s", got)
	}
	if _, err := s.Signatures(ctx, "sha256:short"); err == nil {
		t.Error("a malformed digest was accepted")
	}
}

func TestSignatureDirRoundTrip(t *testing.T) {
	trusted := newKey(t, "trusted")
	keyring, err := release.NewKeyring(trusted.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	r := testRelease("4.18.1")
	dir := t.TempDir()
	sigs := [][]byte{[]byte("junk"), sign(t, trusted, r.Digest, releaseRepo+":4.18.1-x86_64")}
	if err := release.SaveSignatures(dir, r.Digest, sigs); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sha256="+strings.TrimPrefix(r.Digest, "sha256:"), "signature-2")); err != nil {
		t.Fatal(err)
	}
	v := (&release.Verifier{Keyring: keyring, Source: release.SignatureDir(dir)}).Verify(ctx, r)
	if v.Status != release.StatusVerified || v.Index != 2 {
		t.Errorf("status %s index %d %s", v.Status, v.Index, v.Reason)
	}

	// A signature file larger than any store serves (1 MiB; a sparse 1 TiB
	// one here) is refused by its size, not read.
	huge := filepath.Join(release.SignatureDir(dir).Location(r.Digest), "signature-1")
	if err := os.Truncate(huge, 1<<40); err != nil {
		t.Fatal(err)
	}
	_, err = release.SignatureDir(dir).Signatures(ctx, r.Digest)
	if err == nil {
		t.Fatal("a 1 TiB signature file was read")
	}
	mustContain(t, err.Error(), huge, "1099511627776 bytes, more than the 1048576", "remove it")
}

func TestLoadKeyring(t *testing.T) {
	a, b, c := newKey(t, "a"), newKey(t, "b"), newKey(t, "c")
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keys := filepath.Join(dir, "keys")
	if err := os.Mkdir(keys, 0o755); err != nil {
		t.Fatal(err)
	}
	// Two armored blocks in one file (like RPM-GPG-KEY-redhat-release) and a
	// binary key, in a directory with a hidden file to ignore.
	write("keys/redhat.asc", append(append(a.PublicKey(), '\n'), b.PublicKey()...))
	write("keys/other.gpg", c.BinaryPublicKey())
	write("keys/.hidden", []byte("ignored"))

	kr, err := release.LoadKeyring(keys)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(kr.Fingerprints(), ","); got != strings.Join([]string{c.Fingerprint(), a.Fingerprint(), b.Fingerprint()}, ",") { // files in name order
		t.Errorf("fingerprints %s", got)
	}
	r := testRelease("4.18.1")
	for _, k := range []*releasetest.Key{a, b, c} {
		if v := kr.Check(r, [][]byte{sign(t, k, r.Digest, releaseRepo+":4.18.1-x86_64")}); v.Status != release.StatusVerified || v.Fingerprint != k.Fingerprint() {
			t.Errorf("key %s: %s %s", k.Fingerprint(), v.Status, v.Reason)
		}
	}

	bad := write("bad.asc", []byte("hello"))
	if _, err := release.LoadKeyring(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("bad key file error = %v", err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := release.LoadKeyring(empty); err == nil || !strings.Contains(err.Error(), "no key files") {
		t.Errorf("empty dir error = %v", err)
	}
	if _, err := release.LoadKeyring(filepath.Join(dir, "absent")); err == nil {
		t.Error("missing key file accepted")
	}
}

func TestTrustedKeyPaths(t *testing.T) {
	t.Setenv(release.EnvSignatureKey, "/env/key.asc")
	if got, err := release.TrustedKeyPaths([]string{"/flag/key"}); err != nil || !equal(got, []string{"/flag/key"}) {
		t.Errorf("flag: %v %v", got, err)
	}
	if got, err := release.TrustedKeyPaths(nil); err != nil || !equal(got, []string{"/env/key.asc"}) {
		t.Errorf("env: %v %v", got, err)
	}
	t.Setenv(release.EnvSignatureKey, "")
	got, err := release.TrustedKeyPaths(nil)
	if _, statErr := os.Stat(release.DefaultSignatureKeyPath); statErr == nil {
		if err != nil || !equal(got, []string{release.DefaultSignatureKeyPath}) {
			t.Errorf("default: %v %v", got, err)
		}
	} else if err == nil || !strings.Contains(err.Error(), "--release-signature-key") {
		t.Errorf("no key anywhere: %v %v", got, err)
	}
}

// compressedSignatureBomb is an OpenPGP message a signature reader takes
// for a signed one (a one-pass signature packet by keyID, then literal
// data) whose literal data is size zero bytes, zlib-compressed: about a
// thousandth of size on the wire.
func compressedSignatureBomb(t testing.TB, keyID string, size int64) []byte {
	t.Helper()
	id, err := strconv.ParseUint(keyID, 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	cw, err := packet.SerializeCompressed(nopCloser{&buf}, packet.CompressionZLIB, &packet.CompressionConfig{Level: 9})
	if err != nil {
		t.Fatal(err)
	}
	ops := &packet.OnePassSignature{Version: 3, SigType: packet.SigTypeBinary, Hash: crypto.SHA256, PubKeyAlgo: packet.PubKeyAlgoEdDSA, KeyId: id, IsLast: true}
	if err := ops.Serialize(cw); err != nil {
		t.Fatal(err)
	}
	lw, err := packet.SerializeLiteral(nopCloser{cw}, true, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(lw, zeros{}, size); err != nil {
		t.Fatal(err)
	}
	if err := lw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestSignatureDecompressionBomb: a "signature" of 16 KiB that decompresses
// to 16 MiB (a 1 MiB one, what the store may serve, to a GiB; an archive's
// signature files were not bounded at all) is refused as malformed without
// being decompressed whole, whether it claims the trusted key or another; a
// real signature next to it still verifies. Before the check, containers/image
// read the 16 MiB body whole, allocating about 70 MiB.
func TestSignatureDecompressionBomb(t *testing.T) {
	key := newKey(t, "bomb")
	kr, err := release.NewKeyring(key.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	r := testRelease("4.18.1")
	good, err := key.SignRelease(r.Digest, releaseRepo+":4.18.1-x86_64")
	if err != nil {
		t.Fatal(err)
	}
	for _, keyID := range []string{key.KeyID(), "0123456789ABCDEF"} {
		bomb := compressedSignatureBomb(t, keyID, 16<<20)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		v := kr.Check(r, [][]byte{bomb, good})
		runtime.ReadMemStats(&after)
		allocated := after.TotalAlloc - before.TotalAlloc
		t.Logf("key %s: %d bytes, %d MiB allocated checking it: %s", keyID, len(bomb), allocated>>20, v.Signatures[0].Problem)
		if v.Err() != nil || v.Index != 2 {
			t.Errorf("key %s: the real signature next to the bomb: %v (index %d)", keyID, v.Err(), v.Index)
		}
		if p := v.Signatures[0].Problem; v.Signatures[0].Verified || !strings.Contains(p, "decompresses to more than 64 KiB") {
			t.Errorf("key %s: the bomb: %q", keyID, p)
		}
		if allocated > 8<<20 {
			t.Errorf("key %s: checking a %d KiB signature allocated %d MiB: it was decompressed whole", keyID, len(bomb)>>10, allocated>>20)
		}
	}
}

// TestSignatureStoreRetries: a store answering 503 (or 429) for a while is
// asked again as Retries allows, and the signature it then serves counts;
// without retries, or past them, the failure comes back with the attempts
// made; a 404 is "no signature" at once, not retried.
func TestSignatureStoreRetries(t *testing.T) {
	r := testRelease("4.18.1")
	store := releasetest.NewSignatureServer()
	store.Put(r.Digest, []byte("a signature"))
	var mu sync.Mutex
	failures, asked := 0, map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		asked[req.URL.Path]++
		fail := failures > 0
		if fail {
			failures--
		}
		mu.Unlock()
		switch {
		case fail && failures%2 == 0:
			http.Error(w, "busy", http.StatusServiceUnavailable)
		case fail:
			http.Error(w, "slow down", http.StatusTooManyRequests)
		default:
			store.ServeHTTP(w, req)
		}
	}))
	defer srv.Close()
	get := func(retries, fail int) ([][]byte, error) {
		mu.Lock()
		failures, asked = fail, map[string]int{}
		mu.Unlock()
		s := &release.SignatureStore{URL: srv.URL, HTTPClient: srv.Client(), Retries: retries, RetryDelay: time.Millisecond}
		return s.Signatures(ctx, r.Digest)
	}
	sigs, err := get(3, 3)
	if err != nil || len(sigs) != 1 || string(sigs[0]) != "a signature" {
		t.Fatalf("3 failures, 3 retries: %d signatures, %v", len(sigs), err)
	}
	one := "/sha256=" + strings.TrimPrefix(r.Digest, "sha256:") + "/signature-1"
	if asked[one] != 4 || asked[strings.TrimSuffix(one, "1")+"2"] != 1 {
		t.Errorf("asked %v: want signature-1 four times, signature-2 (404) once", asked)
	}
	_, err = get(0, 1)
	if err == nil {
		t.Fatal("no retries: the 503 was not an error")
	}
	mustContain(t, err.Error(), "signature-1", "503")
	_, err = get(2, 5)
	if err == nil {
		t.Fatal("5 failures, 2 retries: no error")
	}
	mustContain(t, err.Error(), "(after 3 attempts)")
}
