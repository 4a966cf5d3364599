package sigstore

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/failure"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/transfer"
)

// Attached is what a search for what is attached to images found and
// what it cost.
type Attached struct {
	// Platforms are the platform manifests of every image looked at, for
	// the workspace's record.
	Platforms                     map[digest.Digest][]digest.Digest
	Signatures                    SignatureStats
	Referrers                     ReferrerStats
	SignaturesTook, ReferrersTook time.Duration
	// Retries counts the requests tried again by a search run beside a
	// copy (Start), whose phases do not count them.
	Retries int64
}

// Attach looks upstream for what is attached to every image of set and to
// every platform manifest of its multi-arch images (of a sparse image,
// those it copies): the cosign signature tags when signatures is set (see
// lookupSignatures), and the OCI referrers of the kinds choice names (see
// lookupReferrers), and adds what it finds to set, to be mirrored by
// digest. An absent signature or referrer is normal; one that cannot be
// read is a warning in res and leaves the image itself alone. The platform
// manifests earlier runs recorded (known) are reused.
func (s Search) Attach(ctx context.Context, set *imageset.Set, known map[digest.Digest][]digest.Digest, signatures bool, choice imageset.ReferrerChoice, res *imageset.Resolution) Attached {
	l := s.Prepare(ctx, set, known, signatures, choice)
	l.run(ctx)
	return l.AddTo(set, res)
}

// Lookup is Attach in steps, so that its questions can be asked while the
// images themselves are copied: over a WAN they are a few thousand round
// trips (a signature tag and a referrers list per manifest), and nothing
// they find changes an image. Prepare reads the platform manifests first
// (the copy's planning pass reads them too, and takes them from there);
// Start asks the questions in the background; AddTo waits for the answers
// and adds what they found to a set.
type Lookup struct {
	s          Search
	images     []target
	kidsOf     [][]digest.Digest
	reads      int // platform manifests read upstream
	signatures bool
	choice     imageset.ReferrerChoice
	out        Attached
	sigs       *signatureSearch
	refs       *referrerSearch

	cancel  context.CancelFunc
	done    chan struct{}
	retries atomic.Int64
}

// Prepare reads the platform manifests of the images of set and returns
// the lookup of what is attached to them.
func (s Search) Prepare(ctx context.Context, set *imageset.Set, known map[digest.Digest][]digest.Digest, signatures bool, choice imageset.ReferrerChoice) *Lookup {
	l := &Lookup{s: s, images: subjects(set), signatures: signatures, choice: choice}
	kidsOf, platforms, reads := s.platformManifests(ctx, l.images, known)
	l.out.Platforms, l.reads = platforms, reads
	l.kidsOf = s.sparse(ctx, l.images, kidsOf)
	return l
}

// run asks upstream for the signature tags and the referrers, side by side:
// neither needs the other's answers.
func (l *Lookup) run(ctx context.Context) {
	start := time.Now()
	var wg sync.WaitGroup
	if l.signatures {
		wg.Go(func() {
			l.sigs = l.s.lookupSignatures(ctx, l.images, l.kidsOf)
			l.out.SignaturesTook = time.Since(start)
		})
	}
	if l.choice.Any() {
		wg.Go(func() {
			l.refs = l.s.lookupReferrers(ctx, l.images, l.kidsOf, l.choice)
			l.out.ReferrersTook = time.Since(start)
		})
	}
	wg.Wait()
}

// Start asks the questions in the background; AddTo or Stop waits for them.
func (l *Lookup) Start(ctx context.Context) {
	ctx, l.cancel = context.WithCancel(ctx)
	l.done = make(chan struct{})
	ctx = transfer.WithProgress(ctx, &lookupRetries{n: &l.retries, log: l.s.Log})
	go func() {
		defer close(l.done)
		l.run(ctx)
	}()
}

// Stop ends a started lookup (a trip that fails before its copy) and
// waits for it.
func (l *Lookup) Stop() {
	if l == nil || l.done == nil {
		return
	}
	l.cancel()
	<-l.done
}

// AddTo waits for the answers and adds what they found to set (the set
// Prepare was given, or a copy of it), its warnings to res.
func (l *Lookup) AddTo(set *imageset.Set, res *imageset.Resolution) Attached {
	if l.done != nil {
		<-l.done
	}
	out := l.out
	out.Retries = l.retries.Load()
	if l.sigs != nil {
		out.Signatures = l.sigs.add(set, l.images, l.kidsOf, res)
		out.Signatures.IndexReads = l.reads
	}
	if l.refs != nil {
		out.Referrers = l.refs.add(set, l.images, l.kidsOf, res)
	}
	return out
}

// lookupRetries counts the retries of a lookup run beside a copy and logs
// each, as a phase's meter does.
type lookupRetries struct {
	n   *atomic.Int64
	log *slog.Logger
}

func (r *lookupRetries) Retry(what string, err error, attempt int, wait time.Duration) {
	r.n.Add(1)
	if r.log != nil {
		r.log.Debug("retrying", "what", what, "attempt", attempt, "wait", wait, "cause", failure.Classify(err).Kind, "error", err)
	}
}
