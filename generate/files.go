package generate

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Dir is the folder under the workspace that holds the generated manifests.
const Dir = "cluster-resources"

// tempPattern names the temporary files Write creates before renaming them.
const tempPattern = ".gapmirror-*.tmp"

// Files maps a manifest file name (no directory) to its content.
type Files map[string][]byte

// names returns the file names, sorted.
func (f Files) names() []string {
	names := make([]string, 0, len(f))
	for n := range f {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// merge adds the files of other to f; a name both hold is an error.
func (f Files) merge(other Files) error {
	for _, n := range other.names() {
		if _, dup := f[n]; dup {
			return fmt.Errorf("two generated manifests are both named %s: give the catalogs distinct names", n)
		}
		f[n] = other[n]
	}
	return nil
}

// Write puts the files into dir (normally <workspace>/cluster-resources),
// each written to a temporary file and renamed into place, and then removes
// the gapmirror manifests an earlier run left there that this run no longer
// produces. Files that are not gapmirror's own (other names, or without the
// gapmirror.io/created-by annotation) are never touched. If a file cannot
// be written, no manifest is replaced and nothing is removed.
func (f Files) Write(dir string) error { return f.WriteKeeping(dir) }

// WriteKeeping is Write leaving the files named keep as they are, even when
// f does not hold them (see HoldMirrorSets).
func (f Files) WriteKeeping(dir string, keep ...string) error {
	for _, n := range f.names() {
		if n == "" || n != filepath.Base(n) || n == "." || n == ".." || strings.ContainsAny(n, `/\`) {
			return fmt.Errorf("manifest file name %q must be a plain file name", n)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating manifest folder: %w", err)
	}
	temps := map[string]string{}
	cleanup := func() {
		for _, t := range temps {
			_ = os.Remove(t)
		}
	}
	for _, n := range f.names() {
		t, err := writeTemp(dir, f[n])
		if err != nil {
			cleanup()
			return fmt.Errorf("writing %s: %w", filepath.Join(dir, n), err)
		}
		temps[n] = t
	}
	for _, n := range f.names() {
		if err := os.Rename(temps[n], filepath.Join(dir, n)); err != nil {
			cleanup()
			return fmt.Errorf("writing %s: %w", filepath.Join(dir, n), err)
		}
		delete(temps, n)
	}
	if err := f.removeStale(dir, keep); err != nil {
		return err
	}
	return syncDir(dir)
}

// removeStale deletes gapmirror manifests in dir that f does not hold, and
// temporary files an interrupted Write left behind.
func (f Files) removeStale(dir string, keep []string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	for _, e := range entries {
		n := e.Name()
		if _, ours := f[n]; ours || !e.Type().IsRegular() || slices.Contains(keep, n) {
			continue
		}
		path := filepath.Join(dir, n)
		if ok, _ := filepath.Match(tempPattern, n); !ok {
			if !isManifestName(n) {
				continue
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return fmt.Errorf("reading %s: %w", path, err)
			}
			if !bytes.Contains(data, []byte(annotationCreatedBy+":")) && !bytes.Contains(data, []byte(annotationCreatedBy+`":`)) {
				continue
			}
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing stale manifest %s: %w", path, err)
		}
	}
	return nil
}

// isManifestName reports whether n is a name gapmirror gives its manifests.
func isManifestName(n string) bool {
	switch n {
	case fileIDMS, fileITMS, fileUpdateService, fileSignatures, FileSignaturesJSON:
		return true
	}
	return strings.HasSuffix(n, ".yaml") && (strings.HasPrefix(n, "cs-") || strings.HasPrefix(n, "cc-"))
}

func writeTemp(dir string, data []byte) (string, error) {
	t, err := os.CreateTemp(dir, tempPattern)
	if err != nil {
		return "", err
	}
	name := t.Name()
	_, werr := t.Write(data)
	if werr == nil {
		werr = t.Chmod(0o644)
	}
	if werr == nil {
		werr = t.Sync()
	}
	if cerr := t.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = os.Remove(name)
		return "", werr
	}
	return name, nil
}

// syncDir flushes dir's entries (the renames) to disk where the platform
// allows it.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening %s: %w", dir, err)
	}
	defer d.Close()
	_ = d.Sync() // not supported on every platform/filesystem; renames are done
	return nil
}
