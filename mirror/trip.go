package mirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/generate"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/release"
)

// WorkingDir is the folder, inside the user's directory, where gapmirror
// keeps its records, plans and cluster resources (oc-mirror's name).
const WorkingDir = "working-dir"

// Trip is what the user asked for: the options of one run of the pipeline
// config → Plan → copy → record → generate. It holds no state of the run:
// resolution makes a Plan, a run executes it, a Report says what happened.
type Trip struct {
	Config     *imageset.ImageSetConfiguration
	ConfigPath string
	// StoreDir is the local store (an OCI layout) used by mirror-to-disk.
	StoreDir string
	Upstream RegistryOptions
	Mirror   RegistryOptions
	Copy     Options
	// ArchiveSize is the chunk size in bytes (0: 500 GiB).
	ArchiveSize   int64
	StrictArchive bool
	// Since picks the baseline of an incremental archive: only archives
	// written before it count as carried (zero: every earlier archive).
	Since time.Time
	// SkipPredecessorCheck lets disk-to-mirror apply an incremental archive
	// whose predecessor this workspace has no record of applying.
	SkipPredecessorCheck bool
	// RetryFailed is a failure file an earlier run wrote: copy exactly the
	// images it lists, executing the plan that run recorded (its digests,
	// files and cluster resources) instead of resolving the configuration
	// again.
	RetryFailed string
	// Prune deletes from the mirror what earlier runs of this workspace
	// pushed there and the image set no longer holds (else: only listed).
	Prune       bool
	DryRun      bool
	Log         *slog.Logger
	Out         io.Writer
	ToolVersion string
	// Now stamps records; tests set it.
	Now func() time.Time
	// Releases say where release payloads, graphs and signatures come from.
	Releases ReleaseOptions
	// MaxNestedPaths limits destination repositories to this many path
	// components below the registry host (0: no limit); see
	// imageset.Set.FlattenDestinations.
	MaxNestedPaths int
	// RemoveSignatures turns off looking for and mirroring the sigstore
	// (cosign) signatures of the images (oc-mirror's --remove-signatures).
	RemoveSignatures bool
	// SecurePolicy makes mirror-to-disk and mirror-to-mirror mirror only the
	// images the signature policy (PolicyPath, else the system's
	// policy.json) accepts; disk-to-mirror trusts what mirror-to-disk checked.
	SecurePolicy bool
	PolicyPath   string
}

// run is one execution of a Plan with a Trip's options: the workspace it
// records into and, in rep, what happened.
type run struct {
	t    *Trip
	ws   workspace
	plan *Plan
	rep  *Report
	// pinned is the pinned configuration file this run wrote.
	pinned string
}

// Report is what a run did: the third of options (Trip), what to do (Plan)
// and what happened.
type Report struct {
	Mode       string
	Set        *imageset.Set
	Resolution *imageset.Resolution
	Result     *Result
	// Archive lists the chunk files written (mirror-to-disk).
	Archive []string
	// ClusterResources lists the manifests written for the cluster.
	ClusterResources []string
	Workspace        string
	// Mirror is the registry root the images went to (disk-to-mirror,
	// mirror-to-mirror).
	Mirror string
	// FailedFile lists the failed images for --retry-failed.
	FailedFile string
	// LeftOut names images of the set a partial archive does not carry.
	LeftOut []string
	// Prune is what the prune step did or would do (mirror destinations).
	Prune *PruneReport
	// HelmCharts lists the chart files written into working-dir/helm.
	HelmCharts []string
	// DryRun is what a dry run found out at the destination.
	DryRun *DryRunFigures
	// MirrorSetsHeldBy names the failed images that kept this run from
	// rewriting the IDMS/ITMS an earlier run wrote.
	MirrorSetsHeldBy []string
}

func (t *Trip) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now().UTC()
}

// contributors resolve the configuration sections that need more than a
// tag lookup: operator catalogs, release payloads and helm charts, into
// plan; ws is read for what earlier runs kept, never written.
func (t *Trip) contributors(up *Registry, store *Store, plan *Plan, ws string) []imageset.Contributor {
	return []imageset.Contributor{
		&operators{trip: t, up: up, store: store, plan: plan},
		&releaseContributor{t: t, up: up, store: store, out: plan, ws: ws},
		&helmCharts{t: t, plan: plan, ws: ws},
	}
}

// copyPlan copies todo and counts the rest of set as done by an earlier run.
func (t *Trip) copyPlan(ctx context.Context, set, todo *imageset.Set, src Source, dst Destination) *Result {
	res := Copy(ctx, todo, src, dst, t.Copy)
	if len(todo.Images) != len(set.Images) {
		in := map[string]bool{}
		for _, img := range todo.Images {
			in[img.Destination] = true
		}
		for _, img := range set.Images {
			if !in[img.Destination] {
				res.Skipped = append(res.Skipped, img)
			}
		}
	}
	return res
}

// MirrorToDisk copies the image set from upstream into the local store and
// writes an archive of it into dir.
func (t *Trip) MirrorToDisk(ctx context.Context, dir string) (*Report, error) {
	if t.MaxNestedPaths != 0 {
		return nil, fmt.Errorf("--max-nested-paths shortens the repository paths of a mirror registry; mirror-to-disk has none: give it to disk-to-mirror when pushing the archive")
	}
	ws := filepath.Join(dir, WorkingDir)
	up := NewUpstream(t.Upstream)
	defer up.Close()
	store, err := OpenStore(t.StoreDir)
	if err != nil {
		return nil, err
	}
	plan, todo, res, err := t.plan(ctx, up, store, ws)
	if err != nil {
		return nil, err
	}
	set := plan.Set
	rep := &Report{Mode: "mirror-to-disk", Set: set, Resolution: res, Workspace: ws}
	if t.DryRun {
		carried, err := t.carriedBlobs(workspace{ws})
		if err != nil {
			return nil, err
		}
		t.dryRunToDisk(ctx, builtSource{up, store}, store, set, carried, rep)
		return rep, t.writePlan(ws, "", set, func(img imageset.Image) bool { return !store.Has(digest.Digest(img.Digest)) })
	}
	r := &run{t: t, ws: workspace{ws}, plan: plan, rep: rep}
	if err := r.keep(); err != nil {
		return rep, err
	}
	if err := store.CleanIngest(); err != nil {
		return nil, err
	}
	t.Log.Info("copying to the local store", "store", store.Dir(), "images", len(set.Images))
	rep.Result = t.copyPlan(ctx, set, todo, builtSource{up, store}, store.Destination())
	if err := store.SaveIndex(); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return rep, fmt.Errorf("interrupted: %w (run again to resume; every blob already stored is reused)", ctx.Err())
	}
	// The archive carries what is complete in the store; failed images are
	// reported and left out, so the other side never trusts them.
	carried := t.succeeded(set, rep.Result)
	chunks, err := r.writeArchive(ctx, dir, store, carried, leftOut(rep.Result, plan))
	if err != nil {
		return rep, err
	}
	rep.Archive = chunks
	return rep, r.record()
}

// succeeded is the subset of set that was copied or already present.
func (t *Trip) succeeded(set *imageset.Set, res *Result) *imageset.Set {
	failed := map[string]bool{}
	for _, f := range res.Failed {
		failed[f.Image.Destination] = true
	}
	out := &imageset.Set{FormatVersion: set.FormatVersion}
	for _, img := range set.Images {
		if !failed[img.Destination] {
			out.Images = append(out.Images, img)
		}
	}
	return out
}

// writeArchive writes set (the plan's, less what failed) from the store
// into dir with the plan's files; leftOut and the plan's blocked list name
// the images of the configuration the archive does not carry.
func (r *run) writeArchive(ctx context.Context, dir string, store *Store, set *imageset.Set, leftOut []string) ([]string, error) {
	t, ws := r.t, r.ws
	// Blobs an earlier archive of this workspace carried stay out: the air
	// gap has them already.
	history, err := ws.archives()
	if err != nil {
		return nil, err
	}
	carried := map[digest.Digest]bool{}
	basedOn := ""
	for _, r := range history {
		if !t.Since.IsZero() && !r.Created.Before(t.Since) {
			continue
		}
		for _, b := range r.Blobs {
			carried[b] = true
		}
		basedOn = r.ID
	}
	seen := map[digest.Digest]bool{}
	var blobs []archive.Blob
	var refs []string
	var bytes int64
	for _, img := range set.Images {
		descs, err := store.Blobs(img)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", img.Destination, err)
		}
		refs = append(refs, img.Destination)
		for _, d := range descs {
			if !seen[d.Digest] && !carried[d.Digest] {
				blobs = append(blobs, archive.Blob{Digest: d.Digest, Size: d.Size})
				bytes += d.Size
			}
			seen[d.Digest] = true
		}
	}
	sort.Slice(blobs, func(a, b int) bool { return blobs[a].Digest < blobs[b].Digest })
	ociIndex, err := store.IndexJSON(refs)
	if err != nil {
		return nil, err
	}
	idx := &archive.Index{
		ToolVersion: t.ToolVersion,
		BasedOn:     basedOn,
		Created:     t.now(),
		Config:      r.plan.Config,
		Set:         set,
		LeftOut:     leftOut,
		Blocked:     r.plan.Blocked,
		Blobs:       blobs,
		Extras: append([]archive.Extra{
			{Name: "index.json", Data: ociIndex},
			{Name: "oci-layout", Data: []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		}, r.plan.extras()...),
	}
	args := []any{"dir", dir, "newBlobs", len(blobs), "bytes", HumanBytes(bytes), "carriedEarlier", len(seen) - len(blobs)}
	if basedOn != "" {
		args = append(args, "basedOn", basedOn)
	}
	t.Log.Info("writing archive", args...)
	written, err := archive.Write(ctx, dir, idx, store, archive.WriteOptions{MaxChunk: t.ArchiveSize, Strict: t.StrictArchive, Logger: t.Log})
	if err != nil {
		return nil, err
	}
	rec := archiveRecord{Seq: len(history) + 1, ID: written.ID, BasedOn: basedOn, Created: written.Created, Images: len(set.Images), Bytes: bytes}
	for _, b := range blobs {
		rec.Blobs = append(rec.Blobs, b.Digest)
	}
	if err := ws.saveArchive(rec); err != nil {
		return nil, err
	}
	var chunks []string
	for _, c := range written.Chunks {
		chunks = append(chunks, filepath.Join(dir, c.Name))
	}
	return chunks, nil
}

// DiskToMirror pushes the images of the archive in dir to the registry at root.
func (t *Trip) DiskToMirror(ctx context.Context, dir, root string) (*Report, error) {
	ws := filepath.Join(dir, WorkingDir)
	ar, err := archive.Open(dir)
	if err != nil {
		return nil, err
	}
	idx := ar.Index()
	w := workspace{ws}
	if idx.BasedOn != "" && !t.SkipPredecessorCheck {
		applied, err := w.applied()
		if err != nil {
			return nil, err
		}
		if _, ok := applied[idx.BasedOn]; !ok {
			return nil, fmt.Errorf("archive %s in %s builds on archive %s, which has not been pushed from this directory: run disk-to-mirror with archive %s first (archives apply in the order they were made), or pass --skip-predecessor-check if the mirror already has it", idx.ID, dir, idx.BasedOn, idx.BasedOn)
		}
	}
	dst, err := NewMirror(root, t.Mirror)
	if err != nil {
		return nil, err
	}
	defer dst.Close()
	plan, err := planFromArchive(ar, t.RemoveSignatures)
	if err != nil {
		return nil, err
	}
	rebuilt, err := t.subset(ctx, plan, ar, dir)
	if err != nil {
		return nil, err
	}
	defer rebuilt.Close()
	if t.SecurePolicy {
		t.Log.Info("--secure-policy: disk-to-mirror pushes what the archive holds and does not verify again; mirror-to-disk verifies when given --secure-policy")
	}
	if err := t.flatten(dst.Root(), plan); err != nil {
		return nil, err
	}
	set := plan.Set
	rep := &Report{Mode: "disk-to-mirror", Set: set, Resolution: &imageset.Resolution{Blocked: idx.Blocked}, Workspace: ws, LeftOut: idx.LeftOut, Mirror: dst.Root()}
	r := &run{t: t, ws: w, plan: plan, rep: rep}
	src := rebuilt.source(&ArchiveSource{Archive: ar, Name: dir, Mirror: dst})
	return r.toMirror(ctx, dst, src, func() *Result {
		t.Log.Info("pushing archive to the mirror", "archive", dir, "id", idx.ID, "mirror", dst.Root(), "images", len(set.Images))
		return Copy(ctx, set, src, dst, t.Copy)
	}, func() error {
		return w.markApplied(appliedRecord{ID: idx.ID, BasedOn: idx.BasedOn, Mirror: dst.Root(), Applied: t.now()})
	})
}

// toMirror is what disk-to-mirror and mirror-to-mirror share once the
// plan is made: with --dry-run the plan and what prune would do; else the
// plan kept in the workspace, a check of the mirror, the copy, the records
// of where blobs went, applied (when the copy ran whole and nothing failed;
// may be nil), the cluster resources, prune and the run record. src is
// where the images come from (a dry run reads their sizes through it). The mirror
// root's record is read once here and handed down.
func (r *run) toMirror(ctx context.Context, dst *Registry, src Source, copyAll func() *Result, applied func() error) (*Report, error) {
	t, w, rep := r.t, r.ws, r.rep
	set := rep.Set
	mrec, err := w.mirrorRecord(dst.Root())
	if err != nil {
		return nil, err
	}
	if t.DryRun {
		if err := r.dryRunToMirror(ctx, dst, src); err != nil {
			return rep, err
		}
		if err := t.writePlan(w.dir, dst.Root(), set, nil); err != nil {
			return rep, err
		}
		return rep, t.pruneMirror(ctx, w, dst, rep, mrec)
	}
	if err := r.keep(); err != nil {
		return rep, err
	}
	if len(set.Images) > 0 {
		if err := dst.Check(ctx, set.Images[0]); err != nil {
			return nil, err
		}
	}
	seedLocations(mrec, dst)
	rep.Result = copyAll()
	for d, repo := range rep.Result.Locations {
		mrec.Blobs[d] = repo
	}
	if err := t.remember(w, mrec, rep.Result); err != nil {
		return rep, err
	}
	if ctx.Err() != nil {
		return rep, fmt.Errorf("interrupted: %w (run again to resume)", ctx.Err())
	}
	if applied != nil && len(rep.Result.Failed) == 0 {
		if err := applied(); err != nil {
			return rep, err
		}
	}
	if err := r.generate(dst.Root()); err != nil {
		return rep, err
	}
	if err := t.pruneMirror(ctx, w, dst, rep, mrec); err != nil {
		return rep, err
	}
	return rep, r.record()
}

// MirrorToMirror copies the image set from upstream straight into the
// registry at root; dir is the workspace.
func (t *Trip) MirrorToMirror(ctx context.Context, dir, root string) (*Report, error) {
	ws := filepath.Join(dir, WorkingDir)
	if filepath.Base(dir) == WorkingDir {
		ws = dir
	}
	dst, err := NewMirror(root, t.Mirror)
	if err != nil {
		return nil, err
	}
	defer dst.Close()
	up := NewUpstream(t.Upstream)
	defer up.Close()
	// The store holds what gapmirror builds (filtered catalogs) and the
	// catalog images it reads, so reruns reuse them.
	store, err := OpenStore(t.StoreDir)
	if err != nil {
		return nil, err
	}
	plan, todo, res, err := t.plan(ctx, up, store, ws)
	if err != nil {
		return nil, err
	}
	whole := todo == plan.Set
	if err := t.flatten(dst.Root(), plan); err != nil {
		return nil, err
	}
	if todo = plan.Set; !whole {
		if todo, err = flattenSet(dst.Root(), todo, plan.MaxNestedPaths); err != nil {
			return nil, err
		}
	}
	set := plan.Set
	rep := &Report{Mode: "mirror-to-mirror", Set: set, Resolution: res, Workspace: ws, Mirror: dst.Root()}
	r := &run{t: t, ws: workspace{ws}, plan: plan, rep: rep}
	return r.toMirror(ctx, dst, builtSource{up, store}, func() *Result {
		t.Log.Info("copying to the mirror", "mirror", dst.Root(), "images", len(set.Images))
		return t.copyPlan(ctx, set, todo, builtSource{up, store}, dst)
	}, nil)
}

// flatten applies --max-nested-paths to the plan of a trip to root: the
// one place destinations are shortened, so that the copy, the records,
// prune and the cluster resources all see the names the images have at the
// mirror. Without a limit it still runs: a --retry-failed plan may come
// flattened, and keeps the limit it was made with.
func (t *Trip) flatten(root string, plan *Plan) error {
	if t.MaxNestedPaths != 0 {
		plan.MaxNestedPaths = t.MaxNestedPaths
	}
	flat, err := flattenSet(root, plan.Set, plan.MaxNestedPaths)
	if err != nil {
		return err
	}
	plan.Set = flat
	return nil
}

func flattenSet(root string, set *imageset.Set, n int) (*imageset.Set, error) {
	_, path, _ := strings.Cut(root, "/")
	flat, err := set.FlattenDestinations(path, n)
	if err != nil {
		return nil, fmt.Errorf("--max-nested-paths %d with mirror docker://%s: %w", n, root, err)
	}
	return flat, nil
}

// withoutSignatures is set less its signatures (--remove-signatures on an
// archive made with them).
func withoutSignatures(set *imageset.Set) *imageset.Set {
	out := &imageset.Set{FormatVersion: set.FormatVersion}
	for _, img := range set.Images {
		if img.Kind != imageset.KindSignature {
			out.Images = append(out.Images, img)
		}
	}
	return out
}

// seedLocations tells the mirror where earlier runs put blobs, so images
// that share them are mounted rather than sent again, and which images they
// copied sparse, so that wanting more of those is noticed.
func seedLocations(r *locationRecord, dst *Registry) {
	dst.KnownLocations(r.Blobs)
	dst.sparse = map[string][]string{}
	for _, m := range r.Images {
		if len(m.Platforms) > 0 {
			dst.sparse[m.key()] = m.Platforms
		}
	}
}

// writePlan saves the Set and a src=dst mapping for --dry-run and prints it;
// root, when known, makes the mapping's destinations absolute.
func (t *Trip) writePlan(ws, root string, set *imageset.Set, missing func(imageset.Image) bool) error {
	dir := filepath.Join(ws, "dry-run")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := set.Marshal()
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, "set.json"), data); err != nil {
		return err
	}
	var mapping, miss strings.Builder
	for _, img := range set.Images {
		fmt.Fprintln(&mapping, mappingLine(img, root))
		if missing != nil && missing(img) {
			fmt.Fprintf(&miss, "%s=%s\n", img.Source, img.Destination)
		}
		sparse := ""
		if len(img.Platforms) > 0 {
			sparse = "  [sparse: " + strings.Join(img.Platforms, ", ") + "]"
		}
		fmt.Fprintf(t.Out, "%-18s %s -> %s  (%s)%s\n", img.Kind, img.Origin, img.Destination, strings.Join(img.Why, "; "), sparse)
	}
	if err := writeFileAtomic(filepath.Join(dir, "mapping.txt"), []byte(mapping.String())); err != nil {
		return err
	}
	if missing != nil {
		if err := writeFileAtomic(filepath.Join(dir, "missing.txt"), []byte(miss.String())); err != nil {
			return err
		}
	}
	t.Log.Info("dry run: plan written", "set", filepath.Join(dir, "set.json"), "mapping", filepath.Join(dir, "mapping.txt"))
	return nil
}

// generate writes the cluster resources for what reached the mirror, from
// the plan and the copy's result alone.
func (r *run) generate(root string) error {
	return r.generateInto(r.ws.path(generate.Dir), root)
}

// generateInto writes them into dir.
func (r *run) generateInto(dir, root string) error {
	rep, plan := r.rep, r.plan
	done := &imageset.Set{FormatVersion: rep.Set.FormatVersion}
	done.Images = append(append(done.Images, rep.Result.Copied...), rep.Result.Skipped...)
	done.Sort()
	var notMirrored []string
	notMirrored = append(notMirrored, plan.Blocked...)
	for _, f := range plan.Unresolved {
		if !f.NotImage {
			notMirrored = append(notMirrored, f.Origin)
		}
	}
	for _, f := range rep.Result.Failed {
		notMirrored = append(notMirrored, f.Image.Origin)
	}
	catalogs, err := generate.CatalogsFromSet(done, root)
	if err != nil {
		return fmt.Errorf("generating cluster resources: %w", err)
	}
	// Templates by catalog digest (the last catalog image of a digest wins),
	// from the copies keep wrote into the workspace.
	templates := map[string]string{}
	for _, img := range done.Images {
		if img.Kind != imageset.KindOperatorCatalog {
			continue
		}
		name := templateExtra(img.OriginalDestination())
		if _, ok := plan.file(name); ok {
			templates[img.Digest] = r.ws.path(filepath.FromSlash(name))
		} else {
			templates[img.Digest] = ""
		}
	}
	for i := range catalogs {
		if tp, ok := templates[catalogs[i].Digest]; ok {
			catalogs[i].TemplatePath = tp
		}
	}
	sigs, err := r.releaseSignatures(done)
	if err != nil {
		return err
	}
	in := generate.Input{
		Set:               done,
		MirrorRoot:        root,
		NotMirrored:       notMirrored,
		Catalogs:          catalogs,
		ReleaseSignatures: sigs,
		Meta:              generate.Meta{ToolVersion: r.t.ToolVersion, CreatedAt: r.t.now()},
		RepositoryScope:   plan.MaxNestedPaths > 0,
	}
	files, err := generate.Manifests(in)
	if err != nil {
		return fmt.Errorf("generating cluster resources: %w", err)
	}
	keep, err := r.t.holdMirrorSets(files, dir, in, rep)
	if err != nil {
		return err
	}
	if err := files.WriteKeeping(dir, keep...); err != nil {
		return err
	}
	for name := range files {
		rep.ClusterResources = append(rep.ClusterResources, filepath.Join(dir, name))
	}
	sort.Strings(rep.ClusterResources)
	return nil
}

// runRecordFormat is the format of the run records (working-dir/runs) and
// failure files (working-dir/failed). 1: the Set only; 2: the whole Plan
// (its fields inline, so "set" stays where it was) and the failure file
// names its run record. Readers take every format up to theirs.
const runRecordFormat = 2

// runRecord is what the workspace keeps of each run: the plan it executed
// and what happened.
type runRecord struct {
	FormatVersion int       `json:"formatVersion"`
	Mode          string    `json:"mode"`
	Time          time.Time `json:"time"`
	ToolVersion   string    `json:"toolVersion"`
	Config        string    `json:"config,omitempty"`
	// Pinned is the path of the pinned configuration the run wrote.
	Pinned string `json:"pinnedConfig,omitempty"`
	Mirror string `json:"mirror,omitempty"`
	*Plan
	Copied  []string        `json:"copied"`
	Skipped []string        `json:"skipped"`
	Failed  []failureRecord `json:"failed,omitempty"`
	Archive []string        `json:"archive,omitempty"`
	Bytes   int64           `json:"bytes"`
	Blobs   int64           `json:"blobs"`
}

type failureRecord struct {
	Image string `json:"image"`
	Error string `json:"error"`
}

// runRecord reads the run record name (relative to the workspace) with the
// content of its plan's files.
func (w workspace) runRecord(name string) (*runRecord, error) {
	var rec runRecord
	ok, err := w.read(&rec, filepath.FromSlash(name))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("run record %s: %w", w.path(name), fs.ErrNotExist)
	}
	if rec.FormatVersion > runRecordFormat {
		return nil, fmt.Errorf("run record %s was written by a newer gapmirror (format %d)", w.path(name), rec.FormatVersion)
	}
	if rec.Plan != nil {
		if err := w.loadFiles(rec.Plan.Files); err != nil {
			return nil, fmt.Errorf("run record %s: %w", w.path(name), err)
		}
	}
	return &rec, nil
}

func (r *run) record() error {
	rep, w := r.rep, r.ws
	if err := w.saveFiles(r.plan.Files); err != nil {
		return fmt.Errorf("keeping the plan's files in %s: %w", w.path("plan-files"), err)
	}
	now := r.t.now()
	rec := runRecord{FormatVersion: runRecordFormat, Mode: rep.Mode, Time: now, ToolVersion: r.t.ToolVersion, Config: r.t.ConfigPath, Pinned: r.pinned, Mirror: rep.Mirror, Plan: r.plan, Archive: rep.Archive}
	if res := rep.Result; res != nil {
		for _, i := range res.Copied {
			rec.Copied = append(rec.Copied, i.Destination)
		}
		for _, i := range res.Skipped {
			rec.Skipped = append(rec.Skipped, i.Destination)
		}
		for _, f := range res.Failed {
			rec.Failed = append(rec.Failed, failureRecord{Image: f.Image.Destination, Error: f.Err.Error()})
		}
		rec.Bytes, rec.Blobs = res.Bytes, res.Blobs
		sort.Strings(rec.Copied)
		sort.Strings(rec.Skipped)
	}
	name := now.Format("20060102T150405.000Z") + "-" + rep.Mode + ".json"
	if err := w.write(rec, "runs", name); err != nil {
		return err
	}
	if len(rec.Failed) > 0 {
		rep.FailedFile = w.path("failed", name)
		if err := w.write(failedFile{FormatVersion: runRecordFormat, Mode: rep.Mode, Run: "runs/" + name, Set: rep.Set, Failed: rec.Failed}, "failed", name); err != nil {
			return err
		}
	}
	return nil
}

// failedFile is what --retry-failed reads: the pinned Set of a run, the
// images of it that failed and (format 2) the run record holding its plan,
// relative to the workspace the file is in.
type failedFile struct {
	FormatVersion int             `json:"formatVersion"`
	Mode          string          `json:"mode"`
	Run           string          `json:"run,omitempty"`
	Set           *imageset.Set   `json:"set"`
	Failed        []failureRecord `json:"failed"`
}

// Summary prints what the trip did.
func (r *Report) Summary(w io.Writer) {
	if r.Result == nil {
		sigs := ""
		if n := r.Set.Signatures(); n > 0 {
			sigs = fmt.Sprintf(" and %d signatures", n)
		}
		fmt.Fprintf(w, "%s (dry run): %d images%s planned; plan in %s\n", r.Mode, len(r.Set.Images)-r.Set.Signatures(), sigs, filepath.Join(r.Workspace, "dry-run"))
		r.DryRun.print(w)
		for _, c := range r.ClusterResources {
			fmt.Fprintf(w, "cluster resource (not applied, dry run): %s\n", c)
		}
		r.printBlocked(w)
		r.printPrune(w)
		return
	}
	res := r.Result
	secs := res.Duration.Seconds()
	copied, skipped, failed := imageset.CountSignatures(res.Copied), imageset.CountSignatures(res.Skipped), 0
	for _, f := range res.Failed {
		if f.Image.Kind == imageset.KindSignature {
			failed++
		}
	}
	fmt.Fprintf(w, "%s: %d images copied, %d already there, %d failed; %d blobs, %s moved in %.1fs (%.1f MiB/s); %d blobs reused\n",
		r.Mode, len(res.Copied)-copied, len(res.Skipped)-skipped, len(res.Failed)-failed+len(r.Resolution.Failed), res.Blobs, HumanBytes(res.Bytes), secs,
		float64(res.Bytes)/(1<<20)/max(secs, 0.001), res.Reused)
	if copied+skipped+failed > 0 {
		fmt.Fprintf(w, "signatures: %d copied, %d already there, %d failed\n", copied, skipped, failed)
	}
	r.printBlocked(w)
	if r.Mode == "disk-to-mirror" && len(r.LeftOut) > 0 {
		// The copy itself succeeded; the admin must still learn the mirror
		// lacks what mirror-to-disk could not get.
		fmt.Fprintf(w, "the archive is partial: mirror-to-disk left out %d images, so the mirror does not have them: %s; fix them on the connected side (its summary says how) and carry the next archive\n",
			len(r.LeftOut), strings.Join(r.LeftOut, ", "))
	}
	for _, c := range r.Archive {
		fmt.Fprintf(w, "archive: %s\n", c)
	}
	for _, c := range r.ClusterResources {
		fmt.Fprintf(w, "cluster resource: %s\n", c)
	}
	r.printHeldMirrorSets(w)
	for _, c := range r.HelmCharts {
		fmt.Fprintf(w, "helm chart: %s\n", c)
	}
	r.printPrune(w)
	for _, f := range r.Resolution.Failed {
		fmt.Fprintf(w, "FAILED %s (%s): %v\n", f.Origin, f.Why, f.Err)
	}
	for _, f := range res.Failed {
		if needs := neededBy(f.Image); needs != "" {
			fmt.Fprintf(w, "FAILED %v (needed by %s)\n", f.Err, needs)
			continue
		}
		fmt.Fprintf(w, "FAILED %v\n", f.Err)
	}
	if r.FailedFile != "" {
		fmt.Fprintf(w, "retry exactly the failed images with: --retry-failed %s\n", r.FailedFile)
	}
	refused, unresolved, unsigned, unusable := 0, 0, 0, 0
	for _, f := range r.Resolution.Failed {
		switch {
		case f.NotImage:
			unusable++
		case errors.Is(f.Err, release.ErrReleaseNotVerified):
			refused++
		case errors.Is(f.Err, ErrPolicyRefused):
			unsigned++
		default:
			unresolved++
		}
	}
	if unusable > 0 {
		fmt.Fprintf(w, "%d helm repositories, charts or chart images could not be used, so the images they name were not mirrored: fix what their FAILED lines say and run again\n", unusable)
	}
	if refused > 0 {
		fmt.Fprintf(w, "%d release(s) refused for their signatures were not mirrored: fix the signature store (--release-signature-url) or the trusted keys (--release-signature-key) and run again\n", refused)
	}
	if unsigned > 0 {
		fmt.Fprintf(w, "%d image(s) refused by the signature policy were not mirrored: have them signed, or fix the policy (--policy), and run again\n", unsigned)
	}
	if unresolved > 0 {
		fmt.Fprintf(w, "images that could not be resolved to a digest need a full rerun once their registry answers\n")
	}
}

// printBlocked says which images mirror.blockedImages kept out, so the
// summary does not read as if the whole configuration was mirrored.
func (r *Report) printBlocked(w io.Writer) {
	if r.Resolution == nil || len(r.Resolution.Blocked) == 0 {
		return
	}
	list := r.Resolution.Blocked
	more := ""
	if len(list) > 5 {
		list, more = list[:5], fmt.Sprintf(" and %d more", len(list)-5)
	}
	fmt.Fprintf(w, "%d images left out by mirror.blockedImages (not mirrored, not in IDMS/ITMS): %s%s\n", len(r.Resolution.Blocked), strings.Join(list, ", "), more)
}

// neededBy names who needs an operator image or an image several sections
// share (its Why, the first few), so a failure says which bundles it leaves
// incomplete; "" for other images.
func neededBy(img imageset.Image) string {
	if img.Kind != imageset.KindOperatorBundle && img.Kind != imageset.KindOperatorRelated && len(img.AlsoKinds) == 0 {
		return ""
	}
	if len(img.Why) > 3 {
		return strings.Join(img.Why[:3], "; ") + fmt.Sprintf(" and %d more", len(img.Why)-3)
	}
	return strings.Join(img.Why, "; ")
}

// Err is nil when every image made it, else a FailedError.
func (r *Report) Err() error {
	if r.Result == nil && len(r.Resolution.Failed) == 0 {
		return r.pruneErr()
	}
	fe := &FailedError{}
	for _, f := range r.Resolution.Failed {
		fe.Groups = append(fe.Groups, f.Kind.Group())
		fe.Errs = append(fe.Errs, fmt.Errorf("%s: %w", f.Origin, f.Err))
	}
	if r.Result != nil {
		for _, f := range r.Result.Failed {
			fe.Groups = append(fe.Groups, f.Image.Groups()...)
			fe.Errs = append(fe.Errs, f.Err)
		}
	}
	if len(fe.Errs) == 0 {
		return r.pruneErr()
	}
	return fe
}

// FailedError says which images failed; its exit code has a bit per
// content group (2 release, 4 operator, 8 additional, 16 helm).
type FailedError struct {
	Groups []string
	Errs   []error
}

func (e *FailedError) Error() string {
	return fmt.Sprintf("%d images or charts failed (see above); the others were mirrored: %v", len(e.Errs), errors.Join(e.Errs...))
}

// ExitCode is the OR of the failed groups' bits.
func (e *FailedError) ExitCode() int {
	code := 0
	for _, g := range e.Groups {
		switch g {
		case "release":
			code |= 2
		case "operator":
			code |= 4
		case "helm":
			code |= 16
		default:
			code |= 8
		}
	}
	if code == 0 {
		code = 1
	}
	return code
}
