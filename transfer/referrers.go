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
	err := r.fromSources(img, func(s pullSource) (err error) {
		refs, _, err = s.client.Referrers(ctx, reference.Path(s.ref), d, artifactType)
		return err
	})
	return refs, err
}

// referrerLocks serialises the updates of one subject's referrers tag
// schema index (read, merge, PUT) within the run.
type referrerLocks struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
	taken sync.Once
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
	if err == nil || errors.Is(err, registryapi.ErrFallbackTagTaken) {
		return nil // another tool's tag: left alone
	}
	return failure.Explain(err, r.Name(img))
}
