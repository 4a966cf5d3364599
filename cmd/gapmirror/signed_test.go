//go:build !gapmirror_lean

package main

import (
	"archive/tar"
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// TestSignedArchives: generate-key-pair makes a cosign key pair;
// mirror-to-disk --sign-key signs each archive (a full one, then an
// incremental one); the bundle verifies with sigstore-go and the public key
// as `cosign verify-blob --bundle --key --insecure-ignore-tlog` would; and
// disk-to-mirror --verify-key pushes the signed archive but refuses, before
// the mirror receives a single write, a chunk rewritten with its index's
// checksums recomputed, an archive without a signature, one checked with
// the wrong key, and an incremental archive another key signed.
func TestSignedArchives(t *testing.T) {
	t.Setenv(passwordEnv, "correct horse")
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(5, 64<<10)
	all := w.images
	keys := filepath.Join(w.dir, "keys")
	must(t, os.Mkdir(keys, 0o700))
	prefix := filepath.Join(keys, "cosign")
	if code, stdout, _ := w.gapmirror("generate-key-pair", "--output-key-prefix", prefix); code != 0 || !strings.Contains(stdout, prefix+".pub") {
		t.Fatalf("generate-key-pair: exit %d", code)
	}
	if b := pemType(t, prefix+".key"); b != "ENCRYPTED SIGSTORE PRIVATE KEY" {
		t.Errorf("private key is a PEM %q block, want cosign's ENCRYPTED SIGSTORE PRIVATE KEY", b)
	}
	if b := pemType(t, prefix+".pub"); b != "PUBLIC KEY" {
		t.Errorf("public key is a PEM %q block", b)
	}
	if code, _, stderr := w.gapmirror("generate-key-pair", "--output-key-prefix", prefix); code != 1 || !strings.Contains(stderr, "cosign.key exists") {
		t.Errorf("generate-key-pair over existing keys: exit %d, stderr:\n%s", code, stderr)
	}
	other := filepath.Join(keys, "other")
	writePKCS8Key(t, other) // unencrypted PKCS#8, as openssl writes it

	// The connected side: a full archive of three images.
	out := filepath.Join(w.dir, "out")
	w.images = all[:3]
	code, stdout, _ := w.gapmirror("mirror", "-c", w.isc(""), "--sign-key", prefix+".key", "file://"+out)
	bundle1 := filepath.Join(out, "mirror_000001.sigstore.json")
	if code != 0 || !strings.Contains(stdout, "archive signature: "+bundle1) {
		t.Fatalf("signed mirror-to-disk: exit %d", code)
	}
	cosignVerifyBlob(t, bundle1, prefix+".pub", filepath.Join(out, "mirror_000001.tar"))

	code, stdout, _ = w.gapmirror("describe", "--quick", "file://"+out)
	if code != 0 || !strings.Contains(stdout, "signed: a signature file is beside it") {
		t.Errorf("describe without --verify-key: exit %d", code)
	}
	code, stdout, _ = w.gapmirror("describe", "--verify-key", prefix+".pub", "file://"+out)
	if code != 0 || !strings.Contains(stdout, "signed: the index's signature verified") || !strings.Contains(stdout, "intact") {
		t.Errorf("describe --verify-key: exit %d", code)
	}

	// Each refusal is tried on a copy of the archive, against a mirror
	// that counts requests: nothing may be written to it.
	counter := registrytest.NewRequestCounter()
	w.dst.SetWrap(counter.Wrap)
	refused := func(name, dir, key string, want ...string) {
		t.Helper()
		code, _, stderr := w.gapmirror("mirror", "--from", "file://"+dir, "--verify-key", key, "docker://"+w.dst.Host()+"/"+name)
		if code != 1 {
			t.Errorf("%s: exit %d, want 1", name, code)
		}
		for _, s := range want {
			if !strings.Contains(stderr, s) {
				t.Errorf("%s: stderr does not say %q:\n%s", name, s, stderr)
			}
		}
		if n := writes(counter); n != 0 {
			t.Errorf("%s: the mirror received %d writes before the archive was refused: %v", name, n, counter.N)
		}
	}

	// A chunk rewritten, and its sha256 in the index and the index's own
	// checksum recomputed: the archive's checksums pass, the signature not.
	tampered := filepath.Join(w.dir, "tampered")
	copyArchive(t, out, tampered, true)
	rewriteChunk(t, tampered)
	if r, err := archive.OpenFirst(tampered, "mirror_000001.tar"); err != nil {
		t.Fatalf("the rewritten archive should pass the checksums alone: %v", err)
	} else if err := r.Verify(t.Context()); err != nil {
		t.Fatalf("the rewritten archive should pass every checksum: %v", err)
	}
	refused("tampered", tampered, prefix+".pub", "an index changed after signing", "do not push it", "mirror_000001.sigstore.json signed by the key of --verify-key")

	unsigned := filepath.Join(w.dir, "unsigned")
	copyArchive(t, out, unsigned, false)
	refused("unsigned", unsigned, prefix+".pub", "no signature (mirror_000001.sigstore.json is not there)", "copy mirror_000001.sigstore.json")

	wrongKey := filepath.Join(w.dir, "wrongkey")
	copyArchive(t, out, wrongKey, true)
	refused("wrongkey", wrongKey, other+".pub", "a signature by another key")

	// The signed archive is pushed.
	airgap := filepath.Join(w.dir, "airgap")
	copyArchive(t, out, airgap, true)
	if code, _, _ := w.gapmirror("mirror", "--from", "file://"+airgap, "--verify-key", prefix+".pub", "docker://"+w.dst.Host()+"/d2m"); code != 0 {
		t.Fatal("disk-to-mirror of the signed archive failed")
	}
	w.assertMirrored(w.dst, "d2m")

	// An incremental archive signed with the key is applied; the next one,
	// signed with another key, is refused.
	w.images = all
	isc := w.isc("")
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "--sign-key", prefix+".key", "file://"+out); code != 0 {
		t.Fatal("incremental mirror-to-disk failed")
	}
	copyArchive(t, out, airgap, true)
	if code, _, _ := w.gapmirror("mirror", "--from", "file://"+airgap, "--verify-key", prefix+".pub", "docker://"+w.dst.Host()+"/d2m"); code != 0 {
		t.Fatal("disk-to-mirror of the signed incremental archive failed")
	}
	w.assertMirrored(w.dst, "d2m")

	if code, _, _ := w.gapmirror("mirror", "-c", isc, "--sign-key", other+".key", "file://"+out); code != 0 {
		t.Fatal("third mirror-to-disk failed")
	}
	found, err := archive.List(out)
	must(t, err)
	if len(found) != 3 || found[2].Index.BasedOn != found[1].Index.ID || found[1].Index.BasedOn != found[0].Index.ID {
		t.Fatalf("want a full and two incremental archives in %s, found %d", out, len(found))
	}
	third := found[2]
	cosignVerifyBlob(t, filepath.Join(out, strings.TrimSuffix(third.First, ".tar")+".sigstore.json"), other+".pub", filepath.Join(out, third.First))
	copyArchive(t, out, airgap, true)
	counter.Lock()
	counter.N = map[string]int{}
	counter.Unlock()
	refused("d2m", airgap, prefix+".pub", "archive "+third.Index.ID, "a signature by another key")
}

// TestSignKeyFlagsRefused: --sign-key and --verify-key go with their trip,
// and a key of the wrong kind is refused by name before anything runs.
func TestSignKeyFlagsRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	key := filepath.Join(w.dir, "k")
	writePKCS8Key(t, key)
	isc := w.isc("")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"mirror", "-c", isc, "--verify-key", key + ".pub", "file://" + filepath.Join(w.dir, "o")}, "--verify-key checks the archive disk-to-mirror pushes"},
		{[]string{"mirror", "-c", isc, "--sign-key", key + ".pub", "file://" + filepath.Join(w.dir, "o")}, "is a public key: signing needs the private key"},
		{[]string{"mirror", "-c", isc, "--sign-key", key + ".key", "--workspace", "file://" + filepath.Join(w.dir, "ws"), "docker://" + w.dst.Host()}, "--sign-key signs the archive mirror-to-disk writes"},
		{[]string{"describe", "--verify-key", key + ".key", "file://" + w.dir}, "not a PEM public key"},
	} {
		code, _, stderr := w.gapmirror(c.args...)
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("gapmirror %s: exit %d, want 1 and %q:\n%s", strings.Join(c.args, " "), code, c.want, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(w.dir, "o")); !os.IsNotExist(err) {
		t.Errorf("a refused command line created its destination: %v", err)
	}
}

// cosignVerifyBlob checks the bundle as `cosign verify-blob --bundle B
// --key PUB --insecure-ignore-tlog INDEX` does, with sigstore-go alone:
// a v0.3 bundle holding a message signature over the index bytes of the
// archive's first chunk by the public key, no transparency log entry.
func cosignVerifyBlob(t *testing.T, bundlePath, pubPath, firstChunk string) {
	t.Helper()
	b, err := bundle.LoadJSONFromPath(bundlePath)
	must(t, err)
	if mt := b.GetMediaType(); mt != "application/vnd.dev.sigstore.bundle.v0.3+json" {
		t.Errorf("bundle media type %q", mt)
	}
	if len(b.GetVerificationMaterial().GetTlogEntries()) != 0 {
		t.Error("bundle has a transparency log entry: signing must stay offline")
	}
	pubPEM, err := os.ReadFile(pubPath)
	must(t, err)
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pubPEM)
	must(t, err)
	der, err := x509.MarshalPKIXPublicKey(pub)
	must(t, err)
	sum := sha256.Sum256(der)
	if hint := b.GetVerificationMaterial().GetPublicKey().GetHint(); hint == "" {
		t.Error("bundle names no public key hint")
	} else if got := hex.EncodeToString(mustB64(t, hint)); got != hex.EncodeToString(sum[:]) {
		t.Errorf("bundle's key hint is sha256 %s, the key's %x", got, sum)
	}
	sv, err := signature.LoadVerifier(pub, crypto.SHA256)
	must(t, err)
	key := root.NewExpiringKey(sv, time.Time{}, time.Time{})
	v, err := verify.NewVerifier(root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) { return key, nil }), verify.WithNoObserverTimestamps())
	must(t, err)
	index := indexBytes(t, firstChunk)
	if _, err := v.Verify(b, verify.NewPolicy(verify.WithArtifact(bytes.NewReader(index)), verify.WithKey())); err != nil {
		t.Errorf("the bundle does not verify the index of %s with %s: %v", firstChunk, pubPath, err)
	}
	if _, err := v.Verify(b, verify.NewPolicy(verify.WithArtifact(bytes.NewReader(append(index, ' '))), verify.WithKey())); err == nil {
		t.Error("the bundle verifies other bytes than the index")
	}
}

// indexBytes extracts gapmirror-index.json from a first chunk, as
// `tar -xOf mirror_000001.tar gapmirror-index.json` does.
func indexBytes(t *testing.T, chunk string) []byte {
	t.Helper()
	f, err := os.Open(chunk)
	must(t, err)
	defer f.Close()
	tr := tar.NewReader(f)
	hdr, err := tr.Next()
	must(t, err)
	if hdr.Name != archive.IndexName {
		t.Fatalf("%s starts with %s", chunk, hdr.Name)
	}
	b, err := io.ReadAll(tr)
	must(t, err)
	return b
}

func mustB64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	must(t, err)
	return b
}

// rewriteChunk changes a byte of chunk 2 of the archive in dir (in the
// padding after its marker entry, which no digest covers) and writes
// the chunk's new sha256 into the index in chunk 1, and the index's new
// sha256 into gapmirror-index.json.sha256, in place (same lengths): every
// checksum the archive carries agrees with the rewritten chunk.
func rewriteChunk(t *testing.T, dir string) {
	t.Helper()
	c2 := filepath.Join(dir, "mirror_000002.tar")
	data, err := os.ReadFile(c2)
	must(t, err)
	oldSum := sha256.Sum256(data)
	data[1023] ^= 0xff
	newSum := sha256.Sum256(data)
	must(t, os.WriteFile(c2, data, 0o644))

	c1 := filepath.Join(dir, "mirror_000001.tar")
	first, err := os.ReadFile(c1)
	must(t, err)
	index := indexBytes(t, c1)
	oldIndexSum := sha256.Sum256(index)
	newIndex := bytes.Replace(index, []byte(hex.EncodeToString(oldSum[:])), []byte(hex.EncodeToString(newSum[:])), 1)
	if bytes.Equal(newIndex, index) {
		t.Fatal("chunk 2's sha256 is not in the index")
	}
	newIndexSum := sha256.Sum256(newIndex)
	first = bytes.Replace(first, index, newIndex, 1)
	first = bytes.Replace(first, []byte(hex.EncodeToString(oldIndexSum[:])), []byte(hex.EncodeToString(newIndexSum[:])), 1)
	must(t, os.WriteFile(c1, first, 0o644))
}

// copyArchive copies the chunks of every archive in from (and their
// signature files, with sigs) into to, replacing what is there.
func copyArchive(t *testing.T, from, to string, sigs bool) {
	t.Helper()
	must(t, os.MkdirAll(to, 0o755))
	files, _ := filepath.Glob(filepath.Join(from, "mirror_*"))
	for _, f := range files {
		if strings.HasSuffix(f, ".sigstore.json") && !sigs {
			continue
		}
		data, err := os.ReadFile(f)
		must(t, err)
		must(t, os.WriteFile(filepath.Join(to, filepath.Base(f)), data, 0o644))
	}
}

// writePKCS8Key writes an unencrypted PKCS#8 ECDSA key (prefix.key) and its
// public key (prefix.pub).
func writePKCS8Key(t *testing.T, prefix string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(k)
	must(t, err)
	must(t, os.WriteFile(prefix+".key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
	pub, err := cryptoutils.MarshalPublicKeyToPEM(k.Public())
	must(t, err)
	must(t, os.WriteFile(prefix+".pub", pub, 0o644))
}

// pemType is the type of the PEM block in the file.
func pemType(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	must(t, err)
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatalf("%s is not PEM", p)
	}
	return b.Type
}

// writes counts the write requests (PUT, POST, PATCH, DELETE) counted.
func writes(c *registrytest.RequestCounter) int {
	c.Lock()
	defer c.Unlock()
	n := 0
	for k, v := range c.N {
		if m, _, _ := strings.Cut(k, " "); m != "GET" && m != "HEAD" {
			n += v
		}
	}
	return n
}

// TestServeVerifyKey: serve --from --verify-key refuses an archive another
// key signed, stopping before it pushes anything, and serves the archive
// its key signed (an unencrypted PKCS#8 key signs without a password).
func TestServeVerifyKey(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(2, 16<<10)
	key, other := filepath.Join(w.dir, "k"), filepath.Join(w.dir, "other")
	writePKCS8Key(t, key)
	writePKCS8Key(t, other)
	out, root := filepath.Join(w.dir, "out"), filepath.Join(w.dir, "srv")
	if code, _, _ := w.gapmirror("mirror", "-c", w.isc(""), "--sign-key", key+".key", "file://"+out); code != 0 {
		t.Fatal("signed mirror-to-disk failed")
	}
	addr := freeAddress(t)
	s := w.serve("--root", root, "--address", addr, "--from", "file://"+out, "--verify-key", other+".pub")
	if s.code != 1 || !strings.Contains(s.errb.String(), "a signature by another key") || strings.Contains(s.out.String(), "copied") {
		t.Errorf("serve --from with another key: exit %d, want 1 and the archive refused before the push", s.code)
	}
	s = w.serve("--root", root, "--address", addr, "--from", "file://"+out, "--verify-key", key+".pub")
	if s.code != 0 {
		t.Fatalf("serve --from with the signing key: exit %d", s.code)
	}
	w.pullAll(addr, filepath.Join(root, "tls"), w.images)
}
