package workspace

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/archive"
)

// Workspace is the working-dir of a trip: the records that make the next
// run incremental. Every file is JSON, written atomically, and versioned.
type Workspace struct{ Dir string }

// Format is the format version of the workspace's records but run records
// (RunFormat); a reader refuses a newer one.
const Format = 1

// ArchiveRecord is what mirror-to-disk remembers of an archive it wrote:
// the blobs it carried, so that the next archive can leave them out.
type ArchiveRecord struct {
	FormatVersion int `json:"formatVersion"`
	// Seq orders the archives of a workspace (timestamps may tie).
	Seq     int             `json:"seq"`
	ID      string          `json:"id"`
	BasedOn string          `json:"basedOn,omitempty"`
	Created time.Time       `json:"created"`
	Images  int             `json:"images"`
	Blobs   []digest.Digest `json:"blobs"`
	Bytes   int64           `json:"bytes"`
}

// AppliedRecord is what disk-to-mirror remembers of an archive it pushed.
type AppliedRecord struct {
	FormatVersion int    `json:"formatVersion"`
	ID            string `json:"id"`
	BasedOn       string `json:"basedOn,omitempty"`
	// Workspace is the archive's (archive.Index.Workspace): the
	// mirror-to-disk workspace whose archives this directory applies to
	// the mirror. Empty in records of archives that do not say.
	Workspace string    `json:"workspace,omitempty"`
	Mirror    string    `json:"mirror"`
	Applied   time.Time `json:"applied"`
}

// identityRecord names a mirror-to-disk workspace; its archives carry the
// id (archive.Index.Workspace), so that disk-to-mirror can tell them from
// another workspace's.
type identityRecord struct {
	FormatVersion int       `json:"formatVersion"`
	ID            string    `json:"id"`
	Created       time.Time `json:"created"`
}

// identityFile is the workspace's identity record, in the working-dir.
const identityFile = "workspace.json"

// Identity returns the workspace's id, making one (and its record) the
// first time it is asked for.
func (w Workspace) Identity(now time.Time) (string, error) {
	var r identityRecord
	ok, err := w.Read(&r, identityFile)
	if err != nil {
		return "", err
	}
	if ok {
		if r.FormatVersion > Format {
			return "", fmt.Errorf("workspace record %s was written by a newer gapmirror", w.Path(identityFile))
		}
		if r.ID != "" {
			return r.ID, nil
		}
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("making the workspace id: %w", err)
	}
	r = identityRecord{FormatVersion: Format, ID: "ws-" + hex.EncodeToString(b[:]), Created: now}
	if err := w.Write(r, identityFile); err != nil {
		return "", fmt.Errorf("recording the workspace id: %w", err)
	}
	return r.ID, nil
}

// LocationRecord is what the workspace knows of one mirror root: where
// blobs are (so later runs mount them) and which images gapmirror pushed
// there (so prune and delete touch only those).
type LocationRecord struct {
	FormatVersion int                      `json:"formatVersion"`
	Mirror        string                   `json:"mirror"`
	Blobs         map[digest.Digest]string `json:"blobs"`
	// MaxNestedPaths is the --max-nested-paths of the latest run to the root.
	MaxNestedPaths int `json:"maxNestedPaths,omitempty"`
	// Images is every manifest a run of this workspace found or pushed at
	// this root and that has not been deleted since, sorted.
	Images []MirroredImage `json:"images,omitempty"`
}

// Path is the path of a record or folder in the workspace.
func (w Workspace) Path(parts ...string) string {
	return filepath.Join(append([]string{w.Dir}, parts...)...)
}

// Write writes v as the JSON record at parts, atomically.
func (w Workspace) Write(v any, parts ...string) error {
	p := w.Path(parts...)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return archive.WriteFileAtomic(p, data)
}

// Read reads the JSON record at parts into v; false when there is none. A
// damaged record is an error that says how to start it afresh.
func (w Workspace) Read(v any, parts ...string) (bool, error) {
	data, err := os.ReadFile(w.Path(parts...))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("workspace record %s is damaged: %w (remove it to start that record afresh)", w.Path(parts...), err)
	}
	return true, nil
}

// ReadAll calls each with the name of every record in the folder dir.
func (w Workspace) ReadAll(dir string, each func(name string) error) error {
	entries, err := os.ReadDir(w.Path(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") {
			if err := each(e.Name()); err != nil {
				return err
			}
		}
	}
	return nil
}

// Archives returns the archives this workspace wrote, oldest first.
func (w Workspace) Archives() ([]ArchiveRecord, error) {
	var out []ArchiveRecord
	err := w.ReadAll("archives", func(name string) error {
		var r ArchiveRecord
		if _, err := w.Read(&r, "archives", name); err != nil {
			return err
		}
		if r.FormatVersion > Format {
			return fmt.Errorf("workspace record archives/%s was written by a newer gapmirror", name)
		}
		out = append(out, r)
		return nil
	})
	sort.Slice(out, func(a, b int) bool { return out[a].Seq < out[b].Seq })
	return out, err
}

// SaveArchive records an archive mirror-to-disk wrote.
func (w Workspace) SaveArchive(r ArchiveRecord) error {
	r.FormatVersion = Format
	return w.Write(r, "archives", r.ID+".json")
}

// Applied returns what this directory applied, by archive id: to root
// only, or to any mirror when root is "" (the latest application of each).
// Records written before they named their mirror count for every root.
func (w Workspace) Applied(root string) (map[string]AppliedRecord, error) {
	out := map[string]AppliedRecord{}
	err := w.ReadAll("applied", func(name string) error {
		var r AppliedRecord
		if _, err := w.Read(&r, "applied", name); err != nil {
			return err
		}
		if root != "" && r.Mirror != "" && r.Mirror != root {
			return nil
		}
		if o, ok := out[r.ID]; !ok || r.Applied.After(o.Applied) {
			out[r.ID] = r
		}
		return nil
	})
	return out, err
}

// MarkApplied records that archive r.ID reached mirror root r.Mirror: a
// file for each archive and root, so that one directory can feed several
// mirrors (enclaves), each applying every archive in turn.
func (w Workspace) MarkApplied(r AppliedRecord) error {
	r.FormatVersion = Format
	return w.Write(r, "applied", r.ID+"@"+LocationFile(r.Mirror))
}

// LocationFile is the name of the records of mirror root root.
func LocationFile(root string) string {
	return strings.NewReplacer("/", "_", ":", "_").Replace(root) + ".json"
}

// Location returns the record of the mirror root (empty if none).
func (w Workspace) Location(root string) (*LocationRecord, error) {
	r := &LocationRecord{}
	if _, err := w.Read(r, "mirrors", LocationFile(root)); err != nil {
		return nil, err
	}
	if r.FormatVersion > Format {
		return nil, fmt.Errorf("workspace record %s was written by a newer gapmirror", w.Path("mirrors", LocationFile(root)))
	}
	if r.Blobs == nil {
		r.Blobs = map[digest.Digest]string{}
	}
	r.FormatVersion, r.Mirror = Format, root
	return r, nil
}

// SaveLocation writes the record of a mirror root, its images sorted.
func (w Workspace) SaveLocation(r *LocationRecord) error {
	sortImages(r.Images)
	return w.Write(r, "mirrors", LocationFile(r.Mirror))
}

// WriteFile writes data to name (slash-separated) under the workspace
// directory ws, making its folders: a file the admin or a later run reads
// there (helm charts, CatalogSource templates, update graphs).
func WriteFile(ws, name string, data []byte) error {
	p := filepath.Join(ws, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return archive.WriteFileAtomic(p, data)
}
