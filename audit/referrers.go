package audit

import (
	"context"
	"fmt"
	"slices"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/failure"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/registryapi"
)

// checkReferrers checks that every referrer found at the mirror is listed
// among its subject's referrers, as a client (cosign, the cluster's
// policy) looks for it: through the referrers API, or at a mirror without
// it, in the subject's tag schema index, which another tool pushing there
// may have rewritten without it. One request per subject with referrers (two
// through the tag schema). A trip takes a referrer its records place at
// the mirror to be there and listed, so this is where a lost listing is
// found.
func (a *Audit) checkReferrers(ctx context.Context) {
	bySubject := map[string][]imageset.Image{}
	var subjects []string
	for _, img := range a.Expected.Plan.Set.Images {
		a.mu.Lock()
		found := a.found[img.Destination]
		a.mu.Unlock()
		// SubjectTagged: the mirror has no place for its index (the run
		// warned); a referrer the mirror lacks is reported already.
		if img.Kind != imageset.KindReferrer || img.SubjectTagged || !found || img.Subject == "" {
			continue
		}
		k := img.DestinationRepo() + "@" + img.Subject
		if _, ok := bySubject[k]; !ok {
			subjects = append(subjects, k)
		}
		bySubject[k] = append(bySubject[k], img)
	}
	slices.Sort(subjects)
	// The requests are counted on the clients: this check is the only
	// user of them while it runs.
	clients := map[*registryapi.Client]int64{}
	for _, k := range subjects {
		if c, _, err := a.client(bySubject[k][0]); err == nil {
			clients[c] = c.Requests.Load()
		}
	}
	defer func() {
		for c, before := range clients {
			a.asked(int(c.Requests.Load() - before))
		}
	}()
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(a.ParallelImages, len(subjects)) {
		wg.Go(func() {
			for k := range work {
				a.checkListed(ctx, bySubject[k])
			}
		})
	}
	for _, k := range subjects {
		if ctx.Err() != nil {
			break
		}
		work <- k
	}
	close(work)
	wg.Wait()
}

// checkListed lists the referrers of the subject the referrers refs share
// and reports each that is not among them.
func (a *Audit) checkListed(ctx context.Context, refs []imageset.Image) {
	first := refs[0]
	c, repo, err := a.client(first)
	if err != nil {
		a.Report(a.problem(kindUnreachable, first, failure.Message(err)))
		return
	}
	subject := digest.Digest(first.Subject)
	listed, fallback, err := c.Referrers(ctx, repo, subject, "")
	if err != nil {
		a.Report(a.problem(kindUnreachable, first, failure.Message(failure.Explain(err, a.name(first)))))
		return
	}
	where := fmt.Sprintf("the referrers API's list for %s@%s", repo, subject)
	if fallback {
		where = fmt.Sprintf("the referrers tag schema index %s:%s", repo, registryapi.FallbackTag(subject))
	}
	for _, img := range refs {
		if !slices.ContainsFunc(listed, func(d v1.Descriptor) bool { return d.Digest.String() == img.Digest }) {
			a.Report(a.problem(kindReferrerUnlisted, img, fmt.Sprintf("the referrer is at the mirror but %s does not list it", where)))
		}
	}
}
