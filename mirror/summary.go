package mirror

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/gapmirror/gapmirror/failure"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/release"
	"github.com/gapmirror/gapmirror/progress"
	"github.com/gapmirror/gapmirror/registryapi"
	"github.com/gapmirror/gapmirror/sigstore"
	"github.com/gapmirror/gapmirror/workspace"
)

// Summary prints what the trip did: one set of figures, then each failure
// cause once with its fix and the images it hit.
func (r *Report) Summary(w io.Writer) {
	if r.Result == nil {
		sigs, refs := "", r.Set.Referrers()
		if n := r.Set.Signatures(); n > 0 {
			sigs = fmt.Sprintf(" and %d signatures", n)
		}
		if k := sigstore.ReferrerKinds(refs); k != "" {
			sigs += " and referrers (" + k + ")"
		}
		fmt.Fprintf(w, "%s (dry run, nothing copied): %d images%s planned; plan in %s\n", r.Mode, len(r.Set.Images)-r.Set.Signatures()-total(refs), sigs, filepath.Join(r.Workspace, "dry-run"))
		r.DryRun.print(w)
		for _, c := range r.ClusterResources {
			fmt.Fprintf(w, "cluster resource (not applied, dry run): %s\n", c)
		}
		r.printBlocked(w)
		r.printPrune(w)
		r.printFailures(w)
		return
	}
	res := r.Result
	n := r.counts()
	fmt.Fprintf(w, "%s: %s: %d copied, %d already at the destination, %d built by gapmirror, %d failed\n",
		r.Mode, plural(n.Images, "image"), n.Copied, n.AlreadyThere, n.Built, n.Failed)
	t := res.Tally
	secs := res.Duration.Seconds()
	inSet := "met"
	switch {
	case t.Known && t.Unread > 0:
		// Images found at the destination were checked, not read.
		inSet = "in the images to copy"
	case t.Known:
		inSet = "in the set"
	}
	fmt.Fprintf(w, "blobs: %d %s (%s): %d moved (%s), %d already at the destination (%s); %d shared references reused; %.1fs, %s/s\n",
		t.Blobs, inSet, progress.HumanBytes(t.Bytes), t.BlobsMoved, progress.HumanBytes(t.BytesMoved), t.BlobsFound, progress.HumanBytes(t.BytesFound), t.Reused,
		secs, progress.HumanBytes(int64(float64(t.BytesMoved)/max(secs, 0.001))))
	if n.Signatures > 0 {
		what := "signatures"
		if k := sigstore.ReferrerKinds(r.Set.Referrers()); k != "" {
			what = "signatures and referrers (" + k + ")"
		}
		fmt.Fprintf(w, "%s: %d copied, %d already at the destination, %d failed\n", what, n.SigCopied, n.SigThere, n.SigFailed)
	}
	if r.Mode != "mirror-to-disk" {
		r.printVerified(w)
	}
	if res.Retries > 0 {
		fmt.Fprintf(w, "retries: %d transfers tried again after a transient error (5xx, 429, dropped connection)\n", res.Retries)
	}
	r.printBlocked(w)
	if r.Mode == "disk-to-mirror" && len(r.LeftOut) > 0 {
		// The copy itself succeeded; the admin must still learn the mirror
		// lacks what mirror-to-disk could not get.
		fmt.Fprintf(w, "the archive is partial: mirror-to-disk left out %d images, so the mirror does not have them: %s; fix them on the connected side (its summary says how) and carry the next archive\n",
			len(r.LeftOut), strings.Join(r.LeftOut, ", "))
	}
	if len(r.Archive) > 0 {
		fmt.Fprintf(w, "archive: %d blobs and manifests (%s) in %d chunk(s)", r.ArchiveFiles, progress.HumanBytes(r.ArchiveBytes), len(r.Archive))
		if r.ArchiveCarried > 0 {
			fmt.Fprintf(w, "; %d more carried by earlier archives", r.ArchiveCarried)
		}
		fmt.Fprintln(w)
	}
	for _, c := range r.Archive {
		fmt.Fprintf(w, "archive: %s\n", c)
	}
	if r.Signature != "" {
		fmt.Fprintf(w, "archive signature: %s (carry it with the chunks)\n", r.Signature)
	}
	for _, c := range r.ClusterResources {
		fmt.Fprintf(w, "cluster resource: %s\n", c)
	}
	r.printHeldMirrorSets(w)
	for _, c := range r.HelmCharts {
		fmt.Fprintf(w, "helm chart: %s\n", c)
	}
	if r.ChartsRefused != "" {
		fmt.Fprintf(w, "WARNING %s\n", r.ChartsRefused)
	}
	r.printPrune(w)
	r.printFailures(w)
}

// printVerified says what the copy verified at the mirror, from what it
// already knows (no request of its own): a blob is sent with its digest,
// which the registry checks before keeping it, or was found or mounted
// there, or an earlier run put it in the repository; a manifest is put by
// its digest's content and the registry accepted it; an image found there
// had its tag on the expected digest. Blobs of images found there are not
// asked for: verify does that.
func (r *Report) printVerified(w io.Writer) {
	res := r.Result
	flag := "--workspace"
	if r.Mode == "disk-to-mirror" {
		flag = "--from"
	}
	fmt.Fprintf(w, "verified at the destination: %d images put by digest and accepted by the registry (each blob checked against its digest as it arrived, or already there), %d found under their tags with the expected digest",
		len(res.Copied), len(res.Skipped)-r.Trusted)
	if r.Trusted > 0 {
		fmt.Fprintf(w, ", %d referrers of those taken to be there, listed, from the workspace's records", r.Trusted)
	}
	if len(res.Failed) > 0 {
		fmt.Fprintf(w, ", %d failed", len(res.Failed))
	}
	fmt.Fprintf(w, "; every blob and platform manifest asked again: gapmirror verify %s file://%s docker://%s\n", flag, filepath.Dir(r.Workspace), r.Mirror)
}

func total(counts map[string]int) (n int) {
	for _, c := range counts {
		n += c
	}
	return n
}

// runCounts are a run's image figures; Copied + AlreadyThere + Built +
// Failed = Images (signatures excluded; failed includes the images that
// could not be resolved).
type runCounts struct {
	Images, Copied, AlreadyThere, Built, Failed int
	Signatures, SigCopied, SigThere, SigFailed  int
}

// counts adds up the run's images.
func (r *Report) counts() runCounts {
	var n runCounts
	count := func(img imageset.Image, copied, there, failed *int, sig *int) {
		switch {
		case img.Kind.Attached():
			*sig++
			n.Signatures++
		case img.Built && failed == nil:
			n.Built++
			n.Images++
		default:
			n.Images++
			if failed != nil {
				*failed++
			} else if copied != nil {
				*copied++
			} else {
				*there++
			}
		}
	}
	if r.Result != nil {
		for _, img := range r.Result.Copied {
			count(img, &n.Copied, nil, nil, &n.SigCopied)
		}
		for _, img := range r.Result.Skipped {
			count(img, nil, &n.AlreadyThere, nil, &n.SigThere)
		}
		for _, f := range r.Result.Failed {
			count(f.Image, nil, nil, &n.Failed, &n.SigFailed)
		}
	}
	if r.Resolution != nil {
		for _, f := range r.Resolution.Failed {
			if !f.NotImage {
				n.Images++
				n.Failed++
			}
		}
	}
	return n
}

// failureGroup is the failures of one cause at one place.
type failureGroup struct {
	cause  failure.Cause
	where  string // registry host, when known
	answer string // the registry's answer (or the error) of the first
	count  int    // failures: an image mirrored to two places fails twice
	images []string
	// missing is the failure file whose run never resolved these images
	// (a --retry-failed run cannot copy them), else "".
	missing string
	// unresolved: some of the images never resolved to a digest, so only
	// running the configuration again can mirror them.
	unresolved bool
}

// answerOf is err as a FAILED heading says it, and the registry it came
// from when known: without the advice RegistryError and the registry
// client add, as the fix of its cause has a line of its own.
func answerOf(err error) (where, answer string) {
	var me *failure.MissingError
	if errors.As(err, &me) {
		return me.Host, me.Answer
	}
	answer = failure.Message(err)
	var re *failure.RegistryError
	if errors.As(err, &re) {
		where = re.Host()
		if re == err {
			answer = failure.Message(re.Err)
		} else if fix := failure.Classify(re.Err).Fix; fix != "" {
			answer = strings.ReplaceAll(answer, " ("+fix+")", "")
		}
	}
	if failure.Classify(err).Fix != "" {
		var pe *registryapi.Error
		if errors.As(err, &pe) && pe.Hint != "" {
			answer = strings.ReplaceAll(answer, " ("+pe.Hint+")", "")
		}
		for _, a := range registryapi.Advices(err) {
			answer = strings.ReplaceAll(answer, a, "")
		}
	}
	return where, answer
}

// failures groups the run's failures by cause and registry, in the order
// first met (resolution first).
func (r *Report) failures() []*failureGroup {
	var groups []*failureGroup
	byKey := map[string]*failureGroup{}
	add := func(name string, err error, unresolved bool) {
		cause := failure.Classify(err)
		where, answer := answerOf(err)
		missing := ""
		var me *failure.MissingError
		if errors.As(err, &me) {
			missing = me.File
		}
		// Images a retry could not try stay apart from those it tried.
		key := cause.Kind + "\x00" + where + "\x00" + missing
		if where == "" || cause.Kind == failure.CauseOther {
			key += "\x00" + answer // unlike causes stay apart
		}
		g := byKey[key]
		if g == nil {
			g = &failureGroup{cause: cause, where: where, answer: answer, missing: missing}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.unresolved = g.unresolved || unresolved
		g.count++
		// An image mirrored to several places (a component several
		// releases share) is named once.
		if !slices.Contains(g.images, name) {
			g.images = append(g.images, name)
		}
	}
	if r.Resolution != nil {
		for _, f := range r.Resolution.Failed {
			name := f.Origin
			if f.Why != "" {
				name += " (" + f.Why + ")"
			}
			add(name, f.Err, !f.NotImage)
		}
	}
	if r.Result != nil {
		for _, f := range r.Result.Failed {
			name := f.Image.Origin
			if needs := neededBy(f.Image); needs != "" {
				name += " (needed by " + needs + ")"
			}
			// Copy prefixes the image's names, which the list shows.
			err := f.Err
			if inner := errors.Unwrap(err); inner != nil && strings.HasPrefix(err.Error(), f.Image.Origin+" (") {
				err = inner
			}
			add(name, err, false)
		}
	}
	return groups
}

// printFailures prints each cause once: count, where, the registry's
// answer, the fix, up to five images; then where the full list is and
// what mirrors them: --retry-failed when every one resolved and failed for
// a cause that passes, else running the configuration again.
func (r *Report) printFailures(w io.Writer) {
	groups := r.failures()
	if len(groups) == 0 {
		return
	}
	retry, unresolved := true, false
	for _, g := range groups {
		where := ""
		if g.where != "" {
			where = " at " + g.where
		}
		what, them := "images", "them"
		if g.count == 1 {
			what, them = "image", "it"
		}
		if g.missing != "" {
			fmt.Fprintf(w, "FAILED %d %s%s (%s), still missing: the run that wrote %s never resolved %s to a digest, so --retry-failed cannot copy %s; it failed with: %s\n",
				g.count, what, where, g.cause.Kind, g.missing, them, them, g.answer)
		} else {
			fmt.Fprintf(w, "FAILED %d %s%s (%s): %s\n", g.count, what, where, g.cause.Kind, g.answer)
		}
		if g.cause.Fix != "" {
			fmt.Fprintf(w, "  fix: %s\n", g.cause.Fix)
		}
		if g.cause.Registry && g.count > 1 && g.missing == "" {
			fmt.Fprintf(w, "  every image of %s stopped at once: no retry fixes this\n", g.where)
		}
		list, more := g.images, ""
		if len(list) > 5 {
			list, more = list[:5], fmt.Sprintf(" and %d more", len(list)-5)
		}
		switch twice := g.count - len(g.images); {
		case twice == 1:
			more += "; 1 more failure is one of these at another destination"
		case twice > 1:
			more += fmt.Sprintf("; %d more failures are these at other destinations", twice)
		}
		fmt.Fprintf(w, "  %s%s\n", strings.Join(list, ", "), more)
		unresolved = unresolved || g.unresolved
		retry = retry && !g.unresolved && (g.cause.Kind == failure.CauseTransient || g.cause.Kind == failure.CauseUnreachable)
	}
	r.printAdvice(w)
	again := "run the configuration again"
	if r.Mode == "disk-to-mirror" {
		again = "run disk-to-mirror again"
	}
	switch {
	case r.FailedFile != "" && retry:
		fmt.Fprintf(w, "full list: %s; retry exactly these: --retry-failed %s\n", r.FailedFile, r.FailedFile)
	case r.FailedFile != "" && unresolved:
		fmt.Fprintf(w, "full list: %s; once fixed, %s: images that never resolved to a digest are not for --retry-failed\n", r.FailedFile, again)
	case r.FailedFile != "":
		fmt.Fprintf(w, "full list: %s; once fixed, %s\n", r.FailedFile, again)
	case r.Result == nil:
		fmt.Fprintf(w, "dry run: nothing was copied; fix the above and run again\n")
	}
}

// printAdvice says what the failures of whole sections mean.
func (r *Report) printAdvice(w io.Writer) {
	if r.Resolution == nil {
		return
	}
	refused, unsigned, unusable := 0, 0, 0
	for _, f := range r.Resolution.Failed {
		switch {
		case f.NotImage:
			unusable++
		case errors.Is(f.Err, release.ErrReleaseNotVerified):
			refused++
		case errors.Is(f.Err, failure.ErrPolicyRefused):
			unsigned++
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
	by := "mirror.blockedImages"
	if r.BlockedByArchive {
		// A subset's sections may not have named some of them at all.
		by = "the archive's mirror.blockedImages, in the whole archive (this -c subset may not name them)"
	}
	fmt.Fprintf(w, "%d images left out by %s (not mirrored, not in IDMS/ITMS): %s%s\n", len(r.Resolution.Blocked), by, strings.Join(list, ", "), more)
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
	fe := &FailedError{DryRun: r.Result == nil}
	for _, f := range r.Resolution.Failed {
		fe.Groups = append(fe.Groups, f.Kind.Group())
		fe.Errs = append(fe.Errs, fmt.Errorf("%s: %w", f.Origin, f.Err))
	}
	if r.Result != nil {
		for _, f := range r.Result.Failed {
			fe.Groups = append(fe.Groups, f.Image.Groups()...)
			fe.Errs = append(fe.Errs, f.Err)
		}
		fe.Mirrored = len(r.Result.Copied) + len(r.Result.Skipped)
	}
	if len(fe.Errs) == 0 {
		return r.pruneErr()
	}
	kinds := map[string]bool{}
	groups := r.failures()
	for _, g := range groups {
		k := g.cause.Kind
		if g.where != "" {
			k += " at " + g.where
		}
		if !kinds[k] {
			kinds[k] = true
			fe.Causes = append(fe.Causes, k)
		}
	}
	sort.Strings(fe.Causes)
	return fe
}

// FailedError says which images failed; its exit code has a bit per
// content group (2 release, 4 operator, 8 additional, 16 helm).
type FailedError struct {
	Groups []string
	Errs   []error
	// Causes are the kinds of failure (Classify), for the one-line message.
	Causes []string
	// DryRun: nothing was copied. Mirrored: images that did make it.
	DryRun   bool
	Mirrored int
}

// Error is one line: the details and the fixes were printed once,
// grouped, above.
func (e *FailedError) Error() string {
	causes := ""
	if len(e.Causes) > 0 {
		causes = " (" + strings.Join(e.Causes, ", ") + ")"
	}
	what := "images or charts"
	if len(e.Errs) == 1 {
		what = "image or chart"
	}
	switch {
	case e.DryRun:
		return fmt.Sprintf("dry run: %d %s cannot be mirrored%s, see FAILED above; nothing was copied", len(e.Errs), what, causes)
	case e.Mirrored > 0:
		return fmt.Sprintf("%d %s failed%s, see FAILED above; %d others are at the destination", len(e.Errs), what, causes, e.Mirrored)
	default:
		return fmt.Sprintf("%d %s failed%s, see FAILED above; none are at the destination", len(e.Errs), what, causes)
	}
}

// ExitCode is the OR of the failed groups' bits.
func (e *FailedError) ExitCode() int { return imageset.ExitCode(e.Groups) }

// unresolvedRecords are the failure file's entries for images that never
// resolved, so a --retry-failed run still reports them missing.
func unresolvedRecords(res *imageset.Resolution) []workspace.Failure {
	if res == nil {
		return nil
	}
	var out []workspace.Failure
	for _, f := range res.Failed {
		if !f.NotImage {
			rec := newFailureRecord(f.Origin, f.Err)
			rec.Unresolved, rec.Kind = true, f.Kind
			out = append(out, rec)
		}
	}
	return out
}

// newFailureRecord is the failure file's entry for image failing with err:
// the error in full, and its cause and registry, so that a --retry-failed
// run reports the images it cannot copy under the cause they failed for.
func newFailureRecord(image string, err error) workspace.Failure {
	var me *failure.MissingError
	if errors.As(err, &me) {
		// Still missing from an earlier run: what that run was told.
		return workspace.Failure{Image: image, Error: me.Answer, Cause: me.Cause().Kind, Host: me.Host}
	}
	where, _ := answerOf(err)
	return workspace.Failure{Image: image, Error: failure.Message(err), Cause: failure.Classify(err).Kind, Host: where}
}

// stillUnresolved are the entries of a failure file --retry-failed cannot
// copy: images its run never resolved to a digest (left in missing).
func stillUnresolved(all []workspace.Failure, missing map[string]bool, file string) []imageset.Unresolved {
	var out []imageset.Unresolved
	for _, f := range all {
		if !missing[f.Image] {
			continue
		}
		kind := f.Kind
		if kind == "" {
			kind = imageset.KindAdditional
		}
		// The recorded error names the image and ends with the fix of its
		// cause, which the summary says on lines of their own.
		me := &failure.MissingError{File: file, Kind: f.Cause, Host: f.Host, Answer: strings.TrimPrefix(f.Error, f.Image+": ")}
		if me.Host == "" && me.Answer != f.Error {
			// A file from before hosts were kept: the error is the
			// registry's answer about the image's own reference.
			me.Host = failure.RefHost(f.Image)
		}
		if fix := me.Cause().Fix; fix != "" {
			me.Answer = strings.ReplaceAll(me.Answer, " ("+fix+")", "")
		}
		out = append(out, imageset.Unresolved{Origin: f.Image, Kind: kind, Err: me})
	}
	return out
}

// plural is "1 image", "2 images".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
