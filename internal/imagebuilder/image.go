// Package imagebuilder makes deterministic container images for tests, demos
// and benchmarks: seeded random or file-tree layers, OCI or Docker schema2
// manifests, multi-arch indexes, and pushes them to a registry or writes them
// into an OCI image layout. The same specs always give the same digests.
package imagebuilder

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Format selects the manifest flavour.
type Format int

// Manifest formats.
const (
	// FormatOCI makes OCI image manifests and OCI image indexes.
	FormatOCI Format = iota
	// FormatDocker makes Docker schema2 manifests and manifest lists.
	FormatDocker
)

// String names the format.
func (f Format) String() string {
	switch f {
	case FormatOCI:
		return "oci"
	case FormatDocker:
		return "docker"
	default:
		return fmt.Sprintf("format(%d)", int(f))
	}
}

// Platform is an image's operating system and CPU architecture.
type Platform struct {
	// OS is e.g. "linux".
	OS string
	// Architecture is e.g. "amd64", "arm64", "ppc64le", "s390x".
	Architecture string
	// Variant is e.g. "v8" for arm64; optional.
	Variant string
}

// String is "os/arch" or "os/arch/variant".
func (p Platform) String() string {
	if p.Variant == "" {
		return p.OS + "/" + p.Architecture
	}
	return p.OS + "/" + p.Architecture + "/" + p.Variant
}

// withDefaults fills in linux/amd64 for an empty platform.
func (p Platform) withDefaults() Platform {
	if p.OS == "" {
		p.OS = "linux"
	}
	if p.Architecture == "" {
		p.Architecture = "amd64"
	}
	return p
}

// OpenShiftPlatforms are the four platforms OpenShift releases ship.
var OpenShiftPlatforms = []Platform{
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64", Variant: "v8"},
	{OS: "linux", Architecture: "ppc64le"},
	{OS: "linux", Architecture: "s390x"},
}

// ImageSpec says how to make one single-platform image.
type ImageSpec struct {
	// Format is the manifest flavour; the zero value is OCI.
	Format Format
	// Platform is the image's platform; the zero value is linux/amd64.
	Platform Platform
	// Layers are the image's layers, bottom first.
	Layers []LayerSpec
	// Labels go into the config (catalog images need
	// operators.operatorframework.io.index.configs.v1).
	Labels map[string]string
	// Env, Entrypoint, Cmd and WorkingDir go into the config as given.
	Env []string
	// Entrypoint is the config's entrypoint.
	Entrypoint []string
	// Cmd is the config's default command.
	Cmd []string
	// WorkingDir is the config's working directory.
	WorkingDir string
	// Created is the config's creation time; zero means Epoch.
	Created time.Time
	// Annotations go into an OCI manifest; Docker manifests cannot carry them.
	Annotations map[string]string
}

// Image is a built single-platform image: its manifest and every blob.
type Image struct {
	// Manifest is the manifest JSON, byte for byte as pushed.
	Manifest []byte
	// MediaType is the manifest's media type.
	MediaType string
	// Digest is the manifest digest.
	Digest digest.Digest
	// Platform is the image's platform.
	Platform Platform
	// Config is the image config blob.
	Config Blob
	// Layers are the layer blobs, bottom first.
	Layers []Blob
}

// Descriptor references the image from an index, with its platform.
func (img *Image) Descriptor() ocispec.Descriptor {
	return ocispec.Descriptor{
		MediaType: img.MediaType,
		Digest:    img.Digest,
		Size:      int64(len(img.Manifest)),
		Platform: &ocispec.Platform{
			OS:           img.Platform.OS,
			Architecture: img.Platform.Architecture,
			Variant:      img.Platform.Variant,
		},
	}
}

// Blobs is the config followed by the layers.
func (img *Image) Blobs() []Blob {
	return append([]Blob{img.Config}, img.Layers...)
}

// Index is a built multi-platform image: an image index (OCI) or manifest
// list (Docker) and its images.
type Index struct {
	// Manifest is the index JSON, byte for byte as pushed.
	Manifest []byte
	// MediaType is the index's media type.
	MediaType string
	// Digest is the index digest.
	Digest digest.Digest
	// Images are the platform images, in index order.
	Images []*Image
}

// Descriptor references the index.
func (idx *Index) Descriptor() ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: idx.MediaType, Digest: idx.Digest, Size: int64(len(idx.Manifest))}
}

// Blobs is every distinct blob of every image, in first-use order.
func (idx *Index) Blobs() []Blob {
	seen := map[digest.Digest]bool{}
	var blobs []Blob
	for _, img := range idx.Images {
		for _, b := range img.Blobs() {
			if !seen[b.Digest] {
				seen[b.Digest] = true
				blobs = append(blobs, b)
			}
		}
	}
	return blobs
}

// IndexSpec says how to make a multi-platform image.
type IndexSpec struct {
	// Format is the flavour of the index and of every image in it (the
	// images' own ImageSpec.Format is ignored).
	Format Format
	// Images are the platform images; platforms should differ.
	Images []ImageSpec
	// Annotations go into an OCI index; Docker manifest lists cannot carry them.
	Annotations map[string]string
}

// Build makes the image spec describes.
func Build(spec ImageSpec) (*Image, error) {
	return newLayerCache().buildImage(spec)
}

// BuildIndex makes the multi-platform image spec describes. Layers with the
// same seed, size and compression are generated once and shared.
func BuildIndex(spec IndexSpec) (*Index, error) {
	return newLayerCache().buildIndex(spec)
}

// layerCache reuses random layers within one build.
type layerCache struct {
	mu     sync.Mutex
	layers map[layerKey]*cachedLayer
}

// cachedLayer is a layer being built or built once.
type cachedLayer struct {
	once sync.Once
	blob Blob
	err  error
}

func newLayerCache() *layerCache {
	return &layerCache{layers: map[layerKey]*cachedLayer{}}
}

// layer builds spec, or returns the earlier result for the same random layer.
func (c *layerCache) layer(spec LayerSpec, format Format) (Blob, error) {
	if spec.Files != nil {
		return buildLayer(spec, format)
	}
	key := layerKey{seed: spec.Seed, size: spec.Size, uncompressed: spec.Uncompressed, format: format}
	c.mu.Lock()
	entry, ok := c.layers[key]
	if !ok {
		entry = &cachedLayer{}
		c.layers[key] = entry
	}
	c.mu.Unlock()
	entry.once.Do(func() { entry.blob, entry.err = buildLayer(spec, format) })
	return entry.blob, entry.err
}

func checkFormat(f Format) error {
	if f != FormatOCI && f != FormatDocker {
		return fmt.Errorf("Format is %v: must be FormatOCI or FormatDocker", f)
	}
	return nil
}

func (c *layerCache) buildImage(spec ImageSpec) (*Image, error) {
	if err := checkFormat(spec.Format); err != nil {
		return nil, fmt.Errorf("ImageSpec.%w", err)
	}
	if spec.Format == FormatDocker && len(spec.Annotations) > 0 {
		return nil, fmt.Errorf("ImageSpec.Annotations: Docker schema2 manifests carry no annotations; use FormatOCI or drop them")
	}
	platform := spec.Platform.withDefaults()
	layers := make([]Blob, len(spec.Layers))
	for i, ls := range spec.Layers {
		b, err := c.layer(ls, spec.Format)
		if err != nil {
			return nil, fmt.Errorf("ImageSpec.Layers[%d]: %w", i, err)
		}
		layers[i] = b
	}

	config, err := imageConfig(spec, platform, layers)
	if err != nil {
		return nil, err
	}
	configBlob := newBlob(ocispec.MediaTypeImageConfig, config)
	mediaType := ocispec.MediaTypeImageManifest
	if spec.Format == FormatDocker {
		configBlob.MediaType = mediaTypeDockerConfig
		mediaType = MediaTypeDockerManifest
	}

	m := ocispec.Manifest{
		Versioned:   specs.Versioned{SchemaVersion: 2},
		MediaType:   mediaType,
		Config:      configBlob.Descriptor(),
		Layers:      make([]ocispec.Descriptor, len(layers)),
		Annotations: sortedCopy(spec.Annotations),
	}
	for i, l := range layers {
		m.Layers[i] = l.Descriptor()
	}
	manifest, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding the manifest: %w", err)
	}
	return &Image{
		Manifest:  manifest,
		MediaType: mediaType,
		Digest:    digest.SHA256.FromBytes(manifest),
		Platform:  platform,
		Config:    configBlob,
		Layers:    layers,
	}, nil
}

// imageConfig is the config JSON (the same shape for OCI and Docker).
func imageConfig(spec ImageSpec, platform Platform, layers []Blob) ([]byte, error) {
	created := spec.Created
	if created.IsZero() {
		created = Epoch
	}
	created = created.UTC()
	cfg := ocispec.Image{
		Created: &created,
		Platform: ocispec.Platform{
			OS:           platform.OS,
			Architecture: platform.Architecture,
			Variant:      platform.Variant,
		},
		Config: ocispec.ImageConfig{
			Env:        slices.Clone(spec.Env),
			Entrypoint: slices.Clone(spec.Entrypoint),
			Cmd:        slices.Clone(spec.Cmd),
			WorkingDir: spec.WorkingDir,
			Labels:     sortedCopy(spec.Labels),
		},
		RootFS: ocispec.RootFS{Type: "layers", DiffIDs: make([]digest.Digest, len(layers))},
	}
	for i, l := range layers {
		cfg.RootFS.DiffIDs[i] = l.DiffID
		cfg.History = append(cfg.History, ocispec.History{
			Created:   &created,
			CreatedBy: fmt.Sprintf("imagebuilder layer %d", i),
		})
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding the image config: %w", err)
	}
	return data, nil
}

// sortedCopy copies a map, nil for an empty one (JSON encodes maps sorted).
func sortedCopy(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

func (c *layerCache) buildIndex(spec IndexSpec) (*Index, error) {
	if err := checkFormat(spec.Format); err != nil {
		return nil, fmt.Errorf("IndexSpec.%w", err)
	}
	if len(spec.Images) == 0 {
		return nil, fmt.Errorf("IndexSpec.Images is empty: an index needs at least one image")
	}
	if spec.Format == FormatDocker && len(spec.Annotations) > 0 {
		return nil, fmt.Errorf("IndexSpec.Annotations: Docker manifest lists carry no annotations; use FormatOCI or drop them")
	}
	seen := map[string]int{}
	images := make([]*Image, len(spec.Images))
	for i, is := range spec.Images {
		is.Format = spec.Format
		p := is.Platform.withDefaults().String()
		if j, dup := seen[p]; dup {
			return nil, fmt.Errorf("IndexSpec.Images[%d]: platform %s already used by Images[%d]", i, p, j)
		}
		seen[p] = i
		img, err := c.buildImage(is)
		if err != nil {
			return nil, fmt.Errorf("IndexSpec.Images[%d] (%s): %w", i, p, err)
		}
		images[i] = img
	}
	return assembleIndex(spec.Format, images, spec.Annotations)
}

// assembleIndex writes the index manifest over built images.
func assembleIndex(format Format, images []*Image, annotations map[string]string) (*Index, error) {
	mediaType := ocispec.MediaTypeImageIndex
	if format == FormatDocker {
		mediaType = mediaTypeDockerManifestList
	}
	idx := ocispec.Index{
		Versioned:   specs.Versioned{SchemaVersion: 2},
		MediaType:   mediaType,
		Manifests:   make([]ocispec.Descriptor, len(images)),
		Annotations: sortedCopy(annotations),
	}
	for i, img := range images {
		idx.Manifests[i] = img.Descriptor()
	}
	data, err := json.Marshal(idx)
	if err != nil {
		return nil, fmt.Errorf("encoding the index: %w", err)
	}
	return &Index{Manifest: data, MediaType: mediaType, Digest: digest.SHA256.FromBytes(data), Images: images}, nil
}

// isDigest reports whether ref is a digest rather than a tag.
func isDigest(ref string) bool {
	_, err := digest.Parse(ref)
	return err == nil && strings.Contains(ref, ":")
}
