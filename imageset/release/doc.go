// Package release decides which OpenShift release payloads an image set
// contains and proves they are genuine.
//
// It has three parts, each usable on its own:
//
//   - the update graph: GraphClient fetches a channel's graph from the
//     OpenShift Update Service (Cincinnati), GraphDir reads graphs saved by an
//     earlier run, SavingGraphSource saves what it fetches so disk-to-mirror
//     runs work offline;
//   - planning: Plan turns graphs and a Spec (the ImageSetConfiguration's
//     mirror.platform) into the list of releases to mirror, with the reason
//     each one is included, following oc-mirror v2's version-selection rules;
//   - signatures: SignatureStore fetches a release's GPG "atomic container
//     signatures", Keyring checks them against trusted keys, and Verifier
//     combines both into one Verdict per release.
//
// The package never pulls images: it names payloads by digest and leaves
// copying to the mirror package.
//
// Signature verification uses containers/image's OpenPGP mechanism; build
// with the containers_image_openpgp tag (pure Go, no gpgme).
package release
