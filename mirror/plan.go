package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/failure"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/release"
	"github.com/gapmirror/gapmirror/ocistore"
	"github.com/gapmirror/gapmirror/sections"
	"github.com/gapmirror/gapmirror/sigstore"
	"github.com/gapmirror/gapmirror/transfer"
	"github.com/gapmirror/gapmirror/workspace"
)

// unresolved turns resolution failures into their record.
func unresolved(list []imageset.Unresolved) []workspace.Unresolved {
	var out []workspace.Unresolved
	for _, f := range list {
		u := workspace.Unresolved{Origin: f.Origin, Kind: f.Kind, Why: f.Why, NotImage: f.NotImage}
		if f.Err != nil {
			u.Error = failure.Message(f.Err)
		}
		out = append(out, u)
	}
	return out
}

// platformsOf reads the workspace ws's record of the platform manifests
// earlier runs found (empty on a first run, or when it cannot be read:
// the manifests are then read again).
func (t *Trip) platformsOf(ws string) workspace.PlatformsRecord {
	var rec workspace.PlatformsRecord
	if ws == "" {
		return rec
	}
	if _, err := (workspace.Workspace{Dir: ws}).Read(&rec, workspace.PlatformsFile...); err != nil {
		t.Log.Warn("reading the record of platform manifests; reading the manifests again", "error", err)
		return workspace.PlatformsRecord{}
	}
	return rec
}

// seenManifests is Registry.seen for a run whose workspace recorded known:
// the top manifests whose platform manifests earlier runs recorded for the
// signature lookup, and those in the store; nil when no earlier run
// recorded any (a first run reads each tag's manifest with one GET).
func seenManifests(known workspace.PlatformsRecord, store *ocistore.Store) func(digest.Digest) bool {
	if len(known.Platforms) == 0 {
		return nil
	}
	return func(d digest.Digest) bool {
		if _, ok := known.Platforms[d]; ok {
			return true
		}
		return store != nil && store.Has(d)
	}
}

// resolve works out the Plan of the configuration. It reads the workspace
// ws (signatures and charts earlier runs kept) but writes nothing into it:
// a dry run leaves the workspace as it was, and execution keeps the plan.
func (t *Trip) resolve(ctx context.Context, up *transfer.Registry, store *ocistore.Store, ws string) (*workspace.Plan, *imageset.Resolution, *attachLater, error) {
	if t.RetryFailed != "" {
		return nil, nil, nil, errors.New("internal: resolve called for a retry")
	}
	start := time.Now()
	opts := t.Copy.WithDefaults()
	up.Retries, up.RetryDelay = opts.Retries, opts.RetryDelay
	plan := &workspace.Plan{}
	opts.Progress.Phase("resolving", 0, transfer.Totals{})
	defer opts.Progress.Finish()
	for _, w := range t.Config.Warnings() {
		t.Log.Warn(w.Error())
	}
	quiet := ctx // for the search beside the copy, whose phases are not its own
	ctx = transfer.WithProgress(ctx, opts.Progress)
	known := t.platformsOf(ws)
	up.Seen = seenManifests(known, store)
	// Contributors resolve one after the other, pinning tags (and reading
	// payloads) twice the copy's parallelism at once (32 by default; at
	// --parallel-images, 8, the mixed workload's 100 tags took 0.6 s under
	// a 40 ms WAN). The search for what is attached to the images after
	// them reads platform manifests, then asks for signature tags and
	// referrers side by side, as many at once each: over a WAN each waits
	// a round trip, and a 429 is retried with backoff.
	set, res, err := imageset.Resolve(ctx, t.Config, imageset.ResolveOptions{Resolver: up, Parallel: 2 * opts.ParallelBlobs, Contributors: sections.Contributors(t.env(), up, store, plan, ws)})
	if err != nil {
		if strings.HasPrefix(err.Error(), t.ConfigPath+":") {
			return nil, nil, nil, err // located already: file:line: field: …
		}
		return nil, nil, nil, fmt.Errorf("%s: %w", t.ConfigPath, err)
	}
	plan.Set = set
	sigSearch := sigstore.Search{Upstream: up, Store: store, Parallel: opts.ParallelBlobs, Log: t.Log}
	if !t.RemoveSignatures || t.SecurePolicy {
		if sigSearch.RegistriesD, err = sigstore.LoadRegistriesD(up.SystemContext()); err != nil {
			return nil, nil, nil, err
		}
	}
	var later *attachLater
	if choice := t.referrerChoice(); !t.RemoveSignatures || choice.Any() {
		if t.DryRun || t.SecurePolicy {
			// A dry run counts what is attached; the policy is checked
			// before anything is copied.
			plan.Platforms = t.logAttached(sigSearch.Attach(ctx, set, known.Platforms, !t.RemoveSignatures, choice, res))
		} else {
			// The copy of the images does not wait for the answers (see
			// attachLater); the platform manifests are read first, for
			// the copy's planning pass too.
			later = &attachLater{Lookup: sigSearch.Prepare(ctx, set, known.Platforms, !t.RemoveSignatures, choice)}
		}
	}
	if t.SecurePolicy {
		if err := sigSearch.Verify(ctx, t.PolicyPath, set, res); err != nil {
			return nil, nil, nil, err
		}
	}
	for _, w := range res.Warnings {
		t.Log.Warn(w)
	}
	for _, f := range res.Failed {
		// The summary prints each cause once; the log keeps every one.
		if f.NotImage {
			t.Log.Debug("cannot use", "what", f.Origin, "why", f.Why, "error", failure.Message(f.Err))
			continue
		}
		what := "cannot resolve image"
		if errors.Is(f.Err, failure.ErrPolicyRefused) {
			what = "image refused by the signature policy"
		}
		t.Log.Debug(what, "image", f.Origin, "why", f.Why, "error", failure.Message(f.Err))
	}
	t.Log.Info("image set resolved", "images", len(set.Images)-set.Signatures()-total(set.Referrers()), "signatures", set.Signatures(), "referrers", total(set.Referrers()), "unresolved", len(res.Failed), "took", time.Since(start).Round(time.Millisecond))
	plan.Blocked, plan.Unresolved = res.Blocked, unresolved(res.Failed)
	if t.Config != nil {
		cfg, err := imageset.MarshalYAML(imageset.Redacted(t.Config))
		if err != nil {
			return nil, nil, nil, err
		}
		plan.Config = string(cfg)
		if err := t.pinPlan(plan); err != nil {
			return nil, nil, nil, fmt.Errorf("pinning the configuration: %w", err)
		}
	}
	if later != nil {
		// The answers go into a copy of the set: the copy reads the set meanwhile.
		later.set = &imageset.Set{FormatVersion: set.FormatVersion, Images: slices.Clone(set.Images)}
		later.Start(quiet)
	}
	return plan, res, later, nil
}

// referrerChoice is --referrers less the signatures --remove-signatures
// leaves out.
func (t *Trip) referrerChoice() imageset.ReferrerChoice {
	if t.RemoveSignatures {
		return t.Referrers.WithoutSignatures()
	}
	return t.Referrers
}

// plan is the Plan of a trip and the part of its Set to copy: all of it,
// or with --retry-failed the images an earlier run failed, with the plan
// that run recorded.
func (t *Trip) plan(ctx context.Context, up *transfer.Registry, store *ocistore.Store, ws string) (plan *workspace.Plan, todo *imageset.Set, res *imageset.Resolution, later *attachLater, err error) {
	if t.RetryFailed == "" {
		plan, res, later, err = t.resolve(ctx, up, store, ws)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		return plan, plan.Set, res, later, nil
	}
	var ff workspace.FailedFile
	data, err := os.ReadFile(t.RetryFailed)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("--retry-failed: %w", err)
	}
	if err := json.Unmarshal(data, &ff); err != nil || ff.Set == nil {
		return nil, nil, nil, nil, fmt.Errorf("--retry-failed %s: not a gapmirror failure file (%v)", t.RetryFailed, err)
	}
	if ff.FormatVersion > workspace.RunFormat {
		return nil, nil, nil, nil, fmt.Errorf("--retry-failed %s was written by a newer gapmirror (format %d): retry with that version", t.RetryFailed, ff.FormatVersion)
	}
	plan = &workspace.Plan{Set: ff.Set}
	fromRecord := false
	if ff.Run != "" {
		// The failure file sits in <workspace>/failed, the record it
		// names in the same workspace.
		fws := workspace.Workspace{Dir: filepath.Dir(filepath.Dir(t.RetryFailed))}
		rec, err := fws.RunRecord(ff.Run)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// The file was moved away from its workspace: the images
			// are copied, the plan's files are missing.
			t.Log.Warn("the run record of the failure file is not next to it: retrying with the image set alone, so cluster resources lack what the plan's files give (catalog templates, release signatures not in this workspace)", "file", t.RetryFailed, "record", fws.Path(ff.Run))
		case err != nil:
			return nil, nil, nil, nil, fmt.Errorf("--retry-failed %s: %w", t.RetryFailed, err)
		case rec.Plan == nil || rec.Plan.Set == nil:
			return nil, nil, nil, nil, fmt.Errorf("--retry-failed %s: the run record %s holds no plan", t.RetryFailed, fws.Path(ff.Run))
		default:
			plan, fromRecord = rec.Plan, true
		}
	}
	if !fromRecord {
		// A format-1 failure file, or one away from its record: the
		// release signatures the workspace kept become the plan's, so
		// that generate needs nothing but the plan.
		sections.KeptSignatures(plan, ws)
	}
	if plan.Config == "" && t.Config != nil {
		// An older record has no configuration: the one given with -c.
		cfg, err := imageset.MarshalYAML(imageset.Redacted(t.Config))
		if err != nil {
			return nil, nil, nil, nil, err
		}
		plan.Config = string(cfg)
	}
	failed := map[string]bool{}
	for _, f := range ff.Failed {
		failed[f.Image] = true
	}
	todo = &imageset.Set{FormatVersion: plan.Set.FormatVersion}
	for _, img := range plan.Set.Images {
		if failed[img.Destination] {
			todo.Images = append(todo.Images, img)
			delete(failed, img.Destination)
		}
	}
	res = &imageset.Resolution{Failed: stillUnresolved(ff.Failed, failed, t.RetryFailed)}
	t.Log.Info("retrying the failed images of an earlier run", "file", t.RetryFailed, "images", len(todo.Images), "cannotRetry", len(res.Failed))
	return plan, todo, res, nil, nil
}

// planFromArchive is the Plan an archive carries: its Set (less what drop
// leaves out: see Trip.leftOut), its files, and what mirror-to-disk blocked.
// Files are checked as they are read: an archive is not trusted blindly.
func planFromArchive(ar *archive.Reader, drop func(imageset.Image) bool) (*workspace.Plan, error) {
	idx := ar.Index()
	plan := &workspace.Plan{Set: without(idx.Set, drop), Config: idx.Config, Blocked: idx.Blocked}
	for _, e := range idx.Extras {
		switch {
		case e.Name == "index.json" || e.Name == "oci-layout":
			continue // the OCI layout of the blobs, not of the plan
		case strings.HasPrefix(e.Name, workspace.ReleaseSignaturesDir+"/"), strings.HasPrefix(e.Name, workspace.ReleaseGraphsDir+"/"),
			strings.HasPrefix(e.Name, "catalog-templates/"), strings.HasPrefix(e.Name, workspace.HelmDir+"/"), e.Name == workspace.PinnedExtra:
		default:
			continue // a file a newer gapmirror added: carried, not used
		}
		data, err := ar.Extra(e.Name)
		if err != nil {
			return nil, fmt.Errorf("reading %s from the archive: %w", e.Name, err)
		}
		plan.AddFile(e.Name, data)
	}
	if _, err := plan.Signatures(); err != nil {
		return nil, fmt.Errorf("archive extra %w", err)
	}
	if err := sections.CheckCharts(plan); err != nil {
		return nil, err
	}
	return plan, nil
}

// keep writes what the plan carries into the workspace, where later runs,
// delete and the admin find them: update graphs (delete resolves version
// ranges with them), release signatures (reruns verify with them), helm
// charts, CatalogSource templates, the pinned configurations and the record
// of platform manifests. It returns the helm chart files written.
func (r *run) keep() error {
	ws := r.ws.Dir
	sigs, err := r.plan.Signatures()
	if err != nil {
		return err
	}
	for _, rd := range sortedKeys(sigs) {
		if err := release.SaveSignatures(filepath.Join(ws, workspace.ReleaseSignaturesDir), rd, sigs[rd]); err != nil {
			return err
		}
	}
	var charts []string
	for _, f := range r.plan.Files {
		switch {
		case strings.HasPrefix(f.Name, workspace.ReleaseGraphsDir+"/"):
			if err := workspace.WriteFile(ws, path.Join(workspace.ReleaseGraphsDir, path.Base(f.Name)), f.Data); err != nil {
				return err
			}
		case strings.HasPrefix(f.Name, workspace.HelmDir+"/"), strings.HasPrefix(f.Name, "catalog-templates/"):
			if err := workspace.WriteFile(ws, f.Name, f.Data); err != nil {
				return err
			}
			if strings.HasPrefix(f.Name, workspace.HelmDir+"/charts/") && strings.HasSuffix(f.Name, ".tgz") {
				charts = append(charts, filepath.Join(ws, filepath.FromSlash(f.Name)))
			}
		}
	}
	r.rep.HelmCharts = charts
	r.keepPlatforms()
	// A retry's plan is its first run's, whose pinned files are written.
	if r.plan.Pinned != "" && r.t.RetryFailed == "" {
		if r.pinned, err = r.t.writePinned(ws, r.plan); err != nil {
			return fmt.Errorf("writing the pinned configuration: %w", err)
		}
		r.t.Log.Info("pinned configuration written", "path", r.pinned)
	}
	return nil
}

// keepPlatforms records the platform manifests of the plan's images, when
// the search for their signatures read them.
func (r *run) keepPlatforms() {
	if r.plan.Platforms != nil {
		if err := r.ws.Write(r.plan.Platforms, workspace.PlatformsFile...); err != nil {
			r.t.Log.Warn("recording the platform manifests of the images; the next run reads them again", "error", err)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
