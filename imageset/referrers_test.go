package imageset

import "testing"

// TestReferrerKinds: artifact types map to the kinds --referrers names,
// cosign v3 bundles by their predicate; --referrers parses lists, all and
// none, and names the kinds when it refuses a word.
func TestReferrerKinds(t *testing.T) {
	for _, c := range []struct{ at, pt, want string }{
		{"application/vnd.dev.sigstore.bundle.v0.3+json", cosignSignPredicate, referrersSignatures},
		{"application/vnd.dev.sigstore.bundle.v0.3+json", "", referrersSignatures},
		{"application/vnd.dev.sigstore.bundle.v0.3+json", "https://slsa.dev/provenance/v1", referrersAttestations},
		{"application/vnd.in-toto+json", "", referrersAttestations},
		{"application/spdx+json", "", referrersSBOM},
		{"application/vnd.cyclonedx+json", "", referrersSBOM},
		{"application/vnd.cncf.notary.signature", "", referrersNotation},
		{"application/vnd.example.thing", "", referrersOther},
		{"", "", referrersOther},
	} {
		if got := ReferrerKind(c.at, c.pt); got != c.want {
			t.Errorf("ReferrerKind(%q, %q) = %s, want %s", c.at, c.pt, got, c.want)
		}
	}
	for in, want := range map[string]string{
		"signatures,attestations": "signatures,attestations",
		"sbom, notation":          "sbom,notation",
		"all":                     "signatures,attestations,sbom,notation,other",
		"none":                    "none",
		"":                        "none",
		"signature,sboms":         "signatures,sbom",
	} {
		c, err := ParseReferrers(in)
		if err != nil || c.String() != want {
			t.Errorf("ParseReferrers(%q) = %s, %v; want %s", in, c, err, want)
		}
	}
	if _, err := ParseReferrers("signatures,sbmo"); err == nil {
		t.Error("an unknown kind was accepted")
	}
	c, _ := ParseReferrers("all")
	if w := c.WithoutSignatures(); w.Wants("application/vnd.cncf.notary.signature", "") || w.Wants("application/vnd.dev.sigstore.bundle.v0.3+json", cosignSignPredicate) || !w.Wants("application/spdx+json", "") {
		t.Errorf("without signatures: %s", w)
	}
}
