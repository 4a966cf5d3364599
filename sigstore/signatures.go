package sigstore

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/pkg/sysregistriesv2"
	"go.podman.io/image/v5/types"

	"github.com/gapmirror/gapmirror/failure"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/ocistore"
	"github.com/gapmirror/gapmirror/transfer"
)

// signatureTag is the tag under which cosign stores the sigstore signature
// of manifest d in the manifest's repository: "sha256-<hex>.sig".
func signatureTag(d digest.Digest) string {
	return imageset.DigestTag(d) + ".sig"
}

// signatureLookup is one "is there a signature of repo@manifest" question.
type signatureLookup struct {
	repo     string // upstream repository, e.g. quay.io/org/app
	manifest digest.Digest
}

// signatureAnswer is what upstream said about one lookup.
type signatureAnswer struct {
	sig digest.Digest // "" when there is none
	err error         // a real error: the signature could not be read
}

// SignatureStats counts what a signature search cost and found.
type SignatureStats struct {
	// Lookups is the number of signature tags asked for (one HEAD each).
	Lookups int
	// Off counts the lookups registries.d turns off
	// (use-sigstore-attachments: false): no request is sent for them.
	Off int
	// IndexReads counts the manifests read to find platform manifests.
	IndexReads int
	Found      int
	Failed     int
}

// Search looks for signatures upstream and checks them against a policy.
type Search struct {
	Upstream *transfer.Registry
	// RegistriesD says which repositories get sigstore lookups (nil: all).
	RegistriesD *RegistriesD
	// Store holds manifests earlier runs or this resolution read.
	Store *ocistore.Store
	// Parallel bounds the lookups (each kind runs twice as many, the
	// manifest reads before them four times).
	Parallel int
	Log      *slog.Logger
}

// signatureSearch is what the signature tags of a set's images are, as
// upstream answered, before the set takes them.
type signatureSearch struct {
	lookups map[signatureLookup]*signatureAnswer
	stats   SignatureStats
}

// lookupSignatures asks upstream, next to every image and platform manifest
// of images, for the cosign signature tag.
func (s Search) lookupSignatures(ctx context.Context, images []target, kidsOf [][]digest.Digest) *signatureSearch {
	rd := s.RegistriesD
	sr := &signatureSearch{lookups: map[signatureLookup]*signatureAnswer{}}
	var order []signatureLookup
	for i, tg := range images {
		for _, d := range append([]digest.Digest{tg.manifest}, kidsOf[i]...) {
			k := signatureLookup{repo: tg.repo, manifest: d}
			if sr.lookups[k] == nil {
				sr.lookups[k] = &signatureAnswer{}
				order = append(order, k)
			}
		}
	}
	// registries.d decides per repository, as containers/image does, whether
	// sigstore attachments are looked for at all; a lookaside it names for
	// simple-signing signatures is said once (those are not mirrored).
	asked := order[:0:0]
	lookasides := map[string]bool{}
	for _, k := range order {
		if l := rd.lookaside(k.repo, k.manifest); l != "" && !lookasides[l] {
			lookasides[l] = true
			s.Log.Info("registries.d names a lookaside for simple-signing signatures: gapmirror reads it only to verify (--secure-policy) and does not mirror those signatures", "repository", k.repo, "lookaside", l)
		}
		if rd.sigstoreAttachments(k.repo, k.manifest) {
			asked = append(asked, k)
		} else {
			sr.stats.Off++
		}
	}
	if sr.stats.Off > 0 {
		s.Log.Info("registries.d turns sigstore attachments off for some repositories (use-sigstore-attachments: false): their signatures are not looked for or mirrored", "lookupsSkipped", sr.stats.Off, "registriesD", rd.from)
	}
	sr.stats.Lookups = len(asked)
	// A HEAD is cheap for the registry: twice the copy's parallelism keeps a
	// no-change rerun of thousands of images short (429s are retried).
	parallelDo(len(asked), 2*s.Parallel, func(i int) {
		k := asked[i]
		sr.lookups[k].sig, sr.lookups[k].err = lookupSignature(ctx, s.Upstream, rd, k)
	})
	return sr
}

// add adds the signatures found to set, each to be mirrored by digest
// under its tag.
func (sr *signatureSearch) add(set *imageset.Set, images []target, kidsOf [][]digest.Digest, res *imageset.Resolution) SignatureStats {
	stats := sr.stats
	warned := map[signatureLookup]bool{}
	for i, tg := range images {
		for _, d := range append([]digest.Digest{tg.manifest}, kidsOf[i]...) {
			k := signatureLookup{repo: tg.repo, manifest: d}
			a := sr.lookups[k]
			if a.err != nil {
				if !warned[k] {
					warned[k] = true
					stats.Failed++
					if failure.Classify(a.err).Registry {
						continue // the image fails for the same cause, said once in the summary
					}
					res.Warnings = append(res.Warnings, fmt.Sprintf("signature of %s@%s could not be read, so it is not mirrored (the image is): %v; if the registry is at fault run again later, or pass --remove-signatures to stop looking", k.repo, d, a.err))
				}
				continue
			}
			if a.sig == "" {
				continue
			}
			tag := signatureTag(d)
			what := tg.img.Origin
			if d != tg.manifest {
				what = fmt.Sprintf("%s (platform manifest %s)", tg.img.Origin, d)
			}
			sig := imageset.Image{
				Source:      k.repo + "@" + a.sig.String(),
				Origin:      k.repo + ":" + tag,
				Digest:      a.sig.String(),
				Destination: tg.img.DestinationRepo() + ":" + tag,
				Kind:        imageset.KindSignature,
				Why:         []string{"signature of " + what},
				AlsoKinds:   append([]imageset.Kind{tg.img.Kind}, tg.img.AlsoKinds...),
				SignatureOf: tg.img.Digest,
			}
			if err := set.Add(sig); err != nil {
				// Another image claims the tag: keep it, warn about the signature.
				res.Warnings = append(res.Warnings, fmt.Sprintf("signature of %s not mirrored: %v", what, err))
				continue
			}
		}
	}
	set.Sort()
	stats.Found = set.Signatures()
	return stats
}

// signatureManifest reads manifest d of img, from the store if it is there.
func signatureManifest(ctx context.Context, up *transfer.Registry, store *ocistore.Store, img imageset.Image, d digest.Digest, reads *atomic.Int64) ([]byte, error) {
	if store != nil && store.Has(d) {
		return store.ReadBlob(d)
	}
	if data, ok := up.KeptManifest(img, d, false); ok {
		return data, nil
	}
	reads.Add(1)
	var data []byte
	err := transfer.Retry(ctx, up.Retries, up.RetryDelay, func() (err error) {
		data, _, err = up.Manifest(ctx, img, d)
		return err
	})
	if err == nil {
		up.KeepResolved(up.Name(img), d, data) // for the copy's planning pass
	}
	return data, err
}

// lookupSignature returns the digest of the signature tag of k, "" when there
// is none. It asks where registries.conf sends pulls of k's manifest by
// digest (mirrors first, as an enclave needs), and the first source that
// answers decides: every "not there" answer (404 with MANIFEST_UNKNOWN,
// NAME_UNKNOWN or no body) means none, since some registries answer
// NAME_UNKNOWN for a tag that does not exist. Only when no source answers
// is it an error. A source registries.d turns sigstore attachments off for
// is not asked.
func lookupSignature(ctx context.Context, r *transfer.Registry, rd *RegistriesD, k signatureLookup) (digest.Digest, error) {
	named, err := reference.ParseNormalizedNamed(k.repo)
	if err != nil {
		return "", err
	}
	type source struct {
		repo reference.Named
		// skipVerify is the insecure of the source's registries.conf
		// entry (a mirror's own), as containers/image reaches it.
		skipVerify types.OptionalBool
	}
	sources := []source{{named, types.OptionalBoolUndefined}}
	canonical, err := reference.WithDigest(named, k.manifest)
	if err != nil {
		return "", err
	}
	reg, err := sysregistriesv2.FindRegistry(r.SystemContext(), canonical.String())
	if err != nil {
		return "", fmt.Errorf("reading registries.conf: %w", err)
	}
	if reg != nil {
		pulls, err := reg.PullSourcesFromReference(canonical)
		if err != nil {
			return "", fmt.Errorf("registries.conf sources of %s: %w", canonical, err)
		}
		// registries.conf's own list: its mirrors, then the primary unless
		// its entry is blocked (then it is not asked, as containers/image
		// would not ask it; none at all when it has no mirrors).
		sources = sources[:0]
		for _, s := range pulls {
			sources = append(sources, source{reference.TrimNamed(s.Reference), types.NewOptionalBool(s.Endpoint.Insecure)})
		}
	}
	var first error
	for _, s := range sources {
		repo := s.repo
		if !rd.sigstoreAttachments(repo.Name(), k.manifest) {
			continue // registries.d: no sigstore attachments from this source
		}
		d, err := headTag(ctx, r, repo, signatureTag(k.manifest), s.skipVerify)
		switch {
		case err == nil:
			return d, nil
		case failure.IsNotFound(err):
			return "", nil
		case first == nil:
			first = err
		}
	}
	return "", first
}

// headTag returns the digest repo:tag names, with one HEAD (and retries);
// skipVerify as for HeadDigestAt.
func headTag(ctx context.Context, r *transfer.Registry, repo reference.Named, tag string, skipVerify types.OptionalBool) (digest.Digest, error) {
	tagged, err := reference.WithTag(repo, tag)
	if err != nil {
		return "", err
	}
	var d digest.Digest
	err = transfer.Retry(ctx, r.Retries, r.RetryDelay, func() (err error) {
		d, err = r.HeadDigestAt(ctx, tagged, skipVerify)
		return err
	})
	if err != nil && !failure.IsNotFound(err) {
		return "", failure.Explain(err, tagged.String())
	}
	return d, err
}

// parallelDo runs do(0..n-1) with at most limit at once.
func parallelDo(n, limit int, do func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, limit)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			do(i)
		}()
	}
	wg.Wait()
}
