package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
)

// example is one image the demo pushes upstream and lists in the
// ImageSetConfiguration, with where it must land at the mirror.
type example struct {
	// Repo and Tag are the upstream repository path and tag.
	Repo string
	Tag  string
	// ByDigest lists the image in the configuration by digest only.
	ByDigest bool
	// TargetRepo and TargetTag, when set, go into the configuration entry.
	TargetRepo string
	TargetTag  string
	// Note is a comment written next to the entry in the configuration.
	Note string

	// Format, Platforms and Layers say how the image is built: more than one
	// platform makes a multi-arch index.
	Format    imagebuilder.Format
	Platforms []imagebuilder.Platform
	// Own is the size of the image's own layer; 0 means none.
	Own int64
	// Base puts the shared base layer under the image's own layer.
	Base bool

	// Digest is the manifest (or index) digest, known once built.
	Digest digest.Digest
	// Blobs are the image's distinct blobs and their sizes, known once built.
	Blobs map[digest.Digest]int64
}

var (
	amd64   = imagebuilder.Platform{OS: "linux", Architecture: "amd64"}
	arm64   = imagebuilder.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}
	ppc64le = imagebuilder.Platform{OS: "linux", Architecture: "ppc64le"}
	s390x   = imagebuilder.Platform{OS: "linux", Architecture: "s390x"}
)

// baseLayerSize is the size of the base layer most examples share.
const baseLayerSize = 1536 << 10

// examples is the demo's image set: multi-arch indexes, OCI and Docker
// schema2 manifests, nested namespaces, a shared base layer, one image named
// only by digest and one renamed with targetRepo/targetTag.
func examples() []*example {
	single := []imagebuilder.Platform{amd64}
	return []*example{
		{Repo: "ubi9/ubi-minimal", Tag: "9.4", Base: true, Platforms: []imagebuilder.Platform{amd64, arm64, ppc64le, s390x},
			Note: "multi-arch: 4 platforms, the base layer of most other images"},
		{Repo: "library/busybox", Tag: "1.36", Own: 640 << 10, Platforms: []imagebuilder.Platform{amd64, arm64},
			TargetRepo: "tools/busybox", TargetTag: "stable", Note: "renamed at the mirror"},
		{Repo: "openshift4/ose-cli", Tag: "v4.16", Base: true, Own: 1 << 20, Platforms: []imagebuilder.Platform{amd64, arm64},
			Note: "multi-arch: 2 platforms"},
		{Repo: "team-a/frontend", Tag: "1.4.2", Base: true, Own: 384 << 10, Platforms: single},
		{Repo: "team-a/backend", Tag: "1.4.2", Base: true, Own: 512 << 10, Platforms: single},
		{Repo: "team-a/backend", Tag: "1.4.1", Base: true, Own: 480 << 10, Platforms: single, Note: "a second tag of the same repository"},
		{Repo: "team-b/payments/api", Tag: "2.0.0", Base: true, Own: 448 << 10, Platforms: single, Note: "nested namespace"},
		{Repo: "team-b/payments/worker", Tag: "2.0.0", Base: true, Own: 320 << 10, Platforms: single, Format: imagebuilder.FormatDocker,
			Note: "Docker schema2 manifest"},
		{Repo: "platform/observability/prometheus", Tag: "v2.51", Base: true, Own: 768 << 10, Platforms: single,
			Format: imagebuilder.FormatDocker, Note: "Docker schema2 manifest"},
		{Repo: "platform/observability/grafana-agent", Tag: "v0.40", Base: true, Own: 576 << 10, Platforms: single},
		{Repo: "platform/ingress/nginx", Tag: "1.25", Base: true, Own: 256 << 10, Platforms: single},
		{Repo: "tools/jq", Tag: "1.7", ByDigest: true, Own: 192 << 10, Platforms: single,
			Note: "by digest only: pushed as tools/jq:sha256-<hex>"},
	}
}

// baseLayer is the shared base layer for a platform.
func baseLayer(p imagebuilder.Platform) imagebuilder.LayerSpec {
	return imagebuilder.RandomLayer(seedOf("base", p.String()), baseLayerSize)
}

// seedOf derives a stable layer seed from words.
func seedOf(words ...string) uint64 {
	var h uint64 = 14695981039346656037 // FNV-1a
	for _, c := range []byte(strings.Join(words, "/")) {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// spec is the image spec of one platform of ex.
func (ex *example) spec(p imagebuilder.Platform) imagebuilder.ImageSpec {
	var layers []imagebuilder.LayerSpec
	if ex.Base {
		layers = append(layers, baseLayer(p))
	}
	if ex.Own > 0 {
		layers = append(layers, imagebuilder.RandomLayer(seedOf(ex.Repo, ex.Tag, p.String()), ex.Own))
	}
	return imagebuilder.ImageSpec{
		Format:   ex.Format,
		Platform: p,
		Layers:   layers,
		Labels:   map[string]string{"org.opencontainers.image.title": ex.Repo, "org.opencontainers.image.version": ex.Tag},
		Cmd:      []string{"/bin/sh"},
	}
}

// push builds ex and pushes it to the registry at t, filling in Digest,
// Blobs and Bytes.
func (ex *example) push(ctx context.Context, t imagebuilder.Target) error {
	what := ex.Repo + ":" + ex.Tag
	var blobs []imagebuilder.Blob
	if len(ex.Platforms) > 1 {
		idx := imagebuilder.IndexSpec{Format: ex.Format}
		for _, p := range ex.Platforms {
			idx.Images = append(idx.Images, ex.spec(p))
		}
		built, err := imagebuilder.BuildIndex(idx)
		if err != nil {
			return fmt.Errorf("building %s: %w", what, err)
		}
		if err := imagebuilder.PushIndex(ctx, t, ex.Repo, ex.Tag, built); err != nil {
			return fmt.Errorf("pushing %s: %w", what, err)
		}
		ex.Digest, blobs = built.Digest, built.Blobs()
	} else {
		built, err := imagebuilder.Build(ex.spec(ex.Platforms[0]))
		if err != nil {
			return fmt.Errorf("building %s: %w", what, err)
		}
		if err := imagebuilder.Push(ctx, t, ex.Repo, ex.Tag, built); err != nil {
			return fmt.Errorf("pushing %s: %w", what, err)
		}
		ex.Digest, blobs = built.Digest, built.Blobs()
	}
	ex.Blobs = map[digest.Digest]int64{}
	for _, b := range blobs {
		ex.Blobs[b.Digest] = b.Descriptor().Size
	}
	return nil
}

// kind describes the image's shape for a human.
func (ex *example) kind() string {
	format := "OCI"
	if ex.Format == imagebuilder.FormatDocker {
		format = "Docker"
	}
	if len(ex.Platforms) > 1 {
		return fmt.Sprintf("%s index, %d platforms", format, len(ex.Platforms))
	}
	return fmt.Sprintf("%s manifest, %s", format, ex.Platforms[0].Architecture)
}

// source is the image's name in the configuration on the upstream host.
func (ex *example) source(host string) string {
	if ex.ByDigest {
		return host + "/" + ex.Repo + "@" + ex.Digest.String()
	}
	return host + "/" + ex.Repo + ":" + ex.Tag
}

// destination is the repository and tag the image must have under a mirror
// prefix: the path kept (or targetRepo), the tag kept (or targetTag, or
// sha256-<hex> for an image named by digest).
func (ex *example) destination(prefix string) (repo, tag string) {
	repo, tag = ex.Repo, ex.Tag
	if ex.TargetRepo != "" {
		repo = ex.TargetRepo
	}
	switch {
	case ex.TargetTag != "":
		tag = ex.TargetTag
	case ex.ByDigest:
		tag = "sha256-" + ex.Digest.Encoded()
	}
	return strings.TrimPrefix(prefix+"/"+repo, "/"), tag
}

// config is the ImageSetConfiguration listing every example on host, after
// the other sections of mirror (releases, operators).
func config(host string, exs []*example, sections string) string {
	var b strings.Builder
	b.WriteString("kind: ImageSetConfiguration\n")
	b.WriteString("apiVersion: mirror.openshift.io/v2alpha1\n")
	b.WriteString("mirror:\n")
	b.WriteString(sections)
	b.WriteString("  # single images, by tag or digest\n")
	b.WriteString("  additionalImages:\n")
	for _, ex := range exs {
		if ex.Note != "" {
			fmt.Fprintf(&b, "  # %s\n", ex.Note)
		}
		fmt.Fprintf(&b, "  - name: %s\n", ex.source(host))
		if ex.TargetRepo != "" {
			fmt.Fprintf(&b, "    targetRepo: %s\n", ex.TargetRepo)
		}
		if ex.TargetTag != "" {
			fmt.Fprintf(&b, "    targetTag: %s\n", ex.TargetTag)
		}
	}
	b.WriteString("  # never mirrored (Go regular expressions); none of the images above matches\n")
	b.WriteString("  blockedImages:\n")
	b.WriteString("  - name: \".*/internal/.*\"\n")
	return b.String()
}
