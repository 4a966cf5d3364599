package generate

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/gapmirror/gapmirror/imageset"
)

// HoldMirrorSets decides whether the mirror sets in files, made from the
// images that reached the mirror (in), may replace the ones an earlier run
// left in dir although the images failed did not. They may when they come
// out the same as if the failed images had been mirrored (the failures are
// not referenced), or when dir has none yet. Otherwise they are taken out
// of files, keep names the earlier files to leave in place, and heldBy the
// failed images that held them back: a cluster applying an IDMS without
// them would lose the mirror of images it may still pull.
func HoldMirrorSets(files Files, dir string, in Input, failed []imageset.Image) (keep, heldBy []string, err error) {
	if len(failed) == 0 {
		return nil, nil, nil
	}
	whole := &imageset.Set{FormatVersion: in.Set.FormatVersion}
	whole.Images = append(append(whole.Images, in.Set.Images...), failed...)
	whole.Sort()
	failedOrigin := map[string]bool{}
	for _, img := range failed {
		failedOrigin[img.Origin] = true
	}
	var others []string
	for _, n := range in.NotMirrored {
		if !failedOrigin[n] {
			others = append(others, n)
		}
	}
	ideal, err := mirrorSets(whole, in.MirrorRoot, others, in.RepositoryScope, in.Meta)
	if err != nil {
		return nil, nil, fmt.Errorf("generating mirror sets: %w", err)
	}
	names := []string{fileIDMS, fileITMS}
	same := true
	for _, n := range names {
		same = same && bytes.Equal(ideal[n], files[n])
	}
	if same {
		return nil, nil, nil
	}
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			keep = append(keep, n)
		}
	}
	if len(keep) == 0 {
		return nil, nil, nil // nothing earlier to protect
	}
	for _, n := range names {
		delete(files, n)
	}
	for _, img := range failed {
		if !img.Kind.Attached() && !slices.Contains(heldBy, img.Origin) {
			heldBy = append(heldBy, img.Origin)
		}
	}
	return keep, heldBy, nil
}
