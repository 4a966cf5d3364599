package mirror

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/docker/distribution/registry/api/errcode"
	v2 "github.com/docker/distribution/registry/api/v2"
	"go.podman.io/image/v5/docker"

	"github.com/gapmirror/gapmirror/registryapi"
)

// retry runs op until it succeeds, fails for good, or the retries are spent.
func (c *copier) retry(ctx context.Context, op func() error) error {
	tries := 0
	return Retry(ctx, c.opts.Retries, c.opts.RetryDelay, func() error {
		if tries++; tries > 1 {
			c.retries.Add(1) // counted for the summary
		}
		return op()
	})
}

// Retry runs op until it succeeds, fails for good (not Transient), or
// retries are spent, backing off exponentially from delay.
func Retry(ctx context.Context, retries int, delay time.Duration, op func() error) error {
	for attempt := 0; ; attempt++ {
		err := op()
		if err == nil || attempt >= retries || !Transient(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(delay*2, 30*time.Second)
	}
}

// Transient reports whether err may go away when the operation is tried
// again: dropped connections, timeouts, 5xx and 429 answers, and content
// that arrived damaged. Authentication failures, missing images and bad
// requests are final.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var de *DigestError
	if errors.As(err, &de) {
		return true // damaged in transit; a fresh read may be fine
	}
	var status docker.UnexpectedHTTPStatusError
	if errors.As(err, &status) {
		return status.StatusCode == http.StatusTooManyRequests || status.StatusCode >= 500
	}
	var pe *registryapi.Error
	if errors.As(err, &pe) {
		return pe.Status == http.StatusTooManyRequests || pe.Status >= 500
	}
	var ec errcode.Error
	if errors.As(err, &ec) {
		switch ec.Code {
		case errcode.ErrorCodeUnavailable, errcode.ErrorCodeTooManyRequests, errcode.ErrorCodeUnknown:
			return true
		case v2.ErrorCodeBlobUploadUnknown, v2.ErrorCodeBlobUploadInvalid:
			return true
		}
		return false
	}
	var ecs errcode.Errors
	if errors.As(err, &ecs) {
		for _, e := range ecs {
			if Transient(e) {
				return true
			}
		}
		return false
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	// Some transports only hand back text.
	msg := err.Error()
	for _, s := range []string{"connection reset", "broken pipe", "unexpected EOF", "server misbehaving",
		"502 Bad Gateway", "503 Service Unavailable", "504 Gateway Timeout", "500 Internal Server Error",
		"429 Too Many Requests", "TLS handshake timeout", "i/o timeout"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
