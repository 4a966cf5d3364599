package prune

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/distribution/reference"
	"sigs.k8s.io/yaml"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/release"
	"github.com/gapmirror/gapmirror/registryapi"
	"github.com/gapmirror/gapmirror/sections"
	"github.com/gapmirror/gapmirror/transfer"
	"github.com/gapmirror/gapmirror/workspace"
)

// deleteListKind is the kind of a delete plan file (oc-mirror's name).
const deleteListKind = "DeleteImageList"

// DeleteList is the plan `delete --generate` writes and
// `delete --delete-yaml-file` executes: oc-mirror's delete-images.yaml
// (apiVersion, kind, items with imageName, imageReference, type) plus the
// mirror, the workspace and the deletes worked out against the registry.
type DeleteList struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Mirror is the mirror root the plan was made for.
	Mirror string `json:"mirror"`
	// Workspace is the working-dir whose records the plan came from; the
	// execution updates them.
	Workspace string       `json:"workspace"`
	Config    string       `json:"config,omitempty"`
	Generated time.Time    `json:"generated"`
	Items     []DeleteItem `json:"items"`
	Actions   []Action     `json:"actions"`
	Kept      []Kept       `json:"kept,omitempty"`
	Gone      []string     `json:"gone,omitempty"`
}

// DeleteItem is one image to delete.
type DeleteItem struct {
	// ImageName is the image as the configuration named it (its origin).
	ImageName string `json:"imageName"`
	// ImageReference is where it is at the mirror.
	ImageReference string `json:"imageReference"`
	Type           string `json:"type"`
	Digest         string `json:"digest"`
	// Why is the delete configuration entry that selected it.
	Why string `json:"why"`
}

// Delete generates and executes delete plans for a mirror registry.
type Delete struct {
	Mirror transfer.RegistryOptions
	// StoreDir is the local store, where catalogs mirrored from this
	// machine already are; others are read from the mirror into it.
	StoreDir    string
	Out         io.Writer
	ToolVersion string
	Now         func() time.Time
	// MaxNestedPaths, when set, is the --max-nested-paths the user says the
	// images were mirrored with; it must match the workspace's record.
	MaxNestedPaths *int
	// DeleteSignatures adds to the plan the recorded sigstore signatures of
	// the images it deletes (oc-mirror's --delete-signatures).
	DeleteSignatures bool
	// Log gets each planned, done, failed and skipped delete at debug
	// level (the run's log file keeps them); nil: none.
	Log *slog.Logger
}

func (d *Delete) log() *slog.Logger {
	if d.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return d.Log
}

func (d *Delete) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now().UTC()
}

// normalRoot validates and normalises a mirror root as the trips do.
func normalRoot(root string) (string, error) {
	r, err := transfer.NewMirror(root, transfer.RegistryOptions{})
	if err != nil {
		return "", err
	}
	return r.Root(), nil
}

// Generate resolves the delete configuration against what this workspace
// recorded pushing to root, works out the deletes against the registry and
// writes the plan to <ws>/delete/delete-images[-id].yaml.
func (d *Delete) Generate(ctx context.Context, cfg *imageset.DeleteImageSetConfiguration, cfgPath, dir, root, id string) (string, *DeleteList, error) {
	root, err := normalRoot(root)
	if err != nil {
		return "", nil, err
	}
	ws := filepath.Join(dir, workspace.WorkingDir)
	if filepath.Base(dir) == workspace.WorkingDir {
		ws = dir
	}
	lock, err := workspace.LockWorkspace(ws)
	if err != nil {
		return "", nil, err
	}
	defer lock.Release()
	w := workspace.Workspace{Dir: ws}
	rec, err := w.Location(root)
	if err != nil {
		return "", nil, err
	}
	if len(rec.Images) == 0 {
		return "", nil, fmt.Errorf("the workspace %s has no record of mirroring anything to %s%s: gapmirror deletes only what it pushed; check the destination (and its prefix) and --workspace", ws, root, knownRoots(w))
	}
	if n := d.MaxNestedPaths; n != nil && *n != rec.MaxNestedPaths {
		return "", nil, fmt.Errorf("--max-nested-paths %d: the latest run of workspace %s to %s used %d; the records hold the names images were pushed under, so leave the flag out or pass %d", *n, ws, root, rec.MaxNestedPaths, rec.MaxNestedPaths)
	}
	// The latest run's Set, read from runs/ once and only when helm entries
	// or picked images need it.
	var (
		set     *imageset.Set
		setErr  error
		setRead bool
	)
	latest := func() (*imageset.Set, error) {
		if !setRead {
			set, setErr = LatestSet(w, root, rec.Images)
			setRead = true
		}
		return set, setErr
	}
	sel := &selection{}
	isBlocked, serrs := blockedRules(cfg.Delete.BlockedImages, cfgPath)
	serrs = append(serrs, d.operatorImages(ctx, sel, cfg.Delete.Operators, cfgPath, root, rec.Images)...)
	serrs = append(serrs, helmImages(sel, cfg.Delete.Helm, cfgPath, root, w, rec.Images, latest)...)
	serrs = append(serrs, additionalImages(sel, cfg.Delete.AdditionalImages, cfgPath, root, rec.Images, isBlocked)...)
	if len(serrs) == 0 {
		if err := sel.settle(latest); err != nil {
			return "", nil, err
		}
	}
	items, err := resolveDelete(cfg, cfgPath, w.Path(workspace.ReleaseGraphsDir), root, rec.Images, sel, serrs, isBlocked)
	if err != nil {
		return "", nil, err
	}
	items, sigsLeft := signatureItems(items, rec.Images, root, d.DeleteSignatures)
	cands := deleteCandidates(items, root)
	keep, err := KeepNames(w, root, nil)
	if err != nil {
		return "", nil, err
	}
	reg, err := registryapi.NewClient(strings.SplitN(root, "/", 2)[0], d.Mirror.SystemContext())
	if err != nil {
		return "", nil, err
	}
	plan, err := compute(ctx, reg, root, cands, keep)
	if err != nil {
		return "", nil, fmt.Errorf("working out the deletes at %s: %w", root, Hint(err))
	}
	if len(sel.kept) > 0 {
		// Kept before the registry was asked: content that stays uses them.
		plan.Kept = append(sel.kept, plan.Kept...)
	}
	abs, _ := filepath.Abs(cfgPath)
	list := &DeleteList{APIVersion: imageset.APIVersion, Kind: deleteListKind, Mirror: root, Workspace: ws, Config: abs,
		Generated: d.now(), Items: items, Actions: plan.Actions, Kept: plan.Kept, Gone: plan.Gone}
	data, err := yaml.Marshal(list)
	if err != nil {
		return "", nil, err
	}
	suffix := ""
	if id != "" {
		suffix = "-" + id
	}
	path := w.Path("delete", "delete-images"+suffix+".yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", nil, err
	}
	if err := archive.WriteFileAtomic(path, data); err != nil {
		return "", nil, err
	}
	// Keep the configuration next to the plan, as oc-mirror does.
	if src, err := os.ReadFile(cfgPath); err == nil {
		if err := archive.WriteFileAtomic(w.Path("delete", "delete-imageset-config"+suffix+".yaml"), src); err != nil {
			return "", nil, err
		}
	}
	for _, a := range plan.Actions {
		d.log().Debug("delete planned", "action", a.String())
	}
	for _, k := range plan.Kept {
		d.log().Debug("kept", "image", k.Image+"@"+k.Digest, "why", k.Why)
	}
	d.log().Info("delete plan written", "path", path, "mirror", root, "images", len(items), "deletes", len(plan.Actions), "kept", len(plan.Kept))
	PrintPlan(d.Out, plan)
	for _, n := range sel.notes {
		fmt.Fprintf(d.Out, "note: %s\n", n)
	}
	if sigsLeft > 0 {
		fmt.Fprintf(d.Out, "%d sigstore signatures of these images stay at the mirror: generate the plan again with --delete-signatures to delete them too\n", sigsLeft)
	}
	sigs, refs := 0, 0
	for _, it := range items {
		switch it.Type {
		case string(imageset.KindSignature):
			sigs++
		case string(imageset.KindReferrer):
			refs++
		}
	}
	what := fmt.Sprintf("%d images", len(items)-sigs-refs)
	if sigs > 0 {
		what += fmt.Sprintf(" and %d signatures", sigs)
	}
	if refs > 0 {
		what += fmt.Sprintf(" and %d referrers", refs)
	}
	fmt.Fprintf(d.Out, "delete plan: %s, %d deletes at %s, written to %s; nothing was deleted: review it, then run\n  gapmirror delete --delete-yaml-file %s docker://%s\n", what, len(plan.Actions), root, path, path, root)
	return path, list, nil
}

// deleteCandidates turns the plan's items into prune candidates, named
// relative to the registry host of root.
func deleteCandidates(items []DeleteItem, root string) []Candidate {
	cands := make([]Candidate, 0, len(items))
	for _, it := range items {
		cands = append(cands, Candidate{Destination: strings.TrimPrefix(it.ImageReference, "docker://"+root+"/"), Digest: it.Digest, Origin: it.ImageName, Kind: it.Type, Why: it.Why})
	}
	return cands
}

// knownRoots lists the mirror roots the workspace has records of, for errors.
func knownRoots(w workspace.Workspace) string {
	var roots []string
	_ = w.ReadAll("mirrors", func(name string) error {
		var r workspace.LocationRecord
		if ok, err := w.Read(&r, "mirrors", name); ok && err == nil && len(r.Images) > 0 {
			roots = append(roots, r.Mirror)
		}
		return nil
	})
	if len(roots) == 0 {
		return " (it has no mirror records at all)"
	}
	sort.Strings(roots)
	return " (it has records for: " + strings.Join(roots, ", ") + ")"
}

// blockedRules compiles delete.blockedImages: isBlocked reports whether
// any of the names given matches one.
func blockedRules(rules []imageset.BlockedImage, cfgPath string) (isBlocked func(...string) bool, errs []error) {
	var blocked []*regexp.Regexp
	for i, b := range rules {
		re, err := regexp.Compile(b.Name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: delete.blockedImages[%d].name: %q is not a valid regular expression: %w", cfgPath, i, b.Name, err))
			continue
		}
		blocked = append(blocked, re)
	}
	return func(s ...string) bool {
		for _, re := range blocked {
			for _, x := range s {
				if re.MatchString(x) {
					return true
				}
			}
		}
		return false
	}, errs
}

// additionalImages resolves delete.additionalImages against what this
// workspace pushed to root, adding what they name to sel: the image set's
// additionalImages reasons go with them, but an image another section
// (a bundle, a release, a chart) still needs is kept (settle). Every entry
// must match something this workspace pushed there.
func additionalImages(sel *selection, ais []imageset.AdditionalImage, cfgPath, root string, images []workspace.MirroredImage, isBlocked func(...string) bool) []error {
	var errs []error
	for i, ai := range ais {
		path := fmt.Sprintf("delete.additionalImages[%d]", i)
		if len(ai.Platforms) > 0 {
			errs = append(errs, fmt.Errorf("%s: %s.platforms: deleting some platforms of an image is not supported; remove the field to delete the whole image", cfgPath, path))
			continue
		}
		repo, dig, tag, err := sections.LayoutTarget(ai)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s.name: %w", cfgPath, path, err))
			continue
		}
		if ai.TargetTag != "" {
			tag = ai.TargetTag
		}
		var found, foreign, blockedN int
		for _, m := range images {
			mrepo, mtag := splitDest(m.SetName())
			if mrepo != repo || (tag != "" && mtag != tag) || (dig != "" && m.Digest != dig) {
				continue
			}
			if !m.Pushed {
				foreign++
				continue
			}
			if isBlocked(m.Origin, m.Destination, m.SetName()) {
				blockedN++
				continue
			}
			found++
			sel.named(m)
			sel.picked = append(sel.picked, matchedImage{m, path})
		}
		switch {
		case found > 0, blockedN > 0:
		case foreign > 0:
			errs = append(errs, fmt.Errorf("%s: %s: %s is at %s/%s but this workspace did not push it there (it was already present), so gapmirror will not delete it", cfgPath, path, ai.Name, root, repo))
		default:
			errs = append(errs, fmt.Errorf("%s: %s: %s was not mirrored to %s by this workspace (looked for %s%s in its records): check the name, targetRepo and targetTag, or whether it was deleted already", cfgPath, path, ai.Name, root, repo, tagOrDigest(tag, dig)))
		}
	}
	return errs
}

// resolveDelete turns the delete configuration into the recorded images it
// names: delete.platform's, and those sel settled on (operators, helm,
// additional images). Every entry must match something this workspace
// pushed to root.
func resolveDelete(cfg *imageset.DeleteImageSetConfiguration, cfgPath, graphDir, root string, images []workspace.MirroredImage, sel *selection, serrs []error, isBlocked func(...string) bool) ([]DeleteItem, error) {
	del := cfg.Delete
	errs := serrs
	if len(del.Samples) > 0 {
		errs = append(errs, fmt.Errorf("%s: delete.samples: deleting by this section is not supported by this version of gapmirror yet (nothing was planned); list the images under delete.additionalImages, or drop them from the ImageSetConfiguration and run `gapmirror mirror --prune`", cfgPath))
	}
	platform, perrs := platformImages(del.Platform, cfgPath, graphDir, images)
	errs = append(errs, perrs...)
	platform = append(platform, sel.images...)
	seen := map[string]bool{}
	var items []DeleteItem
	for _, p := range platform {
		if isBlocked(p.img.Origin, p.img.Destination, p.img.SetName()) || seen[p.img.Key()] {
			continue
		}
		seen[p.img.Key()] = true
		items = append(items, DeleteItem{ImageName: p.img.Origin, ImageReference: "docker://" + root + "/" + p.img.Destination, Type: string(p.img.Kind), Digest: p.img.Digest, Why: p.why})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(items) == 0 {
		if len(sel.kept) > 0 {
			return nil, fmt.Errorf("%s: nothing to delete: the %d images the delete section selects are all still used by content that stays mirrored (e.g. %s: %s)", cfgPath, len(sel.kept), sel.kept[0].Image, sel.kept[0].Why)
		}
		return nil, fmt.Errorf("%s: the delete section names no images to delete", cfgPath)
	}
	sort.Slice(items, func(a, b int) bool {
		return items[a].ImageReference+items[a].Digest < items[b].ImageReference+items[b].Digest
	})
	return items, nil
}

// signatureItems adds to items the referrers this workspace pushed for
// them (same destination repository, of the item's digest, one of its
// platform manifests, or one of those referrers), and the signatures when
// withSigs, else counts them.
func signatureItems(items []DeleteItem, images []workspace.MirroredImage, root string, withSigs bool) ([]DeleteItem, int) {
	deleted := map[string]string{} // repo@digest → why
	seen := map[string]bool{}
	for _, it := range items {
		repo, _ := splitDest(strings.TrimPrefix(it.ImageReference, "docker://"+root+"/"))
		deleted[repo+"@"+it.Digest] = it.Why
		seen[it.ImageReference+"@"+it.Digest] = true
	}
	left := 0
	for _, m := range images {
		if !m.Kind.Attached() || !m.Pushed {
			continue
		}
		repo, _ := splitDest(m.Destination)
		why, ok := deleted[repo+"@"+m.SignatureOf]
		ref := "docker://" + root + "/" + m.Destination
		if !ok || seen[ref+"@"+m.Digest] {
			continue
		}
		seen[ref+"@"+m.Digest] = true
		if m.Kind == imageset.KindReferrer {
			// Attached to the deleted image: useless without it.
			items = append(items, DeleteItem{ImageName: m.Origin, ImageReference: ref, Type: string(m.Kind), Digest: m.Digest, Why: why + " (its referrer)"})
			continue
		}
		if !withSigs {
			left++
			continue
		}
		items = append(items, DeleteItem{ImageName: m.Origin, ImageReference: ref, Type: string(m.Kind), Digest: m.Digest, Why: why + " (--delete-signatures)"})
	}
	sort.Slice(items, func(a, b int) bool {
		return items[a].ImageReference+items[a].Digest < items[b].ImageReference+items[b].Digest
	})
	return items, left
}

func tagOrDigest(tag, dig string) string {
	s := ""
	if tag != "" {
		s += ":" + tag
	}
	if dig != "" {
		s += "@" + dig
	}
	return s
}

func splitDest(dest string) (repo, tag string) {
	i := imageset.Image{Destination: dest}
	return i.DestinationRepo(), i.DestinationTag()
}

// LoadDeleteList reads a delete plan file strictly.
func LoadDeleteList(path string) (*DeleteList, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--delete-yaml-file: %w (generate one with `gapmirror delete -c DISC --generate --workspace file://WS docker://MIRROR`)", err)
	}
	var l DeleteList
	if err := yaml.UnmarshalStrict(data, &l); err != nil {
		return nil, fmt.Errorf("--delete-yaml-file %s: not a gapmirror delete plan: %w", path, err)
	}
	if l.Kind != deleteListKind || l.Mirror == "" || l.Workspace == "" {
		return nil, fmt.Errorf("--delete-yaml-file %s: not a gapmirror delete plan (want kind %s with mirror and workspace; oc-mirror's own delete-images.yaml cannot be used: generate the plan with gapmirror delete --generate)", path, deleteListKind)
	}
	return &l, nil
}

// DeleteReport is what executing a delete plan did.
type DeleteReport struct {
	Plan    *Plan
	Outcome *Outcome
	DryRun  bool
	File    string
}

// Execute carries out a delete plan at root. The deletes are worked out
// again against the registry as it is now; only those the reviewed plan
// lists and that are still safe are done.
func (d *Delete) Execute(ctx context.Context, planPath, root string, dryRun bool) (*DeleteReport, error) {
	l, err := LoadDeleteList(planPath)
	if err != nil {
		return nil, err
	}
	root, err = normalRoot(root)
	if err != nil {
		return nil, err
	}
	if root != l.Mirror {
		return nil, fmt.Errorf("%s is a plan for docker://%s, not docker://%s: pass the destination it was generated for, or generate a plan for this one", planPath, l.Mirror, root)
	}
	if fi, err := os.Stat(l.Workspace); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%s was generated from the workspace %s, which is not there any more: its records must be updated with what gets deleted; restore it, or generate the plan again from where the workspace is now", planPath, l.Workspace)
	}
	if !dryRun {
		lock, err := workspace.LockWorkspace(l.Workspace)
		if err != nil {
			return nil, err
		}
		defer lock.Release()
	}
	w := workspace.Workspace{Dir: l.Workspace}
	cands := deleteCandidates(l.Items, root)
	// An image a mirror run since the plan was generated still had in its
	// image set may be needed again (a bundle or chart now uses it): it is
	// not deleted on the plan's word.
	rec, err := w.Location(root)
	if err != nil {
		return nil, err
	}
	held := map[string]string{}
	for _, m := range rec.Images {
		if m.LastSeen.After(l.Generated) {
			held[m.Key()] = fmt.Sprintf("%s@%s was in the image set of a mirror run into %s at %s, after the plan was generated (%s); generate the plan again", m.Destination, m.Digest, root, m.LastSeen.Format("2006-01-02T15:04:05.000Z07:00"), l.Generated.Format("2006-01-02T15:04:05.000Z07:00"))
		}
	}
	if len(held) > 0 {
		kept := cands[:0:0]
		for _, c := range cands {
			if _, ok := held[c.Key()]; !ok {
				kept = append(kept, c)
			}
		}
		cands = kept
	}
	keep, err := KeepNames(w, root, nil)
	if err != nil {
		return nil, err
	}
	reg, err := registryapi.NewClient(strings.SplitN(root, "/", 2)[0], d.Mirror.SystemContext())
	if err != nil {
		return nil, err
	}
	now, err := compute(ctx, reg, root, cands, keep)
	if err != nil {
		return nil, fmt.Errorf("checking the plan against %s: %w", root, Hint(err))
	}
	// Do what the reviewed plan says and the registry still allows.
	current := map[string]Action{}
	for _, a := range now.Actions {
		current[a.Key()] = a
	}
	reviewed := map[string]bool{}
	run := &Plan{Mirror: root, Candidates: cands, Kept: now.Kept, Gone: now.Gone}
	var skipped []FailedAction
	for _, a := range l.Actions {
		reviewed[a.Key()] = true
		if c, ok := current[a.Key()]; ok {
			run.Actions = append(run.Actions, c)
			continue
		}
		why := "no longer safe or needed: the registry changed since the plan was generated (a tag moved, something new references the manifest, or it is gone); generate the plan again"
		for _, k := range a.For {
			if h, ok := held[k]; ok {
				why = "not safe any more: " + h
				break
			}
		}
		skipped = append(skipped, FailedAction{Action: a, Error: why})
	}
	for _, a := range now.Actions {
		if !reviewed[a.Key()] {
			skipped = append(skipped, FailedAction{Action: a, Error: "not in the reviewed plan: the registry changed since it was generated; generate the plan again to review it"})
		}
	}
	rep := &DeleteReport{Plan: run, DryRun: dryRun}
	if dryRun {
		for _, a := range run.Actions {
			d.log().Debug("would delete", "action", a.String())
		}
		for _, s := range skipped {
			d.log().Debug("would skip", "action", s.Action.String(), "why", s.Error)
		}
		PrintPlan(d.Out, run)
		for _, s := range skipped {
			fmt.Fprintf(d.Out, "  skip            %s: %s\n", s.Action, s.Error)
		}
		fmt.Fprintf(d.Out, "delete (dry run): %d deletes at %s would be done, %d skipped; nothing was deleted\n", len(run.Actions), root, len(skipped))
		return rep, nil
	}
	out, xerr := Execute(ctx, reg, run, d.Out)
	out.Skipped = append(out.Skipped, skipped...)
	rep.Outcome = out
	for _, a := range out.Done {
		d.log().Debug("deleted", "action", a.String())
	}
	for _, f := range out.Failed {
		d.log().Debug("delete failed", "action", f.Action.String(), "error", f.Error)
	}
	for _, s := range out.Skipped {
		d.log().Debug("delete skipped", "action", s.Action.String(), "why", s.Error)
	}
	d.log().Info("deletes done", "mirror", root, "plan", planPath, "done", len(out.Done), "failed", len(out.Failed), "skipped", len(out.Skipped))
	drec := DeletionRecord{FormatVersion: workspace.Format, Kind: "delete", Mirror: root, Time: d.now(), ToolVersion: d.ToolVersion, Plan: run, Outcome: out}
	rep.File = w.Path("delete", drec.Time.Format("20060102T150405.000Z")+"-deleted.json")
	if err := w.Write(drec, "delete", filepath.Base(rep.File)); err != nil {
		return rep, errors.Join(xerr, err)
	}
	if err := Forget(w, root, nil, Resolved(run, out)); err != nil {
		return rep, errors.Join(xerr, err)
	}
	PrintKept(d.Out, run)
	for _, s := range out.Skipped {
		fmt.Fprintf(d.Out, "SKIPPED %s: %s\n", s.Action, s.Error)
	}
	for _, f := range out.Failed {
		fmt.Fprintf(d.Out, "FAILED %s: %s\n", f.Action, f.Error)
	}
	fmt.Fprintf(d.Out, "delete: %d of %d deletes done at %s, %d failed, %d skipped; record in %s\n", len(out.Done), len(l.Actions), root, len(out.Failed), len(out.Skipped), rep.File)
	if len(out.Done) > 0 {
		fmt.Fprintf(d.Out, "the registry frees the space of deleted manifests' layers only when its garbage collection runs (gapmirror serve: stop it and run gapmirror serve gc --root DIR; distribution: registry garbage-collect --delete-untagged)\n")
	}
	switch {
	case xerr != nil:
		return rep, xerr
	case len(out.Failed) > 0:
		return rep, fmt.Errorf("%d deletes failed at %s (listed above and in %s)", len(out.Failed), root, rep.File)
	case len(skipped) > 0:
		return rep, fmt.Errorf("%d deletes of the plan were skipped because the registry changed since %s was generated (listed above); generate it again", len(skipped), planPath)
	}
	return rep, nil
}

type matchedImage struct {
	img workspace.MirroredImage
	why string
}

// platformImages matches delete.platform against the recorded release
// images by oc-mirror's destination layout: release images at
// openshift/release-images:<version>-<arch>, their components (and KubeVirt
// disk) at openshift/release:<version>-<arch>-<name>, the graph image.
// Releases pinned with minVersion = maxVersion are matched directly; other
// channel selections are resolved with the update graphs the workspace
// saved when it mirrored (graphDir), never the update service.
func platformImages(pl imageset.Platform, cfgPath, graphDir string, images []workspace.MirroredImage) ([]matchedImage, []error) {
	var out []matchedImage
	var errs []error
	arches := pl.Architectures
	if len(pl.Platforms) > 0 {
		arches = []string{release.ArchMulti}
	}
	if len(arches) == 0 {
		arches = []string{release.DefaultArch}
	}
	// byTag adds the release image tagged tag and its components.
	byTag := func(tag, path string) bool {
		found := false
		for _, m := range images {
			if !m.Pushed {
				continue
			}
			repo, mtag := splitDest(m.SetName())
			switch {
			case m.Kind == imageset.KindRelease && repo == release.ReleaseImageRepository && mtag == tag,
				m.Kind == imageset.KindReleaseComponent && repo == release.ComponentRepository && strings.HasPrefix(mtag, tag+"-"):
				out = append(out, matchedImage{m, path + " (release " + tag + ")"})
				found = true
			}
		}
		return found
	}
	if pl.Release != "" {
		path := "delete.platform.release"
		named, err := reference.ParseNormalizedNamed(pl.Release)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %q is not an image reference: %w", cfgPath, path, pl.Release, err))
		} else {
			var dig, tag string
			if c, ok := named.(reference.Canonical); ok {
				dig = c.Digest().String()
			}
			if t, ok := named.(reference.Tagged); ok {
				tag = t.Tag()
			}
			var tags []string
			for _, m := range images {
				_, mtag := splitDest(m.SetName())
				if m.Kind == imageset.KindRelease && m.Pushed && (m.Origin == pl.Release || dig != "" && m.Digest == dig || tag != "" && mtag == tag) {
					tags = append(tags, mtag)
				}
			}
			ok := false
			for _, t := range tags {
				ok = byTag(t, path) || ok
			}
			if !ok {
				errs = append(errs, fmt.Errorf("%s: %s: release %s was not mirrored to this root by this workspace", cfgPath, path, pl.Release))
			}
		}
	}
	if len(pl.Channels) > 0 && needsGraph(pl.Channels) {
		errs = append(errs, rangeReleases(pl, cfgPath, graphDir, byTag)...)
	}
	for i, ch := range pl.Channels {
		if needsGraph(pl.Channels) {
			break
		}
		path := fmt.Sprintf("delete.platform.channels[%d]", i)
		typ := release.TypeOCP
		if ch.ReleaseType() == imageset.ReleaseTypeOKD {
			typ = release.TypeOKD
		}
		for _, a := range arches {
			ga, err := release.GraphArch(a)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: delete.platform.architectures: %w", cfgPath, err))
				continue
			}
			tag := release.Release{Version: ch.MinVersion, Arch: ga, Type: typ}.Tag()
			if !byTag(tag, path) {
				errs = append(errs, fmt.Errorf("%s: %s: release %s (%s) was not mirrored to this root by this workspace (looked for %s:%s in its records)", cfgPath, path, ch.MinVersion, ga, release.ReleaseImageRepository, tag))
			}
		}
	}
	if pl.Graph {
		found := false
		for _, m := range images {
			if m.Kind == imageset.KindReleaseGraph && m.Pushed {
				out = append(out, matchedImage{m, "delete.platform.graph"})
				found = true
			}
		}
		if !found {
			errs = append(errs, fmt.Errorf("%s: delete.platform.graph: no graph image was mirrored to this root by this workspace", cfgPath))
		}
	}
	return out, errs
}

// needsGraph reports whether a channel selection needs the update graph:
// anything but every channel pinned with minVersion = maxVersion.
func needsGraph(chs []imageset.ReleaseChannel) bool {
	for _, ch := range chs {
		if ch.MinVersion == "" || ch.MinVersion != ch.MaxVersion || ch.Full || ch.ShortestPath {
			return true
		}
	}
	return false
}

// rangeReleases selects the releases of delete.platform.channels with the
// mirroring planner over the saved update graphs and matches each by tag.
// Releases of a range this workspace never mirrored are passed over; a
// channel none of whose releases were mirrored is an error.
func rangeReleases(pl imageset.Platform, cfgPath, graphDir string, byTag func(tag, path string) bool) []error {
	if len(pl.Platforms) > 0 {
		return []error{fmt.Errorf("%s: delete.platform.platforms: version ranges of sparse multi-architecture payloads are not supported; pin each release with minVersion = maxVersion", cfgPath)}
	}
	s := sections.ReleaseSpec(pl, false)
	graphs, err := release.FetchGraphs(context.Background(), release.GraphDir(graphDir), s)
	if err != nil {
		return []error{fmt.Errorf("%s: delete.platform.channels: version ranges are resolved with the update graphs this workspace saved when it mirrored them (working-dir/release-graphs; disk-to-mirror restores them from the archive): %w; or pin each release to delete with minVersion = maxVersion", cfgPath, rename(err))}
	}
	plan, err := release.NewPlan(graphs, s)
	if err != nil {
		return []error{fmt.Errorf("%s: %w", cfgPath, rename(err))}
	}
	found := map[string]bool{}
	for _, r := range plan.Releases {
		for _, ch := range r.Channels {
			path := "delete.platform.channels"
			if i := slices.IndexFunc(pl.Channels, func(c imageset.ReleaseChannel) bool { return c.Name == ch }); i >= 0 {
				path = fmt.Sprintf("delete.platform.channels[%d]", i)
			}
			if byTag(r.Tag(), path) {
				found[ch] = true
			}
		}
	}
	var errs []error
	for i, ch := range pl.Channels {
		if !found[ch.Name] {
			errs = append(errs, fmt.Errorf("%s: delete.platform.channels[%d]: none of the releases it selects in the saved update graph of %s was mirrored to this root by this workspace (already deleted, or never mirrored)", cfgPath, i, ch.Name))
		}
	}
	return errs
}

// rename makes the planner's errors name the delete configuration's fields.
func rename(err error) error {
	return errors.New(strings.ReplaceAll(err.Error(), "mirror.platform.", "delete.platform."))
}
