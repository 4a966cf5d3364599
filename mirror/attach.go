package mirror

import (
	"time"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/sigstore"
	"github.com/gapmirror/gapmirror/transfer"
	"github.com/gapmirror/gapmirror/workspace"
)

// logAttached logs what a search for what is attached found and returns
// the platform manifests it read, for the workspace's record, when it
// looked for signatures.
func (t *Trip) logAttached(a sigstore.Attached) *workspace.PlatformsRecord {
	var rec *workspace.PlatformsRecord
	choice := t.referrerChoice()
	if !t.RemoveSignatures {
		st := a.Signatures
		rec = &workspace.PlatformsRecord{FormatVersion: workspace.Format, Platforms: a.Platforms}
		t.Log.Info("sigstore signatures looked up", "found", st.Found, "tagLookups", st.Lookups, "offInRegistriesD", st.Off, "manifestReads", st.IndexReads, "unreadable", st.Failed, "took", a.SignaturesTook.Round(time.Millisecond))
	}
	if choice.Any() {
		st := a.Referrers
		t.Log.Info("OCI referrers looked up", "kinds", choice.String(), "found", st.String(), "lookups", st.Lookups, "otherKinds", st.Skipped, "unreadable", st.Failed, "took", a.ReferrersTook.Round(time.Millisecond))
	}
	if a.Retries > 0 {
		t.Log.Info("signatures and referrers looked up beside the copy", "retries", a.Retries)
	}
	return rec
}

// attachLater is the lookup of what is attached to a plan's images, its
// questions asked while the images are copied (see sigstore.Lookup); set
// is a copy of the plan's set as resolved, which takes the answers.
type attachLater struct {
	*sigstore.Lookup
	set *imageset.Set
}

// stop ends the lookup if it still runs (a trip failed before its copy).
func (a *attachLater) stop() {
	if a != nil {
		a.Stop()
	}
}

// copyAttached puts what the lookup beside the copy found into the plan's
// set (flattened for the mirror by flatten, when not nil), copies it with
// copyTo and adds that copy's figures to result, the images' copy's.
func (r *run) copyAttached(later *attachLater, result *transfer.Result, flatten func(*imageset.Set) (*imageset.Set, error), copyTo func(*imageset.Set) *transfer.Result) {
	t, plan := r.t, r.plan
	res := &imageset.Resolution{}
	plan.Platforms = t.logAttached(later.AddTo(later.set, res))
	r.keepPlatforms()
	for _, w := range res.Warnings {
		t.Log.Warn(w)
	}
	r.rep.Resolution.Warnings = append(r.rep.Resolution.Warnings, res.Warnings...)
	// What the lookup added, by the names images have before flattening
	// (flattening keeps them in Unflattened).
	had := make(map[string]bool, len(plan.Set.Images))
	for _, img := range plan.Set.Images {
		had[img.OriginalDestination()] = true
	}
	added := func(set *imageset.Set) *imageset.Set {
		out := &imageset.Set{FormatVersion: set.FormatVersion}
		for _, img := range set.Images {
			if !had[img.OriginalDestination()] {
				out.Images = append(out.Images, img)
			}
		}
		return out
	}
	full := later.set
	if flatten != nil {
		flat, err := flatten(full)
		if err != nil {
			for _, img := range added(full).Images {
				result.Failed = append(result.Failed, transfer.Failure{Image: img, Err: err})
			}
			return
		}
		full = flat
	}
	plan.Set.Images = full.Images // the same Set: the report and the records hold it
	if more := added(full); len(more.Images) > 0 {
		t.Log.Info("copying what is attached to the images", "images", len(more.Images), "signatures", more.Signatures(), "referrers", total(more.Referrers()))
		result.Add(copyTo(more))
	}
}
