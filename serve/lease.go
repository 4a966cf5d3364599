package serve

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/storage/driver"
	"github.com/distribution/distribution/v3/registry/storage/driver/factory"
)

// Replicas on shared object storage cannot see each other's root lock
// (serve.lock is a local file): each running serve, and serve gc while it
// runs, keeps a lease object in the storage instead, under leaseDir (in
// the driver's rootdirectory, outside distribution's docker/ tree). A
// lease says who holds it and until when; its holder renews it every
// leaseRenew and deletes it when it stops. serve gc refuses while a serve
// lease has not expired, and serve refuses to start while a gc lease has
// not: each writes its own lease first and only then looks at the others,
// so that two starting at once both see each other (both refuse) rather
// than neither. A process killed without stopping leaves its lease, which
// expires leaseTTL after its last renewal. The clocks of the hosts must
// agree to well within leaseTTL - leaseRenew.
const leaseDir = "/gapmirror/leases"

// Lease timings (variables for tests).
var (
	leaseRenew = 30 * time.Second
	leaseTTL   = 2 * time.Minute
	// storageProbeTimeout bounds the check of the storage at start.
	storageProbeTimeout = 30 * time.Second
)

// lease is the content of a lease object.
type lease struct {
	// Kind is "serve" or "gc".
	Kind    string    `json:"kind"`
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Address string    `json:"address,omitempty"`
	Started time.Time `json:"started"`
	Renewed time.Time `json:"renewed"`
	Expires time.Time `json:"expires"`
	// Secret is a fingerprint of the replica's http.secret (an HMAC, not
	// the secret), so that replicas started with different secrets are
	// told apart: an upload started on one would fail on the other.
	Secret string `json:"secret,omitempty"`
	path   string
}

func (l lease) String() string {
	s := fmt.Sprintf("gapmirror %s on %s (pid %d", l.Kind, l.Host, l.PID)
	if l.Address != "" {
		s += ", " + l.Address
	}
	return s + ", since " + l.Started.UTC().Format(time.RFC3339) + ")"
}

// usesLeases: the storage may be shared by processes on several hosts,
// which the root's lock cannot see. The filesystem driver is left to the
// lock (a replica killed without stopping would hold a lease there for
// leaseTTL), and inmemory storage belongs to its process.
func usesLeases(driverName string) bool {
	return driverName != "filesystem" && driverName != "inmemory"
}

// secretFingerprint identifies an http.secret without revealing it.
func secretFingerprint(secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("gapmirror serve http.secret fingerprint"))
	return hex.EncodeToString(m.Sum(nil))[:16]
}

// leaseHolder keeps one lease renewed until release.
type leaseHolder struct {
	d       driver.StorageDriver
	l       lease
	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

// takeLease writes a lease of kind for this process into d (the storage
// described by what, for messages), then looks at the other leases: conflict
// says whether one of them forbids this process to go on (its message), in
// which case the lease is deleted again. The write and read back of the
// lease are the check that the storage works at all.
func takeLease(ctx context.Context, d driver.StorageDriver, what string, l lease, conflict func(other lease) string) (*leaseHolder, error) {
	id := make([]byte, 6)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "unknown-host"
	}
	now := time.Now()
	l.Host, l.PID, l.Started = host, os.Getpid(), now
	l.path = path.Join(leaseDir, l.Kind+"-"+strings.ReplaceAll(host, "/", "_")+"-"+hex.EncodeToString(id))
	h := &leaseHolder{d: d, l: l, stop: make(chan struct{}), stopped: make(chan struct{})}
	pctx, cancel := context.WithTimeout(ctx, storageProbeTimeout)
	defer cancel()
	if err := h.write(pctx, now); err != nil {
		return nil, storageError(what, "writing", err)
	}
	data, err := d.GetContent(pctx, l.path)
	if err != nil {
		_ = d.Delete(pctx, l.path)
		return nil, storageError(what, "reading back", err)
	}
	var back lease
	if json.Unmarshal(data, &back) != nil || back.PID != l.PID || !back.Started.Equal(l.Started) {
		_ = d.Delete(pctx, l.path)
		return nil, fmt.Errorf("%s: the object gapmirror wrote (%s) read back different: the storage does not keep what is written", what, l.path)
	}
	others, err := readLeases(pctx, d)
	if err != nil {
		_ = d.Delete(pctx, l.path)
		return nil, storageError(what, "listing "+leaseDir+" in", err)
	}
	var refusals []string
	for _, o := range others {
		if o.path == l.path || !o.Expires.After(now) {
			continue
		}
		if msg := conflict(o); msg != "" {
			refusals = append(refusals, msg)
		}
	}
	if len(refusals) > 0 {
		_ = d.Delete(pctx, l.path)
		return nil, fmt.Errorf("%s: %s", what, strings.Join(refusals, "; "))
	}
	go h.renew()
	return h, nil
}

func (h *leaseHolder) write(ctx context.Context, now time.Time) error {
	h.l.Renewed, h.l.Expires = now, now.Add(leaseTTL)
	data, err := json.Marshal(h.l)
	if err != nil {
		return err
	}
	return h.d.PutContent(ctx, h.l.path, data)
}

func (h *leaseHolder) renew() {
	defer close(h.stopped)
	t := time.NewTicker(leaseRenew)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), leaseRenew)
			_ = h.write(ctx, time.Now()) // a failed renewal is retried at the next tick; the lease lasts leaseTTL
			cancel()
		}
	}
}

// release stops renewing and deletes the lease.
func (h *leaseHolder) release() error {
	if h == nil {
		return nil
	}
	var err error
	h.once.Do(func() {
		close(h.stop)
		<-h.stopped
		ctx, cancel := context.WithTimeout(context.Background(), storageProbeTimeout)
		defer cancel()
		if err = h.d.Delete(ctx, h.l.path); err != nil && !errors.As(err, new(driver.PathNotFoundError)) {
			err = fmt.Errorf("deleting the lease %s (it expires on its own by %s): %w", h.l.path, h.l.Expires.UTC().Format(time.RFC3339), err)
		} else {
			err = nil
		}
	})
	return err
}

// readLeases reads every lease in d; an object that is no lease counts as
// a lease that never expires (something wrote it there: gc stays off).
func readLeases(ctx context.Context, d driver.StorageDriver) ([]lease, error) {
	paths, err := d.List(ctx, leaseDir)
	if errors.As(err, new(driver.PathNotFoundError)) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []lease
	for _, p := range paths {
		data, err := d.GetContent(ctx, p)
		if errors.As(err, new(driver.PathNotFoundError)) {
			continue // released meanwhile
		}
		if err != nil {
			return nil, err
		}
		var l lease
		if json.Unmarshal(data, &l) != nil || l.Kind == "" {
			l = lease{Kind: "unknown lease " + p, Expires: time.Now().Add(100 * 365 * 24 * time.Hour)}
		}
		l.path = p
		out = append(out, l)
	}
	return out, nil
}

// storageError explains a failed check of the storage: which storage, what
// the store answered, and what to check.
func storageError(what, doing string, err error) error {
	msg := err.Error()
	hint := "check the storage section of the configuration"
	switch {
	case strings.Contains(msg, "NoSuchBucket"), strings.Contains(msg, "ContainerNotFound"), strings.Contains(msg, "bucket doesn't exist"):
		hint = "the bucket (or container) does not exist: create it, or correct its name in the configuration"
	case strings.Contains(msg, "InvalidAccessKeyId"), strings.Contains(msg, "SignatureDoesNotMatch"), strings.Contains(msg, "AccessDenied"),
		strings.Contains(msg, "AuthenticationFailed"), strings.Contains(msg, "AuthorizationFailure"), strings.Contains(msg, "NoCredentialProviders"),
		strings.Contains(msg, "status code: 403"), strings.Contains(msg, "status code: 401"):
		hint = "the store refused the credentials: check the access key and secret key (accesskey/secretkey, or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or the account key) and that they may read, write and delete in the bucket"
	case strings.Contains(msg, "connection refused"), strings.Contains(msg, "no such host"), strings.Contains(msg, "i/o timeout"),
		strings.Contains(msg, "context deadline exceeded"), strings.Contains(msg, "RequestError"), strings.Contains(msg, "network is unreachable"):
		hint = "the store's endpoint cannot be reached: check regionendpoint (or the account's endpoint), the network and the proxy settings"
	}
	return fmt.Errorf("%s: %s a small object failed: %w (%s)", what, doing, err, hint)
}

// describeStorage names the storage of cfg for messages: the driver, its
// bucket or container and endpoint, and the file it comes from.
func describeStorage(cfg *configuration.Configuration, source string) string {
	name, p := cfg.Storage.Type(), cfg.Storage.Parameters()
	get := func(k string) string {
		if v, ok := p[k]; ok && v != nil {
			return fmt.Sprint(v)
		}
		return ""
	}
	var s string
	switch name {
	case "s3", "s3aws":
		s = fmt.Sprintf("s3 bucket %q", get("bucket"))
		if e := get("regionendpoint"); e != "" {
			s += " at " + e
		} else {
			s += " in region " + get("region")
		}
	case "azure":
		s = fmt.Sprintf("azure container %q of account %q", get("container"), get("accountname"))
	case "gcs":
		s = fmt.Sprintf("gcs bucket %q", get("bucket"))
	default:
		s = name + " storage"
	}
	if r := get("rootdirectory"); r != "" {
		s += ", rootdirectory " + r
	}
	return "the " + s + " (" + source + ")"
}

// openStorage makes a driver for cfg's storage, as the registry does.
func openStorage(ctx context.Context, cfg *configuration.Configuration, what string) (d driver.StorageDriver, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: %v", what, p)
		}
	}()
	d, err = factory.Create(ctx, cfg.Storage.Type(), cfg.Storage.Parameters())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return d, nil
}
