// Package backoff runs an operation again after transient failures,
// waiting twice as long each time: the one retry loop of registry
// requests (mirror) and of release signature fetches (imageset/release).
package backoff

import (
	"context"
	"errors"
	"time"
)

// Policy is how often and how patiently to try again.
type Policy struct {
	// Retries is how many times a transient failure is tried again.
	Retries int
	// Delay is the wait before the first retry; each next one waits twice
	// as long, up to Max.
	Delay time.Duration
	Max   time.Duration
	// OnRetry, if set, hears of each retry before its wait: the attempt
	// that failed (1 for the first), its error and the wait.
	OnRetry func(attempt int, err error, wait time.Duration)
}

// Do runs op until it succeeds, fails for good (transient false) or the
// retries are spent, and returns op's last error. A cancelled ctx ends
// the wait with op's error joined to ctx's.
func (p Policy) Do(ctx context.Context, op func() (transient bool, err error)) error {
	delay := p.Delay
	for attempt := 0; ; attempt++ {
		transient, err := op()
		if err == nil || !transient || attempt >= p.Retries {
			return err
		}
		if p.OnRetry != nil {
			p.OnRetry(attempt+1, err, delay)
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(delay):
		}
		if p.Max > 0 {
			delay = min(2*delay, p.Max)
		} else {
			delay *= 2
		}
	}
}
