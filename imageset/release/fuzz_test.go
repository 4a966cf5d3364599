package release_test

import (
	"path/filepath"
	"testing"

	"github.com/gapmirror/gapmirror/internal/fuzzguard"

	"github.com/gapmirror/gapmirror/imageset/release"
	"github.com/gapmirror/gapmirror/internal/releasetest"
)

// within fails the input when fn hangs or panics.
func within(t *testing.T, fn func()) { fuzzguard.Within(t, fn) }

// FuzzParseGraph: any update-graph document parses or is refused, never a
// panic or a hang. Seeded with built graphs and the real channel lists.
func FuzzParseGraph(f *testing.F) {
	for _, g := range []*releasetest.Graph{
		releasetest.NewGraph("amd64", "4.18.1", "4.18.2", "4.18.3").GenerateEdges(),
		releasetest.NewGraph("multi", "4.17.9", "4.18.0").Edge("4.17.9", "4.18.0"),
	} {
		if data, err := g.JSON(); err == nil {
			f.Add(data)
		}
	}
	lists, _ := filepath.Glob(filepath.Join(realChannels, "stable-4.1*.yaml"))
	for _, p := range lists {
		if cf, err := releasetest.ReadChannelFile(p); err == nil && len(cf.Versions) > 0 {
			if data, err := releasetest.NewGraph("amd64", cf.Versions...).GenerateEdges().JSON(); err == nil {
				f.Add(data)
			}
		}
	}
	f.Add([]byte(`{"nodes":[{"version":"4.1.0","payload":"x"}],"edges":[[0,5]]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		within(t, func() {
			if g, err := release.ParseGraph(data, "stable-4.18", "amd64"); err == nil {
				_ = g.Versions()
			}
		})
	})
}

// FuzzSignature: any signature blob is checked and refused or accepted,
// never a panic or a hang; only the trusted key's signature of the digest
// is accepted.
func FuzzSignature(f *testing.F) {
	key, err := releasetest.NewKey("fuzz")
	if err != nil {
		f.Fatal(err)
	}
	kr, err := release.NewKeyring(key.PublicKey())
	if err != nil {
		f.Fatal(err)
	}
	digest := releasetest.PayloadDigest("amd64", "4.18.1")
	r := release.Release{Version: "4.18.1", Arch: "amd64", Payload: "quay.io/openshift-release-dev/ocp-release@" + digest, Digest: digest}
	good, err := key.SignRelease(digest, "quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(compressedSignatureBomb(f, key.KeyID(), 1<<20)) // refused by its size (TestSignatureDecompressionBomb)
	if other, err := releasetest.NewKey("other"); err == nil {
		if sig, err := other.SignRelease(digest, "quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64"); err == nil {
			f.Add(sig)
		}
	}
	f.Fuzz(func(t *testing.T, sig []byte) {
		within(t, func() {
			v := kr.Check(r, [][]byte{sig})
			if v.Err() == nil && v.Fingerprint != key.Fingerprint() {
				t.Fatalf("accepted a signature by %s, not the trusted key", v.Fingerprint)
			}
		})
	})
}
