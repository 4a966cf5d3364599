package prune

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/registryapi"
)

// Candidate is a manifest this workspace pushed to the mirror that should go:
// it left the image set, or a DeleteImageSetConfiguration names it.
type Candidate struct {
	// Destination is repo:tag under the mirror root, as the Set names it.
	Destination string `json:"destination"`
	Digest      string `json:"digest"`
	Origin      string `json:"origin,omitempty"`
	Kind        string `json:"kind,omitempty"`
	// Why says why it should go.
	Why string `json:"why"`
}

// Key identifies a candidate: one tag and the digest it was pushed with.
func (c Candidate) Key() string { return c.Destination + "@" + c.Digest }

// Op is what an action asks of the registry.
type Op string

// The two deletes a plan uses.
const (
	// deleteManifest is DELETE /v2/<repo>/manifests/<digest>: the manifest
	// and every tag of the repository naming it go.
	deleteManifest Op = "delete-manifest"
	// DeleteTag is DELETE /v2/<repo>/manifests/<tag>: only the tag goes,
	// because something kept still uses the manifest.
	DeleteTag Op = "delete-tag"
)

// Action is one delete request.
type Action struct {
	Op Op `json:"op"`
	// Repo is the repository on the registry host (mirror prefix included).
	Repo   string `json:"repo"`
	Digest string `json:"digest"`
	// Tag is the tag a DeleteTag removes.
	Tag string `json:"tag,omitempty"`
	// Tags are the tags a DeleteManifest removes with the manifest.
	Tags []string `json:"tags,omitempty"`
	// For lists the candidates (destination@digest) this action serves.
	For []string `json:"for"`
	Why string   `json:"why"`
	// Stays says, for a DeleteTag, why the manifest itself is kept.
	Stays string `json:"stays,omitempty"`
}

// Key identifies an action for comparing plans.
func (a Action) Key() string { return string(a.Op) + " " + a.Repo + "@" + a.Digest + ":" + a.Tag }

// String is the action as the preview prints it.
func (a Action) String() string {
	switch a.Op {
	case DeleteTag:
		return fmt.Sprintf("delete tag      %s:%s: %s; manifest %s stays: %s", a.Repo, a.Tag, a.Why, short(a.Digest), a.Stays)
	default:
		tags := "untagged"
		if len(a.Tags) > 0 {
			tags = "tags " + strings.Join(a.Tags, ", ")
		}
		return fmt.Sprintf("delete manifest %s@%s (%s): %s", a.Repo, a.Digest, tags, a.Why)
	}
}

func short(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}

// Kept is a candidate the plan leaves in place, and why.
type Kept struct {
	Image  string `json:"image"`
	Digest string `json:"digest"`
	Why    string `json:"why"`
}

// Plan is what pruning a mirror root would do, worked out against the
// registry's current tags.
type Plan struct {
	// Mirror is the mirror root, host[:port][/prefix].
	Mirror     string      `json:"mirror"`
	Candidates []Candidate `json:"candidates"`
	Actions    []Action    `json:"actions"`
	Kept       []Kept      `json:"kept,omitempty"`
	// Gone lists candidates already absent from the registry.
	Gone []string `json:"gone,omitempty"`
}

// splitRoot splits a mirror root into host and repository prefix.
func splitRoot(root string) (host, prefix string) {
	root = strings.TrimSuffix(strings.TrimPrefix(root, "docker://"), "/")
	host, prefix, _ = strings.Cut(root, "/")
	return host, prefix
}

// repoOf is the repository on the registry host of a destination under root.
func repoOf(root, destination string) (repo, tag string) {
	_, prefix := splitRoot(root)
	repo, tag = splitTag(destination)
	if prefix != "" {
		repo = prefix + "/" + repo
	}
	return repo, tag
}

func splitTag(s string) (repo, tag string) {
	if repo, _, ok := strings.Cut(s, "@"); ok {
		return repo, "" // a referrer, by digest
	}
	slash := strings.LastIndex(s, "/")
	colon := strings.LastIndex(s, ":")
	if colon > slash {
		return s[:colon], s[colon+1:]
	}
	return s, ""
}

// compute works out how to delete the candidates from the registry at root
// without touching anything kept. keep holds "repo:tag" (registry host
// relative) names that must stay even if a candidate shares the tag: the
// current image set, other mirror roots of the workspace. Every other tag
// in an affected repository (someone else's, or the Set's) protects the
// manifest it names and, for an index, every platform manifest in it.
func compute(ctx context.Context, reg *registryapi.Client, root string, cands []Candidate, keep map[string]bool) (*Plan, error) {
	return ComputeAfter(ctx, reg, root, cands, keep, nil)
}

// After is what a copy not made yet (a dry run skips it) will do to the
// registry: the tags it sets or moves and how to read the manifests they
// will name.
type After struct {
	// Tags maps "repo:tag" (registry host relative) to the digest the tag
	// will name.
	Tags map[string]digest.Digest
	// Manifest reads manifest d of the image the copy puts at repoTag (the
	// one Tags gives it, or an index's platform manifest, or a nested
	// index), from wherever the copy would take it; only asked when the
	// registry's tag names something else.
	Manifest func(ctx context.Context, repoTag string, d digest.Digest) (data []byte, mediaType string, err error)
}

// ComputeAfter is compute against the registry as it will be once after's
// tags name what they give (nil: as it is): a dry run's preview, made
// before the copy it skips, plans the deletes the real run will make.
func ComputeAfter(ctx context.Context, reg *registryapi.Client, root string, cands []Candidate, keep map[string]bool, after *After) (*Plan, error) {
	p := &Plan{Mirror: strings.TrimSuffix(strings.TrimPrefix(root, "docker://"), "/"), Candidates: cands}
	byRepo := map[string][]Candidate{}
	var repos []string
	for _, c := range cands {
		repo, _ := repoOf(root, c.Destination)
		if _, ok := byRepo[repo]; !ok {
			repos = append(repos, repo)
		}
		byRepo[repo] = append(byRepo[repo], c)
	}
	sort.Strings(repos)
	var tagActs, topActs, childActs []Action
	for _, repo := range repos {
		rp, err := planRepo(ctx, reg, root, repo, byRepo[repo], keep, after)
		if err != nil {
			return nil, err
		}
		tagActs = append(tagActs, rp.tags...)
		topActs = append(topActs, rp.tops...)
		childActs = append(childActs, rp.children...)
		p.Kept = append(p.Kept, rp.kept...)
		p.Gone = append(p.Gone, rp.gone...)
	}
	// Tags first, then images, then their platform manifests: an
	// interrupted prune never leaves a tag naming a half-deleted index.
	p.Actions = append(append(tagActs, topActs...), childActs...)
	return p, nil
}

// tagNamesIt is why a plan keeps a manifest that the tag repo:tag names.
func tagNamesIt(repo, tag string) string { return fmt.Sprintf("tag %s:%s names it", repo, tag) }

type repoPlan struct {
	tags, tops, children []Action
	kept                 []Kept
	gone                 []string
}

type liveTag struct {
	digest    digest.Digest
	mediaType string
}

func planRepo(ctx context.Context, reg *registryapi.Client, root, repo string, cands []Candidate, keep map[string]bool, after *After) (*repoPlan, error) {
	tags, err := reg.Tags(ctx, repo)
	if err != nil {
		return nil, fmt.Errorf("listing the tags of %s/%s: %w", reg.Host(), repo, err)
	}
	live, err := headAll(ctx, reg, repo, tags)
	if err != nil {
		return nil, err
	}
	// Platform manifests of indexes the registry does not have yet.
	pendingKids := map[digest.Digest][]digest.Digest{}
	if err := applyAfter(ctx, repo, live, pendingKids, after); err != nil {
		return nil, err
	}
	// kidsOf is childrenOf, but for the indexes after's copy brings.
	kidsOf := func(d digest.Digest) ([]digest.Digest, error) {
		if kids, ok := pendingKids[d]; ok {
			return kids, nil
		}
		return childrenOf(ctx, reg, repo, d)
	}
	// Our tags that still name what we pushed under them and are wanted
	// by nothing kept: these may go.
	removed := map[string]bool{}
	for _, c := range cands {
		_, tag := repoOf(root, c.Destination)
		if lt, ok := live[tag]; ok && lt.digest.String() == c.Digest && !keep[repo+":"+tag] {
			removed[tag] = true
		}
	}
	// Everything else in the repository protects what it references.
	protected := map[digest.Digest]string{}
	var keptTags []string
	for tag := range live {
		if !removed[tag] {
			keptTags = append(keptTags, tag)
		}
	}
	sort.Strings(keptTags)
	for _, tag := range keptTags {
		lt := live[tag]
		if referrersIndex(tag, lt) != "" {
			// A referrers tag schema index lists the referrers of its
			// subject; they go only with the subject, and it with them.
			continue
		}
		if _, ok := protected[lt.digest]; !ok {
			protected[lt.digest] = tagNamesIt(repo, tag)
		}
		if isIndex(lt.mediaType) {
			kids, err := kidsOf(lt.digest)
			if err != nil {
				return nil, err
			}
			for _, k := range kids {
				if _, ok := protected[k]; !ok {
					protected[k] = fmt.Sprintf("the index %s:%s lists it", repo, tag)
				}
			}
		}
	}
	rp := &repoPlan{}
	planned := map[digest.Digest]int{} // digest → index in rp.tops or -1-(index in children)
	sort.Slice(cands, func(a, b int) bool { return cands[a].Key() < cands[b].Key() })
	for _, c := range cands {
		_, tag := repoOf(root, c.Destination)
		d := digest.Digest(c.Digest)
		if why, ok := protected[d]; ok {
			if removed[tag] {
				rp.tags = append(rp.tags, Action{Op: DeleteTag, Repo: repo, Digest: c.Digest, Tag: tag, For: []string{c.Key()}, Why: c.Why, Stays: why})
			} else {
				rp.kept = append(rp.kept, Kept{Image: c.Destination, Digest: c.Digest, Why: why})
			}
			continue
		}
		if i, ok := planned[d]; ok {
			if i >= 0 {
				rp.tops[i].For = append(rp.tops[i].For, c.Key())
				if removed[tag] {
					rp.tops[i].Tags = appendUnique(rp.tops[i].Tags, tag)
				}
				continue
			}
			// Planned as another image's platform manifest: make it a top
			// action of its own so its tag is reported.
			ci := -1 - i
			a := rp.children[ci]
			rp.children = append(rp.children[:ci], rp.children[ci+1:]...)
			for dd, j := range planned {
				if j < i {
					planned[dd] = j + 1
				}
			}
			a.For = append(a.For, c.Key())
			a.Why = c.Why
			if removed[tag] {
				a.Tags = appendUnique(a.Tags, tag)
			}
			planned[d] = len(rp.tops)
			rp.tops = append(rp.tops, a)
			continue
		}
		lt, tagged := live[tag]
		var mt string
		if tagged && lt.digest == d {
			mt = lt.mediaType
		} else {
			// The tag moved on (a newer image, or someone else's); the
			// manifest we pushed may still be there, untagged.
			_, m, err := reg.Head(ctx, repo, c.Digest)
			if registryapi.IsNotFound(err) {
				rp.gone = append(rp.gone, c.Key())
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("looking up %s/%s@%s: %w", reg.Host(), repo, c.Digest, err)
			}
			mt = m
		}
		a := Action{Op: deleteManifest, Repo: repo, Digest: c.Digest, For: []string{c.Key()}, Why: c.Why}
		if removed[tag] {
			a.Tags = []string{tag}
		}
		planned[d] = len(rp.tops)
		rp.tops = append(rp.tops, a)
		if isIndex(mt) {
			kids, err := kidsOf(d)
			if err != nil {
				return nil, err
			}
			for _, k := range kids {
				if _, ok := protected[k]; ok {
					continue
				}
				if _, ok := planned[k]; ok {
					continue
				}
				planned[k] = -1 - len(rp.children)
				rp.children = append(rp.children, Action{Op: deleteManifest, Repo: repo, Digest: k.String(), For: []string{c.Key()}, Why: "platform manifest of " + c.Destination})
			}
		}
	}
	// The referrers tag schema index of a subject deleted goes with it.
	deleted := map[digest.Digest]bool{}
	for _, a := range append(append([]Action{}, rp.tops...), rp.children...) {
		deleted[digest.Digest(a.Digest)] = true
	}
	for _, tag := range keptTags {
		lt := live[tag]
		if subject := referrersIndex(tag, lt); subject != "" && deleted[subject] && !deleted[lt.digest] {
			deleted[lt.digest] = true
			rp.tops = append(rp.tops, Action{Op: deleteManifest, Repo: repo, Digest: lt.digest.String(), Tags: []string{tag}, For: []string{repo + "@" + subject.String()}, Why: "the referrers index of " + repo + "@" + subject.String() + ", deleted"})
		}
	}
	return rp, nil
}

// referrersIndex is the subject whose referrers tag schema index tag names
// (an index under sha256-<hex> that is not the manifest <hex> itself,
// which oc-mirror's tag of an image named by digest would be), "" for any
// other tag.
func referrersIndex(tag string, lt liveTag) digest.Digest {
	alg, hex, ok := strings.Cut(tag, "-")
	if !ok || !isIndex(lt.mediaType) {
		return ""
	}
	d := digest.NewDigestFromEncoded(digest.Algorithm(alg), hex)
	if d.Validate() != nil || d == lt.digest {
		return ""
	}
	return d
}

// applyAfter sets in live the tags of repo that after's copy sets or
// moves, noting the manifests those that are indexes need: their platform
// manifests and, through nested indexes, theirs (as childrenOf does for
// the registry's indexes).
func applyAfter(ctx context.Context, repo string, live map[string]liveTag, kids map[digest.Digest][]digest.Digest, after *After) error {
	if after == nil {
		return nil
	}
	for rt, d := range after.Tags {
		r, tag := splitTag(rt)
		if r != repo || live[tag].digest == d {
			continue
		}
		data, mt, err := after.Manifest(ctx, rt, d)
		if err != nil {
			// Unreadable: the tag still protects the manifest itself;
			// only its platform manifests are not known.
			live[tag] = liveTag{digest: d}
			continue
		}
		mt = mediaTypeOr(mt, data)
		live[tag] = liveTag{digest: d, mediaType: mt}
		if !isIndex(mt) {
			continue
		}
		list, err := walkIndex(d, repo, func(cur digest.Digest) ([]byte, error) {
			if cur == d {
				return data, nil
			}
			// A nested index unreadable here lists nothing, as one
			// the registry lacks does for childrenOf.
			nested, _, err := after.Manifest(ctx, rt, cur)
			if err != nil {
				return nil, nil
			}
			return nested, nil
		})
		if err != nil {
			return err
		}
		if len(list) > 0 {
			kids[d] = list
		}
	}
	return nil
}

// mediaTypeOr is mt, else the mediaType data declares.
func mediaTypeOr(mt string, data []byte) string {
	if mt != "" {
		return mt
	}
	var probe struct {
		MediaType string `json:"mediaType"`
	}
	_ = json.Unmarshal(data, &probe)
	return probe.MediaType
}

func appendUnique(list []string, s string) []string {
	for _, l := range list {
		if l == s {
			return list
		}
	}
	return append(list, s)
}

// headAll looks up every tag of repo, a few at a time.
func headAll(ctx context.Context, reg *registryapi.Client, repo string, tags []string) (map[string]liveTag, error) {
	out := map[string]liveTag{}
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, tag := range tags {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			d, mt, err := reg.Head(ctx, repo, tag)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case registryapi.IsNotFound(err):
				// Deleted between listing and lookup: not there.
			case err != nil:
				if firstErr == nil {
					firstErr = fmt.Errorf("looking up %s/%s:%s: %w", reg.Host(), repo, tag, err)
				}
			default:
				out[tag] = liveTag{digest: d, mediaType: mt}
			}
		}()
	}
	wg.Wait()
	return out, firstErr
}

func isIndex(mt string) bool {
	return strings.Contains(mt, "image.index") || strings.Contains(mt, "manifest.list")
}

// childrenOf lists the manifests the index d lists and, an index being
// allowed to list indexes, those the nested ones list in turn: all of them
// are what d needs. A nested index the registry lacks lists nothing here.
func childrenOf(ctx context.Context, reg *registryapi.Client, repo string, d digest.Digest) ([]digest.Digest, error) {
	return walkIndex(d, reg.Host()+"/"+repo, func(cur digest.Digest) ([]byte, error) {
		data, _, err := reg.Manifest(ctx, repo, cur.String())
		if err != nil {
			if cur != d && registryapi.IsNotFound(err) {
				return nil, nil
			}
			return nil, fmt.Errorf("reading index %s/%s@%s: %w", reg.Host(), repo, cur, err)
		}
		return data, nil
	})
}

// walkIndex lists the manifests index d lists and, through the nested
// indexes, theirs, each once. read gives an index's manifest (nil data:
// it lists nothing); where names its repository in errors.
func walkIndex(d digest.Digest, where string, read func(digest.Digest) ([]byte, error)) ([]digest.Digest, error) {
	var out []digest.Digest
	seen := map[digest.Digest]bool{d: true}
	queue := []digest.Digest{d}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		data, err := read(cur)
		if err != nil {
			return nil, err
		}
		if data == nil {
			continue
		}
		kids, err := parseChildren(data)
		if err != nil {
			return nil, fmt.Errorf("index %s@%s: %w", where, cur, err)
		}
		for _, k := range kids {
			if seen[k.digest] {
				continue
			}
			seen[k.digest] = true
			out = append(out, k.digest)
			if isIndex(k.mediaType) {
				queue = append(queue, k.digest)
			}
		}
	}
	return out, nil
}

// child is a manifest an index lists.
type child struct {
	digest    digest.Digest
	mediaType string
}

// parseChildren lists the manifests an index references.
func parseChildren(data []byte) ([]child, error) {
	var idx struct {
		Manifests []struct {
			Digest    digest.Digest `json:"digest"`
			MediaType string        `json:"mediaType"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, err
	}
	out := make([]child, 0, len(idx.Manifests))
	for _, m := range idx.Manifests {
		out = append(out, child{digest: m.Digest, mediaType: m.MediaType})
	}
	return out, nil
}

// Outcome is what executing a plan did.
type Outcome struct {
	Done   []Action       `json:"done"`
	Failed []FailedAction `json:"failed,omitempty"`
	// Skipped are actions of the plan the registry's state no longer
	// allows (or that a reviewed plan did not list).
	Skipped []FailedAction `json:"skipped,omitempty"`
}

// FailedAction is an action that did not happen, and why.
type FailedAction struct {
	Action Action `json:"action"`
	Error  string `json:"error"`
}

// unsupportedError is a registry refusing manifest deletes.
type unsupportedError struct {
	Host string
	Err  error
}

func (e *unsupportedError) Error() string {
	return fmt.Sprintf("registry %s refused to delete a manifest (%v): deletes are disabled there; enable them (distribution/registry:2: storage.delete.enabled: true, or REGISTRY_STORAGE_DELETE_ENABLED=true; Quay, Harbor, Nexus: give the account delete permission) and run again; nothing further was deleted", e.Host, e.Err)
}

func (e *unsupportedError) Unwrap() error { return e.Err }

// Execute carries out the plan's actions in order. A tag the registry
// cannot delete is reported and left; a registry refusing manifest
// deletes stops the run with an unsupportedError.
func Execute(ctx context.Context, reg *registryapi.Client, p *Plan, log io.Writer) (*Outcome, error) {
	out := &Outcome{}
	for _, a := range p.Actions {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		var err error
		switch a.Op {
		case DeleteTag:
			err = reg.DeleteTag(ctx, a.Repo, a.Tag)
		case deleteManifest:
			err = reg.DeleteManifest(ctx, a.Repo, digest.Digest(a.Digest))
		default:
			err = fmt.Errorf("unknown operation %q", a.Op)
		}
		switch {
		case err == nil, registryapi.IsNotFound(err):
			out.Done = append(out.Done, a)
			fmt.Fprintf(log, "deleted: %s\n", a)
		case registryapi.IsUnsupported(err) && a.Op == DeleteTag:
			out.Failed = append(out.Failed, FailedAction{Action: a, Error: fmt.Sprintf("%v (the registry does not delete tags; the tag stays, the manifest is in use)", err)})
		case registryapi.IsUnsupported(err):
			out.Failed = append(out.Failed, FailedAction{Action: a, Error: err.Error()})
			return out, &unsupportedError{Host: reg.Host(), Err: err}
		default:
			out.Failed = append(out.Failed, FailedAction{Action: a, Error: err.Error()})
		}
	}
	return out, nil
}

// Resolved lists the candidates that need nothing more: every action
// serving them happened (or none was needed).
func Resolved(p *Plan, o *Outcome) []string {
	pending := map[string]bool{}
	for _, f := range append(append([]FailedAction{}, o.Failed...), o.Skipped...) {
		for _, k := range f.Action.For {
			pending[k] = true
		}
	}
	done := map[string]bool{}
	for _, a := range o.Done {
		for _, k := range a.For {
			done[k] = true
		}
	}
	// Candidates whose actions were not reached (a stop) stay pending.
	for _, a := range p.Actions {
		for _, k := range a.For {
			if !done[k] {
				pending[k] = true
			}
		}
	}
	var out []string
	for _, c := range p.Candidates {
		if !pending[c.Key()] {
			out = append(out, c.Key())
		}
	}
	return out
}
