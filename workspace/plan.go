package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/release"
)

// Plan is what a run is to do. Resolution alone makes it (writing nothing
// into the workspace); disk-to-mirror reads it from the archive and
// --retry-failed from the run record. Execution (copy, archive, record,
// generate, prune) consumes it and never resolves anything again, so a run
// started from a record writes the same cluster resources as the run that
// made it.
type Plan struct {
	// Set is every image to mirror, pinned by digest, at its destination
	// (shortened for the mirror root when MaxNestedPaths is set).
	Set *imageset.Set `json:"set"`
	// Config is the configuration as given, credentials redacted (YAML):
	// what an archive says it was made from.
	Config string `json:"configuration,omitempty"`
	// Pinned is the configuration with every catalog and additional image
	// resolved by tag pinned to its digest, and PinnedDelete the matching
	// DeleteImageSetConfiguration (YAML; see pin.go).
	Pinned       string `json:"pinned,omitempty"`
	PinnedDelete string `json:"pinnedDelete,omitempty"`
	// Files travel with the images (archive extras, working-dir copies):
	// update graphs, release signatures, helm charts and their list,
	// CatalogSource templates, the pinned configuration. Their content is
	// kept by digest in working-dir/plan-files.
	Files []PlanFile `json:"files,omitempty"`
	// Blocked lists the references mirror.blockedImages kept out.
	Blocked []string `json:"blocked,omitempty"`
	// Unresolved lists what resolution could not pin to a digest.
	Unresolved []Unresolved `json:"unresolved,omitempty"`
	// MaxNestedPaths is the --max-nested-paths the Set's destinations were
	// shortened with (0: none).
	MaxNestedPaths int `json:"maxNestedPaths,omitempty"`

	mu sync.Mutex
	// PinnedCatalogs maps a catalog entry's config path to the digest it
	// was resolved to, for Pinned.
	PinnedCatalogs map[string]string `json:"-"`
	// Platforms is the record of platform manifests the signature search
	// Read, written to the workspace when the plan runs.
	Platforms *PlatformsRecord `json:"-"`
}

// PlanFile is one file of a Plan.
type PlanFile struct {
	Name   string        `json:"name"`
	Digest digest.Digest `json:"digest"`
	Size   int64         `json:"size"`
	Data   []byte        `json:"-"`
}

// Unresolved is an image (or helm chart) of the configuration that
// resolution could not pin, as the record keeps it.
type Unresolved struct {
	Origin   string        `json:"origin"`
	Kind     imageset.Kind `json:"kind"`
	Why      string        `json:"why,omitempty"`
	Error    string        `json:"error"`
	NotImage bool          `json:"notImage,omitempty"`
}

// AddFile adds a file to the plan; a later file of the same name wins.
func (p *Plan) AddFile(name string, data []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := PlanFile{Name: name, Digest: digest.FromBytes(data), Size: int64(len(data)), Data: data}
	for i := range p.Files {
		if p.Files[i].Name == name {
			p.Files[i] = f
			return
		}
	}
	p.Files = append(p.Files, f)
}

// File returns the content of the named file.
func (p *Plan) File(name string) ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.Files {
		if f.Name == name {
			return f.Data, true
		}
	}
	return nil, false
}

// PinCatalog records that the catalog entry at path (mirror.operators[i])
// was resolved to digest d, for the pinned configuration.
func (p *Plan) PinCatalog(path, d string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.PinnedCatalogs == nil {
		p.PinnedCatalogs = map[string]string{}
	}
	p.PinnedCatalogs[path] = d
}

// Extras are the plan's files as archive extras.
func (p *Plan) Extras() []archive.Extra {
	out := make([]archive.Extra, 0, len(p.Files))
	for _, f := range p.Files {
		out = append(out, archive.Extra{Name: f.Name, Data: f.Data})
	}
	return out
}

// Signatures returns the release signatures the plan carries, by release
// digest, in order.
func (p *Plan) Signatures() (map[string][][]byte, error) {
	sigs := map[string][][]byte{}
	for _, f := range p.Files {
		if !strings.HasPrefix(f.Name, ReleaseSignaturesDir+"/") {
			continue
		}
		parts := strings.Split(f.Name, "/")
		n, err := strconv.Atoi(strings.TrimPrefix(parts[len(parts)-1], "signature-"))
		if len(parts) != 3 || err != nil || n < 1 || n > release.MaxSignatures {
			return nil, fmt.Errorf("%s is not a release signature file: the archive or record is damaged or from another tool", f.Name)
		}
		rd := strings.Replace(parts[1], "=", ":", 1)
		if _, err := digest.Parse(rd); err != nil {
			return nil, fmt.Errorf("%s: %q is not a release digest", f.Name, parts[1])
		}
		for len(sigs[rd]) < n {
			sigs[rd] = append(sigs[rd], nil)
		}
		sigs[rd][n-1] = f.Data
	}
	for rd, list := range sigs {
		for i, s := range list {
			if s == nil {
				return nil, fmt.Errorf("signature %d of release %s is there but not signature %d: the archive or record is damaged", len(list), rd, i+1)
			}
		}
	}
	return sigs, nil
}

// PlatformsFile is the workspace record of the platform manifests of the
// images signatures were looked for, so later runs need not read them.
var PlatformsFile = []string{"sigstore", "platforms.json"}

// PlatformsRecord maps a manifest digest to its platform manifests (none
// for a single-platform image).
type PlatformsRecord struct {
	FormatVersion int                               `json:"formatVersion"`
	Platforms     map[digest.Digest][]digest.Digest `json:"platforms"`
}

// SaveFiles keeps the content of the plan's files by digest in the
// Workspace, for the run record to name.
func (w Workspace) SaveFiles(files []PlanFile) error {
	for _, f := range files {
		p := w.Path("plan-files", f.Digest.Algorithm().String(), f.Digest.Encoded())
		if _, err := os.Stat(p); err == nil {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := archive.WriteFileAtomic(p, f.Data); err != nil {
			return err
		}
	}
	return nil
}

// loadFiles reads the content of files from the workspace, each checked
// against its digest.
func (w Workspace) loadFiles(files []PlanFile) error {
	for i := range files {
		f := &files[i]
		if err := f.Digest.Validate(); err != nil {
			return fmt.Errorf("plan file %s: %w", f.Name, err)
		}
		p := w.Path("plan-files", f.Digest.Algorithm().String(), f.Digest.Encoded())
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("plan file %s: %v (the workspace lost it: run the configuration again instead)", f.Name, err)
		}
		if digest.FromBytes(data) != f.Digest {
			return fmt.Errorf("plan file %s (%s) does not match its digest %s: the workspace is damaged; run the configuration again instead", f.Name, p, f.Digest)
		}
		f.Data = data
	}
	return nil
}

// Names of the release files a trip keeps: in the workspace, and as extra
// files of the archive so that the air-gapped side has them.
const (
	ReleaseGraphsDir     = "release-graphs"
	ReleaseSignaturesDir = "release-signatures"
)

// Where helm charts travel: in the archive (extra files of chunk 1, since
// charts are small) and in working-dir/helm/, oc-mirror's place for them.
const (
	HelmDir        = "helm"
	HelmChartsFile = HelmDir + "/charts.json"
)

// PinnedExtra is the archive's copy of the pinned configuration.
const PinnedExtra = "isc_pinned.yaml"
