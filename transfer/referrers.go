package transfer

import (
	"context"
	"errors"
	"sync"

	"github.com/distribution/reference"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/failure"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/registryapi"
)

// Referrers lists the OCI 1.1 referrers of manifest d of img (the image or
// one of its platform manifests, or a referrer of it) of artifactType ("":
// every one), where img is read: upstream through its pull sources, at a
// mirror in its destination repository. See registryapi.Client.Referrers.
func (r *Registry) Referrers(ctx context.Context, img imageset.Image, d digest.Digest, artifactType string) ([]v1.Descriptor, error) {
	var refs []v1.Descriptor
	err := r.fromSources(img, func(s pullSource) error {
		// Retried here, as a tag's resolution is, so that every caller
		// (the referrers search, the bundle policy) rides out a 429 or 5xx.
		return Retry(ctx, r.Retries, r.RetryDelay, func() (err error) {
			refs, _, err = s.client.Referrers(ctx, reference.Path(s.ref), d, artifactType)
			return err
		})
	})
	return refs, err
}

// referrerLocks serialises the updates of one subject's referrers tag
// schema index (read, merge, PUT) within the run.
type referrerLocks struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
	taken sync.Once
	// listed are the referrers the tag schema indexes read this run list,
	// by repo@subject.
	listed map[string]map[string]bool
	// recorded are the referrers (destination@digest) the workspace's
	// records say an earlier run left at the mirror, listed, in the same
	// run as the image they are attached to (see TrustReferrers).
	recorded map[string]bool
	// confirmed are the images (destination repository@digest) whose tag
	// this run found naming them, whole.
	confirmed map[string]bool
	// trustedN counts the referrers taken to be there on the records.
	trustedN int
}

// TrustedReferrers is how many referrers this run took to be at the
// mirror on the workspace's records, without asking (see TrustReferrers).
func (r *Registry) TrustedReferrers() int {
	r.referrers.mu.Lock()
	defer r.referrers.mu.Unlock()
	return r.referrers.trustedN
}

// TrustReferrers takes the referrers (destination@digest) that the
// workspace's records place at the mirror, pushed or found and listed
// among their subject's referrers by the same run that last saw their
// image there. Once this run finds that image under its tag (a HEAD it
// makes anyway), such a referrer is taken to be there and listed without
// asking: referrers are content-addressed, as blobs are, and asking for each
// (its HEAD and its subject's tag schema index) cost two to three requests
// per image on a rerun. An index another tool clobbered afterwards is
// found by `gapmirror verify`, whose fix copies the referrer again.
func (r *Registry) TrustReferrers(keys map[string]bool) {
	r.referrers.mu.Lock()
	r.referrers.recorded = keys
	r.referrers.mu.Unlock()
}

// confirm notes whether this run found img whole at the mirror.
func (l *referrerLocks) confirm(img imageset.Image, d digest.Digest, whole bool) {
	if img.Kind == imageset.KindReferrer || len(l.recorded) == 0 {
		return
	}
	l.mu.Lock()
	if l.confirmed == nil {
		l.confirmed = map[string]bool{}
	}
	k := img.DestinationRepo() + "@" + d.String()
	l.confirmed[k] = l.confirmed[k] || whole
	l.mu.Unlock()
}

// trusted reports whether referrer img is recorded and its image was
// found whole in this run (see TrustReferrers).
func (l *referrerLocks) trusted(img imageset.Image) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	ok := l.recorded[img.Destination+"@"+img.Digest] && l.confirmed[img.DestinationRepo()+"@"+img.SignatureOf]
	if ok {
		l.trustedN++
	}
	return ok
}

// AttachedLast orders images for existence checks: the images first, then
// what is attached to them (referrers), so that the check of a referrer
// can use what the check of its image found (see TrustReferrers).
func AttachedLast(images []imageset.Image) [][]imageset.Image {
	var plain, attached []imageset.Image
	for _, img := range images {
		if img.Kind == imageset.KindReferrer {
			attached = append(attached, img)
		} else {
			plain = append(plain, img)
		}
	}
	return [][]imageset.Image{plain, attached}
}

func (l *referrerLocks) lock(key string) func() {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]*sync.Mutex{}
	}
	m := l.locks[key]
	if m == nil {
		m = &sync.Mutex{}
		l.locks[key] = m
	}
	l.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// referrerListed reports whether referrer img, which the mirror holds, is
// listed among its subject's referrers: always where the mirror has the
// referrers API; for one without it, when the subject's tag schema index
// names it (one read of the index per subject and run). A run stopped
// between a referrer's PUT and its index's leaves it unlisted: the next
// run copies it again, which lists it.
func (r *Registry) referrerListed(ctx context.Context, img imageset.Image) (bool, error) {
	subject := digest.Digest(img.Subject)
	if subject == "" || img.SubjectTagged {
		return true, nil
	}
	c, repo, err := r.pushClient(img)
	if err != nil {
		return false, err
	}
	key := repo + "@" + subject.String()
	defer r.referrers.lock(key)()
	if api, err := c.HasReferrersAPI(ctx, repo, subject); err != nil || api {
		return api, err
	}
	r.referrers.mu.Lock()
	listed, ok := r.referrers.listed[key]
	r.referrers.mu.Unlock()
	if !ok {
		refs, fallback, err := c.Referrers(ctx, repo, subject, "")
		if err != nil || !fallback {
			return !fallback, err
		}
		listed = map[string]bool{}
		for _, ref := range refs {
			listed[ref.Digest.String()] = true
		}
		r.referrers.mu.Lock()
		if r.referrers.listed == nil {
			r.referrers.listed = map[string]map[string]bool{}
		}
		r.referrers.listed[key] = listed
		r.referrers.mu.Unlock()
	}
	return listed[img.Digest], nil
}

// listReferrer makes referrer img, just pushed to repo, listed among its
// subject's referrers: a registry with the referrers API lists it itself;
// for one without, the referrers tag schema index of the subject gets it
// (merged into what is there, as the distribution spec asks of a client).
func (r *Registry) listReferrer(ctx context.Context, c *registryapi.Client, repo string, img imageset.Image, mt string, data []byte) error {
	subject := digest.Digest(img.Subject)
	if subject == "" {
		return nil
	}
	defer r.referrers.lock(repo + "@" + subject.String())()
	api, err := c.HasReferrersAPI(ctx, repo, subject)
	if err != nil || api {
		return err
	}
	if img.SubjectTagged {
		r.referrers.taken.Do(func() {
			if r.log != nil {
				r.log.Warn("the mirror has no referrers API, and images named by digest are tagged sha256-<hex> there, the tag its referrers index would need: their referrers are copied but not listed (a registry with the referrers API, such as Quay, lists them)", "example", r.Name(img))
			}
		})
		return nil
	}
	desc, err := registryapi.ReferrerDescriptor(data, mt)
	if err != nil {
		return err
	}
	err = c.AddFallbackReferrers(ctx, repo, subject, []v1.Descriptor{desc})
	if err == nil {
		r.referrers.mu.Lock()
		if l := r.referrers.listed[repo+"@"+subject.String()]; l != nil {
			l[img.Digest] = true
		}
		r.referrers.mu.Unlock()
	}
	if err == nil || errors.Is(err, registryapi.ErrFallbackTagTaken) {
		return nil // another tool's tag: left alone
	}
	return failure.Explain(err, r.Name(img))
}
