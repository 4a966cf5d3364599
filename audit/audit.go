// Package audit checks a mirror registry against what a workspace's
// records say it should hold (gapmirror verify): every image of the set by
// digest at its destination tag, with the platform manifests it keeps and
// every blob; the images the cluster resources and the rebuilt catalogs
// name; the release signature ConfigMaps. It asks the mirror only (HEADs
// and manifest GETs through the copy's shared clients), never upstream.
package audit

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/registryapi"
	"github.com/gapmirror/gapmirror/transfer"
	"github.com/gapmirror/gapmirror/workspace"
)

// Audit is one check of a mirror root against a workspace's latest run to it.
type Audit struct {
	// Mirror is the registry at the mirror root.
	Mirror *transfer.Registry
	// Expected is what the mirror should hold (Load).
	Expected *Expected
	// ParallelImages images are checked at once, and twice as many blob
	// requests are in flight, as the copy bounds its transfers.
	ParallelImages int
	// Deep reads every blob and checks it against its digest instead of
	// asking with a HEAD.
	Deep bool
	Log  *slog.Logger

	requests atomic.Int64
	mu       sync.Mutex
	problems []Problem
	// seen are the manifests and blobs checked, by repository@digest, so
	// that what several images share is asked about once, and each image
	// learns the answer.
	seen map[string]*shared
	// found is what the image check learnt of each set image: whether its
	// destination holds it whole.
	found map[string]bool
	// manifests keeps the manifests of the rebuilt catalogs, read once.
	manifests map[string][]byte
	counts    Counts
}

// Counts are what an audit checked.
type Counts struct {
	Images     int `json:"images"`
	Signatures int `json:"signatures"` // and referrers
	Platforms  int `json:"platformManifests"`
	Blobs      int `json:"blobs"`
	// Named are the references to the mirror in the cluster resources.
	Named    int `json:"clusterResourceReferences"`
	Catalogs int `json:"catalogs"`
	// CatalogImages are the images the rebuilt catalogs name.
	CatalogImages     int `json:"catalogImages"`
	ReleaseSignatures int `json:"releaseSignatureConfigMaps"`
	Requests          int `json:"requests"`
}

// Run checks the mirror and returns the report; err is an error that
// stopped the audit as a whole (the records cannot be read), not what it
// found wrong.
func (a *Audit) Run(ctx context.Context) (*Report, error) {
	if a.ParallelImages < 1 {
		a.ParallelImages = 8
	}
	if a.Log == nil {
		a.Log = slog.New(slog.DiscardHandler)
	}
	a.seen, a.found, a.manifests = map[string]*shared{}, map[string]bool{}, map[string][]byte{}
	a.checkImages(ctx)
	if err := a.unreachable(); err != nil {
		return nil, err
	}
	if err := a.checkClusterResources(ctx); err != nil {
		return nil, err
	}
	if err := a.checkReleaseSignatures(); err != nil {
		return nil, err
	}
	a.checkCatalogs(ctx)
	a.checkReferrers(ctx)
	if ctx.Err() != nil {
		return nil, fmt.Errorf("interrupted: %w", ctx.Err())
	}
	a.counts.Requests = int(a.requests.Load())
	return a.report(), nil
}

// unreachable is the mirror's answer when it answered no image check at
// all (down, refusing the credentials, TLS): said once, not per image.
func (a *Audit) unreachable() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.found) > 0 {
		return nil
	}
	for _, p := range a.problems {
		if p.Kind == kindUnreachable {
			return fmt.Errorf("the mirror %s answered no image check: %s", a.Mirror.Root(), p.Detail)
		}
	}
	return nil
}

// client is the shared client for img's repository at the mirror and the
// repository's path; every request through it is to be counted with Asked.
func (a *Audit) client(img imageset.Image) (*registryapi.Client, string, error) {
	return a.Mirror.RepositoryClient(img)
}

// asked counts n requests to the mirror.
func (a *Audit) asked(n int) { a.requests.Add(int64(n)) }

// Report adds what is wrong.
func (a *Audit) Report(p Problem) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.problems = append(a.problems, p)
}

// shared is the check of a manifest or blob several images name: the
// first to claim it makes it, the others wait for its answer.
type shared struct {
	done  chan struct{}
	whole bool
}

// claim returns the check of key; first says the caller makes it, and
// must finish it.
func (a *Audit) claim(key string) (s *shared, first bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.seen[key]; s != nil {
		return s, false
	}
	s = &shared{done: make(chan struct{})}
	a.seen[key] = s
	return s, true
}

func (s *shared) finish(whole bool) { s.whole = whole; close(s.done) }

// wait is the answer of the check another image made.
func (s *shared) wait() bool { <-s.done; return s.whole }

// fix is the command that pushes img again, for the problem kind k.
func (a *Audit) fix(k Kind) string {
	e := a.Expected
	root := "docker://" + a.Mirror.Root()
	force := ""
	if k.needsForce() {
		// The tag is right, so a plain run takes the image to be there.
		force = " --force"
	}
	switch {
	case e.Mode == "disk-to-mirror":
		return fmt.Sprintf("gapmirror mirror --from file://%s%s %s", e.Dir, force, root)
	case e.FailedFile != "":
		return fmt.Sprintf("gapmirror mirror --workspace file://%s --retry-failed %s%s %s", e.Dir, e.FailedFile, force, root)
	default:
		return fmt.Sprintf("gapmirror mirror -c %s --workspace file://%s%s %s", orConfig(e.Config), e.Dir, force, root)
	}
}

func orConfig(c string) string {
	if c == "" {
		return "isc.yaml"
	}
	return c
}

// name is where img is at the mirror.
func (a *Audit) name(img imageset.Image) string { return a.Mirror.Name(img) }

// Expected is what the mirror root should hold: the plan of the latest run
// of a workspace that pushed there, with what that run could not push.
type Expected struct {
	// Dir is the directory given (--from or --workspace), Workspace its
	// working-dir, Record the run record read (relative to Workspace).
	Dir, Workspace, Record string
	Mode                   string
	Config                 string
	Plan                   *workspace.Plan
	// Failed are the images of the set the run could not push (by
	// destination): reported missing with the run's error, never asked for.
	Failed map[string]string
	// FailedFile is the failure file verify wrote for --retry-failed, when
	// it found something wrong in a mirror-to-mirror workspace.
	FailedFile string
}

// Load reads what root should hold from the workspace ws (a working-dir):
// the latest run record of a disk-to-mirror or mirror-to-mirror run to root.
func Load(dir, ws, root string) (*Expected, error) {
	w := workspace.Workspace{Dir: ws}
	var names []string
	if err := w.ReadAll("runs", func(name string) error {
		if strings.HasSuffix(name, "-disk-to-mirror.json") || strings.HasSuffix(name, "-mirror-to-mirror.json") {
			names = append(names, name)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	slices.Sort(names) // named by time
	var roots []string
	for i := len(names) - 1; i >= 0; i-- {
		rec, err := w.RunRecord(filepath.ToSlash(filepath.Join("runs", names[i])))
		if err != nil {
			return nil, err
		}
		if rec.Mirror != root {
			if !slices.Contains(roots, rec.Mirror) {
				roots = append(roots, rec.Mirror)
			}
			continue
		}
		if rec.Plan == nil || rec.Plan.Set == nil {
			return nil, fmt.Errorf("run record %s holds no plan (an older gapmirror wrote it): run the trip to %s again with this version, then verify", w.Path("runs", names[i]), root)
		}
		e := &Expected{Dir: dir, Workspace: ws, Record: "runs/" + names[i], Mode: rec.Mode, Config: rec.Config, Plan: rec.Plan, Failed: map[string]string{}}
		for _, f := range rec.Failed {
			e.Failed[f.Image] = f.Error
		}
		return e, nil
	}
	hint := ""
	if len(roots) > 0 {
		hint = fmt.Sprintf(" (its runs pushed to %s)", strings.Join(roots, ", "))
	}
	return nil, fmt.Errorf("%s has no record of a run that pushed to %s%s: give the --from or --workspace directory of the trips to that mirror, and the mirror root as they named it", ws, root, hint)
}

// retryFile writes a failure file naming the images the audit found
// wrong, for `mirror --retry-failed`, into the workspace's failed/ folder
// (mirror-to-mirror only: disk-to-mirror pushes the archive again).
func (e *Expected) retryFile(name string, images []string, why map[string]string) (string, error) {
	if e.Mode != "mirror-to-mirror" || len(images) == 0 {
		return "", nil
	}
	ff := workspace.FailedFile{FormatVersion: workspace.RunFormat, Mode: e.Mode, Run: e.Record, Set: e.Plan.Set}
	for _, img := range images {
		ff.Failed = append(ff.Failed, workspace.Failure{Image: img, Error: why[img]})
	}
	w := workspace.Workspace{Dir: e.Workspace}
	if err := w.Write(ff, "failed", name); err != nil {
		return "", err
	}
	e.FailedFile = w.Path("failed", name)
	return e.FailedFile, nil
}
