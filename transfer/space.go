package transfer

import (
	"errors"
	"path/filepath"
	"strings"

	"github.com/gapmirror/gapmirror/archive"
)

// NoSpace returns a *archive.NoSpaceError when images of res failed
// because a disk filled up: one for each of roots (the archive directory,
// the store) that holds a file that did not fit, in the order they filled,
// counting the bytes of the blobs that did not fit there (a lower bound:
// the failed images' other blobs were never tried). A full disk is not the
// images' fault: the run stops there instead of writing an archive without
// them.
func NoSpace(res *Result, roots ...string) error {
	if res == nil {
		return nil
	}
	var order []string
	byRoot := map[string]*archive.NoSpaceError{}
	seen := map[string]bool{}
	for _, f := range res.Failed {
		var ns *archive.NoSpaceError
		if !errors.As(f.Err, &ns) {
			continue
		}
		root := rootOf(ns.Path, roots)
		e := byRoot[root]
		if e == nil {
			e = &archive.NoSpaceError{Path: root, AtLeast: true, Err: ns.Err}
			byRoot[root] = e
			order = append(order, root)
		}
		// The same blob may fail for several images: count it once.
		// Blobs streamed into an archive share its directory as path; their
		// messages name the blob.
		if key := ns.Path + " " + ns.Err.Error(); !seen[key] {
			seen[key] = true
			e.Need += ns.Need
		}
	}
	switch len(order) {
	case 0:
		return nil
	case 1:
		return byRoot[order[0]]
	}
	errs := make([]error, len(order))
	for i, root := range order {
		errs[i] = byRoot[root]
	}
	return errors.Join(errs...)
}

// rootOf is the innermost of roots that holds path, or path itself.
func rootOf(path string, roots []string) string {
	best := path
	for _, r := range roots {
		if (path == r || strings.HasPrefix(path, r+string(filepath.Separator))) && (best == path || len(r) > len(best)) {
			best = r
		}
	}
	return best
}
