package sections

import (
	"context"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.podman.io/image/v5/types"

	"github.com/gapmirror/gapmirror/imageset/helm"
	"github.com/gapmirror/gapmirror/internal/helmtest"
	"github.com/gapmirror/gapmirror/transfer"
)

// TestHelmHTTPClientTLS: chart repositories get the source side's TLS
// settings: verified by default, a private CA from --src-cert-dir, or no
// verification with --src-tls-verify=false.
func TestHelmHTTPClientTLS(t *testing.T) {
	repo := helmtest.ServeTLS(t, helmtest.Pod("p", "0.1.0", "reg.example/apps/p:v1"))
	certDir := t.TempDir()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: repo.Server.Certificate().Raw})
	if err := os.WriteFile(filepath.Join(certDir, "ca.crt"), ca, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		opts    transfer.RegistryOptions
		wantErr string
	}{
		{"verified, unknown CA", transfer.RegistryOptions{}, "certificate"},
		{"private CA from the cert dir", transfer.RegistryOptions{CertDir: certDir}, ""},
		{"verification off", transfer.RegistryOptions{TLSVerify: types.OptionalBoolFalse}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			client, err := (&Env{Upstream: c.opts}).helmHTTPClient()
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = helm.Repository{URL: repo.URL(), Client: client}.Index(context.Background())
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("index: %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Errorf("index: got %v, want an error about %q", err, c.wantErr)
			}
		})
	}
}

// TestHelmRepositoryCredentialsNotPrinted: a password in a repository URL
// is sent as basic auth and appears in no message.
func TestHelmRepositoryCredentialsNotPrinted(t *testing.T) {
	r := helm.Repository{URL: "http://user:s3cret-pw@127.0.0.1:1/charts"}
	_, _, err := r.Index(context.Background())
	if err == nil {
		t.Fatal("an unreachable repository answered")
	}
	if strings.Contains(err.Error(), "s3cret-pw") || strings.Contains(r.Redacted(), "s3cret-pw") {
		t.Errorf("the password leaks: %v / %s", err, r.Redacted())
	}
}
