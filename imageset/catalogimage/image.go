package catalogimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/imageset/layer"
)

// ConfigsLabel is the image config label naming the directory that holds a
// catalog image's file-based catalog.
const ConfigsLabel = "operators.operatorframework.io.index.configs.v1"

// Blobs is a content-addressed blob store (the local store satisfies it).
type Blobs interface {
	// Has reports whether the blob with digest d is in the store.
	Has(d digest.Digest) bool
	// Open opens the blob with digest d.
	Open(d digest.Digest) (io.ReadCloser, error)
	// Put stores the blob read from r, which must have digest d and size
	// size (negative: unknown).
	Put(d digest.Digest, size int64, r io.Reader) error
}

// RebuildOptions tunes Rebuild.
type RebuildOptions struct {
	// Comment goes into the history entries of the two new layers (for
	// example the filter's hash), so `podman history` shows what made them.
	Comment string
	// TempDir is where the new configs layer is staged before it is stored;
	// empty means the system temporary directory.
	TempDir string
	// Platforms, when set, keeps only the platform images of these
	// "os/architecture" pairs in a rebuilt index (operators[].platforms):
	// the rebuilt image is new anyway, so it is whole rather than sparse.
	Platforms []string
}

// Media types of Docker schema2 content (OCI ones come from image-spec).
const (
	mediaTypeDockerManifest     = "application/vnd.docker.distribution.manifest.v2+json"
	mediaTypeDockerManifestList = "application/vnd.docker.distribution.manifest.list.v2+json"
	mediaTypeDockerLayerGzip    = "application/vnd.docker.image.rootfs.diff.tar.gzip"
	mediaTypeDockerSchema1      = "application/vnd.docker.distribution.manifest.v1+json"
	mediaTypeDockerSchema1JWS   = "application/vnd.docker.distribution.manifest.v1+prettyjws"
)

// maxMetadataBlob caps the size of a manifest or image config read whole
// (containers/image uses the same 4 MiB limit).
const maxMetadataBlob = 4 << 20

// Whiteout names of the OCI image layer format.
const (
	whiteoutPrefix     = ".wh."
	whiteoutMetaPrefix = ".wh..wh."
	whiteoutOpaque     = ".wh..wh..opq"
)

// layerTime is the modification time of every entry of the layers Rebuild
// writes, so the same FBC always gives the same layer digest.
var layerTime = time.Unix(0, 0).UTC()

// ConfigsDir is the absolute, clean path of the FBC directory inside the
// catalog image manifestDigest (normally "/configs"), read from the image's
// ConfigsLabel. For a multi-platform image it reads the first linux/amd64
// image, else the first image: every platform of a catalog carries the same
// FBC.
func ConfigsDir(blobs Blobs, manifestDigest digest.Digest) (string, error) {
	img, err := catalogPlatformImage(blobs, manifestDigest)
	if err != nil {
		return "", err
	}
	dir, err := img.configsPath()
	if err != nil {
		return "", err
	}
	return "/" + dir, nil
}

// ExtractFBC writes the file-based catalog of the catalog image
// manifestDigest into dest (created if missing; it must be empty): dest ends
// up holding exactly what the image's configs directory holds when the
// container runs. Layers are applied in order and streamed; only entries
// under the configs directory are written, OCI whiteouts (.wh.<name> and
// opaque .wh..wh..opq) are honoured, hard links inside the directory are
// copied, and symbolic links, device files, absolute entry names and ".."
// components are refused. For a multi-platform image it reads the image
// ConfigsDir reads.
func ExtractFBC(blobs Blobs, manifestDigest digest.Digest, dest string) error {
	img, err := catalogPlatformImage(blobs, manifestDigest)
	if err != nil {
		return err
	}
	configs, err := img.configsPath()
	if err != nil {
		return err
	}
	if err := emptyDir(dest); err != nil {
		return err
	}
	root, err := os.OpenRoot(dest)
	if err != nil {
		return fmt.Errorf("opening extraction directory: %w", err)
	}
	defer root.Close()

	x := &fbcExtraction{image: img.digest, configs: configs, root: root}
	for i, layer := range img.manifest.Layers {
		x.layer = layer.Digest
		x.written = map[string]bool{}
		if err := forEachLayerEntry(blobs, layer, x.entry); err != nil {
			return fmt.Errorf("catalog image %s: layer %d (%s): %w", img.digest, i, layer.Digest, err)
		}
	}
	if !x.present {
		return fmt.Errorf("catalog image %s: label %s says the catalog is in /%s, but no layer holds that directory: the image is not a usable file-based catalog", img.digest, ConfigsLabel, configs)
	}
	return nil
}

// Rebuild makes a new catalog image from the catalog image manifestDigest
// whose configs directory holds exactly the tree in fbcDir, writes every new
// blob into blobs, and returns the digest and media type of the new top
// manifest (an index when the source is one, with each platform's descriptor
// updated and its platform kept; attestation manifests are dropped because
// they describe the original build).
//
// Each platform image keeps the source's layers, labels, entrypoint, env,
// user, working directory, creation time and media types (Docker schema2 or
// OCI), and gets two gzip layers: the first whites out the old configs
// directory (.wh.<configs> in its parent) and the opm serve cache named by
// --cache-dir in the entrypoint or command; the second holds fbcDir at the
// configs path (directories 0755, files 0644, owner 0:0, fixed times, sorted
// entries). The --cache-dir, --cache-only and --cache-enforce-integrity flags
// are dropped from the entrypoint and command, so opm builds a fresh cache
// in a temporary directory when it starts instead of failing on a cache
// that no longer matches the catalog. The same fbcDir over the same source
// always gives the same digest.
func Rebuild(blobs Blobs, manifestDigest digest.Digest, fbcDir string, opts RebuildOptions) (digest.Digest, string, error) {
	tree, err := readFBCTree(fbcDir)
	if err != nil {
		return "", "", err
	}
	top, err := readManifestBlob(blobs, manifestDigest)
	if err != nil {
		return "", "", err
	}
	r := &catalogRebuild{
		blobs:   blobs,
		tree:    tree,
		opts:    opts,
		images:  map[digest.Digest]ocispec.Descriptor{},
		layers:  map[string]layerBlob{},
		scanned: map[string]map[string]*sourcePath{},
	}
	if top.isIndex {
		return r.index(top)
	}
	desc, err := r.image(manifestDigest)
	if err != nil {
		return "", "", err
	}
	return desc.Digest, desc.MediaType, nil
}

// ---------------------------------------------------------------------------
// Reading manifests and configs

// manifestBlob is a manifest or index read from the store.
type manifestBlob struct {
	digest    digest.Digest
	mediaType string // from the blob, inferred when absent
	isIndex   bool
	data      []byte
}

// catalogImage is one platform image of a catalog: its manifest and config.
type catalogImage struct {
	digest    digest.Digest
	mediaType string
	manifest  ocispec.Manifest
	config    imageConfigDoc
}

// imageConfigDoc is the part of an image config Rebuild reads.
type imageConfigDoc struct {
	Created json.RawMessage `json:"created,omitempty"`
	Config  struct {
		Labels     map[string]string `json:"Labels"`
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		WorkingDir string            `json:"WorkingDir"`
	} `json:"config"`
	RootFS struct {
		DiffIDs []digest.Digest `json:"diff_ids"`
	} `json:"rootfs"`
	History []json.RawMessage `json:"history"`
}

// readMetadataBlob reads a manifest or config whole and checks its digest.
func readMetadataBlob(blobs Blobs, d digest.Digest, what string) ([]byte, error) {
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("%s digest %q: %w", what, d, err)
	}
	rc, err := blobs.Open(d)
	if err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", what, d, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxMetadataBlob+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", what, d, err)
	}
	if len(data) > maxMetadataBlob {
		return nil, fmt.Errorf("%s %s is larger than %d bytes: it is not an image %s", what, d, maxMetadataBlob, what)
	}
	if d.Algorithm().FromBytes(data) != d {
		return nil, fmt.Errorf("%s %s in the store does not match its digest: the store is damaged; remove the blob and pull the catalog again", what, d)
	}
	return data, nil
}

// readManifestBlob reads a manifest or index and tells which it is.
func readManifestBlob(blobs Blobs, d digest.Digest) (*manifestBlob, error) {
	data, err := readMetadataBlob(blobs, d, "manifest")
	if err != nil {
		return nil, err
	}
	var probe struct {
		SchemaVersion int               `json:"schemaVersion"`
		MediaType     string            `json:"mediaType"`
		Manifests     json.RawMessage   `json:"manifests"`
		Config        json.RawMessage   `json:"config"`
		FSLayers      []json.RawMessage `json:"fsLayers"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("manifest %s is not valid JSON: %w", d, err)
	}
	m := &manifestBlob{digest: d, mediaType: probe.MediaType, data: data}
	switch probe.MediaType {
	case ocispec.MediaTypeImageIndex, mediaTypeDockerManifestList:
		m.isIndex = true
	case ocispec.MediaTypeImageManifest, mediaTypeDockerManifest:
	case mediaTypeDockerSchema1, mediaTypeDockerSchema1JWS:
		return nil, fmt.Errorf("image %s is a Docker schema1 image: catalog images must be Docker schema2 or OCI; rebuild or re-push the catalog", d)
	case "":
		switch {
		case probe.Manifests != nil:
			m.isIndex, m.mediaType = true, ocispec.MediaTypeImageIndex
		case probe.Config != nil:
			m.mediaType = ocispec.MediaTypeImageManifest
		case probe.FSLayers != nil || probe.SchemaVersion == 1:
			return nil, fmt.Errorf("image %s is a Docker schema1 image: catalog images must be Docker schema2 or OCI; rebuild or re-push the catalog", d)
		default:
			return nil, fmt.Errorf("manifest %s is neither an image manifest nor an image index", d)
		}
	default:
		return nil, fmt.Errorf("manifest %s has media type %s: a catalog must be a container image (OCI or Docker schema2 manifest, or an index of them)", d, probe.MediaType)
	}
	return m, nil
}

// isAttestation reports whether an index entry is a BuildKit attestation
// manifest rather than a platform image.
func isAttestation(d ocispec.Descriptor) bool {
	if d.Annotations["vnd.docker.reference.type"] == "attestation-manifest" {
		return true
	}
	return d.Platform != nil && d.Platform.OS == "unknown" && d.Platform.Architecture == "unknown"
}

// indexEntries decodes the descriptors of an index.
func indexEntries(m *manifestBlob) ([]json.RawMessage, []ocispec.Descriptor, error) {
	var idx struct {
		Manifests []json.RawMessage `json:"manifests"`
	}
	if err := json.Unmarshal(m.data, &idx); err != nil {
		return nil, nil, fmt.Errorf("image index %s is not valid: %w", m.digest, err)
	}
	descs := make([]ocispec.Descriptor, len(idx.Manifests))
	for i, raw := range idx.Manifests {
		if err := json.Unmarshal(raw, &descs[i]); err != nil {
			return nil, nil, fmt.Errorf("image index %s: manifests[%d] is not a valid descriptor: %w", m.digest, i, err)
		}
		if err := descs[i].Digest.Validate(); err != nil {
			return nil, nil, fmt.Errorf("image index %s: manifests[%d] has an invalid digest: %w", m.digest, i, err)
		}
	}
	return idx.Manifests, descs, nil
}

// catalogPlatformImage resolves d to one platform image: d itself, or the
// first linux/amd64 image of the index d, else its first image.
func catalogPlatformImage(blobs Blobs, d digest.Digest) (*catalogImage, error) {
	top, err := readManifestBlob(blobs, d)
	if err != nil {
		return nil, err
	}
	if !top.isIndex {
		return readCatalogImage(blobs, top)
	}
	_, descs, err := indexEntries(top)
	if err != nil {
		return nil, err
	}
	pick := -1
	for i, desc := range descs {
		if isAttestation(desc) {
			continue
		}
		if pick < 0 {
			pick = i
		}
		if p := desc.Platform; p != nil && p.OS == "linux" && p.Architecture == "amd64" {
			pick = i
			break
		}
	}
	if pick < 0 {
		return nil, fmt.Errorf("image index %s lists no platform image", d)
	}
	inner, err := readManifestBlob(blobs, descs[pick].Digest)
	if err != nil {
		return nil, fmt.Errorf("image index %s: %w", d, err)
	}
	if inner.isIndex {
		return nil, fmt.Errorf("image index %s: entry %s is itself an index: nested indexes are not supported for catalogs", d, descs[pick].Digest)
	}
	return readCatalogImage(blobs, inner)
}

// readCatalogImage decodes an image manifest and reads its config.
func readCatalogImage(blobs Blobs, m *manifestBlob) (*catalogImage, error) {
	img := &catalogImage{digest: m.digest, mediaType: m.mediaType}
	if err := json.Unmarshal(m.data, &img.manifest); err != nil {
		return nil, fmt.Errorf("image manifest %s is not valid: %w", m.digest, err)
	}
	switch img.manifest.Config.MediaType {
	case ocispec.MediaTypeImageConfig, "application/vnd.docker.container.image.v1+json":
	default:
		return nil, fmt.Errorf("image %s has a config of media type %q: it is not a container image, so it cannot be a catalog", m.digest, img.manifest.Config.MediaType)
	}
	for i, l := range img.manifest.Layers {
		if err := l.Digest.Validate(); err != nil {
			return nil, fmt.Errorf("image manifest %s: layers[%d] has an invalid digest: %w", m.digest, i, err)
		}
	}
	data, err := readMetadataBlob(blobs, img.manifest.Config.Digest, "image config")
	if err != nil {
		return nil, fmt.Errorf("catalog image %s: %w", m.digest, err)
	}
	if err := json.Unmarshal(data, &img.config); err != nil {
		return nil, fmt.Errorf("catalog image %s: image config %s is not valid: %w", m.digest, img.manifest.Config.Digest, err)
	}
	return img, nil
}

// configsPath is the configs directory relative to the image root
// ("configs" for the label value "/configs").
func (img *catalogImage) configsPath() (string, error) {
	label, ok := img.config.Config.Labels[ConfigsLabel]
	if !ok || strings.TrimSpace(label) == "" {
		return "", fmt.Errorf("catalog image %s has no label %s: it is not a file-based catalog (sqlite catalogs are not supported)", img.digest, ConfigsLabel)
	}
	p, err := cleanImagePath(label)
	if err != nil || p == "." {
		return "", fmt.Errorf("catalog image %s: label %s=%q must name a directory below / such as /configs", img.digest, ConfigsLabel, label)
	}
	return p, nil
}

// cleanImagePath turns an absolute or root-relative path inside an image into
// a clean relative one ("." for the root), refusing ".." components.
func cleanImagePath(p string) (string, error) {
	rel := strings.TrimLeft(p, "/")
	for _, c := range strings.Split(rel, "/") {
		if c == ".." {
			return "", fmt.Errorf("path %q has a \"..\" component", p)
		}
	}
	return path.Clean("./" + rel), nil
}

// within reports whether p is dir or lies below it (dir "." is the root).
func within(p, dir string) bool {
	return dir == "." || p == dir || strings.HasPrefix(p, dir+"/")
}

// ---------------------------------------------------------------------------
// Streaming layers

// forEachLayerEntry streams the layer's tar and calls fn for each entry,
// then checks the compressed bytes against the layer digest.
func forEachLayerEntry(blobs Blobs, desc ocispec.Descriptor, fn func(*tar.Header, io.Reader) error) error {
	if strings.Contains(desc.MediaType, "encrypted") {
		return fmt.Errorf("layer media type %s is encrypted: decrypt the catalog image first", desc.MediaType)
	}
	rc, err := blobs.Open(desc.Digest)
	if err != nil {
		return fmt.Errorf("reading the layer: %w", err)
	}
	defer rc.Close()
	verifier := desc.Digest.Verifier()
	compressed := io.TeeReader(rc, verifier)
	plain, err := layer.Decompress(compressed)
	if err != nil {
		return fmt.Errorf("decompressing the layer: %w", err)
	}
	defer plain.Close()
	tr := tar.NewReader(plain)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading the layer tar: %w", err)
		}
		if err := fn(hdr, tr); err != nil {
			return err
		}
	}
	// Feed the rest of the blob (tar padding, compression trailer) to the
	// verifier before checking it. Read only: pgzip's WriteTo panics when
	// called after the stream has been read to its end.
	if _, err := io.Copy(io.Discard, struct{ io.Reader }{plain}); err != nil {
		return fmt.Errorf("reading the layer: %w", err)
	}
	if _, err := io.Copy(io.Discard, compressed); err != nil {
		return fmt.Errorf("reading the layer: %w", err)
	}
	if !verifier.Verified() {
		return fmt.Errorf("layer content does not match its digest: the store is damaged; remove the blob and pull the catalog again")
	}
	return nil
}

// entryPath cleans a layer entry name to a path relative to the image root
// ("." for the root itself), refusing absolute names and ".." components.
func entryPath(name string) (string, error) {
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("entry %q has an absolute name: layer entries must be relative to the image root; the image is malformed or hostile", name)
	}
	for _, c := range strings.Split(name, "/") {
		if c == ".." {
			return "", fmt.Errorf("entry %q has a \"..\" component: it would escape the image root; the image is malformed or hostile", name)
		}
	}
	return path.Clean("./" + name), nil
}

// ---------------------------------------------------------------------------
// Extraction

// fbcExtraction applies layers to the configs directory of one image.
type fbcExtraction struct {
	image   digest.Digest
	configs string // configs dir relative to the image root
	root    *os.Root
	present bool // the configs dir exists after the layers applied so far

	layer   digest.Digest
	written map[string]bool // paths (relative to configs, "" for it) the current layer wrote
}

// rootName is rel as an os.Root name.
func rootName(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

// rel is p relative to the configs dir ("" for the dir itself).
func (x *fbcExtraction) rel(p string) string {
	if p == x.configs {
		return ""
	}
	return p[len(x.configs)+1:]
}

// entry applies one layer entry.
func (x *fbcExtraction) entry(hdr *tar.Header, r io.Reader) error {
	p, err := entryPath(hdr.Name)
	if err != nil {
		return err
	}
	if p == "." {
		return nil
	}
	dir, base := path.Dir(p), path.Base(p)
	if strings.HasPrefix(base, whiteoutPrefix) {
		return x.whiteout(hdr.Name, dir, base)
	}
	switch {
	case within(p, x.configs):
		return x.write(hdr, x.rel(p), r)
	case within(x.configs, p) && hdr.Typeflag != tar.TypeDir:
		return fmt.Errorf("entry %q is a %s, not a directory, so the configs directory /%s named by label %s is not a plain directory; gapmirror reads only catalogs whose configs path is made of real directories", hdr.Name, typeName(hdr.Typeflag), x.configs, ConfigsLabel)
	}
	return nil
}

// whiteout applies a whiteout entry .wh.<name> or .wh..wh..opq in dir.
func (x *fbcExtraction) whiteout(name, dir, base string) error {
	if base == whiteoutOpaque {
		switch {
		case within(dir, x.configs):
			return x.pruneChildren(x.rel(dir))
		case within(x.configs, dir):
			return x.wipe()
		}
		return nil
	}
	if strings.HasPrefix(base, whiteoutMetaPrefix) {
		return nil // AUFS metadata (.wh..wh.plnk and the like)
	}
	victim := strings.TrimPrefix(base, whiteoutPrefix)
	if victim == "" || victim == "." || victim == ".." {
		return fmt.Errorf("whiteout entry %q names no file", name)
	}
	target := path.Join(dir, victim)
	switch {
	case target != x.configs && within(target, x.configs):
		return x.prune(x.rel(target))
	case within(x.configs, target):
		return x.wipe()
	}
	return nil
}

// wipe hides the whole configs dir of lower layers.
func (x *fbcExtraction) wipe() error {
	if len(x.written) == 0 {
		x.present = false
	}
	return x.pruneChildren("")
}

// prune removes what lower layers put at rel, keeping what the current layer
// wrote (a whiteout hides lower layers only).
func (x *fbcExtraction) prune(rel string) error {
	if !x.written[rel] {
		// ENOTDIR: a parent is a file, so there is nothing to hide.
		if err := x.root.RemoveAll(rel); err != nil && !errors.Is(err, syscall.ENOTDIR) {
			return fmt.Errorf("applying whiteout of %s: %w", rel, err)
		}
		return nil
	}
	fi, err := x.root.Lstat(rel)
	if err != nil || !fi.IsDir() {
		return nil
	}
	return x.pruneChildren(rel)
}

// pruneChildren prunes every child of the directory rel.
func (x *fbcExtraction) pruneChildren(rel string) error {
	f, err := x.root.Open(rootName(rel))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("applying whiteout in %s: %w", rootName(rel), err)
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return fmt.Errorf("applying whiteout in %s: %w", rootName(rel), err)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := x.prune(path.Join(rel, n)); err != nil {
			return err
		}
	}
	return nil
}

// write applies a non-whiteout entry at rel inside the configs dir.
func (x *fbcExtraction) write(hdr *tar.Header, rel string, r io.Reader) error {
	where := "/" + path.Join(x.configs, rel)
	if rel == "" {
		if hdr.Typeflag != tar.TypeDir {
			return fmt.Errorf("entry %q makes the configs directory %s a %s: a file-based catalog is a directory", hdr.Name, where, typeName(hdr.Typeflag))
		}
		x.written[""], x.present = true, true
		return nil
	}
	switch hdr.Typeflag {
	case tar.TypeDir, tar.TypeReg, tar.TypeRegA, tar.TypeLink:
	case tar.TypeSymlink:
		return fmt.Errorf("%s is a symbolic link to %q: gapmirror does not follow links inside a catalog's configs directory; the catalog must hold the files themselves", where, hdr.Linkname)
	default:
		return fmt.Errorf("%s is a %s: a catalog's configs directory may hold only directories and regular files", where, typeName(hdr.Typeflag))
	}
	if err := x.parents(rel, hdr.Name); err != nil {
		return err
	}
	x.present = true
	existing, err := x.root.Lstat(rel)
	exists := err == nil
	if hdr.Typeflag == tar.TypeDir {
		x.written[rel] = true
		if exists && existing.IsDir() {
			return nil
		}
		if exists {
			if err := x.root.RemoveAll(rel); err != nil {
				return fmt.Errorf("replacing %s: %w", where, err)
			}
		}
		if err := x.root.Mkdir(rel, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", where, err)
		}
		return nil
	}

	src := r
	if hdr.Typeflag == tar.TypeLink {
		target, err := entryPath(hdr.Linkname)
		if err != nil {
			return fmt.Errorf("hard link %s: %w", where, err)
		}
		if target == x.configs || !within(target, x.configs) {
			return fmt.Errorf("%s is a hard link to /%s, outside the configs directory /%s: gapmirror refuses it", where, target, x.configs)
		}
		trel := x.rel(target)
		fi, err := x.root.Lstat(trel)
		if err != nil || !fi.Mode().IsRegular() || trel == rel {
			return fmt.Errorf("%s is a hard link to /%s, which is not a regular file extracted before it", where, target)
		}
		f, err := x.root.Open(trel)
		if err != nil {
			return fmt.Errorf("copying hard link %s: %w", where, err)
		}
		defer f.Close()
		src = f
	}
	if exists {
		if err := x.root.RemoveAll(rel); err != nil {
			return fmt.Errorf("replacing %s: %w", where, err)
		}
	}
	out, err := x.root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("creating %s: %w", where, err)
	}
	_, err = io.Copy(out, src)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", where, err)
	}
	x.written[rel] = true
	return nil
}

// parents makes sure every directory above rel exists (a layer may omit its
// parent directory entries) and counts them as written by this layer.
func (x *fbcExtraction) parents(rel, name string) error {
	var chain []string
	for d := path.Dir(rel); d != "."; d = path.Dir(d) {
		chain = append(chain, d)
	}
	x.written[""] = true
	for _, d := range slices.Backward(chain) {
		fi, err := x.root.Lstat(d)
		switch {
		case err == nil && fi.IsDir():
		case err == nil:
			return fmt.Errorf("entry %q needs /%s to be a directory, but an earlier entry made it a file", name, path.Join(x.configs, d))
		default:
			if err := x.root.Mkdir(d, 0o755); err != nil {
				return fmt.Errorf("creating /%s: %w", path.Join(x.configs, d), err)
			}
		}
		x.written[d] = true
	}
	return nil
}

// typeName names a tar entry type for messages.
func typeName(t byte) string {
	switch t {
	case tar.TypeReg, tar.TypeRegA:
		return "regular file"
	case tar.TypeDir:
		return "directory"
	case tar.TypeSymlink:
		return "symbolic link"
	case tar.TypeLink:
		return "hard link"
	case tar.TypeChar:
		return "character device"
	case tar.TypeBlock:
		return "block device"
	case tar.TypeFifo:
		return "named pipe"
	default:
		return fmt.Sprintf("tar entry of type %q", t)
	}
}

// emptyDir makes sure dir exists and is empty.
func emptyDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating extraction directory: %w", err)
	}
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening extraction directory: %w", err)
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading extraction directory %s: %w", dir, err)
	}
	if len(names) > 0 {
		return fmt.Errorf("extraction directory %s is not empty: extract into a new or empty directory", dir)
	}
	return nil
}

// ---------------------------------------------------------------------------
// Rebuilding

// fbcFile is one entry of the filtered FBC tree to add.
type fbcFile struct {
	rel  string // slash-separated, relative to fbcDir
	dir  bool
	size int64
	src  string // file on disk
}

// readFBCTree lists fbcDir: directories and regular files only.
func readFBCTree(fbcDir string) ([]fbcFile, error) {
	fi, err := os.Stat(fbcDir)
	if err != nil {
		return nil, fmt.Errorf("filtered catalog directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("filtered catalog %s is not a directory", fbcDir)
	}
	var tree []fbcFile
	err = filepath.WalkDir(fbcDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == fbcDir {
			return nil
		}
		rel, err := filepath.Rel(fbcDir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(d.Name(), whiteoutPrefix) {
			return fmt.Errorf("filtered catalog %s: %s starts with %q, which container runtimes read as a whiteout; rename it", fbcDir, rel, whiteoutPrefix)
		}
		switch {
		case d.IsDir():
			tree = append(tree, fbcFile{rel: rel, dir: true})
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			tree = append(tree, fbcFile{rel: rel, size: info.Size(), src: p})
		default:
			return fmt.Errorf("filtered catalog %s: %s is not a regular file or directory (%s); write plain files", fbcDir, rel, d.Type())
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading filtered catalog: %w", err)
	}
	return tree, nil
}

// catalogRebuild is one Rebuild call.
type catalogRebuild struct {
	blobs Blobs
	tree  []fbcFile
	opts  RebuildOptions

	images  map[digest.Digest]ocispec.Descriptor // source → rebuilt platform image
	layers  map[string]layerBlob                 // new layer content key → stored blob
	scanned map[string]map[string]*sourcePath    // layer digest + paths → what it holds
}

// layerBlob is a layer written into the store.
type layerBlob struct {
	digest digest.Digest
	size   int64
	diffID digest.Digest
}

// sourcePath is what a source image's layers hold at one path.
type sourcePath struct {
	hdr    *tar.Header // the last entry at exactly this path, nil if none
	exists bool        // some entry lies at or under this path
}

// index rebuilds every platform image of an index.
func (r *catalogRebuild) index(top *manifestBlob) (digest.Digest, string, error) {
	raws, descs, err := indexEntries(top)
	if err != nil {
		return "", "", err
	}
	var kept []json.RawMessage
	var have []string
	for i, desc := range descs {
		if isAttestation(desc) {
			continue
		}
		have = append(have, platformName(desc.Platform))
		if len(r.opts.Platforms) > 0 && (desc.Platform == nil || !slices.Contains(r.opts.Platforms, desc.Platform.OS+"/"+desc.Platform.Architecture)) {
			continue
		}
		rebuilt, err := r.image(desc.Digest)
		if err != nil {
			return "", "", fmt.Errorf("image index %s, platform %s: %w", top.digest, platformName(desc.Platform), err)
		}
		var entry map[string]json.RawMessage
		if err := json.Unmarshal(raws[i], &entry); err != nil {
			return "", "", fmt.Errorf("image index %s: manifests[%d]: %w", top.digest, i, err)
		}
		if err := setJSON(entry, "digest", rebuilt.Digest); err != nil {
			return "", "", err
		}
		if err := setJSON(entry, "size", rebuilt.Size); err != nil {
			return "", "", err
		}
		raw, err := json.Marshal(entry)
		if err != nil {
			return "", "", fmt.Errorf("encoding index entry: %w", err)
		}
		kept = append(kept, raw)
	}
	if len(kept) == 0 && len(r.opts.Platforms) > 0 {
		return "", "", fmt.Errorf("image index %s has none of the platforms %s (it has %s): list one of its platforms in platforms", top.digest, strings.Join(r.opts.Platforms, ", "), strings.Join(have, ", "))
	}
	if len(kept) == 0 {
		return "", "", fmt.Errorf("image index %s lists no platform image", top.digest)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(top.data, &doc); err != nil {
		return "", "", fmt.Errorf("image index %s is not valid: %w", top.digest, err)
	}
	if err := setJSON(doc, "manifests", kept); err != nil {
		return "", "", err
	}
	desc, err := r.putJSON(doc, top.mediaType)
	if err != nil {
		return "", "", fmt.Errorf("storing the rebuilt index of %s: %w", top.digest, err)
	}
	return desc.Digest, top.mediaType, nil
}

// platformName is "os/arch[/variant]" or "unknown".
func platformName(p *ocispec.Platform) string {
	if p == nil {
		return "unknown"
	}
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// image rebuilds one platform image and returns its new descriptor.
func (r *catalogRebuild) image(d digest.Digest) (ocispec.Descriptor, error) {
	if desc, ok := r.images[d]; ok {
		return desc, nil
	}
	m, err := readManifestBlob(r.blobs, d)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if m.isIndex {
		return ocispec.Descriptor{}, fmt.Errorf("image %s is an index inside an index: nested indexes are not supported for catalogs", d)
	}
	img, err := readCatalogImage(r.blobs, m)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	configs, err := img.configsPath()
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if n, l := len(img.config.RootFS.DiffIDs), len(img.manifest.Layers); n != l {
		return ocispec.Descriptor{}, fmt.Errorf("catalog image %s: config lists %d layer diff_ids but the manifest has %d layers: the image is malformed", d, n, l)
	}
	for i, l := range img.manifest.Layers {
		if !r.blobs.Has(l.Digest) {
			return ocispec.Descriptor{}, fmt.Errorf("catalog image %s: layer %d (%s) is not in the store: the rebuilt image reuses every source layer, so copy the whole catalog image into the store first", d, i, l.Digest)
		}
	}

	entrypoint, epDirs := dropCacheFlags(img.config.Config.Entrypoint)
	cmd, cmdDirs := dropCacheFlags(img.config.Config.Cmd)
	var caches []string
	for _, v := range append(epDirs, cmdDirs...) {
		if !path.IsAbs(v) {
			v = path.Join("/", img.config.Config.WorkingDir, v)
		}
		c, err := cleanImagePath(v)
		if err != nil {
			return ocispec.Descriptor{}, fmt.Errorf("catalog image %s: --cache-dir %q: %w", d, v, err)
		}
		switch {
		case within(configs, c):
			return ocispec.Descriptor{}, fmt.Errorf("catalog image %s: opm cache dir /%s contains the configs directory /%s; gapmirror cannot remove the cache without removing the catalog", d, c, configs)
		case within(c, configs):
			// removed with the configs directory
		case !slices.Contains(caches, c):
			caches = append(caches, c)
		}
	}

	// The whiteout layer re-emits the directories above what it removes;
	// copy their mode and owner from the source so /tmp stays 1777.
	var want []string
	want = append(want, ancestors(configs)...)
	for _, c := range caches {
		want = append(want, ancestors(c)...)
		want = append(want, c)
	}
	slices.Sort(want)
	want = slices.Compact(want)
	found, err := r.scan(img, want)
	if err != nil {
		return ocispec.Descriptor{}, err
	}

	wh, err := r.whiteoutLayer(img, configs, caches, found)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	fbc, err := r.configsLayer(img, configs, found)
	if err != nil {
		return ocispec.Descriptor{}, err
	}

	layerType := ocispec.MediaTypeImageLayerGzip
	if img.mediaType == mediaTypeDockerManifest {
		layerType = mediaTypeDockerLayerGzip
	}
	newConfig, err := r.config(img, configs, caches, entrypoint, cmd, wh.diffID, fbc.diffID)
	if err != nil {
		return ocispec.Descriptor{}, err
	}

	var doc map[string]json.RawMessage
	if err := json.Unmarshal(m.data, &doc); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("image manifest %s is not valid: %w", d, err)
	}
	var cfgDesc map[string]json.RawMessage
	if err := json.Unmarshal(doc["config"], &cfgDesc); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("image manifest %s: config descriptor is not valid: %w", d, err)
	}
	if err := setJSON(cfgDesc, "digest", newConfig.Digest); err != nil {
		return ocispec.Descriptor{}, err
	}
	if err := setJSON(cfgDesc, "size", newConfig.Size); err != nil {
		return ocispec.Descriptor{}, err
	}
	var layers []json.RawMessage
	if raw, ok := doc["layers"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &layers); err != nil {
			return ocispec.Descriptor{}, fmt.Errorf("image manifest %s: layers are not valid: %w", d, err)
		}
	}
	for _, l := range []layerBlob{wh, fbc} {
		raw, err := json.Marshal(ocispec.Descriptor{MediaType: layerType, Digest: l.digest, Size: l.size})
		if err != nil {
			return ocispec.Descriptor{}, fmt.Errorf("encoding layer descriptor: %w", err)
		}
		layers = append(layers, raw)
	}
	if err := setJSON(doc, "config", cfgDesc); err != nil {
		return ocispec.Descriptor{}, err
	}
	if err := setJSON(doc, "layers", layers); err != nil {
		return ocispec.Descriptor{}, err
	}
	desc, err := r.putJSON(doc, img.mediaType)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("storing the rebuilt manifest of %s: %w", d, err)
	}
	r.images[d] = desc
	return desc, nil
}

// config writes the rebuilt image config: the source's, with the new diff_ids,
// history entries and the entrypoint and command without cache flags.
func (r *catalogRebuild) config(img *catalogImage, configs string, caches []string, entrypoint, cmd []string, whDiffID, fbcDiffID digest.Digest) (ocispec.Descriptor, error) {
	data, err := readMetadataBlob(r.blobs, img.manifest.Config.Digest, "image config")
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("image config %s is not valid: %w", img.manifest.Config.Digest, err)
	}
	var container map[string]json.RawMessage
	if raw, ok := doc["config"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &container); err != nil {
			return ocispec.Descriptor{}, fmt.Errorf("image config %s: config is not valid: %w", img.manifest.Config.Digest, err)
		}
	}
	if !slices.Equal(entrypoint, img.config.Config.Entrypoint) {
		if err := setJSON(container, "Entrypoint", entrypoint); err != nil {
			return ocispec.Descriptor{}, err
		}
	}
	if !slices.Equal(cmd, img.config.Config.Cmd) {
		if err := setJSON(container, "Cmd", cmd); err != nil {
			return ocispec.Descriptor{}, err
		}
	}
	if container != nil {
		if err := setJSON(doc, "config", container); err != nil {
			return ocispec.Descriptor{}, err
		}
	}

	var rootfs map[string]json.RawMessage
	if err := json.Unmarshal(doc["rootfs"], &rootfs); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("image config %s: rootfs is not valid: %w", img.manifest.Config.Digest, err)
	}
	diffIDs := append(slices.Clone(img.config.RootFS.DiffIDs), whDiffID, fbcDiffID)
	if err := setJSON(rootfs, "diff_ids", diffIDs); err != nil {
		return ocispec.Descriptor{}, err
	}
	if err := setJSON(doc, "rootfs", rootfs); err != nil {
		return ocispec.Descriptor{}, err
	}

	// Add history only where the source keeps it, so the count of history
	// entries with a layer keeps matching diff_ids.
	if len(img.config.History) > 0 {
		removed := "/" + configs
		for _, c := range caches {
			removed += " and opm cache /" + c
		}
		history := slices.Clone(img.config.History)
		for _, by := range []string{
			"gapmirror: remove " + removed,
			"gapmirror: add the filtered file-based catalog at /" + configs,
		} {
			entry := struct {
				Created   json.RawMessage `json:"created,omitempty"`
				CreatedBy string          `json:"created_by"`
				Comment   string          `json:"comment,omitempty"`
			}{img.config.Created, by, r.opts.Comment}
			raw, err := json.Marshal(entry)
			if err != nil {
				return ocispec.Descriptor{}, fmt.Errorf("encoding history: %w", err)
			}
			history = append(history, raw)
		}
		if err := setJSON(doc, "history", history); err != nil {
			return ocispec.Descriptor{}, err
		}
	}
	desc, err := r.putJSON(doc, img.manifest.Config.MediaType)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("storing the rebuilt config of %s: %w", img.digest, err)
	}
	return desc, nil
}

// setJSON sets doc[key] to the JSON encoding of v.
func setJSON(doc map[string]json.RawMessage, key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", key, err)
	}
	doc[key] = raw
	return nil
}

// putJSON stores the JSON encoding of doc (keys sorted, so deterministic).
func (r *catalogRebuild) putJSON(doc any, mediaType string) (ocispec.Descriptor, error) {
	data, err := json.Marshal(doc)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("encoding: %w", err)
	}
	d := digest.SHA256.FromBytes(data)
	if !r.blobs.Has(d) {
		if err := r.blobs.Put(d, int64(len(data)), bytes.NewReader(data)); err != nil {
			return ocispec.Descriptor{}, err
		}
	}
	return ocispec.Descriptor{MediaType: mediaType, Digest: d, Size: int64(len(data))}, nil
}

// dropCacheFlags removes opm serve's cache flags from args and returns the
// --cache-dir values it removed.
func dropCacheFlags(args []string) ([]string, []string) {
	if args == nil {
		return nil, nil
	}
	out := make([]string, 0, len(args))
	var dirs []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--cache-dir":
			if i+1 < len(args) {
				dirs = append(dirs, args[i+1])
				i++
			}
		case strings.HasPrefix(a, "--cache-dir="):
			dirs = append(dirs, strings.TrimPrefix(a, "--cache-dir="))
		case a == "--cache-only", strings.HasPrefix(a, "--cache-only="),
			a == "--cache-enforce-integrity", strings.HasPrefix(a, "--cache-enforce-integrity="):
		default:
			out = append(out, a)
		}
	}
	return out, dirs
}

// ancestors lists the directories above p (relative), top first.
func ancestors(p string) []string {
	var out []string
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		out = append(out, d)
	}
	slices.Reverse(out)
	return out
}

// scan reads the source layers for what they hold at the paths want.
func (r *catalogRebuild) scan(img *catalogImage, want []string) (map[string]*sourcePath, error) {
	found := map[string]*sourcePath{}
	for _, p := range want {
		found[p] = &sourcePath{}
	}
	if len(want) == 0 {
		return found, nil
	}
	for i, layer := range img.manifest.Layers {
		key := layer.Digest.String() + "\x00" + strings.Join(want, "\x00")
		seen, ok := r.scanned[key]
		if !ok {
			seen = map[string]*sourcePath{}
			err := forEachLayerEntry(r.blobs, layer, func(hdr *tar.Header, _ io.Reader) error {
				p, err := entryPath(hdr.Name)
				if err != nil {
					return err
				}
				for _, w := range want {
					if !within(p, w) {
						continue
					}
					sp := seen[w]
					if sp == nil {
						sp = &sourcePath{}
						seen[w] = sp
					}
					sp.exists = true
					if p == w {
						sp.hdr = hdr
					}
				}
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("catalog image %s: layer %d (%s): %w", img.digest, i, layer.Digest, err)
			}
			r.scanned[key] = seen
		}
		for p, sp := range seen {
			if sp.hdr != nil {
				found[p].hdr = sp.hdr
			}
			found[p].exists = found[p].exists || sp.exists
		}
	}
	return found, nil
}

// newLayerEntry is one entry of a layer Rebuild writes.
type newLayerEntry struct {
	name string // relative, no trailing slash
	hdr  tar.Header
	src  string // regular file content on disk
}

// dirEntry is a directory entry that copies mode and owner of the source's
// directory at p, or is root-owned 0755 (01777 for tmp) when it has none.
func dirEntry(img *catalogImage, p string, found map[string]*sourcePath) (newLayerEntry, error) {
	hdr := tar.Header{Typeflag: tar.TypeDir, Mode: 0o755}
	if p == "tmp" || p == "var/tmp" {
		hdr.Mode = 0o1777
	}
	if sp := found[p]; sp != nil && sp.hdr != nil {
		if sp.hdr.Typeflag != tar.TypeDir {
			return newLayerEntry{}, fmt.Errorf("catalog image %s: /%s is a %s, not a directory; gapmirror cannot rewrite what lies below it", img.digest, p, typeName(sp.hdr.Typeflag))
		}
		hdr.Mode = sp.hdr.Mode & 0o7777
		hdr.Uid, hdr.Gid = sp.hdr.Uid, sp.hdr.Gid
	}
	return newLayerEntry{name: p, hdr: hdr}, nil
}

// whiteoutLayer stores the layer that removes the configs dir and caches.
func (r *catalogRebuild) whiteoutLayer(img *catalogImage, configs string, caches []string, found map[string]*sourcePath) (layerBlob, error) {
	seen := map[string]bool{}
	var entries []newLayerEntry
	remove := func(p string) error {
		for _, a := range ancestors(p) {
			if seen[a] {
				continue
			}
			seen[a] = true
			e, err := dirEntry(img, a, found)
			if err != nil {
				return err
			}
			entries = append(entries, e)
		}
		entries = append(entries, newLayerEntry{
			name: path.Join(path.Dir(p), whiteoutPrefix+path.Base(p)),
			hdr:  tar.Header{Typeflag: tar.TypeReg, Mode: 0o644},
		})
		return nil
	}
	if err := remove(configs); err != nil {
		return layerBlob{}, err
	}
	for _, c := range caches {
		if sp := found[c]; sp != nil && sp.exists {
			if err := remove(c); err != nil {
				return layerBlob{}, err
			}
		}
	}
	return r.putLayer(entries)
}

// configsLayer stores the layer holding the filtered FBC at configs.
func (r *catalogRebuild) configsLayer(img *catalogImage, configs string, found map[string]*sourcePath) (layerBlob, error) {
	var entries []newLayerEntry
	for _, a := range ancestors(configs) {
		e, err := dirEntry(img, a, found)
		if err != nil {
			return layerBlob{}, err
		}
		entries = append(entries, e)
	}
	entries = append(entries, newLayerEntry{name: configs, hdr: tar.Header{Typeflag: tar.TypeDir, Mode: 0o755}})
	for _, f := range r.tree {
		e := newLayerEntry{name: path.Join(configs, f.rel), src: f.src}
		if f.dir {
			e.hdr = tar.Header{Typeflag: tar.TypeDir, Mode: 0o755}
		} else {
			e.hdr = tar.Header{Typeflag: tar.TypeReg, Mode: 0o644, Size: f.size}
		}
		entries = append(entries, e)
	}
	return r.putLayer(entries)
}

// putLayer writes entries as a deterministic tar+gzip layer into the store
// (once per distinct content within this rebuild).
func (r *catalogRebuild) putLayer(entries []newLayerEntry) (layerBlob, error) {
	slices.SortFunc(entries, func(a, b newLayerEntry) int { return compareEntryNames(a.name, b.name) })
	var key strings.Builder
	for _, e := range entries {
		fmt.Fprintf(&key, "%s\x00%c\x00%o\x00%d\x00%d\x00%d\x00%s\n", e.name, e.hdr.Typeflag, e.hdr.Mode, e.hdr.Uid, e.hdr.Gid, e.hdr.Size, e.src)
	}
	if l, ok := r.layers[key.String()]; ok {
		return l, nil
	}

	tmp, err := os.CreateTemp(r.opts.TempDir, "gapmirror-catalog-layer-*")
	if err != nil {
		return layerBlob{}, fmt.Errorf("staging the new catalog layer (set a writable temporary directory): %w", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()

	compressed := sha256.New()
	plain := sha256.New()
	size, err := writeLayer(io.MultiWriter(tmp, compressed), plain, entries)
	if err != nil {
		return layerBlob{}, err
	}
	l := layerBlob{
		digest: digest.NewDigest(digest.SHA256, compressed),
		size:   size,
		diffID: digest.NewDigest(digest.SHA256, plain),
	}
	if !r.blobs.Has(l.digest) {
		if _, err := tmp.Seek(0, io.SeekStart); err != nil {
			return layerBlob{}, fmt.Errorf("staging the new catalog layer: %w", err)
		}
		if err := r.blobs.Put(l.digest, l.size, tmp); err != nil {
			return layerBlob{}, fmt.Errorf("storing the new catalog layer: %w", err)
		}
	}
	r.layers[key.String()] = l
	return l, nil
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeLayer writes the tar of entries, gzip-compressed, to out, and the
// uncompressed tar to plain; it returns the compressed size.
func writeLayer(out io.Writer, plain hash.Hash, entries []newLayerEntry) (int64, error) {
	counted := &countingWriter{w: out}
	zw, err := gzip.NewWriterLevel(counted, gzip.DefaultCompression)
	if err != nil {
		return 0, err
	}
	tw := tar.NewWriter(io.MultiWriter(zw, plain))
	for _, e := range entries {
		hdr := e.hdr
		hdr.Name = e.name
		if hdr.Typeflag == tar.TypeDir {
			hdr.Name += "/"
		}
		hdr.ModTime = layerTime
		if err := tw.WriteHeader(&hdr); err != nil {
			return 0, fmt.Errorf("writing the new catalog layer: %s: %w", e.name, err)
		}
		if e.src != "" && hdr.Typeflag == tar.TypeReg {
			if err := copyFileInto(tw, e.src, hdr.Size); err != nil {
				return 0, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return 0, fmt.Errorf("writing the new catalog layer: %w", err)
	}
	if err := zw.Close(); err != nil {
		return 0, fmt.Errorf("writing the new catalog layer: %w", err)
	}
	return counted.n, nil
}

// copyFileInto copies exactly size bytes of the file src into w.
func copyFileInto(w io.Writer, src string, size int64) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("reading filtered catalog: %w", err)
	}
	defer f.Close()
	n, err := io.Copy(w, io.LimitReader(f, size+1))
	if err != nil {
		return fmt.Errorf("adding %s to the new catalog layer: %w", src, err)
	}
	if n != size {
		return fmt.Errorf("filtered catalog file %s changed size while the catalog layer was written (%d bytes, then %d): do not change the directory during a rebuild", src, size, n)
	}
	return nil
}

// compareEntryNames orders layer entries: component by component, parents
// before children, and in a directory the opaque marker, then whiteouts,
// then the other names.
func compareEntryNames(a, b string) int {
	as, bs := strings.Split(a, "/"), strings.Split(b, "/")
	for i := 0; i < len(as) && i < len(bs); i++ {
		if as[i] == bs[i] {
			continue
		}
		if ra, rb := entryRank(as[i]), entryRank(bs[i]); ra != rb {
			return ra - rb
		}
		return strings.Compare(as[i], bs[i])
	}
	return len(as) - len(bs)
}

// entryRank puts the opaque marker first and whiteouts next.
func entryRank(name string) int {
	switch {
	case name == whiteoutOpaque:
		return 0
	case strings.HasPrefix(name, whiteoutPrefix):
		return 1
	default:
		return 2
	}
}
