package sections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/distribution/reference"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/ocistore"
	"github.com/gapmirror/gapmirror/transfer"
)

// layoutImages mirrors the additional images that are OCI image layouts on
// disk (oci:///abs/path or oci:rel/path), as oc-mirror does: each is copied
// into the local store during resolution and travels from there like an
// image gapmirror built (read from the store, carried in the archive, never
// in IDMS/ITMS since no cluster pulls it by its path on disk).
type layoutImages struct {
	t     *Env
	store *ocistore.Store
}

func (l *layoutImages) Sections() []string { return []string{imageset.SectionLayoutImages} }

// Contribute adds every oci: additional image. A missing or malformed
// layout is bad input: the run stops with the field path and what to fix.
func (l *layoutImages) Contribute(ctx context.Context, cfg *imageset.ImageSetConfiguration, r *imageset.Resolving) error {
	for i, ai := range cfg.Mirror.AdditionalImages {
		dir, ok := ai.OCILayoutPath()
		if !ok {
			continue
		}
		path := fmt.Sprintf("mirror.additionalImages[%d]", i)
		repo, tag := layoutDestination(ai)
		if r.SkipListed(path, ai.Name, ai.Name, repo) {
			continue // before reading it: a blocked layout need not be there
		}
		at := l.at(cfg, path+".name")
		top, abs, err := readLayout(dir)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", at, ai.Name, err)
		}
		img := imageset.Image{
			Source:      "oci:" + abs + "@" + top.Digest.String(),
			Origin:      ai.Name,
			Digest:      top.Digest.String(),
			Destination: repo + ":" + tag,
			Kind:        imageset.KindAdditional,
			Built:       true,
			Why:         []string{path},
		}
		if l.store != nil {
			// Planned, with its own planning and copying lines: a layout
			// image may be large.
			res := transfer.CopyPlanned(ctx, &imageset.Set{Images: []imageset.Image{img}}, &transfer.ArchiveSource{Archive: layoutBlobs{dir: abs}, Name: "OCI layout " + abs}, transfer.StoreDestination(l.store), l.t.Copy)
			if len(res.Failed) > 0 {
				err := res.Failed[0].Err
				if missing := (*transfer.MissingBlobError)(nil); errors.As(err, &missing) {
					return fmt.Errorf("%s: %s: the OCI layout %s is incomplete: it lacks blob %s (%s), which its manifests name; %s",
						at, ai.Name, abs, missing.Digest, layoutBlobs{dir: abs}.path(missing.Digest), rewriteLayout(abs))
				}
				return fmt.Errorf("%s: %s: the OCI layout %s is incomplete or damaged: %w; %s", at, ai.Name, abs, err, rewriteLayout(abs))
			}
			l.store.Tag(img.Destination, top)
			if err := l.store.SaveIndex(); err != nil {
				return err
			}
		}
		if err := r.Set.Add(img); err != nil {
			return fmt.Errorf("%s: %w: give one of them another targetRepo or targetTag", l.at(cfg, path), err)
		}
	}
	return nil
}

// at is where a field is, as configuration errors say it: "file:line: path".
func (l *layoutImages) at(cfg *imageset.ImageSetConfiguration, path string) string {
	file := l.t.ConfigPath
	if file == "" {
		file = cfg.File()
	}
	switch line := cfg.Line(path); {
	case file != "" && line > 0:
		return fmt.Sprintf("%s:%d: %s", file, line, path)
	case file != "":
		return fmt.Sprintf("%s: %s", file, path)
	}
	return path
}

// layoutHint says what an oci: additional image must point at.
const layoutHint = "point it at a directory holding oci-layout, index.json and blobs/ (one image), as `skopeo copy docker://IMAGE oci:DIR:TAG` writes it; a relative path is taken from the current directory"

// rewriteLayout says how to make an incomplete layout whole again.
func rewriteLayout(dir string) string {
	return fmt.Sprintf("write the layout again (skopeo copy docker://IMAGE oci:%s:TAG), or copy it whole with its blobs/ directory", dir)
}

// readLayout finds the one image an OCI layout holds (a manifest or an
// index) and returns its descriptor and the layout's absolute path.
func readLayout(dir string) (ocispec.Descriptor, string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ocispec.Descriptor{}, "", err
	}
	if fi, err := os.Stat(abs); err != nil {
		return ocispec.Descriptor{}, "", fmt.Errorf("no OCI image layout at %s (%w): %s", abs, err, layoutHint)
	} else if !fi.IsDir() {
		return ocispec.Descriptor{}, "", fmt.Errorf("%s is a file, not an OCI image layout directory: %s", abs, layoutHint)
	}
	data, err := os.ReadFile(filepath.Join(abs, ocispec.ImageIndexFile))
	if err != nil {
		return ocispec.Descriptor{}, "", fmt.Errorf("%s is not an OCI image layout (%w): %s", abs, err, layoutHint)
	}
	var idx ocispec.Index
	if err := json.Unmarshal(data, &idx); err != nil {
		return ocispec.Descriptor{}, "", fmt.Errorf("%s/index.json is not an OCI index: %w", abs, err)
	}
	switch len(idx.Manifests) {
	case 0:
		return ocispec.Descriptor{}, "", fmt.Errorf("the OCI layout %s names no image (its index.json lists no manifest)", abs)
	case 1:
	default:
		var names []string
		for _, m := range idx.Manifests {
			names = append(names, orDigest(m))
		}
		return ocispec.Descriptor{}, "", fmt.Errorf("the OCI layout %s names %d images (%s): keep one image per layout", abs, len(idx.Manifests), strings.Join(names, ", "))
	}
	top := idx.Manifests[0]
	if err := top.Digest.Validate(); err != nil {
		return ocispec.Descriptor{}, "", fmt.Errorf("%s/index.json names manifest %q: %w", abs, top.Digest, err)
	}
	if _, err := os.Stat(layoutBlobs{dir: abs}.path(top.Digest)); err != nil {
		return ocispec.Descriptor{}, "", fmt.Errorf("the OCI layout %s is incomplete: it lacks the manifest %s its index.json names; %s", abs, top.Digest, rewriteLayout(abs))
	}
	top.Annotations, top.Platform = nil, nil
	return top, abs, nil
}

func orDigest(d ocispec.Descriptor) string {
	if n := d.Annotations[ocispec.AnnotationRefName]; n != "" {
		return n
	}
	return d.Digest.String()
}

// layoutDestination is where an oci: additional image goes under the mirror
// root, by oc-mirror's rules: targetRepo, else the layout's path as written
// (without the leading '/'; each component made a valid repository name,
// "." and ".." dropped); targetTag, else "latest".
func layoutDestination(ai imageset.AdditionalImage) (repo, tag string) {
	repo = strings.Trim(ai.TargetRepo, "/")
	if dir, _ := ai.OCILayoutPath(); repo == "" {
		var parts []string
		for _, p := range strings.Split(filepath.ToSlash(dir), "/") {
			if p == "" {
				continue
			}
			if c := layoutRepo(p); c != "catalog" || strings.EqualFold(p, "catalog") {
				parts = append(parts, c)
			}
		}
		repo = strings.Join(parts, "/")
	}
	tag = ai.TargetTag
	if tag == "" {
		tag = "latest"
	}
	return repo, tag
}

// LayoutTarget is the repository, digest and tag (each may be empty: any)
// a delete.additionalImages entry selects at the mirror.
func LayoutTarget(ai imageset.AdditionalImage) (repo, dig, tag string, err error) {
	if _, ok := ai.OCILayoutPath(); ok {
		repo, _ = layoutDestination(ai)
		return repo, "", ai.TargetTag, nil
	}
	named, err := reference.ParseNormalizedNamed(ai.Name)
	if err != nil {
		return "", "", "", fmt.Errorf("%q is not an image reference: %w", ai.Name, err)
	}
	named = reference.TagNameOnly(named)
	repo = reference.Path(named)
	if ai.TargetRepo != "" {
		repo = strings.Trim(ai.TargetRepo, "/")
	}
	if c, ok := named.(reference.Canonical); ok {
		dig = c.Digest().String()
	}
	if t, ok := named.(reference.Tagged); ok {
		tag = t.Tag()
	}
	return repo, dig, tag, nil
}
