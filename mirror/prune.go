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
	"time"

	"github.com/opencontainers/go-digest"

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

// deletionRecord is what the workspace keeps of a prune or delete: the
// plan worked out against the registry and, when executed, the outcome.
type deletionRecord struct {
	FormatVersion int            `json:"formatVersion"`
	Kind          string         `json:"kind"` // prune-preview, prune, delete
	Mirror        string         `json:"mirror"`
	Time          time.Time      `json:"time"`
	ToolVersion   string         `json:"toolVersion"`
	Plan          *prune.Plan    `json:"plan"`
	Outcome       *prune.Outcome `json:"outcome,omitempty"`
}

// dryRunPreview is where a dry run writes its prune preview (a real run
// without --prune writes prune/<time>-preview.json).
var dryRunPreview = []string{"dry-run", "prune-preview.json"}

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
		if err := os.Remove(w.Path(dryRunPreview...)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if why != "" {
		return nil
	}
	cands := pruneCandidates(rec.Images, rep.Set)
	keep, err := keepNames(w, dst.Root(), rep.Set)
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
		after = afterCopy(dst.Root(), rep.Set, src)
	}
	plan, err := prune.ComputeAfter(ctx, reg, dst.Root(), cands, keep, after)
	if err != nil {
		pr.Err = fmt.Errorf("working out what to prune from %s: %w", dst.Root(), hint(err))
		return nil
	}
	pr.Plan = plan
	drec := deletionRecord{FormatVersion: workspace.Format, Kind: "prune-preview", Mirror: dst.Root(), Time: t.now(), ToolVersion: t.ToolVersion, Plan: plan}
	name := drec.Time.Format("20060102T150405.000Z")
	if t.DryRun {
		pr.File = w.Path(dryRunPreview...)
		return w.Write(drec, dryRunPreview...)
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
	if err := forget(w, dst.Root(), rec, prune.Resolved(plan, out)); err != nil {
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

// afterCopy is what the copy of set into root, which a dry run skips,
// does to the registry's tags; the manifests come from src, where the copy
// would read them.
func afterCopy(root string, set *imageset.Set, src transfer.Source) *prune.After {
	a := &prune.After{Tags: map[string]digest.Digest{}}
	byTag := map[string]imageset.Image{}
	for _, img := range set.Images {
		repo, tag := prune.RepoOf(root, img.Destination)
		a.Tags[repo+":"+tag] = digest.Digest(img.Digest)
		byTag[repo+":"+tag] = img
	}
	a.Manifest = func(ctx context.Context, repoTag string, d digest.Digest) ([]byte, string, error) {
		img := byTag[repoTag]
		read, done := transfer.PlanReader(src, img)
		defer done()
		data, mt, err := read(ctx, d)
		if err != nil {
			return nil, "", err
		}
		if guessed := transfer.MediaTypeOf(data); guessed != "" {
			mt = guessed
		}
		return data, mt, nil
	}
	return a
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

// pruneCandidates are the images gapmirror pushed to the root that the
// set no longer holds under the same tag and digest.
func pruneCandidates(images []workspace.MirroredImage, set *imageset.Set) []prune.Candidate {
	inSet := map[string]string{}
	for _, img := range set.Images {
		inSet[img.Destination] = img.Digest
	}
	// The set may lack the signature of an image it keeps (the lookup
	// failed this time, or --remove-signatures): the signature stays.
	kept := map[string]bool{}
	for _, img := range set.Images {
		kept[img.DestinationRepo()+"@"+img.Digest] = true
	}
	var out []prune.Candidate
	for _, m := range images {
		if !m.Pushed {
			continue
		}
		d, ok := inSet[m.Destination]
		if ok && d == m.Digest {
			continue
		}
		if m.Kind == imageset.KindSignature && !ok {
			repo, _ := splitDest(m.Destination)
			if kept[repo+"@"+m.SignatureOf] {
				continue
			}
		}
		why := fmt.Sprintf("%s is no longer in the image set (last in it %s)", m.Destination, m.LastSeen.Format(time.RFC3339))
		if ok {
			why = fmt.Sprintf("%s now names %s; this is the image it named until %s", m.Destination, d, m.LastSeen.Format(time.RFC3339))
		}
		out = append(out, prune.Candidate{Destination: m.Destination, Digest: m.Digest, Origin: m.Origin, Kind: string(m.Kind), Why: why})
	}
	return out
}

// keepNames are the "repo:tag" names (registry host relative) that must
// stay: the set's, and those of every other mirror root of the workspace
// on the same host (nested prefixes share repositories).
func keepNames(w workspace.Workspace, root string, set *imageset.Set) (map[string]bool, error) {
	keep := map[string]bool{}
	add := func(r, dest string) {
		repo, tag := prune.RepoOf(r, dest)
		keep[repo+":"+tag] = true
	}
	if set != nil {
		for _, img := range set.Images {
			add(root, img.Destination)
		}
	}
	host, _ := prune.SplitRoot(root)
	var errs []error
	err := w.ReadAll("mirrors", func(name string) error {
		if name == workspace.LocationFile(root) {
			return nil // the root's own: its names are the set's
		}
		var r workspace.LocationRecord
		if _, err := w.Read(&r, "mirrors", name); err != nil {
			errs = append(errs, err)
			return nil
		}
		if h, _ := prune.SplitRoot(r.Mirror); h != host || r.Mirror == root {
			return nil
		}
		for _, m := range r.Images {
			add(r.Mirror, m.Destination)
		}
		return nil
	})
	return keep, errors.Join(append(errs, err)...)
}

// forget drops deleted images (keys destination@digest) from the root's
// record: r when the caller has read it already, else read here.
func forget(w workspace.Workspace, root string, r *workspace.LocationRecord, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	if r == nil {
		var err error
		if r, err = w.Location(root); err != nil {
			return err
		}
	}
	gone := map[string]bool{}
	for _, k := range keys {
		gone[k] = true
	}
	kept := r.Images[:0]
	for _, m := range r.Images {
		if !gone[m.Key()] {
			kept = append(kept, m)
		}
	}
	r.Images = kept
	return w.SaveLocation(r)
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
		PrintPlan(w, p.Plan)
	} else {
		printKept(w, p.Plan)
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

// PrintPlan prints a plan's deletes, what it keeps and why.
func PrintPlan(w io.Writer, p *prune.Plan) {
	for _, a := range p.Actions {
		fmt.Fprintf(w, "  %s\n", a)
	}
	printKept(w, p)
}

func printKept(w io.Writer, p *prune.Plan) {
	for _, k := range p.Kept {
		fmt.Fprintf(w, "  keep            %s@%s: %s\n", k.Image, k.Digest, k.Why)
	}
	for _, g := range p.Gone {
		fmt.Fprintf(w, "  already gone    %s\n", g)
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

// hint adds what to do about a registry error met while planning deletes
// (failure.Explain does the same for transfers).
func hint(err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such host") || strings.Contains(msg, "i/o timeout"):
		return fmt.Errorf("%w (the registry is unreachable: check the host name, port and network)", err)
	case strings.Contains(msg, "x509:") || strings.Contains(msg, "certificate"):
		return fmt.Errorf("%w (the registry's TLS certificate is not trusted: add its CA with --dest-cert-dir or /etc/containers/certs.d, or pass --dest-tls-verify=false)", err)
	case strings.Contains(msg, "server gave HTTP response to HTTPS client"):
		return fmt.Errorf("%w (the registry speaks plain HTTP: pass --dest-tls-verify=false)", err)
	case strings.Contains(msg, " 401") || strings.Contains(msg, " 403") || strings.Contains(msg, "DENIED") || strings.Contains(msg, "UNAUTHORIZED"):
		return fmt.Errorf("%w (check the credentials for this registry in --authfile and that they may list tags and delete)", err)
	}
	return err
}
