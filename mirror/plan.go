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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/failure"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/release"
	"github.com/gapmirror/gapmirror/sigstore"
	"github.com/gapmirror/gapmirror/transfer"
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
	// pinnedCatalogs maps a catalog entry's config path to the digest it
	// was resolved to, for Pinned.
	pinnedCatalogs map[string]string
	// platforms is the record of platform manifests the signature search
	// read, written to the workspace when the plan runs.
	platforms *platformsRecord
}

// PlanFile is one file of a Plan.
type PlanFile struct {
	Name   string        `json:"name"`
	Digest digest.Digest `json:"digest"`
	Size   int64         `json:"size"`
	data   []byte
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

// addFile adds a file to the plan; a later file of the same name wins.
func (p *Plan) addFile(name string, data []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := PlanFile{Name: name, Digest: digest.FromBytes(data), Size: int64(len(data)), data: data}
	for i := range p.Files {
		if p.Files[i].Name == name {
			p.Files[i] = f
			return
		}
	}
	p.Files = append(p.Files, f)
}

// file returns the content of the named file.
func (p *Plan) file(name string) ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.Files {
		if f.Name == name {
			return f.data, true
		}
	}
	return nil, false
}

func (p *Plan) pinCatalog(path, d string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pinnedCatalogs == nil {
		p.pinnedCatalogs = map[string]string{}
	}
	p.pinnedCatalogs[path] = d
}

// extras are the plan's files as archive extras.
func (p *Plan) extras() []archive.Extra {
	out := make([]archive.Extra, 0, len(p.Files))
	for _, f := range p.Files {
		out = append(out, archive.Extra{Name: f.Name, Data: f.data})
	}
	return out
}

// signatures returns the release signatures the plan carries, by release
// digest, in order.
func (p *Plan) signatures() (map[string][][]byte, error) {
	sigs := map[string][][]byte{}
	for _, f := range p.Files {
		if !strings.HasPrefix(f.Name, releaseSignaturesDir+"/") {
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
		sigs[rd][n-1] = f.data
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

// unresolved turns resolution failures into their record.
func unresolved(list []imageset.Unresolved) []Unresolved {
	var out []Unresolved
	for _, f := range list {
		u := Unresolved{Origin: f.Origin, Kind: f.Kind, Why: f.Why, NotImage: f.NotImage}
		if f.Err != nil {
			u.Error = failure.Message(f.Err)
		}
		out = append(out, u)
	}
	return out
}

// platformsFile is the workspace record of the platform manifests of the
// images signatures were looked for, so later runs need not read them.
var platformsFile = []string{"sigstore", "platforms.json"}

// platformsRecord maps a manifest digest to its platform manifests (none
// for a single-platform image).
type platformsRecord struct {
	FormatVersion int                               `json:"formatVersion"`
	Platforms     map[digest.Digest][]digest.Digest `json:"platforms"`
}

// platformsOf reads the workspace ws's record of the platform manifests
// earlier runs found (empty on a first run, or when it cannot be read:
// the manifests are then read again).
func (t *Trip) platformsOf(ws string) platformsRecord {
	var rec platformsRecord
	if ws == "" {
		return rec
	}
	if _, err := (workspace{ws}).read(&rec, platformsFile...); err != nil {
		t.Log.Warn("reading the record of platform manifests; reading the manifests again", "error", err)
		return platformsRecord{}
	}
	return rec
}

// seenManifests is Registry.seen for a run whose workspace recorded known:
// the top manifests whose platform manifests earlier runs recorded for the
// signature lookup, and those in the store; nil when no earlier run
// recorded any (a first run reads each tag's manifest with one GET).
func seenManifests(known platformsRecord, store *transfer.Store) func(digest.Digest) bool {
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
func (t *Trip) resolve(ctx context.Context, up *transfer.Registry, store *transfer.Store, ws string) (*Plan, *imageset.Resolution, error) {
	if t.RetryFailed != "" {
		return nil, nil, errors.New("internal: resolve called for a retry")
	}
	start := time.Now()
	opts := t.Copy.WithDefaults()
	up.Retries, up.RetryDelay = opts.Retries, opts.RetryDelay
	plan := &Plan{}
	opts.Progress.Phase("resolving", 0, transfer.Totals{})
	defer opts.Progress.Finish()
	for _, w := range t.Config.Warnings() {
		t.Log.Warn(w.Error())
	}
	ctx = transfer.WithProgress(ctx, opts.Progress)
	known := t.platformsOf(ws)
	up.Seen = seenManifests(known, store)
	set, res, err := imageset.Resolve(ctx, t.Config, imageset.ResolveOptions{Resolver: up, Parallel: t.Copy.ParallelImages, Contributors: t.contributors(up, store, plan, ws)})
	if err != nil {
		if strings.HasPrefix(err.Error(), t.ConfigPath+":") {
			return nil, nil, err // located already: file:line: field: …
		}
		return nil, nil, fmt.Errorf("%s: %w", t.ConfigPath, err)
	}
	plan.Set = set
	sigSearch := sigstore.Search{Upstream: up, Store: store, Parallel: opts.ParallelImages, Log: t.Log}
	if !t.RemoveSignatures || t.SecurePolicy {
		if sigSearch.RegistriesD, err = sigstore.LoadRegistriesD(up.SystemContext()); err != nil {
			return nil, nil, err
		}
	}
	if !t.RemoveSignatures {
		sigStart := time.Now()
		platforms, st := sigSearch.Add(ctx, set, known.Platforms, res)
		plan.platforms = &platformsRecord{FormatVersion: recordFormat, Platforms: platforms}
		t.Log.Info("sigstore signatures looked up", "found", st.Found, "tagLookups", st.Lookups, "offInRegistriesD", st.Off, "manifestReads", st.IndexReads, "unreadable", st.Failed, "took", time.Since(sigStart).Round(time.Millisecond))
	}
	if t.SecurePolicy {
		if err := sigSearch.Verify(ctx, t.PolicyPath, set, res); err != nil {
			return nil, nil, err
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
	t.Log.Info("image set resolved", "images", len(set.Images)-set.Signatures(), "signatures", set.Signatures(), "unresolved", len(res.Failed), "took", time.Since(start).Round(time.Millisecond))
	plan.Blocked, plan.Unresolved = res.Blocked, unresolved(res.Failed)
	if t.Config != nil {
		cfg, err := imageset.MarshalYAML(imageset.Redacted(t.Config))
		if err != nil {
			return nil, nil, err
		}
		plan.Config = string(cfg)
		if err := t.pinPlan(plan); err != nil {
			return nil, nil, fmt.Errorf("pinning the configuration: %w", err)
		}
	}
	return plan, res, nil
}

// plan is the Plan of a trip and the part of its Set to copy: all of it,
// or with --retry-failed the images an earlier run failed, with the plan
// that run recorded.
func (t *Trip) plan(ctx context.Context, up *transfer.Registry, store *transfer.Store, ws string) (plan *Plan, todo *imageset.Set, res *imageset.Resolution, err error) {
	if t.RetryFailed == "" {
		plan, res, err = t.resolve(ctx, up, store, ws)
		if err != nil {
			return nil, nil, nil, err
		}
		return plan, plan.Set, res, nil
	}
	var ff failedFile
	data, err := os.ReadFile(t.RetryFailed)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--retry-failed: %w", err)
	}
	if err := json.Unmarshal(data, &ff); err != nil || ff.Set == nil {
		return nil, nil, nil, fmt.Errorf("--retry-failed %s: not a gapmirror failure file (%v)", t.RetryFailed, err)
	}
	if ff.FormatVersion > runRecordFormat {
		return nil, nil, nil, fmt.Errorf("--retry-failed %s was written by a newer gapmirror (format %d): retry with that version", t.RetryFailed, ff.FormatVersion)
	}
	plan = &Plan{Set: ff.Set}
	fromRecord := false
	if ff.Run != "" {
		// The failure file sits in <workspace>/failed, the record it
		// names in the same workspace.
		fws := workspace{filepath.Dir(filepath.Dir(t.RetryFailed))}
		rec, err := fws.runRecord(ff.Run)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// The file was moved away from its workspace: the images
			// are copied, the plan's files are missing.
			t.Log.Warn("the run record of the failure file is not next to it: retrying with the image set alone, so cluster resources lack what the plan's files give (catalog templates, release signatures not in this workspace)", "file", t.RetryFailed, "record", fws.path(ff.Run))
		case err != nil:
			return nil, nil, nil, fmt.Errorf("--retry-failed %s: %w", t.RetryFailed, err)
		case rec.Plan == nil || rec.Plan.Set == nil:
			return nil, nil, nil, fmt.Errorf("--retry-failed %s: the run record %s holds no plan", t.RetryFailed, fws.path(ff.Run))
		default:
			plan, fromRecord = rec.Plan, true
		}
	}
	if !fromRecord {
		// A format-1 failure file, or one away from its record: the
		// release signatures the workspace kept become the plan's, so
		// that generate needs nothing but the plan.
		keptSignatures(plan, ws)
	}
	if plan.Config == "" && t.Config != nil {
		// An older record has no configuration: the one given with -c.
		cfg, err := imageset.MarshalYAML(imageset.Redacted(t.Config))
		if err != nil {
			return nil, nil, nil, err
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
	return plan, todo, res, nil
}

// planFromArchive is the Plan an archive carries: its Set (less signatures
// with --remove-signatures), its files, and what mirror-to-disk blocked.
// Files are checked as they are read: an archive is not trusted blindly.
func planFromArchive(ar *archive.Reader, removeSignatures bool) (*Plan, error) {
	idx := ar.Index()
	plan := &Plan{Set: idx.Set, Config: idx.Config, Blocked: idx.Blocked}
	if removeSignatures {
		plan.Set = withoutSignatures(plan.Set)
	}
	for _, e := range idx.Extras {
		switch {
		case e.Name == "index.json" || e.Name == "oci-layout":
			continue // the OCI layout of the blobs, not of the plan
		case strings.HasPrefix(e.Name, releaseSignaturesDir+"/"), strings.HasPrefix(e.Name, releaseGraphsDir+"/"),
			strings.HasPrefix(e.Name, "catalog-templates/"), strings.HasPrefix(e.Name, helmDir+"/"), e.Name == pinnedExtra:
		default:
			continue // a file a newer gapmirror added: carried, not used
		}
		data, err := ar.Extra(e.Name)
		if err != nil {
			return nil, fmt.Errorf("reading %s from the archive: %w", e.Name, err)
		}
		plan.addFile(e.Name, data)
	}
	if _, err := plan.signatures(); err != nil {
		return nil, fmt.Errorf("archive extra %w", err)
	}
	if err := checkCharts(plan); err != nil {
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
	ws := r.ws.dir
	sigs, err := r.plan.signatures()
	if err != nil {
		return err
	}
	for _, rd := range sortedKeys(sigs) {
		if err := release.SaveSignatures(filepath.Join(ws, releaseSignaturesDir), rd, sigs[rd]); err != nil {
			return err
		}
	}
	var charts []string
	for _, f := range r.plan.Files {
		switch {
		case strings.HasPrefix(f.Name, releaseGraphsDir+"/"):
			if err := writeWorkingFile(ws, path.Join(releaseGraphsDir, path.Base(f.Name)), f.data); err != nil {
				return err
			}
		case strings.HasPrefix(f.Name, helmDir+"/"), strings.HasPrefix(f.Name, "catalog-templates/"):
			if err := writeWorkingFile(ws, f.Name, f.data); err != nil {
				return err
			}
			if strings.HasPrefix(f.Name, helmDir+"/charts/") && strings.HasSuffix(f.Name, ".tgz") {
				charts = append(charts, filepath.Join(ws, filepath.FromSlash(f.Name)))
			}
		}
	}
	r.rep.HelmCharts = charts
	if r.plan.platforms != nil {
		if err := r.ws.write(r.plan.platforms, platformsFile...); err != nil {
			r.t.Log.Warn("recording the platform manifests of the images; the next run reads them again", "error", err)
		}
	}
	// A retry's plan is its first run's, whose pinned files are written.
	if r.plan.Pinned != "" && r.t.RetryFailed == "" {
		if r.pinned, err = r.t.writePinned(ws, r.plan); err != nil {
			return fmt.Errorf("writing the pinned configuration: %w", err)
		}
		r.t.Log.Info("pinned configuration written", "path", r.pinned)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// saveFiles keeps the content of the plan's files by digest in the
// workspace, for the run record to name.
func (w workspace) saveFiles(files []PlanFile) error {
	for _, f := range files {
		p := w.path("plan-files", f.Digest.Algorithm().String(), f.Digest.Encoded())
		if _, err := os.Stat(p); err == nil {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := transfer.WriteFileAtomic(p, f.data); err != nil {
			return err
		}
	}
	return nil
}

// loadFiles reads the content of files from the workspace, each checked
// against its digest.
func (w workspace) loadFiles(files []PlanFile) error {
	for i := range files {
		f := &files[i]
		if err := f.Digest.Validate(); err != nil {
			return fmt.Errorf("plan file %s: %w", f.Name, err)
		}
		p := w.path("plan-files", f.Digest.Algorithm().String(), f.Digest.Encoded())
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("plan file %s: %v (the workspace lost it: run the configuration again instead)", f.Name, err)
		}
		if digest.FromBytes(data) != f.Digest {
			return fmt.Errorf("plan file %s (%s) does not match its digest %s: the workspace is damaged; run the configuration again instead", f.Name, p, f.Digest)
		}
		f.data = data
	}
	return nil
}
