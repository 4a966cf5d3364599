package release

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"sigs.k8s.io/yaml"

	"github.com/gapmirror/gapmirror/imageset/layer"
)

// Files of a release image that ReadPayload reads.
const (
	// releaseMetadataFile is the release's Cincinnati metadata (JSON).
	releaseMetadataFile = "release-manifests/release-metadata"
	// imageReferencesFile is the ImageStream listing every component image.
	imageReferencesFile = "release-manifests/image-references"
	// bootImagesFile is the ConfigMap describing RHCOS boot images, among
	// them the KubeVirt container disk.
	bootImagesFile = "release-manifests/0000_50_installer_coreos-bootimages.yaml"
)

// KubeVirtComponentName is the component name the KubeVirt container disk
// gets among a release's components (oc-mirror v2's name).
const KubeVirtComponentName = "kube-virt-container"

// maxPayloadFileBytes bounds one file read from a release image; real
// image-references files are around 100 KiB.
const maxPayloadFileBytes = 16 << 20

// ErrDigestMismatch says content read from a registry does not match the
// digest that names it (corrupted in transit or in the registry).
var ErrDigestMismatch = errors.New("content does not match its digest")

// ImageReader reads manifests and blobs of an image (the copy engine's
// upstream registry satisfies it).
type ImageReader interface {
	// Manifest returns the manifest d of the image ref and its media type.
	Manifest(ctx context.Context, ref string, d digest.Digest) ([]byte, string, error)
	// Blob opens the blob d (of size bytes, or -1 when unknown) of the image ref.
	Blob(ctx context.Context, ref string, d digest.Digest, size int64) (io.ReadCloser, error)
}

// Payload is what a release image says about its release.
type Payload struct {
	// Version is the release version from release-metadata, e.g. 4.18.1.
	Version string
	// Previous lists the versions that may update to this one.
	Previous []string
	// Metadata is release-metadata's "metadata" object, verbatim (errata
	// URL, release.openshift.io/architecture, …); nil when absent.
	Metadata json.RawMessage
	// Components are the images of image-references, sorted by name.
	Components []Component
	// KubeVirt are the KubeVirt container disks, only when asked for: the
	// one of the release's architecture or, for a multi-architecture
	// release, one per architecture that ships one (x86_64, s390x), named
	// kube-virt-container-<arch> when there are several, as oc-mirror does.
	KubeVirt []Component
	// NoKubeVirt says why KubeVirt is empty although it was asked for: the
	// release ships no KubeVirt container disk for its architecture (only
	// x86_64 and s390x have one), or has no boot images file at all.
	NoKubeVirt string
	// Instance is the manifest that was read: the release digest itself, or
	// the chosen platform image of a multi-architecture release.
	Instance digest.Digest
	// Arch is the architecture of Instance as the update graph spells it
	// (amd64, arm64, ppc64le, s390x).
	Arch string
}

// Component is one image a release is made of.
type Component struct {
	// Name is the component's name in image-references (etcd, cli, …).
	Name string
	// Image is the pull spec as the payload writes it, pinned by digest.
	Image string
	// Digest is Image's manifest digest.
	Digest digest.Digest
}

// PayloadOption changes what ReadPayload reads.
type PayloadOption func(*payloadOptions)

type payloadOptions struct {
	kubeVirt bool
}

// WithKubeVirt makes ReadPayload also read the KubeVirt container disk from
// bootImagesFile (mirror.platform.kubeVirtContainer). A release that ships
// none for its architecture (arm64 and ppc64le releases never do) is not an
// error: Payload.NoKubeVirt then says so, as oc-mirror warns and mirrors the
// release without it. A boot images file that cannot be read is an error.
func WithKubeVirt() PayloadOption {
	return func(o *payloadOptions) { o.kubeVirt = true }
}

// ReadPayload reads the release image ref, whose manifest is d, and returns
// its version, its component images and, WithKubeVirt, its KubeVirt
// container disk.
//
// arch is the architecture to read (amd64, arm64, ppc64le, s390x; x86_64 and
// aarch64 are accepted); for a multi-architecture release (an index) it picks
// that platform's image. With arch "multi" or "" any image of an index is
// read, linux/amd64 when present: every image of a multi payload carries the
// same release-manifests, whose components are themselves indexes. A
// single-architecture release whose config names another architecture is an
// error.
//
// Only the files it needs are read, without unpacking the image: layers are
// walked from the top down, because a file in a higher layer hides the same
// file (and whiteouts hide files) in lower ones; the walk stops at the first
// layer that settles every file, which for real payloads is the top layer
// (the one `oc adm release new` adds). Walking bottom-up instead would read
// every layer, base operating system included. Every manifest and blob read
// is checked against its digest: once a layer has given what is needed, the
// rest of its compressed bytes are still read (not decompressed) so that
// nothing unverified is trusted.
func ReadPayload(ctx context.Context, r ImageReader, ref string, d digest.Digest, arch string, opts ...PayloadOption) (*Payload, error) {
	var o payloadOptions
	for _, opt := range opts {
		opt(&o)
	}
	label := payloadLabel(ref, d)
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("release image %s: digest %q is not valid: %w", ref, d, err)
	}
	want, releaseArch := "", ""
	if strings.TrimSpace(arch) != "" {
		ga, err := GraphArch(arch)
		if err != nil {
			return nil, fmt.Errorf("reading release image %s: %w", label, err)
		}
		releaseArch = ga
		if ga != ArchMulti {
			want = ga
		}
	}

	pr := &payloadReader{r: r, ref: ref, label: label}
	img, err := pr.image(ctx, d, want)
	if err != nil {
		return nil, err
	}
	files := []string{releaseMetadataFile, imageReferencesFile}
	if o.kubeVirt {
		files = append(files, bootImagesFile)
	}
	found, err := pr.files(ctx, img.layers, files)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if _, ok := found[f]; !ok && f != bootImagesFile {
			return nil, fmt.Errorf("release image %s has no %s: it is not an OpenShift release payload, or a broken one; check the image reference", label, f)
		}
	}

	p := &Payload{Instance: img.digest, Arch: img.arch}
	if releaseArch == "" {
		releaseArch = img.arch
	}
	if err := parseReleaseMetadata(found[releaseMetadataFile], p); err != nil {
		return nil, fmt.Errorf("release image %s: %s: %w", label, releaseMetadataFile, err)
	}
	if p.Components, err = parseImageReferences(found[imageReferencesFile], p.Version, releaseArch); err != nil {
		return nil, fmt.Errorf("release image %s: %s: %w", label, imageReferencesFile, err)
	}
	if o.kubeVirt {
		if bootImages, ok := found[bootImagesFile]; !ok {
			p.NoKubeVirt = fmt.Sprintf("the release has no %s, so no KubeVirt container disk", bootImagesFile)
		} else if p.KubeVirt, p.NoKubeVirt, err = parseBootImages(bootImages, p.Arch, releaseArch == ArchMulti); err != nil {
			return nil, fmt.Errorf("release image %s: %s: %w", label, bootImagesFile, err)
		}
	}
	return p, nil
}

// payloadLabel names a release image in messages: ref, with @d when ref
// does not carry it.
func payloadLabel(ref string, d digest.Digest) string {
	if d == "" || strings.HasSuffix(ref, "@"+d.String()) {
		return ref
	}
	return ref + "@" + d.String()
}

// payloadReader reads one release image.
type payloadReader struct {
	r     ImageReader
	ref   string
	label string
}

// platformImage is the single-platform manifest chosen for reading.
type platformImage struct {
	digest digest.Digest
	arch   string // graph spelling; "" when unknown
	layers []ocispec.Descriptor
}

// manifestDoc covers image manifests and indexes of both OCI and Docker
// schema2 (the fields they share).
type manifestDoc struct {
	SchemaVersion int                  `json:"schemaVersion"`
	MediaType     string               `json:"mediaType"`
	Config        *ocispec.Descriptor  `json:"config"`
	Layers        []ocispec.Descriptor `json:"layers"`
	Manifests     []ocispec.Descriptor `json:"manifests"`
}

// Media types of manifests ReadPayload understands.
const (
	mediaTypeDockerManifest     = "application/vnd.docker.distribution.manifest.v2+json"
	mediaTypeDockerManifestList = "application/vnd.docker.distribution.manifest.list.v2+json"
)

func isIndex(mediaType string) bool {
	return mediaType == ocispec.MediaTypeImageIndex || mediaType == mediaTypeDockerManifestList
}

func isImageManifest(mediaType string) bool {
	return mediaType == ocispec.MediaTypeImageManifest || mediaType == mediaTypeDockerManifest
}

// manifest fetches manifest d and checks it against d.
func (pr *payloadReader) manifest(ctx context.Context, d digest.Digest) (manifestDoc, string, error) {
	data, mediaType, err := pr.r.Manifest(ctx, pr.ref, d)
	if err != nil {
		return manifestDoc{}, "", fmt.Errorf("reading release image %s: manifest %s: %w", pr.label, d, err)
	}
	if got := d.Algorithm().FromBytes(data); got != d {
		return manifestDoc{}, "", fmt.Errorf("reading release image %s: manifest %s has digest %s: %w; the registry or a proxy altered it, retry or check the registry",
			pr.label, d, got, ErrDigestMismatch)
	}
	var doc manifestDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return manifestDoc{}, "", fmt.Errorf("reading release image %s: manifest %s is not JSON: %w", pr.label, d, err)
	}
	if i := strings.IndexByte(mediaType, ';'); i >= 0 {
		mediaType = mediaType[:i]
	}
	mediaType = strings.TrimSpace(mediaType)
	if !isIndex(mediaType) && !isImageManifest(mediaType) {
		mediaType = doc.MediaType
	}
	if mediaType == "" && doc.SchemaVersion == 2 {
		// An OCI manifest may leave mediaType out: tell by its fields.
		if doc.Manifests != nil {
			mediaType = ocispec.MediaTypeImageIndex
		} else if doc.Config != nil {
			mediaType = ocispec.MediaTypeImageManifest
		}
	}
	if !isIndex(mediaType) && !isImageManifest(mediaType) {
		return manifestDoc{}, "", fmt.Errorf("reading release image %s: manifest %s has media type %q (schema %d): release images are OCI or Docker schema2 images",
			pr.label, d, mediaType, doc.SchemaVersion)
	}
	return doc, mediaType, nil
}

// image resolves d to the single-platform image to read; want is the graph
// architecture asked for, "" for any.
func (pr *payloadReader) image(ctx context.Context, d digest.Digest, want string) (platformImage, error) {
	doc, mediaType, err := pr.manifest(ctx, d)
	if err != nil {
		return platformImage{}, err
	}
	if !isIndex(mediaType) {
		img := platformImage{digest: d, arch: want, layers: doc.Layers}
		if err := pr.checkLayers(d, doc); err != nil {
			return platformImage{}, err
		}
		// The config says which architecture the image is for: check it
		// against the one asked for, or learn it when none was.
		cfgArch, err := pr.configArch(ctx, d, doc.Config)
		if err != nil {
			return platformImage{}, err
		}
		if want != "" && cfgArch != "" && cfgArch != want {
			return platformImage{}, fmt.Errorf("release image %s is for architecture %s, not %s: use the payload of architecture %s (tag <version>-%s)",
				pr.label, cfgArch, want, want, TagArch(want))
		}
		if img.arch == "" {
			img.arch = cfgArch
		}
		return img, nil
	}

	chosen := -1
	var platforms []string
	for i, m := range doc.Manifests {
		if m.Platform == nil {
			platforms = append(platforms, "(no platform)")
			continue
		}
		platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
		if m.Platform.OS != "" && m.Platform.OS != "linux" {
			continue
		}
		ga, err := GraphArch(m.Platform.Architecture)
		if err != nil {
			continue
		}
		if (want != "" && ga == want) || (want == "" && ga == archAMD64) {
			chosen = i
			break
		}
		if want == "" && chosen < 0 {
			chosen = i
		}
	}
	if chosen < 0 {
		if want == "" {
			return platformImage{}, fmt.Errorf("release image %s is an index with no linux image (platforms: %s): it is not an OpenShift release payload",
				pr.label, strings.Join(platforms, ", "))
		}
		return platformImage{}, fmt.Errorf("release image %s has no linux/%s image (platforms: %s): ask for one of its architectures, or multi",
			pr.label, want, strings.Join(platforms, ", "))
	}
	m := doc.Manifests[chosen]
	if err := m.Digest.Validate(); err != nil {
		return platformImage{}, fmt.Errorf("release image %s: index entry manifests[%d] has an invalid digest %q: %w", pr.label, chosen, m.Digest, err)
	}
	sub, subType, err := pr.manifest(ctx, m.Digest)
	if err != nil {
		return platformImage{}, err
	}
	if !isImageManifest(subType) {
		return platformImage{}, fmt.Errorf("release image %s: index entry %s (%s) is not an image manifest but %s; nested indexes are not release payloads",
			pr.label, m.Digest, m.Platform.Architecture, subType)
	}
	if err := pr.checkLayers(m.Digest, sub); err != nil {
		return platformImage{}, err
	}
	ga, _ := GraphArch(m.Platform.Architecture)
	return platformImage{digest: m.Digest, arch: ga, layers: sub.Layers}, nil
}

// checkLayers refuses manifests whose layers cannot be read.
func (pr *payloadReader) checkLayers(d digest.Digest, doc manifestDoc) error {
	if len(doc.Layers) == 0 {
		return fmt.Errorf("release image %s: manifest %s has no layers: it is not an OpenShift release payload", pr.label, d)
	}
	for i, l := range doc.Layers {
		if err := l.Digest.Validate(); err != nil {
			return fmt.Errorf("release image %s: manifest %s layers[%d] has an invalid digest %q: %w", pr.label, d, i, l.Digest, err)
		}
		if strings.Contains(l.MediaType, "encrypted") {
			return fmt.Errorf("release image %s: manifest %s layers[%d] is encrypted (%s): gapmirror cannot read encrypted release images", pr.label, d, i, l.MediaType)
		}
	}
	return nil
}

// configArch reads the image config's architecture, in graph spelling; ""
// when the config does not say or says something unknown.
func (pr *payloadReader) configArch(ctx context.Context, d digest.Digest, cfg *ocispec.Descriptor) (string, error) {
	if cfg == nil || cfg.Digest == "" {
		return "", nil
	}
	if err := cfg.Digest.Validate(); err != nil {
		return "", fmt.Errorf("release image %s: manifest %s has an invalid config digest %q: %w", pr.label, d, cfg.Digest, err)
	}
	data, err := pr.readBlob(ctx, *cfg, 1<<20)
	if err != nil {
		return "", fmt.Errorf("reading release image %s: config %s: %w", pr.label, cfg.Digest, err)
	}
	var c struct {
		Architecture string `json:"architecture"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return "", fmt.Errorf("release image %s: config %s is not JSON: %w", pr.label, cfg.Digest, err)
	}
	ga, err := GraphArch(c.Architecture)
	if err != nil {
		return "", nil
	}
	return ga, nil
}

// readBlob reads a small blob whole and checks its digest.
func (pr *payloadReader) readBlob(ctx context.Context, desc ocispec.Descriptor, limit int64) ([]byte, error) {
	if desc.Size > limit {
		return nil, fmt.Errorf("blob %s is %d bytes, more than the %d expected", desc.Digest, desc.Size, limit)
	}
	rc, err := pr.r.Blob(ctx, pr.ref, desc.Digest, desc.Size)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(newVerifiedReader(rc, desc.Digest, desc.Size))
}

// fileState is what the layers above have settled about one wanted file.
type fileState int

const (
	filePending fileState = iota
	fileFound
	fileDeleted
)

// files reads the wanted files from layers (bottom first, as in manifests)
// and returns those present in the image's merged file system.
func (pr *payloadReader) files(ctx context.Context, layers []ocispec.Descriptor, wanted []string) (map[string][]byte, error) {
	state := make(map[string]fileState, len(wanted))
	found := make(map[string][]byte, len(wanted))
	for _, w := range wanted {
		state[w] = filePending
	}
	pending := len(wanted)
	for i := len(layers) - 1; i >= 0 && pending > 0; i-- {
		n, err := pr.scanLayer(ctx, layers[i], state, found)
		if err != nil {
			return nil, fmt.Errorf("reading release image %s: layer %s (layers[%d]): %w", pr.label, layers[i].Digest, i, err)
		}
		pending -= n
	}
	return found, nil
}

// scanLayer reads one layer's tar stream for the pending files, records
// those it has and those its whiteouts delete, and returns how many files it
// settled. It stops decompressing once nothing is pending, then reads the
// rest of the blob only to verify its digest.
func (pr *payloadReader) scanLayer(ctx context.Context, desc ocispec.Descriptor, state map[string]fileState, found map[string][]byte) (int, error) {
	rc, err := pr.r.Blob(ctx, pr.ref, desc.Digest, desc.Size)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	vr := newVerifiedReader(rc, desc.Digest, desc.Size)
	// fail reports a read or format error, unless the blob turns out not to
	// match its digest: then that is the real cause.
	fail := func(err error) (int, error) {
		if derr := vr.drain(); derr != nil {
			return 0, derr
		}
		return 0, err
	}

	pending := 0
	for _, s := range state {
		if s == filePending {
			pending++
		}
	}
	settled := 0
	var whiteouts []string // paths deleted in lower layers
	var opaque []string    // directories whose lower-layer content is hidden

	dec, err := layer.Decompress(vr)
	if err != nil {
		return fail(fmt.Errorf("decompressing: %w", err))
	}
	tr := tar.NewReader(dec)
	for settled < pending {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			dec.Close()
			return fail(fmt.Errorf("reading the layer's tar stream: %w", err))
		}
		name := cleanEntryName(hdr.Name)
		dir, base := path.Split(name)
		if strings.HasPrefix(base, ".wh.") {
			if base == ".wh..wh..opq" {
				opaque = append(opaque, strings.TrimSuffix(dir, "/"))
			} else {
				whiteouts = append(whiteouts, dir+strings.TrimPrefix(base, ".wh."))
			}
			continue
		}
		if s, ok := state[name]; !ok || s != filePending {
			continue
		}
		if hdr.Typeflag != tar.TypeReg && hdr.Typeflag != tar.TypeRegA {
			dec.Close()
			return fail(fmt.Errorf("%s is not a regular file (tar type %q): the release image is malformed", name, hdr.Typeflag))
		}
		if hdr.Size > maxPayloadFileBytes {
			dec.Close()
			return fail(fmt.Errorf("%s is %d bytes, more than the %d MiB a release file may have: the release image is malformed", name, hdr.Size, maxPayloadFileBytes>>20))
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			dec.Close()
			return fail(fmt.Errorf("reading %s: %w", name, err))
		}
		found[name] = data
		state[name] = fileFound
		settled++
	}
	if err := dec.Close(); err != nil {
		return fail(fmt.Errorf("decompressing: %w", err))
	}
	if err := vr.drain(); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	// Whiteouts and opaque directories hide what lower layers have; they
	// are applied after the whole layer is read, since they do not hide the
	// layer's own files.
	for name, s := range state {
		if s == filePending && hidden(name, whiteouts, opaque) {
			state[name] = fileDeleted
			settled++
		}
	}
	return settled, nil
}

// cleanEntryName turns a tar entry name ("./a/b", "/a/b") into "a/b".
func cleanEntryName(name string) string {
	name = path.Clean("/" + name)
	return strings.TrimPrefix(name, "/")
}

// hidden reports whether a whiteout of name or of a parent, or an opaque
// parent directory, hides name.
func hidden(name string, whiteouts, opaque []string) bool {
	for _, w := range whiteouts {
		if name == w || strings.HasPrefix(name, w+"/") {
			return true
		}
	}
	for _, o := range opaque {
		if o == "" || strings.HasPrefix(name, o+"/") {
			return true
		}
	}
	return false
}

// verifiedReader passes a blob through and fails at its end when the bytes
// do not match the expected digest and size.
type verifiedReader struct {
	r        io.Reader
	want     digest.Digest
	size     int64 // -1 when unknown
	verifier digest.Verifier
	n        int64
	err      error // sticky result once the end is reached
}

func newVerifiedReader(r io.Reader, want digest.Digest, size int64) *verifiedReader {
	if size == 0 {
		// A descriptor with size 0 for a non-empty blob is malformed; treat
		// as unknown and let the digest decide.
		size = -1
	}
	return &verifiedReader{r: r, want: want, size: size, verifier: want.Verifier()}
}

// Read implements io.Reader.
func (v *verifiedReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.r.Read(p)
	if n > 0 {
		v.n += int64(n)
		_, _ = v.verifier.Write(p[:n])
		if v.size >= 0 && v.n > v.size {
			v.err = fmt.Errorf("blob %s is longer than its %d bytes: %w", v.want, v.size, ErrDigestMismatch)
			return 0, v.err
		}
	}
	switch {
	case err == io.EOF:
		if v.size >= 0 && v.n != v.size {
			v.err = fmt.Errorf("blob %s ended after %d of its %d bytes: the download was cut short, retry", v.want, v.n, v.size)
		} else if !v.verifier.Verified() {
			v.err = fmt.Errorf("blob %s: %w; the registry or a proxy served corrupt bytes, retry or check the registry", v.want, ErrDigestMismatch)
		} else {
			v.err = io.EOF
		}
		return n, v.err
	case err != nil:
		v.err = err
	}
	return n, err
}

// drain reads the rest of the blob and returns an error unless it matched
// its digest.
func (v *verifiedReader) drain() error {
	_, err := io.Copy(io.Discard, v)
	return err
}

// releaseMetadataDoc is release-manifests/release-metadata.
type releaseMetadataDoc struct {
	Kind     string          `json:"kind"`
	Version  string          `json:"version"`
	Previous []string        `json:"previous"`
	Metadata json.RawMessage `json:"metadata"`
}

// releaseMetadataKind is the only release-metadata kind known.
const releaseMetadataKind = "cincinnati-metadata-v0"

func parseReleaseMetadata(data []byte, p *Payload) error {
	var doc releaseMetadataDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("not valid JSON: %w", err)
	}
	if doc.Kind != "" && doc.Kind != releaseMetadataKind {
		return fmt.Errorf("kind is %q, want %q", doc.Kind, releaseMetadataKind)
	}
	if strings.TrimSpace(doc.Version) == "" {
		return errors.New("field version is missing")
	}
	if _, err := semver.StrictNewVersion(doc.Version); err != nil {
		return fmt.Errorf("version %q is not a semantic version", doc.Version)
	}
	p.Version = doc.Version
	p.Previous = doc.Previous
	if len(doc.Metadata) > 0 && string(doc.Metadata) != "null" {
		p.Metadata = append(json.RawMessage(nil), doc.Metadata...)
	}
	return nil
}

// imageStreamDoc is release-manifests/image-references.
type imageStreamDoc struct {
	Kind string `json:"kind"`
	Spec struct {
		Tags []struct {
			Name string `json:"name"`
			From *struct {
				Kind string `json:"kind"`
				Name string `json:"name"`
			} `json:"from"`
		} `json:"tags"`
	} `json:"spec"`
}

// tagSafe matches what a component name must be to become part of a tag.
var tagSafe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// maxTagLength is the longest tag registries accept.
const maxTagLength = 128

func parseImageReferences(data []byte, version, arch string) ([]Component, error) {
	var doc imageStreamDoc
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("not a valid ImageStream document: %w", err)
	}
	if doc.Kind != "ImageStream" {
		return nil, fmt.Errorf("kind is %q, want ImageStream", doc.Kind)
	}
	if len(doc.Spec.Tags) == 0 {
		return nil, errors.New("spec.tags is empty: the release lists no component images")
	}
	var errs []error
	seen := map[string]int{}
	out := make([]Component, 0, len(doc.Spec.Tags))
	for i, t := range doc.Spec.Tags {
		at := fmt.Sprintf("spec.tags[%d]", i)
		if t.Name != "" {
			at += fmt.Sprintf(" (%s)", t.Name)
		}
		switch {
		case t.Name == "":
			errs = append(errs, fmt.Errorf("%s: name is empty", at))
			continue
		case !tagSafe.MatchString(t.Name):
			errs = append(errs, fmt.Errorf("%s: name %q cannot be part of an image tag (letters, digits, _ . - only)", at, t.Name))
			continue
		case len(componentTag(version, arch, t.Name)) > maxTagLength:
			errs = append(errs, fmt.Errorf("%s: name %q makes the destination tag %s longer than %d characters", at, t.Name, componentTag(version, arch, t.Name), maxTagLength))
			continue
		}
		if j, dup := seen[t.Name]; dup {
			errs = append(errs, fmt.Errorf("%s: name %q already used by spec.tags[%d]", at, t.Name, j))
			continue
		}
		seen[t.Name] = i
		if t.From == nil || t.From.Name == "" {
			errs = append(errs, fmt.Errorf("%s: from.name is empty", at))
			continue
		}
		if t.From.Kind != "" && t.From.Kind != "DockerImage" {
			errs = append(errs, fmt.Errorf("%s: from.kind is %q, want DockerImage", at, t.From.Kind))
			continue
		}
		d, err := pinnedDigest(t.From.Name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: from.name: %w", at, err))
			continue
		}
		out = append(out, Component{Name: t.Name, Image: t.From.Name, Digest: d})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out, nil
}

// pinnedDigest returns the digest of a pull spec, which must name one.
func pinnedDigest(pullspec string) (digest.Digest, error) {
	named, err := reference.ParseNormalizedNamed(pullspec)
	if err != nil {
		return "", fmt.Errorf("%q is not an image reference: %w", pullspec, err)
	}
	c, ok := named.(reference.Canonical)
	if !ok {
		return "", fmt.Errorf("%q is not pinned by digest: a release must name its images as repo@sha256:…; the payload is not a published release", pullspec)
	}
	return c.Digest(), nil
}

// bootImagesDoc is the coreos-bootimages ConfigMap.
type bootImagesDoc struct {
	Kind string            `json:"kind"`
	Data map[string]string `json:"data"`
}

// coreOSStream is the CoreOS stream metadata in the ConfigMap's data.stream.
type coreOSStream struct {
	Architectures map[string]struct {
		Images struct {
			KubeVirt *struct {
				Release   string `json:"release"`
				Image     string `json:"image"`
				DigestRef string `json:"digest-ref"`
			} `json:"kubevirt"`
		} `json:"images"`
	} `json:"architectures"`
}

// parseBootImages returns the KubeVirt container disks from the boot
// images ConfigMap: arch's, or with multi every architecture's that has one
// (sorted by architecture); else none and why (the stream has no such
// architecture or no disk for it). A ConfigMap it cannot read is an error.
func parseBootImages(data []byte, arch string, multi bool) ([]Component, string, error) {
	var cm bootImagesDoc
	if err := yaml.Unmarshal(data, &cm); err != nil {
		return nil, "", fmt.Errorf("not a valid ConfigMap: %w", err)
	}
	if cm.Kind != "ConfigMap" {
		return nil, "", fmt.Errorf("kind is %q, want ConfigMap", cm.Kind)
	}
	raw, ok := cm.Data["stream"]
	if !ok || strings.TrimSpace(raw) == "" {
		return nil, "", errors.New("data.stream is missing")
	}
	var s coreOSStream
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return nil, "", fmt.Errorf("data.stream is not valid JSON: %w", err)
	}
	disk := func(key string) (*Component, error) {
		kv := s.Architectures[key].Images.KubeVirt
		if kv == nil || kv.DigestRef == "" {
			return nil, nil
		}
		d, err := pinnedDigest(kv.DigestRef)
		if err != nil {
			return nil, fmt.Errorf("architectures.%s.images.kubevirt.digest-ref: %w", key, err)
		}
		return &Component{Name: KubeVirtComponentName, Image: kv.DigestRef, Digest: d}, nil
	}
	if multi {
		var out []Component
		for _, key := range slices.Sorted(maps.Keys(s.Architectures)) {
			c, err := disk(key)
			if err != nil {
				return nil, "", err
			}
			if c != nil {
				c.Name += "-" + key
				out = append(out, *c)
			}
		}
		switch len(out) {
		case 0:
			return nil, fmt.Sprintf("%s data.stream has no architecture with images.kubevirt.digest-ref: the release ships no KubeVirt container disk", bootImagesFile), nil
		case 1:
			out[0].Name = KubeVirtComponentName
		}
		return out, "", nil
	}
	if arch == "" {
		arch = archAMD64
	}
	key := TagArch(arch)
	if _, ok := s.Architectures[key]; !ok {
		return nil, fmt.Sprintf("%s data.stream has no architectures.%s: the release has no boot images, so no KubeVirt container disk, for %s", bootImagesFile, key, arch), nil
	}
	c, err := disk(key)
	if err != nil {
		return nil, "", err
	}
	if c == nil {
		return nil, fmt.Sprintf("%s data.stream has no architectures.%s.images.kubevirt.digest-ref: the release ships no KubeVirt container disk for %s (x86_64 and s390x releases do)", bootImagesFile, key, arch), nil
	}
	return []Component{*c}, "", nil
}
