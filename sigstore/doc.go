// Package sigstore finds and checks the signatures of images upstream, a
// step of resolution: the cosign signature tags beside every image and
// platform manifest (Search.Add, which puts them into the Set to be copied
// by digest), the OCI 1.1 referrers of the same manifests and of those
// referrers (Search.AddReferrers, added as kind referrer), registries.d's say on which repositories are asked
// (RegistriesD), and --secure-policy's check against a containers policy
// (Search.Verify): the tag-scheme signatures as containers/image checks
// them, else the cosign v3 Sigstore bundles attached as OCI 1.1 referrers,
// verified offline with the policy's keys (verifyBundle).
//
// It may import failure, imageset and transfer.
package sigstore
