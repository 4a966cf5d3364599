package mirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/prune"
	"github.com/gapmirror/gapmirror/registryapi"
	"github.com/gapmirror/gapmirror/transfer"
	"github.com/gapmirror/gapmirror/workspace"
)

// remember adds what a copy pushed and found at the root to r, the root's
// record, and saves it right after the copy, so that even a run that fails
// later keeps track of what it pushed.
func (t *Trip) remember(w workspace.Workspace, r *workspace.LocationRecord, res *transfer.Result) error {
	root := r.Mirror
	if len(r.Images) > 0 && r.MaxNestedPaths != t.MaxNestedPaths {
		// The record holds the names images were pushed under, so prune
		// still compares like with like; it only has more to delete.
		t.Log.Warn("--max-nested-paths differs from the earlier runs to this mirror: images now go to other repositories; the earlier ones stay until a run with --prune deletes them",
			"mirror", root, "before", r.MaxNestedPaths, "now", t.MaxNestedPaths)
	}
	r.MaxNestedPaths = t.MaxNestedPaths
	now := t.now()
	at := map[string]int{}
	for i, m := range r.Images {
		at[m.Key()] = i
	}
	note := func(img imageset.Image, pushed bool) {
		k := img.Destination + "@" + img.Digest
		if i, ok := at[k]; ok {
			m := &r.Images[i]
			m.LastSeen, m.Kind, m.Origin, m.Unflattened, m.SignatureOf = now, img.Kind, img.Origin, img.Unflattened, img.SignatureOf
			// Copied or found complete for img's platforms, on top of what was there.
			m.Platforms = imageset.MergePlatforms(m.Platforms, img.Platforms)
			// --force re-pushes what was there: that does not make
			// someone else's image ours.
			if pushed && !t.Copy.Force {
				m.Pushed = true
			}
			return
		}
		at[k] = len(r.Images)
		r.Images = append(r.Images, workspace.MirroredImage{Destination: img.Destination, Unflattened: img.Unflattened, Digest: img.Digest, Kind: img.Kind, Origin: img.Origin, SignatureOf: img.SignatureOf, Pushed: pushed, FirstSeen: now, LastSeen: now, Platforms: img.Platforms})
	}
	for _, img := range res.Copied {
		note(img, true)
	}
	for _, img := range res.Skipped {
		note(img, false)
	}
	return w.SaveLocation(r)
}

// PruneReport is what the prune step of a run did or would do.
type PruneReport struct {
	Executed bool
	Plan     *prune.Plan
	Outcome  *prune.Outcome
	File     string
	// Skipped says why the run did not work out a prune plan.
	Skipped string
	// Err is why pruning failed (the copy itself went fine).
	Err error
}

// pruneMirror runs after a copy into the mirror (and remember): when the
// run mirrored the whole image set, it works out what
// earlier runs pushed that the set no longer holds, then deletes it
// (--prune) or lists it. rec is the root's record as remember left it.
//
// A dry run (src is where its skipped copy would read the images) works
// the plan out as the registry will be after that copy, so that its
// preview lists what the real run deletes.
func (t *Trip) pruneMirror(ctx context.Context, w workspace.Workspace, dst *transfer.Registry, rep *Report, rec *workspace.LocationRecord, src transfer.Source) error {
	why := ""
	switch {
	case t.RetryFailed != "":
		why = "a --retry-failed run copies part of the image set; run a full mirror to prune"
	case rep.Result != nil && len(rep.Result.Failed) > 0 || len(rep.Resolution.Failed) > 0:
		why = "some images failed, so the image set was not mirrored completely"
	case len(rep.LeftOut) > 0:
		why = fmt.Sprintf("the archive is partial: mirror-to-disk left out %d images that failed there", len(rep.LeftOut))
	case ctx.Err() != nil:
		why = "the run was interrupted"
	}
	pr := &PruneReport{Executed: t.Prune && !t.DryRun, Skipped: why}
	rep.Prune = pr
	if t.DryRun {
		// A dry run's preview goes with its plan into dry-run/, the one
		// place a dry run writes: an earlier dry run's is not left to be
		// taken for this one's.
		if err := os.Remove(w.Path(prune.DryRunPreview...)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if why != "" {
		return nil
	}
	cands := prune.Candidates(rec.Images, rep.Set)
	keep, err := prune.KeepNames(w, dst.Root(), rep.Set)
	if err != nil {
		return err
	}
	if len(cands) == 0 {
		pr.Plan = &prune.Plan{Mirror: dst.Root()}
		return nil
	}
	reg, err := registryapi.NewClient(strings.SplitN(dst.Root(), "/", 2)[0], t.Mirror.SystemContext())
	if err != nil {
		pr.Err = err
		return nil
	}
	var after *prune.After
	if t.DryRun && src != nil {
		after = prune.AfterCopy(dst.Root(), rep.Set, src)
	}
	plan, err := prune.ComputeAfter(ctx, reg, dst.Root(), cands, keep, after)
	if err != nil {
		pr.Err = fmt.Errorf("working out what to prune from %s: %w", dst.Root(), prune.Hint(err))
		return nil
	}
	pr.Plan = plan
	drec := prune.DeletionRecord{FormatVersion: workspace.Format, Kind: "prune-preview", Mirror: dst.Root(), Time: t.now(), ToolVersion: t.ToolVersion, Plan: plan}
	name := drec.Time.Format("20060102T150405.000Z")
	if t.DryRun {
		pr.File = w.Path(prune.DryRunPreview...)
		return w.Write(drec, prune.DryRunPreview...)
	}
	if !pr.Executed {
		pr.File = w.Path("prune", name+"-preview.json")
		return w.Write(drec, "prune", name+"-preview.json")
	}
	t.Log.Info("pruning", "mirror", dst.Root(), "deletes", len(plan.Actions))
	out, xerr := prune.Execute(ctx, reg, plan, t.Out)
	pr.Outcome = out
	drec.Kind, drec.Outcome = "prune", out
	pr.File = w.Path("prune", name+"-pruned.json")
	if err := w.Write(drec, "prune", name+"-pruned.json"); err != nil {
		return errors.Join(xerr, err)
	}
	if err := prune.Forget(w, dst.Root(), rec, prune.Resolved(plan, out)); err != nil {
		return errors.Join(xerr, err)
	}
	switch {
	case xerr != nil:
		pr.Err = xerr
	case len(out.Failed) > 0:
		pr.Err = fmt.Errorf("pruning %s: %d of %d deletes failed (listed above and in %s); run again with --prune to retry them", dst.Root(), len(out.Failed), len(plan.Actions), pr.File)
	}
	return nil
}

// pruneErr is why a requested prune did not happen or failed; nil when
// --prune was not given (a preview problem is only a warning).
func (r *Report) pruneErr() error {
	p := r.Prune
	switch {
	case p == nil || !p.Executed:
		return nil
	case p.Skipped != "":
		return fmt.Errorf("not pruning (--prune): %s; nothing was deleted", p.Skipped)
	default:
		return p.Err
	}
}

// printPrune prints the prune step's preview or summary.
func (r *Report) printPrune(w io.Writer) {
	p := r.Prune
	if p == nil {
		return
	}
	if p.Skipped != "" {
		fmt.Fprintf(w, "prune: skipped, nothing deleted: %s\n", p.Skipped)
		return
	}
	if p.Err != nil && p.Plan == nil {
		fmt.Fprintf(w, "prune: could not work out what to delete: %v\n", p.Err)
		return
	}
	if p.Plan == nil || len(p.Plan.Actions) == 0 && len(p.Plan.Kept) == 0 && len(p.Plan.Gone) == 0 {
		fmt.Fprintf(w, "prune: nothing to delete: every image this workspace pushed to the mirror is in the image set\n")
		return
	}
	if !p.Executed {
		prune.PrintPlan(w, p.Plan)
	} else {
		prune.PrintKept(w, p.Plan)
	}
	switch {
	case !p.Executed:
		fmt.Fprintf(w, "prune preview: %d deletes listed above (and in %s); nothing was deleted: run with --prune (and without --dry-run) to delete them\n", len(p.Plan.Actions), p.File)
	case p.Outcome != nil:
		fmt.Fprintf(w, "prune: %d of %d deletes done, %d failed; record in %s\n", len(p.Outcome.Done), len(p.Plan.Actions), len(p.Outcome.Failed), p.File)
		for _, f := range p.Outcome.Failed {
			fmt.Fprintf(w, "FAILED %s: %s\n", f.Action, f.Error)
		}
		fmt.Fprintf(w, "the registry frees the space of deleted manifests' layers only when its garbage collection runs (gapmirror serve: stop it and run gapmirror serve gc --root DIR; distribution: registry garbage-collect --delete-untagged)\n")
	}
}

// leftOut names what a mirror-to-disk run could not carry: images that
// failed, and what its plan could not resolve (a retry's plan keeps its
// first run's, so its archive is not taken for complete).
func leftOut(res *transfer.Result, plan *workspace.Plan) []string {
	var out []string
	if res != nil {
		for _, f := range res.Failed {
			out = append(out, f.Image.Destination)
		}
	}
	for _, f := range plan.Unresolved {
		out = append(out, f.Origin)
	}
	sort.Strings(out)
	return out
}
