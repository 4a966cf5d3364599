package failure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"syscall"

	"github.com/distribution/reference"
	"github.com/docker/distribution/registry/api/errcode"
	v2 "github.com/docker/distribution/registry/api/v2"
	"github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/docker"

	"github.com/gapmirror/gapmirror/imageset/release"
	"github.com/gapmirror/gapmirror/registryapi"
)

// Transient reports whether err may go away when the operation is tried
// again: dropped connections, timeouts, 5xx and 429 answers, and content
// that arrived damaged. What Classify calls permanent is never retried.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	k := Classify(err).Kind
	return k == CauseTransient || k == CauseUnreachable
}

// Cause kinds: why an operation failed, decided once, so that retries,
// stopping a registry's images and the failure summary agree.
const (
	CauseTransient   = "transient"     // may work when tried again
	CauseUnreachable = "unreachable"   // connection refused: retried, it may be restarting
	CauseTLS         = "tls"           // certificate not trusted, handshake refused
	CauseScheme      = "plain-http"    // HTTP answer to an HTTPS request
	CauseAuth        = "unauthorized"  // 401: credentials missing or refused
	CauseDenied      = "denied"        // 403: the account may not do this
	CauseDNS         = "dns"           // the host name does not resolve
	CauseNotFound    = "not-found"     // manifest, tag or repository unknown
	causeSignature   = "signature"     // refused for its signatures
	causeBlocked     = "blocked"       // registries.conf says blocked = true
	causeInterrupted = "interrupted"   // the run was stopped
	CauseOther       = "other"         // anything else: not retried
	causeStopped     = "registry-down" // not tried: its registry already failed for good
)

// Cause is what Classify finds about an error.
type Cause struct {
	Kind string
	// Registry: the cause is the registry's, not one image's; every other
	// image of that registry would fail the same way.
	Registry bool
	// Fix is what the admin can do about it.
	Fix string
}

// causes are the cause of each kind, with its fix: Classify's answers, and
// what a failure file's recorded kind stands for.
var causes = map[string]Cause{
	causeInterrupted: {Kind: causeInterrupted, Fix: "run again to resume"},
	causeSignature:   {Kind: causeSignature, Fix: "have the image signed, or fix the signature policy / trusted keys, and run again"},
	causeBlocked:     {Kind: causeBlocked, Fix: "registries.conf forbids pulling from (or pushing to) it: remove the image from the configuration, add a [[registry.mirror]] to the blocking entry to pull it from there, or take blocked = true out of the entry"},
	CauseScheme:      {Kind: CauseScheme, Registry: true, Fix: "the registry speaks plain HTTP: pass --src-tls-verify=false (source) or --dest-tls-verify=false (mirror), or mark it insecure in registries.conf"},
	CauseTLS:         {Kind: CauseTLS, Registry: true, Fix: "the registry's TLS certificate is not trusted: add its CA (--src-cert-dir/--dest-cert-dir, /etc/containers/certs.d) or pass --src-tls-verify=false / --dest-tls-verify=false for this side"},
	CauseDNS:         {Kind: CauseDNS, Registry: true, Fix: "the registry's host name does not resolve: check the name (and DNS, HTTP(S)_PROXY)"},
	CauseDenied:      {Kind: CauseDenied, Fix: "the account --authfile gives for this registry may not do this (a mirror needs pull and push, a source pull); check its permissions"},
	CauseAuth:        {Kind: CauseAuth, Registry: true, Fix: "check the credentials for this registry in --authfile / $REGISTRY_AUTH_FILE, or --src-authfile / --dest-authfile when given (podman login / docker login)"},
	CauseNotFound:    {Kind: CauseNotFound, Fix: "the image, tag or repository does not exist there: check the name in the configuration"},
	CauseUnreachable: {Kind: CauseUnreachable, Fix: "the registry is unreachable: check the host name, port and network (and HTTP(S)_PROXY); run again once it answers"},
	CauseTransient:   {Kind: CauseTransient, Fix: "the registry or network failed for a while; run again"},
	CauseOther:       {Kind: CauseOther},
}

// causeOf is the cause of kind ("" and unknown kinds: CauseOther).
func causeOf(kind string) Cause {
	if c, ok := causes[kind]; ok {
		return c
	}
	return causes[CauseOther]
}

// Classify decides, once, whether err is worth retrying, whether it stops
// its registry, and what fixes it.
func Classify(err error) Cause {
	if err == nil {
		return Cause{}
	}
	var stopped *StoppedError
	if errors.As(err, &stopped) {
		return Classify(stopped.Err)
	}
	var missing *MissingError
	if errors.As(err, &missing) {
		return missing.Cause()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return causes[causeInterrupted]
	}
	if errors.Is(err, ErrPolicyRefused) || errors.Is(err, release.ErrReleaseNotVerified) {
		return causes[causeSignature]
	}
	msg := err.Error()
	low := strings.ToLower(msg)
	var be *registryapi.BlockedError
	if errors.As(err, &be) || strings.Contains(msg, " is blocked in one of ") { // containers/image's words
		return causes[causeBlocked]
	}
	var de *DigestError
	if errors.As(err, &de) {
		return Cause{Kind: CauseTransient, Fix: "content arrived damaged; run again (the retries were spent)"}
	}
	switch {
	case strings.Contains(msg, "server gave HTTP response to HTTPS client"),
		// A plain-HTTP server's answer read as a TLS record (crypto/tls's
		// RecordHeaderError): not a certificate problem.
		strings.Contains(msg, "first record does not look like a TLS handshake"):
		return causes[CauseScheme]
	case strings.Contains(low, "tls handshake timeout") || strings.Contains(low, "i/o timeout"):
		return Cause{Kind: CauseTransient, Fix: "the registry did not answer in time; run again"}
	case strings.Contains(msg, "x509:") || strings.Contains(low, "certificate") || strings.Contains(low, "tls: "):
		return causes[CauseTLS]
	case strings.Contains(msg, "no such host"):
		return causes[CauseDNS]
	}
	var pe *registryapi.Error
	if errors.As(err, &pe) && pe.Denied {
		return causes[CauseDenied]
	}
	if pe != nil && pe.Retry {
		// The client fixed what made the registry refuse (a token that
		// expired on the way, credentials a hidden repository needed, an
		// upload session the registry dropped), but could not send the
		// body again itself.
		return Cause{Kind: CauseTransient, Fix: "run again (the retries were spent)"}
	}
	var unauthorized docker.ErrUnauthorizedForCredentials
	if errors.As(err, &unauthorized) || errors.Is(err, registryapi.ErrNoCredentials) || hasStatus(err, http.StatusUnauthorized) || hasCode(err, errcode.ErrorCodeUnauthorized) ||
		strings.Contains(low, "unauthorized") || strings.Contains(low, "authentication required") {
		return causes[CauseAuth]
	}
	if hasStatus(err, http.StatusForbidden) || hasCode(err, errcode.ErrorCodeDenied) || strings.Contains(low, "denied") {
		return causes[CauseDenied]
	}
	if IsNotFound(err) || strings.Contains(low, "manifest unknown") || strings.Contains(low, "name unknown") {
		if pe != nil && pe.Hint != "" {
			// Asked without credentials of a registry that asks for none:
			// it may hide a private repository.
			return Cause{Kind: CauseNotFound, Fix: pe.Hint + "; otherwise " + causes[CauseNotFound].Fix}
		}
		return causes[CauseNotFound]
	}
	if strings.Contains(msg, "connection refused") {
		return causes[CauseUnreachable]
	}
	if transient(err) {
		return causes[CauseTransient]
	}
	return causes[CauseOther]
}

func hasStatus(err error, code int) bool {
	var status docker.UnexpectedHTTPStatusError
	if errors.As(err, &status) && status.StatusCode == code {
		return true
	}
	var pe *registryapi.Error
	return errors.As(err, &pe) && pe.Status == code
}

func hasCode(err error, code errcode.ErrorCode) bool {
	var ec errcode.Error
	if errors.As(err, &ec) && ec.Code == code {
		return true
	}
	var ecs errcode.Errors
	if errors.As(err, &ecs) {
		for _, e := range ecs {
			if hasCode(e, code) {
				return true
			}
		}
	}
	return false
}

// transient: dropped connections, timeouts, 5xx and 429 answers, and what
// the registry client marks to be sent again (Retry).
func transient(err error) bool {
	var status docker.UnexpectedHTTPStatusError
	if errors.As(err, &status) {
		return status.StatusCode == http.StatusTooManyRequests || status.StatusCode >= 500
	}
	var pe *registryapi.Error
	if errors.As(err, &pe) {
		return pe.Retry || pe.Status == http.StatusTooManyRequests || pe.Status >= 500
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
			if transient(e) {
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
		"429 Too Many Requests", "connection refused"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// RegistryError is a registry's answer about ref.
type RegistryError struct {
	Ref string
	Err error
}

func (e *RegistryError) Error() string {
	if c := Classify(e.Err); c.Fix != "" && c.Kind != CauseTransient {
		msg := e.Err.Error()
		if pe := (*registryapi.Error)(nil); errors.As(e.Err, &pe) && pe.Hint != "" && strings.Contains(c.Fix, pe.Hint) {
			msg = strings.Replace(msg, " ("+pe.Hint+")", "", 1) // the fix says it
		}
		return fmt.Sprintf("%s: %s (%s)", e.Ref, msg, c.Fix)
	}
	return fmt.Sprintf("%s: %v", e.Ref, e.Err)
}

func (e *RegistryError) Unwrap() error { return e.Err }

// Host is the registry the error came from.
func (e *RegistryError) Host() string { return RefHost(e.Ref) }

// Explain ties a registry's answer to the reference it was about; Error
// adds what the user can do about it.
func Explain(err error, ref string) error {
	var re *RegistryError
	if errors.As(err, &re) {
		return err
	}
	return &RegistryError{Ref: ref, Err: err}
}

// RefHost is the registry host of image reference ref (its first path
// element when ref does not parse).
func RefHost(ref string) string {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		host, _, _ := strings.Cut(ref, "/")
		return host
	}
	return reference.Domain(named)
}

// Message is err as the admin reads it: each part once (wrapping often
// repeats the image name) and no upload tokens or credentials.
func Message(err error) string {
	if err == nil {
		return ""
	}
	parts := strings.Split(err.Error(), ": ")
	out := parts[:0:0]
	seen := map[string]bool{}
	for _, p := range parts {
		if seen[p] && !strings.ContainsAny(p, " ") {
			continue // a repeated name prefix
		}
		seen[p] = true
		out = append(out, p)
	}
	return Redact(strings.Join(out, ": "))
}

// secrets are what must never reach a terminal, a log or a record: upload
// session state, bearer and basic credentials, passwords in URLs. Each
// regular expression runs only on text holding one of its hints (lower
// case): every log line goes through Redact, and nearly none holds any.
var secrets = []struct {
	hints []string
	re    *regexp.Regexp
	with  string
}{
	{[]string{"_state="}, regexp.MustCompile(`([?&]_state=)[^&\s"']+`), "${1}REDACTED"},
	{[]string{"authorization"}, regexp.MustCompile(`(?i)((?:proxy-)?authorization["']?\s*[:=]\s*["']?(?:bearer|basic)?\s*)[A-Za-z0-9._~+/=-]+`), "${1}REDACTED"},
	{[]string{"bearer", "basic"}, regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/-]{8,}=*`), "$1 REDACTED"},
	{[]string{"token=", "password=", "client_secret="}, regexp.MustCompile(`(?i)([?&](?:access_token|token|password|refresh_token|client_secret)=)[^&\s"']+`), "${1}REDACTED"},
	{[]string{"password\"", "auth\"", "token\""}, regexp.MustCompile(`(?i)("(?:password|auth|identitytoken|registrytoken|access_token|refresh_token|token)"\s*:\s*")[^"]*`), "${1}REDACTED"},
	{[]string{"@"}, regexp.MustCompile(`(://[^/\s:@]+:)[^@/\s]+@`), "${1}REDACTED@"},
}

// Redact removes credentials and upload tokens from s.
func Redact(s string) string {
	low := strings.ToLower(s)
	for _, r := range secrets {
		for _, h := range r.hints {
			if strings.Contains(low, h) {
				s = r.re.ReplaceAllString(s, r.with)
				low = strings.ToLower(s)
				break
			}
		}
	}
	return s
}

// ErrPolicyRefused marks images the signature policy (--secure-policy) refused.
var ErrPolicyRefused = errors.New("refused by the signature policy (--secure-policy)")

// MissingError is an image a --retry-failed run cannot copy: the run that
// wrote File never resolved it to a digest. Kind and Host are the cause
// that run recorded, so the summary groups these images as it did then.
type MissingError struct {
	File   string // the failure file
	Kind   string // Classify's kind then; "" in files written before kinds were kept
	Host   string // the registry that failed then, when known
	Answer string // what it failed with
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("still missing: the run that wrote %s never resolved it to a digest, so --retry-failed cannot copy it: %s", e.File, e.Answer)
}

// Cause is the recorded cause, or (an older file) the answer's.
func (e *MissingError) Cause() Cause {
	if e.Kind != "" {
		return causeOf(e.Kind)
	}
	return Classify(errors.New(e.Answer))
}

// IsNotFound reports whether err is a registry's "not there": a 404, or
// MANIFEST_UNKNOWN or NAME_UNKNOWN in its error body. Some registries
// answer NAME_UNKNOWN for a tag that does not exist.
func IsNotFound(err error) bool {
	var status docker.UnexpectedHTTPStatusError
	if errors.As(err, &status) && status.StatusCode == http.StatusNotFound {
		return true
	}
	if registryapi.IsNotFound(err) {
		return true
	}
	var ec errcode.Error
	if errors.As(err, &ec) && (ec.Code == v2.ErrorCodeManifestUnknown || ec.Code == v2.ErrorCodeNameUnknown) {
		return true
	}
	var ecs errcode.Errors
	if errors.As(err, &ecs) {
		for _, e := range ecs {
			if IsNotFound(e) {
				return true
			}
		}
	}
	// containers/image reports a bodiless 404 (HEAD) only as text: looked
	// for last, since formatting an error costs more than the checks above
	// (a no-change rerun asks here once per signature tag not found).
	return strings.Contains(err.Error(), "StatusCode: 404,")
}

// StoppedError is an image not tried because its registry already failed
// for a reason no retry fixes.
type StoppedError struct {
	Host string
	Err  error // the registry's failure
}

func (e *StoppedError) Error() string {
	return fmt.Sprintf("not tried: registry %s already failed for good: %v", e.Host, e.Err)
}

func (e *StoppedError) Unwrap() error { return e.Err }

// DigestError says that content did not match the digest that names it.
type DigestError struct {
	Digest digest.Digest
	Msg    string
}

func (e *DigestError) Error() string {
	return fmt.Sprintf("blob %s: %s (the source served corrupt data; nothing was stored)", e.Digest, e.Msg)
}
