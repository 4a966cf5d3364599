package imagebuilder

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// WriteLayout writes img into the OCI image layout at dir (created if
// missing, merged if it exists), naming it refName in index.json
// (org.opencontainers.image.ref.name; empty for no name). An entry with the
// same name is replaced. The result is readable as oci:DIR:REFNAME.
func WriteLayout(dir, refName string, img *Image) error {
	if img == nil {
		return fmt.Errorf("writing OCI layout %s: no image given", dir)
	}
	manifest := newBlob(img.MediaType, img.Manifest)
	return writeLayout(dir, refName, img.Descriptor(), append(img.Blobs(), manifest))
}

// WriteIndexLayout writes a multi-platform image into the OCI image layout at
// dir like WriteLayout does; refName names the index.
func WriteIndexLayout(dir, refName string, idx *Index) error {
	if idx == nil {
		return fmt.Errorf("writing OCI layout %s: no index given", dir)
	}
	blobs := idx.Blobs()
	for _, img := range idx.Images {
		blobs = append(blobs, newBlob(img.MediaType, img.Manifest))
	}
	blobs = append(blobs, newBlob(idx.MediaType, idx.Manifest))
	return writeLayout(dir, refName, idx.Descriptor(), blobs)
}

func writeLayout(dir, refName string, top ocispec.Descriptor, blobs []Blob) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating OCI layout %s: %w", dir, err)
	}
	layoutFile := filepath.Join(dir, ocispec.ImageLayoutFile)
	if _, err := os.Stat(layoutFile); errors.Is(err, fs.ErrNotExist) {
		data, err := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
		if err != nil {
			return fmt.Errorf("encoding %s: %w", layoutFile, err)
		}
		if err := writeFileAtomic(layoutFile, data); err != nil {
			return err
		}
	} else if err != nil {
		return fmt.Errorf("reading OCI layout %s: %w", dir, err)
	}
	for _, b := range blobs {
		if err := writeLayoutBlob(dir, b); err != nil {
			return err
		}
	}

	indexFile := filepath.Join(dir, ocispec.ImageIndexFile)
	index := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex}
	if data, err := os.ReadFile(indexFile); err == nil {
		if err := json.Unmarshal(data, &index); err != nil {
			return fmt.Errorf("OCI layout %s: index.json is not a valid image index (fix or remove it): %w", dir, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("reading %s: %w", indexFile, err)
	}
	if refName != "" {
		top.Annotations = map[string]string{ocispec.AnnotationRefName: refName}
	}
	kept := index.Manifests[:0]
	for _, d := range index.Manifests {
		name := d.Annotations[ocispec.AnnotationRefName]
		sameName := refName != "" && name == refName
		sameUnnamed := refName == "" && name == "" && d.Digest == top.Digest
		if !sameName && !sameUnnamed {
			kept = append(kept, d)
		}
	}
	index.Manifests = append(kept, top)
	data, err := json.Marshal(index)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", indexFile, err)
	}
	return writeFileAtomic(indexFile, data)
}

// writeLayoutBlob stores b under blobs/<alg>/<hex> unless it is there.
func writeLayoutBlob(dir string, b Blob) error {
	if err := b.Digest.Validate(); err != nil {
		return fmt.Errorf("blob %q: %w", b.Digest, err)
	}
	if b.Digest.Algorithm() != digest.SHA256 {
		return fmt.Errorf("blob %s: only sha256 digests are supported", b.Digest)
	}
	algDir := filepath.Join(dir, ocispec.ImageBlobsDir, b.Digest.Algorithm().String())
	if err := os.MkdirAll(algDir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", algDir, err)
	}
	path := filepath.Join(algDir, b.Digest.Encoded())
	if st, err := os.Stat(path); err == nil && st.Size() == b.Size {
		return nil
	}
	tmp, err := os.CreateTemp(algDir, ".tmp-"+b.Digest.Encoded()+"-*")
	if err != nil {
		return fmt.Errorf("writing blob %s: %w", b.Digest, err)
	}
	verifier := b.Digest.Verifier()
	rc := b.Open()
	n, err := io.Copy(io.MultiWriter(tmp, verifier), rc)
	_ = rc.Close()
	err = errors.Join(err, tmp.Close())
	if err == nil && (n != b.Size || !verifier.Verified()) {
		err = fmt.Errorf("content (%d bytes) does not match the blob's size %d and digest", n, b.Size)
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("writing blob %s to %s: %w", b.Digest, path, err)
	}
	return nil
}

// writeFileAtomic writes data to path through a temporary file and a rename.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
