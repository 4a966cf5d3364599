package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The air-gapped registry is gapmirror serve, with TLS from the CA it
// makes and a user for the mirror-to-mirror trip's pushes (anonymous users
// may only pull; serve's own --from push needs no user).
const (
	serveRoot    = "registry"
	htpasswdFile = "htpasswd"
	mirrorUser   = "demo"
	// mirrorPassword is the demo user's; a real one comes from a vault.
	mirrorPassword = "demo-password"
)

// caFile is the CA gapmirror serve makes, relative to the demo directory.
var caFile = filepath.Join(serveRoot, "tls", "ca.crt")

// served is the gapmirror serve process of the demo.
type served struct {
	cmd    *exec.Cmd
	done   chan error
	kept   *lockedBuffer
	stdout *toolOutput
	stderr *toolOutput
}

// pickMirrorAddress chooses the loopback address the mirror will serve on.
func pickMirrorAddress() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port for the mirror registry: %w", err)
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// writeMirrorCredentials puts the demo user into auth.json for the mirror.
func (d *demo) writeMirrorCredentials() error {
	data, err := json.MarshalIndent(map[string]any{"auths": map[string]any{
		d.mirrorHost: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(mirrorUser + ":" + mirrorPassword))},
	}}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(d.dir, authFile), append(data, '\n'), 0o600)
}

// addMirrorUser runs gapmirror serve htpasswd for the demo user.
func (d *demo) addMirrorUser(ctx context.Context) error {
	args := []string{"serve", "htpasswd", "--file", htpasswdFile, mirrorUser}
	d.out.command(append([]string{"gapmirror"}, args...))
	d.out.info("(the password, %s, on standard input)", mirrorPassword)
	cmd := exec.CommandContext(ctx, d.bin, args...)
	cmd.Dir = d.dir
	cmd.Stdin = strings.NewReader(mirrorPassword + "\n")
	out, err := cmd.CombinedOutput()
	d.out.block("    │ ", strings.TrimSpace(string(out)))
	if err != nil {
		return fmt.Errorf("gapmirror serve htpasswd: %v", err)
	}
	return nil
}

// serve starts gapmirror serve with args, showing its output, and returns
// its output up to "ready:" (after its --from push).
func (d *demo) serve(ctx context.Context, args []string) (string, error) {
	groups := [][]string{append([]string{"gapmirror"}, args...), isolation()[0]}
	d.out.command(groups...)
	s := &served{done: make(chan error, 1), kept: &lockedBuffer{}}
	s.stdout = &toolOutput{c: d.out, margin: "    │ ", kept: s.kept}
	s.stderr = &toolOutput{c: d.out, margin: "    │ ", kept: s.kept}
	s.cmd = exec.Command(d.bin, append(slices.Clone(args), isolation()[0]...)...)
	s.cmd.Dir = d.dir
	s.cmd.Stdout, s.cmd.Stderr = s.stdout, s.stderr
	start := time.Now()
	if err := s.cmd.Start(); err != nil {
		return "", fmt.Errorf("starting %s serve: %w", d.bin, err)
	}
	d.served = s
	go func() { s.done <- s.cmd.Wait() }()
	for !strings.Contains(s.kept.String(), "ready: ") {
		select {
		case err := <-s.done:
			s.done <- err
			return s.kept.String(), fmt.Errorf("gapmirror serve stopped before it was ready: %v (its output is above)", err)
		case <-ctx.Done():
			return s.kept.String(), ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	d.trips = append(d.trips, tripTime{name: "disk-to-mirror (serve --from)", took: time.Since(start)})
	return s.kept.String(), nil
}

// stopServe stops gapmirror serve as Ctrl-C would and waits for it.
func (d *demo) stopServe() error {
	s := d.served
	if s == nil {
		return nil
	}
	d.served = nil
	_ = s.cmd.Process.Signal(os.Interrupt)
	var err error
	select {
	case err = <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		err = <-s.done
	}
	s.stdout.flush()
	s.stderr.flush()
	if err != nil {
		return fmt.Errorf("gapmirror serve: %v", err)
	}
	return nil
}

// mirrorClient trusts the CA gapmirror serve made and sends the demo user's
// credentials.
func (d *demo) mirrorClient() (*http.Client, error) {
	pem, err := os.ReadFile(filepath.Join(d.dir, caFile))
	if err != nil {
		return nil, fmt.Errorf("reading the mirror's CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no certificate", caFile)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = nil
	transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: basicAuth{next: transport}, Timeout: 30 * time.Second}, nil
}

// basicAuth adds the demo user's credentials to every request.
type basicAuth struct{ next http.RoundTripper }

func (b basicAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.SetBasicAuth(mirrorUser, mirrorPassword)
	return b.next.RoundTrip(r)
}
