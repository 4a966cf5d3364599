package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/failure"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/registryapi"
)

// Expect tells the mirror which images a copy is about to push (Copy
// calls it), so that existence checks in repositories new to this
// workspace can share one tag listing.
func (r *Registry) Expect(set *imageset.Set) {
	if r.root == "" {
		return
	}
	r.runMemory.mu.Lock()
	defer r.runMemory.mu.Unlock()
	for _, img := range set.Images {
		if named, err := reference.ParseNormalizedNamed(r.Name(img)); err == nil {
			r.expect[reference.Path(named)]++
		}
	}
}

// lacksTag reports whether the mirror's repository of named certainly
// lacks its tag, from one listing of the repository's tags for the run.
// It lists only repositories that several images of the run go to and
// that no earlier run of the workspace put blobs in (a rerun finds its
// tags there, and a HEAD each is then cheaper than a listing).
func (r *Registry) lacksTag(ctx context.Context, named reference.Named) bool {
	tagged, ok := named.(reference.Tagged)
	if !ok {
		return false
	}
	repo := reference.Path(named)
	if r.newRepo(ctx, named) {
		return true
	}
	r.runMemory.mu.Lock()
	if r.expect[repo] < 2 {
		r.runMemory.mu.Unlock()
		return false
	}
	lt := r.tags[repo]
	if lt == nil {
		if r.knownRepos[repo] {
			r.runMemory.mu.Unlock()
			return false
		}
		lt = &listedTags{}
		r.tags[repo] = lt
	}
	r.runMemory.mu.Unlock()
	c, err := r.sharedClient(named)
	if err != nil {
		return false // the HEAD that follows says what is wrong
	}
	lt.once.Do(func() {
		var tags []string
		tags, lt.err = c.Tags(ctx, repo)
		lt.tags = map[string]bool{}
		for _, t := range tags {
			lt.tags[t] = true
		}
	})
	return lt.err == nil && !lt.tags[tagged.Tag()]
}

// newRepo reports whether named's repository certainly does not exist yet,
// from one reading of the registry's catalog under the root, made only on a
// first push (no earlier run of the workspace put anything under the root;
// on a rerun the records and tag lists answer). A registry that does not
// offer its catalog (quay and others restrict it) leaves the tag lists and
// HEADs to answer. A repository the catalog misses is pushed to as new: at
// worst an image is copied again, never skipped wrongly.
func (r *Registry) newRepo(ctx context.Context, named reference.Named) bool {
	// One catalog request pays off from two repositories on.
	r.runMemory.mu.Lock()
	first, repos := len(r.knownRepos) == 0, len(r.expect)
	r.runMemory.mu.Unlock()
	if !first || repos < 2 {
		return false
	}
	r.catalog.once.Do(func() {
		c, err := r.sharedClient(named)
		if err != nil {
			return
		}
		prefix := ""
		if _, path, ok := strings.Cut(r.root, "/"); ok {
			prefix = strings.TrimSuffix(path, "/") + "/"
		}
		// Ten pages: a registry of more than 10,000 repositories is
		// cheaper to ask per repository.
		repos, err := c.Catalog(ctx, prefix, 10)
		if err != nil {
			slog.Debug("registry catalog not read: existence checks per repository", "root", r.root, "err", err)
			return
		}
		listed := make(map[string]bool, len(repos))
		for _, repo := range repos {
			listed[repo] = true
		}
		r.runMemory.mu.Lock()
		r.catalog.repos, r.catalog.ok = listed, true
		r.runMemory.mu.Unlock()
	})
	return r.unlisted(reference.Path(named))
}

// HasManifest implements Destination with one HEAD of the destination tag
// (none where the repository's listing says the tag is not there).
func (r *Registry) HasManifest(ctx context.Context, img imageset.Image, d digest.Digest) (has bool, err error) {
	if img.Kind == imageset.KindReferrer && r.referrers.trusted(img) {
		return true, nil
	}
	defer func() { r.referrers.confirm(img, d, has && err == nil) }()
	named, err := reference.ParseNormalizedNamed(r.Name(img))
	if err != nil {
		return false, err
	}
	if r.root != "" && r.lacksTag(ctx, named) {
		return false, nil
	}
	got, err := r.headDigest(ctx, named)
	if err != nil {
		if failure.IsNotFound(err) {
			return false, nil
		}
		return false, failure.Explain(err, r.Name(img))
	}
	if got != d {
		return false, nil
	}
	if img.Kind == imageset.KindReferrer {
		return r.referrerListed(ctx, img)
	}
	// A sparse image, or one an earlier run copied sparse: the tag alone
	// does not say whether the platforms wanted now are there.
	if len(img.Platforms) > 0 || len(r.Sparse[img.Destination+"@"+d.String()]) > 0 {
		return r.hasInstances(ctx, img, d)
	}
	return true, nil
}

// hasInstances reports whether the mirror holds the instances of the index d
// that the sparse image img needs: an earlier run may have copied it for
// fewer platforms. Missing instances of other platforms are not asked for.
func (r *Registry) hasInstances(ctx context.Context, img imageset.Image, d digest.Digest) (bool, error) {
	data, _, err := r.Manifest(ctx, img, d)
	if err != nil {
		return false, err
	}
	if !IsIndex(MediaTypeOf(data)) {
		return true, nil
	}
	kids, err := Children(data)
	if err != nil {
		return false, fmt.Errorf("%s: parsing index %s: %w", r.Name(img), d, err)
	}
	if kids, err = instances(img, d, kids); err != nil {
		return false, nil // the copy reports it
	}
	named, err := reference.ParseNormalizedNamed(r.Name(img))
	if err != nil {
		return false, err
	}
	for _, k := range kids {
		byDigest, err := reference.WithDigest(reference.TrimNamed(named), k.Digest)
		if err != nil {
			return false, err
		}
		if _, err := r.headDigest(ctx, byDigest); err != nil {
			if failure.IsNotFound(err) {
				return false, nil
			}
			return false, failure.Explain(err, byDigest.String())
		}
	}
	return true, nil
}

// headBlobLimit: the direct push path asks whether the mirror has a blob
// it knows nothing of (not in the workspace's records, not put by this
// run) only when the blob is this large; a smaller one costs about as
// much to send as to ask about.
const headBlobLimit = 1 << 20

// HasBlob implements Destination. Through the run's client for the
// mirror: a blob this run put or found in the repository is there (no
// request), and so is one the workspace's records place in the repository
// when the run can send it again (ResendFrom): the manifest PUT, which the
// registry refuses while a blob it references is missing, is the check;
// one another repository of the run or of the records holds is mounted
// from there (one POST, trusted only on 201; the upload the registry opens
// instead serves PutBlob); a large unknown blob gets a HEAD; a small one is
// reported absent and sent.
func (r *Registry) HasBlob(ctx context.Context, img imageset.Image, desc ocispec.Descriptor) (bool, error) {
	c, repo, err := r.pushClient(img)
	if err != nil {
		return false, err
	}
	key := repo + "@" + desc.Digest.String()
	r.runMemory.mu.Lock()
	have, from := r.have[key], r.known[desc.Digest]
	r.runMemory.mu.Unlock()
	switch {
	case have:
		return true, nil
	case from != "" && from != repo:
		mounted, loc, err := c.Mount(ctx, repo, from, desc.Digest)
		if err != nil {
			return false, failure.Explain(err, r.Name(img))
		}
		if mounted {
			r.put(repo, desc.Digest)
			return true, nil
		}
		if loc != "" {
			r.runMemory.mu.Lock()
			r.sessions[key] = loc
			r.runMemory.mu.Unlock()
		}
		return false, nil
	case from == repo:
		r.runMemory.mu.Lock()
		resend := r.resend != nil
		if resend {
			r.trusted[key] = true
		}
		r.runMemory.mu.Unlock()
		if resend {
			return true, nil
		}
		return r.HeadBlob(ctx, img, desc)
	case desc.Size >= headBlobLimit && !r.unlisted(repo):
		// A large blob may be there already (another tool pushed
		// it); a repository that did not exist holds none.
		return r.HeadBlob(ctx, img, desc)
	}
	return false, nil
}

// HeadBlob asks the mirror whether img's repository holds the blob; the
// copy asks when the source does not have a blob HasBlob did not ask about.
func (r *Registry) HeadBlob(ctx context.Context, img imageset.Image, desc ocispec.Descriptor) (bool, error) {
	c, repo, err := r.pushClient(img)
	if err != nil {
		return false, err
	}
	has, err := c.HasBlob(ctx, repo, desc.Digest)
	if err != nil {
		return false, failure.Explain(err, r.Name(img))
	}
	if has {
		r.put(repo, desc.Digest)
	}
	return has, nil
}

// PutBlob implements Destination: one monolithic upload (the mirror checks
// the digest before it keeps the blob).
func (r *Registry) PutBlob(ctx context.Context, img imageset.Image, desc ocispec.Descriptor, rd io.Reader) error {
	c, repo, err := r.pushClient(img)
	if err != nil {
		return err
	}
	key := repo + "@" + desc.Digest.String()
	r.runMemory.mu.Lock()
	loc := r.sessions[key]
	delete(r.sessions, key)
	r.runMemory.mu.Unlock()
	if err := c.PutBlob(ctx, repo, desc.Digest, desc.Size, rd, loc); err != nil {
		return failure.Explain(err, r.Name(img))
	}
	r.put(repo, desc.Digest)
	return nil
}

// PutManifest implements Destination: instances by digest, the image's own
// manifest by its destination tag.
func (r *Registry) PutManifest(ctx context.Context, img imageset.Image, desc ocispec.Descriptor, data []byte, top bool) error {
	c, repo, err := r.pushClient(img)
	if err != nil {
		return err
	}
	ref := desc.Digest.String()
	if top {
		named, err := reference.ParseNormalizedNamed(r.Name(img))
		if err != nil {
			return err
		}
		if tagged, ok := named.(reference.Tagged); ok {
			ref = tagged.Tag()
		}
	}
	err = c.PutManifest(ctx, repo, ref, desc.MediaType, data)
	if refusedManifest(err) {
		// Blobs taken to be there on the records alone may be gone
		// (the registry was restored, or cleaned): distribution
		// answers MANIFEST_BLOB_UNKNOWN, others in words of their
		// own, so any refusal has them checked. The missing ones are
		// sent, then the manifest again.
		var sent bool
		if sent, err = r.resendTrusted(ctx, c, repo, img, data, err); sent {
			err = c.PutManifest(ctx, repo, ref, desc.MediaType, data)
		}
	}
	if err != nil {
		return failure.Explain(err, r.Name(img))
	}
	if top && img.Kind == imageset.KindReferrer {
		return r.listReferrer(ctx, c, repo, img, desc.MediaType, data)
	}
	return nil
}

// ResendFrom lets HasBlob trust the workspace's records of which blobs a
// repository holds: src is where the run reads img's blobs, to send one
// after all that the registry turns out to have lost. log hears of that.
func (r *Registry) ResendFrom(src Source, log *slog.Logger) {
	r.runMemory.mu.Lock()
	r.resend, r.log = src, log
	r.runMemory.mu.Unlock()
}

// refusedManifest reports a registry's refusal of a manifest PUT for its
// content (4xx other than authentication, permission and rate limits).
func refusedManifest(err error) bool {
	var e *registryapi.Error
	if !errors.As(err, &e) || e.Status < 400 || e.Status >= 500 {
		return false
	}
	return e.Status != http.StatusUnauthorized && e.Status != http.StatusForbidden && e.Status != http.StatusTooManyRequests
}

// resendTrusted sends into repo the blobs of the image manifest data that
// HasBlob trusted the records for and that the registry does not have
// (one HEAD each), after the registry refused the manifest (refused).
// sent is false, with refused as the error, when no such blob was missing:
// the refusal is about something else.
func (r *Registry) resendTrusted(ctx context.Context, c *registryapi.Client, repo string, img imageset.Image, data []byte, refused error) (sent bool, err error) {
	if IsIndex(MediaTypeOf(data)) {
		return false, refused
	}
	blobs, err := blobsOf(data)
	if err != nil {
		return false, refused
	}
	r.runMemory.mu.Lock()
	src, log := r.resend, r.log
	var suspects []ocispec.Descriptor
	for _, b := range blobs {
		if r.trusted[repo+"@"+b.Digest.String()] {
			suspects = append(suspects, b)
		}
	}
	r.runMemory.mu.Unlock()
	if src == nil || len(suspects) == 0 {
		return false, refused
	}
	for _, b := range suspects {
		// Errors wrap what went wrong here, so that it decides whether the
		// copy tries again; the refusal is told in words.
		has, err := c.HasBlob(ctx, repo, b.Digest)
		if err != nil {
			return false, fmt.Errorf("the registry refused the manifest (%v); asking about blob %s, which the workspace records place there: %w", refused, b.Digest, err)
		}
		if has {
			r.put(repo, b.Digest)
			continue
		}
		if log != nil {
			log.Warn("the mirror lost a blob the workspace records place there: sending it again", "image", r.Name(img), "blob", b.Digest, "size", b.Size)
		}
		if err := r.sendFrom(ctx, c, src, repo, img, b); err != nil {
			return false, fmt.Errorf("the registry refused the manifest (%v) and lacks blob %s, which the workspace records place there; sending it again: %w", refused, b.Digest, err)
		}
		sent = true
	}
	if !sent {
		return false, refused
	}
	return true, nil
}

// sendFrom uploads blob b of img from src into repo, verified against its
// digest as it is read.
func (r *Registry) sendFrom(ctx context.Context, c *registryapi.Client, src Source, repo string, img imageset.Image, b ocispec.Descriptor) error {
	rc, err := src.Blob(ctx, img, b)
	if err != nil {
		return err
	}
	defer rc.Close()
	vr := &verifyingReader{r: rc, desc: b, v: b.Digest.Verifier(), progress: nopProgress{}}
	if err := c.PutBlob(ctx, repo, b.Digest, b.Size, vr, ""); err != nil {
		if vr.err != nil {
			return vr.err
		}
		return err
	}
	if vr.n != b.Size || !vr.v.Verified() {
		return &failure.DigestError{Digest: b.Digest, Msg: "the destination accepted a blob that was not read whole"}
	}
	r.put(repo, b.Digest)
	return nil
}

// KnownLocations tells the registry where blobs already are (destination
// repository per digest, as an earlier run recorded), so new images can
// mount them instead of needing their bytes.
func (r *Registry) KnownLocations(locs map[digest.Digest]string) {
	if r.root == "" {
		return
	}
	for d, repo := range locs {
		named, err := reference.ParseNormalizedNamed(r.root + "/" + repo)
		if err != nil {
			continue
		}
		r.runMemory.mu.Lock()
		if _, ok := r.known[d]; !ok {
			r.known[d] = reference.Path(named)
		}
		r.knownRepos[reference.Path(named)] = true
		r.runMemory.mu.Unlock()
	}
}

// Check makes sure the mirror registry answers and accepts our credentials,
// so that an unreachable or misconfigured mirror fails the run up front
// with one clear error instead of one error per image.
func (r *Registry) Check(ctx context.Context, img imageset.Image) error {
	// Retried like every request of a run: a 429 or a 5xx on this first
	// request is no verdict on the registry.
	err := Retry(ctx, r.Retries, r.RetryDelay, func() error {
		_, err := r.HasManifest(ctx, img, digest.Digest(img.Digest))
		return err
	})
	if err != nil {
		return fmt.Errorf("cannot use the mirror registry %s: %w", r.root, err)
	}
	return nil
}
