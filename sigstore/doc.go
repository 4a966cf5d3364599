// Package sigstore finds and checks what is attached to images upstream:
// the cosign signature tags beside every image and platform manifest, and
// the OCI 1.1 referrers of the same manifests and of those referrers, asked
// for side by side and put into the Set to be copied by digest (kinds
// signature and referrer): at once (Search.Attach), or in steps so that
// the questions are asked while the images copy (Search.Prepare,
// Lookup.Start, Lookup.AddTo); registries.d's say on which repositories are
// asked (RegistriesD); and --secure-policy's check against a containers
// policy (Search.Verify): the tag-scheme signatures as containers/image
// checks them, else the cosign v3 Sigstore bundles attached as OCI 1.1
// referrers, verified offline with the policy's keys (verifyBundle).
//
// It may import failure, imageset and transfer.
package sigstore
