package imageset

import (
	"fmt"
	"slices"
	"strings"
)

// Kinds of referrers, as --referrers names them.
const (
	referrersSignatures   = "signatures"   // sigstore (cosign v3 bundles, cosign signatures as referrers)
	referrersAttestations = "attestations" // in-toto statements and DSSE envelopes
	referrersSBOM         = "sbom"         // SPDX, CycloneDX, syft
	referrersNotation     = "notation"     // Notary Project signatures
	referrersOther        = "other"        // any other artifact type
)

// ReferrerKindNames is every kind, in the order summaries list them.
var ReferrerKindNames = []string{referrersSignatures, referrersAttestations, referrersSBOM, referrersNotation, referrersOther}

// defaultReferrers are the kinds mirrored unless --referrers says otherwise:
// what a cluster's signature policy may need.
var defaultReferrers = []string{referrersSignatures, referrersAttestations}

// PredicateTypeAnnotation is where cosign v3 says what a bundle it attaches
// signs: its signature's predicate (cosignSignPredicate), or an
// attestation's.
const (
	PredicateTypeAnnotation = "dev.sigstore.bundle.predicateType"
	cosignSignPredicate     = "https://sigstore.dev/cosign/sign/v1"
)

// ReferrerKind is the kind of a referrer of artifactType; predicateType is
// its PredicateTypeAnnotation ("" when it has none).
func ReferrerKind(artifactType, predicateType string) string {
	at := strings.ToLower(artifactType)
	switch {
	case strings.HasPrefix(at, "application/vnd.dev.sigstore.bundle"):
		// cosign v3 attaches signatures and attestations alike as
		// bundles: the predicate tells them apart.
		if predicateType != "" && predicateType != cosignSignPredicate {
			return referrersAttestations
		}
		return referrersSignatures
	case at == "application/vnd.dev.cosign.artifact.sig.v1+json",
		at == "application/vnd.dev.cosign.simplesigning.v1+json":
		return referrersSignatures
	case strings.HasPrefix(at, "application/vnd.in-toto"),
		at == "application/vnd.dsse.envelope.v1+json",
		at == "application/vnd.dev.cosign.attestation.v1+json":
		return referrersAttestations
	case strings.Contains(at, "spdx"), strings.Contains(at, "cyclonedx"), strings.Contains(at, "syft"):
		return referrersSBOM
	case strings.HasPrefix(at, "application/vnd.cncf.notary."):
		return referrersNotation
	}
	return referrersOther
}

// ReferrerChoice is which kinds of referrers are mirrored.
type ReferrerChoice map[string]bool

// ParseReferrers reads --referrers: a comma-separated list of kinds, or
// "all", or "none".
func ParseReferrers(s string) (ReferrerChoice, error) {
	c := ReferrerChoice{}
	for _, w := range strings.Split(s, ",") {
		w = strings.ToLower(strings.TrimSpace(w))
		switch {
		case w == "" || w == "none":
		case w == "all":
			for _, k := range ReferrerKindNames {
				c[k] = true
			}
		case w == "signature" || w == "attestation":
			c[w+"s"] = true
		case w == "sboms":
			c[referrersSBOM] = true
		case slices.Contains(ReferrerKindNames, w):
			c[w] = true
		default:
			return nil, fmt.Errorf("--referrers %q: unknown kind %q: use a comma-separated list of %s, or all, or none", s, w, strings.Join(ReferrerKindNames, ", "))
		}
	}
	return c, nil
}

// Wants reports whether a referrer of artifactType (and predicateType, as
// for ReferrerKind) is mirrored.
func (c ReferrerChoice) Wants(artifactType, predicateType string) bool {
	return c[ReferrerKind(artifactType, predicateType)]
}

// SignatureKind reports whether referrer kind k is a signature (cosign's
// or Notation's): what --remove-signatures leaves out.
func SignatureKind(k string) bool { return k == referrersSignatures || k == referrersNotation }

// WithoutSignatures is c less the kinds that are signatures
// (--remove-signatures: no signature of any kind is mirrored).
func (c ReferrerChoice) WithoutSignatures() ReferrerChoice {
	out := ReferrerChoice{}
	for k, v := range c {
		if !SignatureKind(k) {
			out[k] = v
		}
	}
	return out
}

// Any reports whether any kind is chosen.
func (c ReferrerChoice) Any() bool {
	for _, v := range c {
		if v {
			return true
		}
	}
	return false
}

// String is the choice as --referrers writes it.
func (c ReferrerChoice) String() string {
	var out []string
	for _, k := range ReferrerKindNames {
		if c[k] {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ",")
}
