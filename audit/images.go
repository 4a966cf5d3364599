package audit

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gapmirror/gapmirror/failure"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/registryapi"
	"github.com/gapmirror/gapmirror/transfer"
)

// checkImages checks every image of the set at its destination, at most
// ParallelImages at once: one GET of the destination tag (the digest of
// what it returns says whether the tag is right, and its content which
// platform manifests and blobs to ask for), one GET per platform manifest
// kept, one HEAD per blob of a repository.
func (a *Audit) checkImages(ctx context.Context) {
	set := a.Expected.Plan.Set
	blobs := make(chan struct{}, 2*a.ParallelImages)
	work := make(chan imageset.Image)
	var wg sync.WaitGroup
	for range a.ParallelImages {
		wg.Go(func() {
			for img := range work {
				a.checkImage(ctx, img, blobs)
			}
		})
	}
	for _, img := range set.Images {
		if img.Kind.Attached() {
			a.counts.Signatures++
		} else {
			a.counts.Images++
		}
		if ctx.Err() != nil {
			break
		}
		work <- img
	}
	close(work)
	wg.Wait()
}

// checkImage checks one image; blobs bounds the blob requests in flight.
func (a *Audit) checkImage(ctx context.Context, img imageset.Image, blobs chan struct{}) {
	want, err := digest.Parse(img.Digest)
	if err != nil {
		a.Report(a.problem(kindMissingImage, img, fmt.Sprintf("the record gives no valid digest (%q): %v", img.Digest, err)))
		return
	}
	if why, failed := a.Expected.Failed[img.Destination]; failed {
		a.Report(a.problem(kindNotPushed, img, "the last run could not push it: "+why))
		return
	}
	c, repo, err := a.client(img)
	if err != nil {
		a.Report(a.problem(kindUnreachable, img, failure.Message(err)))
		return
	}
	tag := img.DestinationTag()
	byDigest := tag == "" // a referrer, pushed by digest
	if byDigest {
		tag = want.String()
	}
	a.asked(1)
	data, _, err := c.Manifest(ctx, repo, tag)
	switch {
	case err != nil && !registryapi.IsNotFound(err):
		a.Report(a.problem(kindUnreachable, img, failure.Message(failure.Explain(err, a.name(img)))))
		return
	case err == nil && want.Algorithm().FromBytes(data) == want:
	case byDigest:
		// Asked by digest already: no tag to tell apart from the content.
		a.Report(a.problem(kindReferrerMissing, img, fmt.Sprintf("referrer of %s@%s: its digest is not at the mirror", img.DestinationRepo(), img.Subject)))
		return
	default:
		// The tag is gone or names another manifest: is the image itself
		// still there by digest?
		moved := ""
		if err == nil {
			moved = want.Algorithm().FromBytes(data).String()
		}
		a.asked(1)
		data, _, err = c.Manifest(ctx, repo, want.String())
		switch {
		case err != nil && registryapi.IsNotFound(err):
			detail := "neither its tag nor its digest is at the mirror"
			if moved != "" {
				detail = "its tag names " + moved + " and the image itself is gone"
			}
			a.Report(a.problem(kindMissingImage, img, detail))
			return
		case err != nil:
			a.Report(a.problem(kindUnreachable, img, failure.Message(failure.Explain(err, a.name(img)))))
			return
		case moved != "":
			a.Report(a.problem(kindTagMoved, img, fmt.Sprintf("tag %s names %s, not %s (the image is still there by digest)", tag, moved, want)))
		default:
			a.Report(a.problem(kindTagMissing, img, fmt.Sprintf("tag %s is gone (the image is still there by digest)", tag)))
		}
	}
	if img.Kind == imageset.KindOperatorCatalog && img.Built {
		a.keepManifest(repo, want, data)
	}
	whole := a.checkContent(ctx, img, c, repo, want, data, blobs)
	a.mu.Lock()
	a.found[img.Destination] = whole
	a.mu.Unlock()
}

// checkContent checks the platform manifests (of an index) and the blobs
// of the manifest data, digest d, in repo; true when all are there.
func (a *Audit) checkContent(ctx context.Context, img imageset.Image, c *registryapi.Client, repo string, d digest.Digest, data []byte, blobs chan struct{}) bool {
	check, first := a.claim("manifest " + repo + "@" + d.String())
	if !first {
		return check.wait() // another image of the repository checks it
	}
	whole := false
	defer func() { check.finish(whole) }()
	whole = a.checkManifest(ctx, img, c, repo, d, data, blobs)
	return whole
}

// checkManifest is checkContent's check of manifest d, made once.
func (a *Audit) checkManifest(ctx context.Context, img imageset.Image, c *registryapi.Client, repo string, d digest.Digest, data []byte, blobs chan struct{}) bool {
	if !transfer.IsIndex(transfer.MediaTypeOf(data)) {
		return a.checkBlobs(ctx, img, c, repo, d, data, blobs)
	}
	kids, err := transfer.Children(data)
	if err != nil {
		a.Report(a.problem(kindMissingPlatform, img, fmt.Sprintf("its index %s cannot be read: %v", d, err)))
		return false
	}
	whole := true
	for _, k := range kids {
		if !img.WantsPlatform(k.Platform) {
			continue // a sparse copy left it out
		}
		a.mu.Lock()
		a.counts.Platforms++
		a.mu.Unlock()
		a.asked(1)
		kd, _, err := c.Manifest(ctx, repo, k.Digest.String())
		switch {
		case err != nil && registryapi.IsNotFound(err):
			a.Report(a.problem(kindMissingPlatform, img, fmt.Sprintf("platform manifest %s (%s) is missing", k.Digest, platform(k.Platform))))
			whole = false
			continue
		case err != nil:
			a.Report(a.problem(kindUnreachable, img, failure.Message(failure.Explain(err, a.name(img)+"@"+k.Digest.String()))))
			whole = false
			continue
		}
		if img.Kind == imageset.KindOperatorCatalog && img.Built {
			a.keepManifest(repo, k.Digest, kd)
		}
		if !a.checkContent(ctx, img, c, repo, k.Digest, kd, blobs) {
			whole = false
		}
	}
	return whole
}

// checkBlobs asks for every blob of the image manifest data (HEAD, or with
// Deep a GET whose content is checked against the digest).
func (a *Audit) checkBlobs(ctx context.Context, img imageset.Image, c *registryapi.Client, repo string, d digest.Digest, data []byte, blobs chan struct{}) bool {
	list, err := transfer.ImageBlobs(data)
	if err != nil {
		a.Report(a.problem(kindMissingBlob, img, fmt.Sprintf("manifest %s cannot be read: %v", d, err)))
		return false
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	whole := true
	lost := func() {
		mu.Lock()
		whole = false
		mu.Unlock()
	}
	for _, b := range list {
		check, first := a.claim("blob " + repo + "@" + b.Digest.String())
		if !first {
			// Another image asks; this one is whole only if the blob is there.
			wg.Go(func() {
				if !check.wait() {
					lost()
				}
			})
			continue
		}
		a.mu.Lock()
		a.counts.Blobs++
		a.mu.Unlock()
		blobs <- struct{}{}
		wg.Go(func() {
			defer func() { <-blobs }()
			detail := a.checkBlob(ctx, c, repo, b)
			check.finish(detail == "")
			if detail != "" {
				k := kindMissingBlob
				if detail[0] == '!' {
					k, detail = kindUnreachable, detail[1:]
				}
				a.Report(a.problem(k, img, detail))
				lost()
			}
		})
	}
	wg.Wait()
	return whole
}

// checkBlob says what is wrong with blob b of repo, or "" (a leading "!"
// marks an error of the registry, not a missing blob).
func (a *Audit) checkBlob(ctx context.Context, c *registryapi.Client, repo string, b ocispec.Descriptor) string {
	a.asked(1)
	if !a.Deep {
		has, err := c.HasBlob(ctx, repo, b.Digest)
		switch {
		case err != nil:
			return "!" + failure.Message(err)
		case !has:
			return fmt.Sprintf("blob %s (%d bytes) is missing from %s", b.Digest, b.Size, repo)
		}
		return ""
	}
	rc, err := c.Blob(ctx, repo, b.Digest, b.Size)
	if err != nil {
		if registryapi.IsNotFound(err) {
			return fmt.Sprintf("blob %s (%d bytes) is missing from %s", b.Digest, b.Size, repo)
		}
		return "!" + failure.Message(err)
	}
	defer rc.Close()
	v := b.Digest.Verifier()
	// One byte more than the size tells a body too long: a registry that
	// keeps sending is not read to its end.
	n, err := io.Copy(v, io.LimitReader(rc, b.Size+1))
	switch {
	case err != nil:
		return "!" + fmt.Sprintf("reading blob %s of %s: %v", b.Digest, repo, err)
	case !v.Verified() || n != b.Size:
		return fmt.Sprintf("blob %s of %s is damaged: its %d bytes do not match the digest and size %d", b.Digest, repo, n, b.Size)
	}
	return ""
}

func (a *Audit) keepManifest(repo string, d digest.Digest, data []byte) {
	a.mu.Lock()
	a.manifests[repo+"@"+d.String()] = data
	a.mu.Unlock()
}

func platform(p *ocispec.Platform) string {
	if p == nil {
		return "no platform"
	}
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}
