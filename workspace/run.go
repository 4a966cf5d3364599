package workspace

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/gapmirror/gapmirror/imageset"
)

// WorkingDir is the folder, inside the user's directory, where gapmirror
// keeps its records, plans and cluster resources (oc-mirror's name).
const WorkingDir = "working-dir"

// RunFormat is the format of the run records (working-dir/runs) and
// failure files (working-dir/failed). 1: the Set only; 2: the whole Plan
// (its fields inline, so "set" stays where it was) and the failure file
// names its run record. Readers take every format up to theirs.
const RunFormat = 2

// Run is what the workspace keeps of each run: the plan it executed
// and what happened.
type Run struct {
	FormatVersion int       `json:"formatVersion"`
	Mode          string    `json:"mode"`
	Time          time.Time `json:"time"`
	ToolVersion   string    `json:"toolVersion"`
	Config        string    `json:"config,omitempty"`
	// Pinned is the path of the pinned configuration the run wrote.
	Pinned string `json:"pinnedConfig,omitempty"`
	Mirror string `json:"mirror,omitempty"`
	*Plan
	Copied  []string  `json:"copied"`
	Skipped []string  `json:"skipped"`
	Failed  []Failure `json:"failed,omitempty"`
	Archive []string  `json:"archive,omitempty"`
	// ArchiveID is the archive the run wrote or pushed (describe finds
	// an archive's predecessor's images by it).
	ArchiveID string `json:"archiveId,omitempty"`
	Bytes     int64  `json:"bytes"`
	Blobs     int64  `json:"blobs"`
}

// Failure is one image a run could not copy (or resolve), as run records
// and failure files keep it.
type Failure struct {
	Image string `json:"image"`
	Error string `json:"error"`
	// Unresolved: the image never got a digest (Image is its reference as
	// configured); --retry-failed cannot copy it.
	Unresolved bool          `json:"unresolved,omitempty"`
	Kind       imageset.Kind `json:"kind,omitempty"`
	// Cause is Classify's kind of the failure and Host the registry that
	// failed, when known: a --retry-failed run groups the images it cannot
	// copy by them. Older readers ignore both (no format change).
	Cause string `json:"cause,omitempty"`
	Host  string `json:"host,omitempty"`
}

// RunRecord reads the run record name (relative to the workspace) with the
// content of its plan's files.
func (w Workspace) RunRecord(name string) (*Run, error) {
	var rec Run
	ok, err := w.Read(&rec, filepath.FromSlash(name))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("run record %s: %w", w.Path(name), fs.ErrNotExist)
	}
	if rec.FormatVersion > RunFormat {
		return nil, fmt.Errorf("run record %s was written by a newer gapmirror (format %d)", w.Path(name), rec.FormatVersion)
	}
	if rec.Plan != nil {
		if err := w.loadFiles(rec.Plan.Files); err != nil {
			return nil, fmt.Errorf("run record %s: %w", w.Path(name), err)
		}
	}
	return &rec, nil
}

// FailedFile is what --retry-failed reads: the pinned Set of a run, the
// images of it that failed and (format 2) the run record holding its plan,
// relative to the workspace the file is in.
type FailedFile struct {
	FormatVersion int           `json:"formatVersion"`
	Mode          string        `json:"mode"`
	Run           string        `json:"run,omitempty"`
	Set           *imageset.Set `json:"set"`
	Failed        []Failure     `json:"failed"`
}
