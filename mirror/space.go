package mirror

import (
	"errors"

	"github.com/gapmirror/gapmirror/archive"
)

// noSpace returns a *archive.NoSpaceError when images of res failed
// because the disk under dir filled up, counting the bytes of the blobs
// that did not fit (a lower bound: the failed images' other blobs were
// never tried). A full disk is not the images' fault: the run stops there
// instead of writing an archive without them.
func noSpace(res *Result, dir string) error {
	if res == nil {
		return nil
	}
	var first *archive.NoSpaceError
	var need int64
	seen := map[string]bool{}
	for _, f := range res.Failed {
		var ns *archive.NoSpaceError
		if !errors.As(f.Err, &ns) {
			continue
		}
		if first == nil {
			first = ns
		}
		// The same blob may fail for several images: count it once.
		// Blobs streamed into an archive share its directory as path; their
		// messages name the blob.
		if key := ns.Path + " " + ns.Err.Error(); !seen[key] {
			seen[key] = true
			need += ns.Need
		}
	}
	if first == nil {
		return nil
	}
	return &archive.NoSpaceError{Path: dir, Need: need, AtLeast: true, Err: first.Err}
}
