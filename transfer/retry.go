package transfer

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/gapmirror/gapmirror/backoff"
	"github.com/gapmirror/gapmirror/failure"
	"github.com/gapmirror/gapmirror/imageset"
)

// retry runs op until it succeeds, fails for good, or the retries are spent;
// each retry is reported (with its cause) to the copy's progress.
func (c *copier) retry(ctx context.Context, op func() error) error {
	tries := 0
	return retryReporting(ctx, c.opts.Retries, c.opts.RetryDelay, c.opts.Progress, func() error {
		if tries++; tries > 1 {
			c.retries.Add(1) // counted for the summary
		}
		return op()
	})
}

type progressKey struct{}

// WithProgress makes the retries of requests made with ctx outside a copy
// (resolution: tags, catalogs, signatures) reported to p: a Progress's
// phase counts and logs them.
func WithProgress(ctx context.Context, p RetryReporter) context.Context {
	return context.WithValue(ctx, progressKey{}, p)
}

func retryReporting(ctx context.Context, retries int, delay time.Duration, p RetryReporter, op func() error) error {
	return backoff.Policy{Retries: retries, Delay: delay, Max: 30 * time.Second,
		OnRetry: func(attempt int, err error, wait time.Duration) { p.Retry("registry request", err, attempt, wait) },
	}.Do(ctx, func() (bool, error) {
		err := op()
		return failure.Transient(err), err
	})
}

// breaker stops the images of a registry once one of them failed for a
// registry-level cause (TLS, plain HTTP, credentials, DNS).
type breaker struct {
	mu      sync.Mutex
	stopped map[string]error
}

// trip records err of img; a registry-level cause stops its registry.
func (b *breaker) trip(err error) {
	var re *failure.RegistryError
	if err == nil || !errors.As(err, &re) || !failure.Classify(err).Registry {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped == nil {
		b.stopped = map[string]error{}
	}
	if _, ok := b.stopped[re.Host()]; !ok {
		b.stopped[re.Host()] = re
	}
}

// check returns a StoppedError when one of hosts is stopped.
func (b *breaker) check(hosts ...string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, h := range hosts {
		if err, ok := b.stopped[h]; ok && h != "" {
			return &failure.StoppedError{Host: h, Err: err}
		}
	}
	return nil
}

// stopped is the copier's hook before an image: its source or destination
// registry already failed for good.
func (c *copier) stopped(img imageset.Image) error {
	from, to := c.hosts(img)
	return c.breaker.check(from, to)
}

// endpoints are the copy's source and destination without the planning
// pass's wrappers.
func (c *copier) endpoints() (Source, Destination) {
	src, dst := c.src, c.dst
	if p, ok := src.(*plannedSource); ok {
		src = p.unwrap()
	}
	if p, ok := dst.(*plannedDestination); ok {
		dst = p.unwrap()
	}
	return src, dst
}

// hosts are the registries img is copied from and to ("" for a local side:
// the store, an archive, a layout; and for a source registries.conf gives
// mirrors to try in turn: see trip).
//
// Asked for every blob of img (its lane) and every image (the breaker),
// the answer is worked out once per image: it parses references and looks
// registries.conf up.
func (c *copier) hosts(img imageset.Image) (from, to string) {
	key := img.Source + "\x00" + img.Destination
	if h, ok := c.hostsOf.Load(key); ok {
		pair := h.([2]string)
		return pair[0], pair[1]
	}
	_, dst := c.endpoints()
	if r := c.upstream(img); r != nil && !r.triedInTurn(img) {
		from = failure.RefHost(r.Name(img))
	}
	if r, ok := dst.(*Registry); ok {
		to = failure.RefHost(r.Name(img))
	}
	c.hostsOf.Store(key, [2]string{from, to})
	return from, to
}

// upstream is the registry img is read from, nil for a local source.
func (c *copier) upstream(img imageset.Image) *Registry {
	src, _ := c.endpoints()
	switch s := src.(type) {
	case *Registry:
		return s
	case builtSource:
		if r, ok := s.Source.(*Registry); ok && !s.local(img) {
			return r
		}
	}
	return nil
}

// trip records img's failure with the breaker, unless registries.conf
// gives img several places to pull from (its mirrors, then its source):
// one of them failing then says nothing of the registry's other images,
// which may come from a mirror (see Registry.triedInTurn).
func (c *copier) trip(img imageset.Image, err error) {
	if r := c.upstream(img); r != nil && r.triedInTurn(img) {
		return
	}
	c.breaker.trip(err)
}

// Retry runs op until it succeeds, fails for good (not Transient), or
// retries are spent, backing off exponentially from delay. Each retry is
// reported to the Progress ctx carries (WithProgress), if any.
func Retry(ctx context.Context, retries int, delay time.Duration, op func() error) error {
	p, ok := ctx.Value(progressKey{}).(RetryReporter)
	if !ok {
		p = nopProgress{}
	}
	return retryReporting(ctx, retries, delay, p, op)
}
