// Package generate writes the cluster manifests that point a disconnected
// cluster at the mirror: ImageDigestMirrorSet and ImageTagMirrorSet,
// CatalogSource and ClusterCatalog, UpdateService and the release signature
// ConfigMaps. Every function is pure (data in, YAML out) except Files.Write,
// which puts the result into <workspace>/cluster-resources/, and the reading
// of a CatalogSource template file.
//
// # Mirror-set scope
//
// IDMS and ITMS entries map a source (a repository or a namespace, "scope")
// to mirrors. The container runtime picks the most specific entry whose
// source is a path-component prefix of the pulled image, and looks the rest
// of the path up under each mirror. gapmirror groups entries at the widest
// scope that is still exactly right:
//
//   - Every image of the Set yields a mapping from its source repository (the
//     repository of Image.Origin, normalised, so "busybox" becomes
//     "docker.io/library/busybox") to its mirror repository
//     (<mirror root>/<Image.DestinationRepo()>). All images count, including
//     catalogs and the graph image, which get no entry of their own.
//   - A namespace <registry>/<c1>/…/<ck> (k ≥ 1: never a whole registry) may
//     replace the repository entries under it only if
//     (a) every mapping whose source lies at or under it ends in the same
//     remaining path, so that one prefix mapping <namespace> → <mirror
//     prefix> is exactly right for all of them (a repository mirrored to two
//     places, or under a different path such as a targetRepo, keeps its
//     namespace narrow), and the mirror prefix keeps at least one path
//     component after the host; and
//     (b) no reference known not to be mirrored (blocked or failed) lies at
//     or under it, so that the cluster is never sent to the mirror for an
//     image that is not there.
//   - Each mapping uses the widest namespace satisfying (a) and (b), however
//     many levels up that is; otherwise its own repository. Because the
//     rules only get harder to satisfy as a namespace grows, two chosen
//     namespaces never nest, and one source never gets two different
//     mirror prefixes.
//
// Digest-pinned origins go to IDMS, tag-only origins to ITMS; release images
// go to IDMS even when named by tag (the installer needs it). Entries are
// grouped by content (release, operator, generic: additional images and
// Helm images) into objects named idms-<group>-<n>, deduplicated and sorted;
// n grows only when one object would get too large for "oc apply".
//
// With --max-nested-paths (Input.RepositoryScope) every entry stays at
// repository scope, as in oc-mirror: the mirror repositories are flattened,
// so a namespace entry would promise paths under it the registry cannot hold.
package generate
