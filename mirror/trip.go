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
	"github.com/gapmirror/gapmirror/archivesign"
	"github.com/gapmirror/gapmirror/generate"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/ocistore"
	"github.com/gapmirror/gapmirror/progress"
	"github.com/gapmirror/gapmirror/sections"
	"github.com/gapmirror/gapmirror/transfer"
	"github.com/gapmirror/gapmirror/workspace"
)

// Trip is what the user asked for: the options of one run of the pipeline
// config → Plan → copy → record → generate. It holds no state of the run:
// resolution makes a Plan, a run executes it, a Report says what happened.
type Trip struct {
	Config     *imageset.ImageSetConfiguration
	ConfigPath string
	// StoreDir is the local store (an OCI layout) used by mirror-to-disk.
	StoreDir string
	Upstream transfer.RegistryOptions
	Mirror   transfer.RegistryOptions
	Copy     transfer.Options
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
	Releases sections.ReleaseOptions
	// MaxNestedPaths limits destination repositories to this many path
	// components below the registry host (0: no limit); see
	// imageset.Set.FlattenDestinations.
	MaxNestedPaths int
	// RemoveSignatures turns off looking for and mirroring the sigstore
	// (cosign) signatures of the images (oc-mirror's --remove-signatures).
	RemoveSignatures bool
	// Referrers are the kinds of OCI 1.1 referrers looked for and mirrored
	// with the images (--referrers); --remove-signatures takes the
	// signature kinds out.
	Referrers imageset.ReferrerChoice
	// ReferrersGiven: --referrers was given, so disk-to-mirror pushes only
	// those kinds of the referrers an archive carries (else every one).
	ReferrersGiven bool
	// SecurePolicy makes mirror-to-disk and mirror-to-mirror mirror only the
	// images the signature policy (PolicyPath, else the system's
	// policy.json) accepts; disk-to-mirror trusts what mirror-to-disk checked.
	SecurePolicy bool
	PolicyPath   string
	// Signer signs each archive mirror-to-disk writes (--sign-key); Trust
	// refuses, before disk-to-mirror reads or pushes anything of them,
	// archives its key did not sign (--verify-key).
	Signer *archivesign.Signer
	Trust  *archivesign.Verifier
	// partialSubset: the archive is an earlier one of several applied in
	// one disk-to-mirror run with a subset -c; it pushes what it holds of
	// the subset (the latest archive was checked to hold all of it).
	partialSubset bool
}

// run is one execution of a Plan with a Trip's options: the workspace it
// records into and, in rep, what happened.
type run struct {
	t    *Trip
	ws   workspace.Workspace
	plan *workspace.Plan
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
	Result     *transfer.Result
	// Trusted are the referrers Result.Skipped counts that the mirror
	// was not asked about: the records place them there, with their image.
	Trusted int
	// Archive lists the chunk files written (mirror-to-disk), Signature
	// the archive's signature file (--sign-key).
	Archive   []string
	Signature string
	// ArchiveID is the archive written (mirror-to-disk) or pushed
	// (disk-to-mirror).
	ArchiveID string
	// ArchiveFiles and ArchiveBytes are the blobs and manifests the archive
	// carries, ArchiveCarried those left to the archives before it.
	ArchiveFiles, ArchiveCarried int
	ArchiveBytes                 int64
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
	// BlockedByArchive: Resolution.Blocked are what the archive's
	// configuration blocked, pushed here as a subset (-c) of it.
	BlockedByArchive bool
	// Prune is what the prune step did or would do (mirror destinations).
	Prune *PruneReport
	// HelmCharts lists the chart files written into working-dir/helm.
	HelmCharts []string
	// ChartsRefused is the warning when the mirror refused the charts as OCI artifacts.
	ChartsRefused string
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

// copyPlan copies todo and counts the rest of set as done by an earlier run.
func (t *Trip) copyPlan(ctx context.Context, set, todo *imageset.Set, src transfer.Source, dst transfer.Destination) *transfer.Result {
	res := transfer.CopyPlanned(ctx, todo, src, dst, t.Copy)
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
	ws := filepath.Join(dir, workspace.WorkingDir)
	release, err := t.lockRun(ctx, ws, true)
	if err != nil {
		return nil, err
	}
	defer release()
	up := transfer.NewUpstream(t.Upstream)
	defer up.Close()
	store, err := ocistore.Open(t.StoreDir)
	if err != nil {
		return nil, err
	}
	plan, todo, res, later, err := t.plan(ctx, up, store, ws)
	if err != nil {
		return nil, err
	}
	defer later.stop()
	set := plan.Set
	rep := &Report{Mode: "mirror-to-disk", Set: set, Resolution: res, Workspace: ws}
	if t.DryRun {
		carried, err := t.carriedBlobs(workspace.Workspace{Dir: ws})
		if err != nil {
			return nil, err
		}
		t.dryRunToDisk(ctx, transfer.WithStore(up, store), store, set, carried, rep)
		return rep, t.writePlan(ws, "", set, func(img imageset.Image) bool { return !store.Has(digest.Digest(img.Digest)) })
	}
	r := &run{t: t, ws: workspace.Workspace{Dir: ws}, plan: plan, rep: rep}
	if err := r.keep(); err != nil {
		return rep, err
	}
	if err := store.CleanIngest(); err != nil {
		return nil, err
	}
	base, err := r.baseline()
	if err != nil {
		return nil, err
	}
	if !t.Copy.Force {
		if base, err = r.adoptOrphan(ctx, dir, base); err != nil {
			return nil, err
		}
	}
	// A run killed while staging its archive left a journal of the blobs
	// it had whole: keep them for this run.
	r.recoverKilled(dir, store)
	// Blobs stream straight into the archive's chunks as they arrive (see
	// diskDestination); a run that ends before Commit leaves none of them.
	p := t.Copy.WithDefaults().Progress
	stage, err := archive.Stage(dir, t.now(), archive.WriteOptions{MaxChunk: t.ArchiveSize, Strict: t.StrictArchive, Logger: t.Log, Progress: progress.ArchiveProgress(p), Seq: base.seq, Replace: t.Copy.Force})
	var clash *archive.ReplaceError
	if errors.As(err, &clash) {
		// Ours (not whole: adoptOrphan would have taken it), or another
		// workspace's: the error says which.
		clash.Writing, _ = r.ws.Identity(t.now())
	}
	if err != nil {
		return nil, err
	}
	defer stage.Abort()
	t.Log.Info("copying into the archive", "dir", dir, "manifests", store.Dir(), "images", len(set.Images))
	copyCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	src, into := transfer.WithStore(up, store), transfer.NewDiskDestination(store, stage, base.carried, stop)
	rep.Result = t.copyPlan(copyCtx, set, todo, src, into)
	if later != nil {
		r.copyAttached(later, rep.Result, nil, func(added *imageset.Set) *transfer.Result {
			return t.copyPlan(copyCtx, added, added, src, into)
		})
	}
	if err := store.SaveIndex(); err != nil {
		return nil, err
	}
	var strict *archive.StrictError
	if errors.As(context.Cause(copyCtx), &strict) && ctx.Err() == nil {
		return rep, fmt.Errorf("%w (nothing was archived)", strict)
	}
	if ctx.Err() != nil {
		kept := r.salvage(stage, store)
		return rep, fmt.Errorf("interrupted: %w (run again to resume: %d blobs already downloaded are kept for it)", ctx.Err(), kept)
	}
	if err := transfer.NoSpace(rep.Result, dir, store.Dir()); err != nil {
		return rep, err
	}
	// The archive carries what is complete; failed images are reported and
	// left out, so the other side never trusts them.
	carried := t.succeeded(set, rep.Result)
	chunks, err := r.writeArchive(ctx, dir, store, stage, base, carried, leftOut(rep.Result, plan))
	if err != nil {
		return rep, err
	}
	rep.Archive = chunks
	return rep, r.record()
}

// succeeded is the subset of set that was copied or already present.
func (t *Trip) succeeded(set *imageset.Set, res *transfer.Result) *imageset.Set {
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

// archiveBaseline is what a new archive of the workspace builds on.
type archiveBaseline struct {
	carried map[digest.Digest]bool // blobs earlier archives carried
	basedOn string                 // the newest of them
	seq     int                    // the new archive's sequence number
}

// baseline reads the workspace's archives: blobs an earlier archive
// carried stay out of the next one (the air gap has them already), unless
// --since leaves that archive out of the baseline.
func (r *run) baseline() (archiveBaseline, error) {
	b := archiveBaseline{carried: map[digest.Digest]bool{}, seq: 1}
	history, err := r.ws.Archives()
	if err != nil {
		return b, err
	}
	for _, a := range history {
		b.seq = max(b.seq, a.Seq+1)
		if !r.t.Since.IsZero() && !a.Created.Before(r.t.Since) {
			continue
		}
		for _, d := range a.Blobs {
			b.carried[d] = true
		}
		b.basedOn = a.ID
	}
	return b, nil
}

// adoptOrphan takes into the workspace's records the archive a run of
// this workspace wrote into dir as its next one, whole, but was stopped
// before recording (killed between moving the chunks into place and
// writing the record): it is a good archive the admin may already have
// carried, so it is neither overwritten nor carried again; this run's
// archive builds on it. Several in a row (records of the last few lost)
// are adopted in order. The orphan must build on nothing or on an archive
// the workspace records (a run with --since bases its archive on an older
// one than the newest). Anything else in its place is left for Stage to
// refuse.
func (r *run) adoptOrphan(ctx context.Context, dir string, base archiveBaseline) (archiveBaseline, error) {
	id, err := r.ws.Identity(r.t.now())
	if err != nil {
		return base, err
	}
	for {
		idx, err := archive.Whole(dir, base.seq)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				r.t.Log.Debug("no archive to adopt", "dir", dir, "seq", base.seq, "error", err)
			}
			return base, nil
		}
		if idx.Workspace != id || idx.Seq != base.seq {
			return base, nil
		}
		if idx.BasedOn != "" {
			history, err := r.ws.Archives()
			if err != nil {
				return base, err
			}
			known := false
			for _, a := range history {
				known = known || (a.ID == idx.BasedOn && a.Seq < idx.Seq)
			}
			if !known {
				return base, nil
			}
		}
		rec := workspace.ArchiveRecord{Seq: idx.Seq, ID: idx.ID, BasedOn: idx.BasedOn, Created: idx.Created}
		if idx.Set != nil {
			rec.Images = len(idx.Set.Images)
		}
		for _, b := range idx.Blobs {
			rec.Blobs = append(rec.Blobs, b.Digest)
			rec.Bytes += b.Size
		}
		if r.t.Signer != nil { // it may have been stopped before signing too
			if _, err := r.t.Signer.SignArchive(ctx, dir, idx); err != nil {
				return base, err
			}
		}
		if err := r.ws.SaveArchive(rec); err != nil {
			return base, fmt.Errorf("recording archive %s, which an earlier run wrote into %s and was stopped before recording: %w", idx.ID, dir, err)
		}
		r.t.Log.Warn("an earlier run was stopped after writing an archive and before recording it; the archive is whole, now recorded, and this run's archive builds on it: carry both, in order",
			"archive", idx.ID, "chunks", archive.SeqChunkName(idx.Seq, 1)+"…", "dir", dir)
		if base, err = r.baseline(); err != nil {
			return base, err
		}
	}
}

// writeArchive commits the staged archive with set (the plan's, less what
// failed) and the plan's files; leftOut and the plan's blocked list name
// the images of the configuration the archive does not carry. Blobs not
// staged by this run's copy come from the store.
func (r *run) writeArchive(ctx context.Context, dir string, store *ocistore.Store, stage *archive.Staging, base archiveBaseline, set *imageset.Set, leftOut []string) ([]string, error) {
	t, ws := r.t, r.ws
	carried, basedOn, seq := base.carried, base.basedOn, base.seq
	present := func(d digest.Digest) bool { return carried[d] || stage.Has(d) || store.Has(d) }
	seen := map[digest.Digest]bool{}
	var blobs []archive.Blob
	var refs []string
	var bytes int64
	for _, img := range set.Images {
		descs, err := transfer.StoreBlobsWalk(store, img, digest.Digest(img.Digest), present)
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
	id, err := ws.Identity(t.now())
	if err != nil {
		return nil, err
	}
	idx := &archive.Index{
		ToolVersion: t.ToolVersion,
		Workspace:   id,
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
		}, r.plan.Extras()...),
	}
	// An archive holds manifests as blobs too (OCI layout), and the
	// images gapmirror built: its figures are not the copy's.
	r.rep.ArchiveFiles, r.rep.ArchiveBytes, r.rep.ArchiveCarried = len(blobs), bytes, len(seen)-len(blobs)
	args := []any{"dir", dir, "blobsAndManifests", len(blobs), "bytes", progress.HumanBytes(bytes), "carriedEarlier", len(seen) - len(blobs)}
	if basedOn != "" {
		args = append(args, "basedOn", basedOn)
	}
	t.Log.Info("writing archive", args...)
	// The sequence keeps this archive from replacing one not yet carried.
	p := t.Copy.WithDefaults().Progress
	p.Phase("writing archive", 0, transfer.Totals{Blobs: int64(len(blobs)), Bytes: bytes})
	written, err := stage.Commit(ctx, idx, store)
	p.Finish()
	if err != nil {
		return nil, err
	}
	r.rep.ArchiveID = written.ID
	first := written.Chunks[0].Name
	// takeBack removes the archive again: one the workspace does not know
	// of would be left out of the next one's baseline and clash with its
	// name.
	takeBack := func() {
		for _, c := range written.Chunks {
			os.Remove(filepath.Join(dir, c.Name))
		}
		_ = archivesign.Unsign(dir, first)
	}
	if t.Signer != nil {
		r.rep.Signature, err = t.Signer.SignArchive(ctx, dir, written)
	} else {
		err = archivesign.Unsign(dir, first) // an earlier archive's, by that name
	}
	if err != nil {
		takeBack()
		return nil, fmt.Errorf("%w (the archive's chunks were removed again; run again once this is fixed)", err)
	}
	rec := workspace.ArchiveRecord{Seq: seq, ID: written.ID, BasedOn: basedOn, Created: written.Created, Images: len(set.Images), Bytes: bytes}
	for _, b := range blobs {
		rec.Blobs = append(rec.Blobs, b.Digest)
	}
	if err := ws.SaveArchive(rec); err != nil {
		takeBack()
		return nil, fmt.Errorf("recording archive %s (its chunks were removed again; run again once this is fixed): %w", written.ID, err)
	}
	var chunks []string
	for _, c := range written.Chunks {
		chunks = append(chunks, filepath.Join(dir, c.Name))
	}
	r.linkStaged(dir, written, store, stage)
	return chunks, nil
}

// linkStaged links the store to the blobs this run streamed into the
// archive (see Store.Link). A link is a shortcut, not a record: failing to
// write one costs a later run a download, so it is logged, not returned.
func (r *run) linkStaged(dir string, written *archive.Index, store *ocistore.Store, stage *archive.Staging) {
	abs, err := filepath.Abs(dir)
	if err == nil {
		var ar *archive.Reader
		if ar, err = archive.OpenFirst(abs, written.Chunks[0].Name); err == nil {
			for _, b := range written.Blobs {
				// Staged now, or kept by an interrupted run: the new
				// archive is where they stay.
				if !stage.Has(b.Digest) && !store.LinkedUnder(b.Digest, r.ws.Path(salvageDir)) {
					continue
				}
				if l, ok := ar.Locate(b.Digest); ok {
					if err = store.Link(b.Digest, l); err != nil {
						break
					}
				}
			}
		}
	}
	if err != nil {
		r.t.Log.Warn("the store could not link to the blobs of the new archive: a run of another workspace will fetch them again", "err", err)
		return
	}
	// What interrupted runs kept is in this archive now.
	if err := os.RemoveAll(r.ws.Path(salvageDir)); err != nil {
		r.t.Log.Warn("removing the blobs kept by an interrupted run", "err", err)
	}
}

// salvageDir (in the workspace) holds the blobs an interrupted
// mirror-to-disk downloaded, for the next run.
const salvageDir = "salvage"

// recoverKilled links the store to the blobs a killed mirror-to-disk had
// staged whole in dir (archive.Recover checks each against its digest).
func (r *run) recoverKilled(dir string, store *ocistore.Store) {
	n := r.keepBlobs(store, "some blobs of a killed run could not be kept", func(into string) ([]archive.Salvaged, error) {
		return archive.Recover(dir, into)
	})
	if n > 0 {
		r.t.Log.Info("kept the blobs a killed run had downloaded", "blobs", n)
	}
}

// salvage keeps the blobs an interrupted mirror-to-disk staged whole: their
// chunk files move into the workspace and the store links to them, so the
// next run reads them instead of downloading them again (verified against
// their digests as it reads). It returns how many it kept.
func (r *run) salvage(stage *archive.Staging, store *ocistore.Store) int {
	return r.keepBlobs(store, "some downloaded blobs could not be kept for the next run", stage.Salvage)
}

// keepBlobs has move put kept blobs into the workspace's salvage directory and
// links the store to each; it returns how many it linked.
func (r *run) keepBlobs(store *ocistore.Store, warning string, move func(into string) ([]archive.Salvaged, error)) int {
	into, err := filepath.Abs(r.ws.Path(salvageDir))
	if err != nil {
		r.t.Log.Warn(warning, "err", err)
		return 0
	}
	kept, err := move(into)
	if err != nil {
		r.t.Log.Warn(warning, "err", err)
	}
	n := 0
	for _, k := range kept {
		if store.Link(k.Digest, k.At) == nil {
			n++
		}
	}
	return n
}

// DiskToMirror pushes to the registry at root every archive in dir that
// this directory has not applied to root yet, oldest first (the latest
// again when every one is applied). Each is a run of its own; it stops at the first
// that does not complete, and returns the report of the last it ran.
func (t *Trip) DiskToMirror(ctx context.Context, dir, root string) (*Report, error) {
	ws := filepath.Join(dir, workspace.WorkingDir)
	found, err := archive.List(dir)
	if err != nil {
		return nil, err
	}
	release, err := t.lockRun(ctx, ws, false)
	if err != nil {
		return nil, err
	}
	defer release()
	mirrorRoot, err := transfer.NewMirror(root, t.Mirror)
	if err != nil {
		return nil, err
	}
	todo, again, err := unapplied(workspace.Workspace{Dir: ws}, found, mirrorRoot.Root(), t.Log)
	if err != nil {
		return nil, err
	}
	if err := t.checkSignatures(dir, todo); err != nil {
		return nil, err
	}
	if !t.SkipPredecessorCheck && !again {
		if err := oneWorkspace(workspace.Workspace{Dir: ws}, dir, todo, mirrorRoot.Root()); err != nil {
			return nil, err
		}
	}
	if len(todo) > 1 {
		t.Log.Info("applying archives in the order they were made", "dir", dir, "archives", len(todo))
		// A subset is refused before anything is pushed when the latest
		// archive, whose set says what the mirror should hold, lacks any of it.
		if err := t.checkSubset(ctx, dir, todo[len(todo)-1].First, mirrorRoot.Root()); err != nil {
			return nil, err
		}
	}
	for i, a := range todo {
		last := i == len(todo)-1
		one := *t
		// Pushed before, so its predecessor was checked then.
		one.SkipPredecessorCheck = t.SkipPredecessorCheck || again
		if !last {
			// Only the latest archive's set says what the mirror should hold;
			// with a subset, each earlier archive pushes what it holds of it
			// (not all of it: the enclave would get what the subset leaves out).
			one.Prune = false
			one.partialSubset = true
		}
		rep, err := one.applyArchive(ctx, dir, a.First, root)
		if last || err != nil {
			return rep, err
		}
		if rep.Err() != nil {
			t.Log.Error("stopping before the later archives: this one did not complete; run disk-to-mirror again", "archive", a.Index.ID, "notApplied", len(todo)-i-1)
			return rep, nil
		}
		if t.Out != nil {
			rep.Summary(t.Out)
		}
	}
	return nil, fmt.Errorf("no archive to apply in %s", dir) // List found at least one
}

// checkSignatures refuses, with --verify-key, archives of todo whose index
// its key did not sign, before anything else of them is read.
func (t *Trip) checkSignatures(dir string, todo []archive.Listed) error {
	if t.Trust == nil {
		return nil
	}
	for _, a := range todo {
		if err := t.Trust.VerifyArchive(dir, a.First, a.Index); err != nil {
			return err
		}
		t.Log.Info("archive signature verified", "archive", a.Index.ID, "key", t.Trust.Path(), "fingerprint", t.Trust.Fingerprint())
	}
	return nil
}

// unapplied returns the archives of found (oldest first) that ws has no
// record of applying to root and that are newer than every one it applied there, or the
// latest (again true) when there are none. An older archive applied after
// a newer one would move tags back, so it is left out (and said so).
func unapplied(ws workspace.Workspace, found []archive.Listed, root string, log *slog.Logger) (todo []archive.Listed, again bool, err error) {
	applied, err := ws.Applied(root)
	if err != nil {
		return nil, false, err
	}
	var out []archive.Listed
	for _, a := range found {
		if _, ok := applied[a.Index.ID]; ok {
			for _, o := range out {
				log.Warn("not applying an archive older than one already applied (it would move tags back); it is no longer needed", "archive", o.Index.ID, "appliedNewer", a.Index.ID)
			}
			out = nil
			continue
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return found[len(found)-1:], true, nil
	}
	return out, false, nil
}

// oneWorkspace refuses, before anything is pushed, archives of todo that
// another mirror-to-disk workspace wrote than the one whose archives this
// directory applied to root last (or, with none applied there, than the
// first of todo): applied in between, such an archive's image set would
// replace the other's at the mirror (cluster resources, and --prune would
// delete the other's images). Archives that do not name their workspace
// (written before archives did) are not checked.
func oneWorkspace(ws workspace.Workspace, dir string, todo []archive.Listed, root string) error {
	applied, err := ws.Applied(root)
	if err != nil {
		return err
	}
	var last workspace.AppliedRecord
	for _, a := range applied {
		if a.Workspace != "" && a.Applied.After(last.Applied) {
			last = a
		}
	}
	want, by := last.Workspace, ""
	if want != "" {
		by = fmt.Sprintf("archive %s, which this directory applied to %s on %s", last.ID, root, last.Applied.UTC().Format(time.RFC3339))
	}
	var foreign []string
	for _, a := range todo {
		w := a.Index.Workspace
		switch {
		case w == "":
		case want == "":
			want, by = w, fmt.Sprintf("archive %s (%s)", a.Index.ID, a.First)
		case w != want:
			foreign = append(foreign, fmt.Sprintf("%s (archive %s, workspace %s)", a.First, a.Index.ID, w))
		}
	}
	if len(foreign) == 0 {
		return nil
	}
	return &foreignArchiveError{Dir: dir, Mirror: root, Foreign: foreign, Workspace: want, By: by}
}

// foreignArchiveError refuses archives that another mirror-to-disk
// workspace wrote than the archives a directory applies to a mirror.
type foreignArchiveError struct {
	Dir, Mirror string
	// Foreign names the refused archives: first chunk, id, workspace.
	Foreign []string
	// Workspace is the workspace of the directory's archives, By the
	// archive that says so.
	Workspace, By string
}

func (e *foreignArchiveError) Error() string {
	return fmt.Sprintf("%s holds archives of another mirror-to-disk workspace than %s (workspace %s): %s. "+
		"Nothing was pushed: applied to %s, such an archive's image set would replace the other's there (cluster resources, and --prune would delete its images). "+
		"Carry each connected host's (each workspace's) archives in a directory of their own and give each to --from in turn; "+
		"if that workspace replaces the other on purpose (the connected side's working-dir was lost and made again), pass --skip-predecessor-check",
		e.Dir, e.By, e.Workspace, strings.Join(e.Foreign, ", "), e.Mirror)
}

// applyArchive pushes the archive whose first chunk in dir is first.
func (t *Trip) applyArchive(ctx context.Context, dir, first, root string) (*Report, error) {
	ws := filepath.Join(dir, workspace.WorkingDir)
	ar, err := archive.OpenFirst(dir, first)
	if err != nil {
		return nil, err
	}
	idx := ar.Index()
	// Again, on the index as read this time (the media may have changed).
	if err := t.checkSignatures(dir, []archive.Listed{{First: first, Index: idx}}); err != nil {
		return nil, err
	}
	w := workspace.Workspace{Dir: ws}
	dst, err := t.mirrorRegistry(root)
	if err != nil {
		return nil, err
	}
	defer dst.Close()
	if idx.BasedOn != "" && !t.SkipPredecessorCheck {
		applied, err := w.Applied(dst.Root())
		if err != nil {
			return nil, err
		}
		if _, ok := applied[idx.BasedOn]; !ok {
			return nil, &predecessorError{Dir: dir, ID: idx.ID, BasedOn: idx.BasedOn, Mirror: dst.Root()}
		}
	}
	plan, err := planFromArchive(ar, t.leftOut())
	if err != nil {
		return nil, err
	}
	rebuilt, err := t.subset(ctx, plan, ar, dir, dst.Root())
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
	rep := &Report{Mode: "disk-to-mirror", Set: set, Resolution: &imageset.Resolution{Blocked: idx.Blocked}, Workspace: ws, LeftOut: idx.LeftOut, Mirror: dst.Root(), ArchiveID: idx.ID,
		BlockedByArchive: rebuilt != nil || t.Config != nil && plan.Config != ""}
	r := &run{t: t, ws: w, plan: plan, rep: rep}
	name := filepath.Join(dir, first)
	src := rebuilt.Source(&transfer.ArchiveSource{Archive: ar, Name: name, Mirror: dst})
	return r.toMirror(ctx, dst, src, func() *transfer.Result {
		t.Log.Info("pushing archive to the mirror", "archive", name, "id", idx.ID, "mirror", dst.Root(), "images", len(set.Images))
		return transfer.CopyPlanned(ctx, set, src, dst, t.Copy)
	}, func() error {
		return w.MarkApplied(workspace.AppliedRecord{ID: idx.ID, BasedOn: idx.BasedOn, Workspace: idx.Workspace, Mirror: dst.Root(), Applied: t.now()})
	})
}

// checkSubset refuses the subset -c names when the archive whose first
// chunk in dir is first does not hold all of it (with what is kept for
// root); it keeps nothing.
func (t *Trip) checkSubset(ctx context.Context, dir, first, root string) error {
	if t.Config == nil {
		return nil
	}
	ar, err := archive.OpenFirst(dir, first)
	if err != nil {
		return err
	}
	plan, err := planFromArchive(ar, t.leftOut())
	if err != nil {
		return err
	}
	check := *t
	check.DryRun = true // keeps nothing in the workspace
	rb, err := check.subset(ctx, plan, ar, dir, root)
	rb.Close()
	return err
}

// predecessorError refuses an incremental archive whose predecessor was
// not applied from this directory.
type predecessorError struct {
	Dir, ID, BasedOn, Mirror string
}

func (e *predecessorError) Error() string {
	return fmt.Sprintf("archive %s in %s builds on archive %s, which has not been pushed from this directory to "+e.Mirror+": "+
		"copy the chunks of archive %s into %s too (disk-to-mirror applies every archive there in the order they were made), "+
		"or pass --skip-predecessor-check if the mirror already has it. "+
		"If archive %s is lost, make a replacement on the connected side from the local store: mirror-to-disk with --since set to the day %s was made "+
		"(its id starts with the date; gapmirror describe lists it) writes an archive that carries everything since",
		e.ID, e.Dir, e.BasedOn, e.BasedOn, e.Dir, e.BasedOn, e.BasedOn)
}

// toMirror is what disk-to-mirror and mirror-to-mirror share once the
// plan is made: with --dry-run the plan and what prune would do; else the
// plan kept in the workspace, a check of the mirror, the copy, the records
// of where blobs went, applied (when the copy ran whole and nothing failed;
// may be nil), the cluster resources, prune and the run record. src is
// where the images come from (a dry run reads their sizes through it). The mirror
// root's record is read once here and handed down.
func (r *run) toMirror(ctx context.Context, dst *transfer.Registry, src transfer.Source, copyAll func() *transfer.Result, applied func() error) (*Report, error) {
	t, w, rep := r.t, r.ws, r.rep
	set := rep.Set
	mrec, err := w.Location(dst.Root())
	if err != nil {
		return nil, err
	}
	if t.DryRun {
		// As the real run: the records seed where blobs are, the set is
		// announced, so the checks cost what the run's would.
		seedLocations(mrec, dst)
		dst.Expect(set)
		if err := r.dryRunToMirror(ctx, dst, src); err != nil {
			return rep, err
		}
		if err := t.writePlan(w.Dir, dst.Root(), set, nil); err != nil {
			return rep, err
		}
		return rep, t.pruneMirror(ctx, w, dst, rep, mrec, src)
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
	// Blobs the records place in an image's repository are taken to be
	// there without asking; the manifest PUT finds any the registry lost,
	// and they are sent again from src.
	dst.ResendFrom(src, t.Log)
	rep.Result = copyAll()
	rep.Trusted = dst.TrustedReferrers()
	t.chartsRefused(rep)
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
	if err := t.pruneMirror(ctx, w, dst, rep, mrec, nil); err != nil {
		return rep, err
	}
	return rep, r.record()
}

// MirrorToMirror copies the image set from upstream straight into the
// registry at root; dir is the workspace.
func (t *Trip) MirrorToMirror(ctx context.Context, dir, root string) (*Report, error) {
	ws := filepath.Join(dir, workspace.WorkingDir)
	if filepath.Base(dir) == workspace.WorkingDir {
		ws = dir
	}
	release, err := t.lockRun(ctx, ws, true)
	if err != nil {
		return nil, err
	}
	defer release()
	dst, err := t.mirrorRegistry(root)
	if err != nil {
		return nil, err
	}
	defer dst.Close()
	up := transfer.NewUpstream(t.Upstream)
	defer up.Close()
	// The store holds what gapmirror builds (filtered catalogs) and the
	// catalog images it reads, so reruns reuse them.
	store, err := ocistore.Open(t.StoreDir)
	if err != nil {
		return nil, err
	}
	plan, todo, res, later, err := t.plan(ctx, up, store, ws)
	if err != nil {
		return nil, err
	}
	defer later.stop()
	whole := todo == plan.Set
	if err := t.flatten(dst.Root(), plan); err != nil {
		return nil, err
	}
	if whole {
		todo = plan.Set
	} else if todo, err = flattenSet(dst.Root(), todo, plan.MaxNestedPaths); err != nil {
		// A --retry-failed run copies only the failed images (it copied
		// the whole set again, every image with --force).
		return nil, err
	}
	set := plan.Set
	rep := &Report{Mode: "mirror-to-mirror", Set: set, Resolution: res, Workspace: ws, Mirror: dst.Root()}
	r := &run{t: t, ws: workspace.Workspace{Dir: ws}, plan: plan, rep: rep}
	return r.toMirror(ctx, dst, transfer.WithStore(up, store), func() *transfer.Result {
		t.Log.Info("copying to the mirror", "mirror", dst.Root(), "images", len(set.Images))
		result := t.copyPlan(ctx, set, todo, transfer.WithStore(up, store), dst)
		if later != nil {
			flatten := func(s *imageset.Set) (*imageset.Set, error) { return flattenSet(dst.Root(), s, plan.MaxNestedPaths) }
			r.copyAttached(later, result, flatten, func(added *imageset.Set) *transfer.Result {
				return t.copyPlan(ctx, added, added, transfer.WithStore(up, store), dst)
			})
		}
		return result
	}, nil)
}

// flatten applies --max-nested-paths to the plan of a trip to root: the
// one place destinations are shortened, so that the copy, the records,
// prune and the cluster resources all see the names the images have at the
// mirror. Without a limit it still runs: a --retry-failed plan may come
// flattened, and keeps the limit it was made with.
func (t *Trip) flatten(root string, plan *workspace.Plan) error {
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

// leftOut says which images of an archive's set disk-to-mirror leaves
// out: its signatures, tag or referrer, with --remove-signatures; the
// referrers of kinds --referrers does not name, when given.
func (t *Trip) leftOut() func(imageset.Image) bool {
	return func(img imageset.Image) bool {
		kind := imageset.ReferrerKind(img.ArtifactType, img.PredicateType)
		switch {
		case t.RemoveSignatures && (img.Kind == imageset.KindSignature || img.Kind == imageset.KindReferrer && imageset.SignatureKind(kind)):
			return true
		case t.ReferrersGiven && img.Kind == imageset.KindReferrer:
			return !t.Referrers[kind]
		}
		return false
	}
}

// without is set less the images drop names, and the referrers of those
// left out (a signature of an SBOM left out goes with it).
func without(set *imageset.Set, drop func(imageset.Image) bool) *imageset.Set {
	gone := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for _, img := range set.Images {
			if !gone[img.Destination] && (drop(img) || img.Kind == imageset.KindReferrer && gone[img.DestinationRepo()+"@"+img.Subject]) {
				gone[img.Destination], changed = true, true
			}
		}
	}
	out := &imageset.Set{FormatVersion: set.FormatVersion}
	for _, img := range set.Images {
		if !gone[img.Destination] {
			out.Images = append(out.Images, img)
		}
	}
	return out
}

// seedLocations tells the mirror where earlier runs put blobs, so images
// that share them are mounted rather than sent again, and which images they
// copied sparse, so that wanting more of those is noticed.
func seedLocations(r *workspace.LocationRecord, dst *transfer.Registry) {
	dst.KnownLocations(r.Blobs)
	dst.TrustReferrers(r.ListedReferrers())
	dst.Sparse = map[string][]string{}
	for _, m := range r.Images {
		if len(m.Platforms) > 0 {
			dst.Sparse[m.Key()] = m.Platforms
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
	if err := archive.WriteFileAtomic(filepath.Join(dir, "set.json"), data); err != nil {
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
	if err := archive.WriteFileAtomic(filepath.Join(dir, "mapping.txt"), []byte(mapping.String())); err != nil {
		return err
	}
	if missing != nil {
		if err := archive.WriteFileAtomic(filepath.Join(dir, "missing.txt"), []byte(miss.String())); err != nil {
			return err
		}
	}
	t.Log.Info("dry run: plan written", "set", filepath.Join(dir, "set.json"), "mapping", filepath.Join(dir, "mapping.txt"))
	return nil
}

// generate writes the cluster resources for what reached the mirror, from
// the plan and the copy's result alone.
func (r *run) generate(root string) error {
	return r.generateInto(r.ws.Path(generate.Dir), root)
}

// generateInto writes them into dir.
func (r *run) generateInto(dir, root string) error {
	rep, plan := r.rep, r.plan
	done := &imageset.Set{FormatVersion: rep.Set.FormatVersion}
	done.Images = append(append(done.Images, rep.Result.Copied...), rep.Result.Skipped...)
	done.Sort()
	var notMirrored []string
	for _, b := range plan.Blocked {
		if _, layout := (imageset.AdditionalImage{Name: b}).OCILayoutPath(); !layout { // no registry to map
			notMirrored = append(notMirrored, b)
		}
	}
	for _, f := range plan.Unresolved {
		if !f.NotImage {
			notMirrored = append(notMirrored, f.Origin)
		}
	}
	for _, f := range rep.Result.Failed {
		if !f.Image.ServedAsIs() {
			notMirrored = append(notMirrored, f.Image.Origin)
		}
	}
	catalogs, err := generate.CatalogsFromSet(done, root)
	if err != nil {
		return fmt.Errorf("generating cluster resources: %w", err)
	}
	// Templates by catalog digest (the last catalog image of a digest wins),
	// as the plan carries them: never the copies keep wrote into the
	// workspace, which a later run may have replaced.
	type template struct {
		name string
		data []byte
	}
	templates := map[string]template{}
	for _, img := range done.Images {
		if img.Kind != imageset.KindOperatorCatalog {
			continue
		}
		name := sections.TemplateExtra(img.OriginalDestination())
		if data, ok := plan.File(name); ok {
			templates[img.Digest] = template{name, append([]byte{}, data...)} // never nil: a template, however empty
		} else {
			templates[img.Digest] = template{}
		}
	}
	for i := range catalogs {
		if tp, ok := templates[catalogs[i].Digest]; ok {
			catalogs[i].Template, catalogs[i].TemplatePath = tp.data, tp.name
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
	if p, err := sections.WriteChartReferences(dir, root, done); err != nil {
		return err
	} else if p != "" {
		rep.ClusterResources = append(rep.ClusterResources, p)
	}
	sort.Strings(rep.ClusterResources)
	return nil
}

func (r *run) record() error {
	rep, w := r.rep, r.ws
	if err := w.SaveFiles(r.plan.Files); err != nil {
		return fmt.Errorf("keeping the plan's files in %s: %w", w.Path("plan-files"), err)
	}
	now := r.t.now()
	rec := workspace.Run{FormatVersion: workspace.RunFormat, Mode: rep.Mode, Time: now, ToolVersion: r.t.ToolVersion, Config: r.t.ConfigPath, Pinned: r.pinned, Mirror: rep.Mirror, Plan: r.plan, Archive: rep.Archive, ArchiveID: rep.ArchiveID}
	if res := rep.Result; res != nil {
		for _, i := range res.Copied {
			rec.Copied = append(rec.Copied, i.Destination)
		}
		for _, i := range res.Skipped {
			rec.Skipped = append(rec.Skipped, i.Destination)
		}
		for _, f := range res.Failed {
			rec.Failed = append(rec.Failed, newFailureRecord(f.Image.Destination, f.Err))
		}
		rec.Bytes, rec.Blobs = res.Bytes, res.Blobs
		sort.Strings(rec.Copied)
		sort.Strings(rec.Skipped)
	}
	name := now.Format("20060102T150405.000Z") + "-" + rep.Mode + ".json"
	if err := w.Write(rec, "runs", name); err != nil {
		return err
	}
	rec.Failed = append(rec.Failed, unresolvedRecords(rep.Resolution)...)
	if len(rec.Failed) > 0 {
		rep.FailedFile = w.Path("failed", name)
		if err := w.Write(workspace.FailedFile{FormatVersion: workspace.RunFormat, Mode: rep.Mode, Run: "runs/" + name, Set: rep.Set, Failed: rec.Failed}, "failed", name); err != nil {
			return err
		}
	}
	return nil
}

// lockRun takes the locks a run needs: its workspace's (but for a dry run)
// and, when it uses the store, the store's (after the workspace's, so a
// refused run never waits). release gives back both.
func (t *Trip) lockRun(ctx context.Context, ws string, store bool) (release func(), err error) {
	var wl *workspace.Lock
	if !t.DryRun { // a dry run writes only its plan, atomically, and nothing else
		if wl, err = workspace.LockWorkspace(ws); err != nil {
			return nil, err
		}
	}
	if !store {
		return wl.Release, nil
	}
	sl, err := workspace.LockStore(ctx, t.StoreDir, t.Log)
	if err != nil {
		wl.Release()
		return nil, err
	}
	return func() { sl.Release(); wl.Release() }, nil
}

// chartsRefused turns the failures of charts a mirror refuses as OCI
// artifacts into one warning: the images still count as mirrored, the
// charts stay in working-dir/helm.
func (t *Trip) chartsRefused(rep *Report) {
	if rep.Result == nil {
		return
	}
	var kept []transfer.Failure
	var refused []string
	var answer error
	for _, f := range rep.Result.Failed {
		if f.Image.Kind == imageset.KindHelmChart && sections.ChartRefused(f.Err) {
			refused = append(refused, f.Image.Destination)
			if answer == nil {
				answer = f.Err
			}
			continue
		}
		kept = append(kept, f)
	}
	if len(refused) == 0 {
		return
	}
	rep.Result.Failed = kept
	rep.ChartsRefused = fmt.Sprintf("the mirror %s refused the helm charts as OCI artifacts (%d: %s); its answer: %v. The images are mirrored; the charts stay in %s: serve them from a chart repository, or use a registry that accepts OCI artifacts",
		rep.Mirror, len(refused), strings.Join(refused, ", "), answer, filepath.Join(rep.Workspace, workspace.HelmDir, "charts"))
	t.Log.Warn(rep.ChartsRefused)
}

// releaseSignatures returns the signatures of the release images that
// reached the mirror, from the plan alone (a plan from an older record is
// given the workspace's when it is made: see keptSignatures).
func (r *run) releaseSignatures(done *imageset.Set) (map[string][][]byte, error) {
	have, err := r.plan.Signatures()
	if err != nil {
		return nil, err
	}
	out := map[string][][]byte{}
	for _, img := range done.Images {
		if img.Kind != imageset.KindRelease {
			continue
		}
		if s, ok := have[img.Digest]; ok && len(s) > 0 {
			out[img.Digest] = s
			continue
		}
		r.t.Log.Warn("no signature for a mirrored release: clusters that verify releases will refuse to update to it", "release", img.Destination, "digest", img.Digest)
	}
	return out, nil
}

func (t *Trip) env() *sections.Env {
	return &sections.Env{Config: t.Config, ConfigPath: t.ConfigPath, Upstream: t.Upstream, Copy: t.Copy, Releases: t.Releases, ToolVersion: t.ToolVersion, Log: t.Log}
}

// mirrorRegistry is the mirror registry at root, retrying as the copy
// does (--retry-times, --retry-delay) where it asks outside the copy (the
// up-front check, existence checks of a dry run).
func (t *Trip) mirrorRegistry(root string) (*transfer.Registry, error) {
	dst, err := transfer.NewMirror(root, t.Mirror)
	if err != nil {
		return nil, err
	}
	opts := t.Copy.WithDefaults()
	dst.Retries, dst.RetryDelay = opts.Retries, opts.RetryDelay
	return dst, nil
}
