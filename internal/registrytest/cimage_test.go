package registrytest_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.podman.io/image/v5/copy"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/oci/layout"
	"go.podman.io/image/v5/signature"
	"go.podman.io/image/v5/transports"
	"go.podman.io/image/v5/types"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// TestContainersImageInterop copies an imagebuilder OCI layout into a TLS,
// auth-protected registry (basic auth, and bearer tokens from the token
// server) and back with containers/image, using the registry's CertsDir and
// AuthFile the way gapmirror will.
func TestContainersImageInterop(t *testing.T) {
	for name, opts := range map[string]registrytest.Options{
		"basic": {TLS: true, Username: "u", Password: "p"},
		"token": {TLS: true, Username: "u", Password: "p", Token: &registrytest.TokenAuth{}},
	} {
		t.Run(name, func(t *testing.T) { testContainersImageInterop(t, opts) })
	}
}

func testContainersImageInterop(t *testing.T, opts registrytest.Options) {
	ctx := context.Background()
	idx, err := imagebuilder.BuildIndex(imagebuilder.IndexSpec{Images: []imagebuilder.ImageSpec{
		{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(1, 64<<10), imagebuilder.FileLayer(map[string][]byte{"configs/a/catalog.json": []byte("{}")})}},
		{Platform: imagebuilder.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}, Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(2, 64<<10)}},
	}})
	if err != nil {
		t.Fatalf("BuildIndex: %v", err)
	}
	src := filepath.Join(t.TempDir(), "src")
	if err := imagebuilder.WriteIndexLayout(src, "multi", idx); err != nil {
		t.Fatalf("WriteIndexLayout: %v", err)
	}
	reg := registrytest.Start(t, opts)

	emptyConf := filepath.Join(t.TempDir(), "registries.conf")
	if err := os.WriteFile(emptyConf, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sys := &types.SystemContext{
		DockerCertPath:           reg.CertsDir(),
		AuthFilePath:             reg.AuthFile(),
		SystemRegistriesConfPath: emptyConf,
		RegistriesDirPath:        t.TempDir(),
	}
	policy, err := signature.NewPolicyContext(&signature.Policy{Default: signature.PolicyRequirements{signature.NewPRInsecureAcceptAnything()}})
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	defer policy.Destroy()

	copyImage := func(from, to string) {
		t.Helper()
		srcRef, dstRef := parseRef(t, from), parseRef(t, to)
		_, err = copy.Image(ctx, policy, dstRef, srcRef, &copy.Options{
			SourceCtx: sys, DestinationCtx: sys, ImageListSelection: copy.CopyAllImages,
		})
		if err != nil {
			t.Fatalf("copy %s → %s: %v", from, to, err)
		}
	}
	copyImage("oci:"+src+":multi", "docker://"+reg.Ref("interop/app", "v1"))
	if got, err := reg.ManifestDigest("interop/app", "v1"); err != nil || got != idx.Digest {
		t.Fatalf("registry has %s (%v), want the layout's %s", got, err, idx.Digest)
	}
	back := filepath.Join(t.TempDir(), "back")
	copyImage("docker://"+reg.Ref("interop/app", "v1"), "oci:"+back+":again")
	data, err := os.ReadFile(filepath.Join(back, "blobs", "sha256", idx.Digest.Encoded()))
	if err != nil || string(data) != string(idx.Manifest) {
		t.Errorf("copied-back layout lacks the original index %s: %v", idx.Digest, err)
	}
}

// parseRef parses "docker://…" and "oci:DIR:REF" without linking every transport.
func parseRef(t *testing.T, name string) types.ImageReference {
	t.Helper()
	var tr types.ImageTransport
	switch {
	case strings.HasPrefix(name, "docker:"):
		tr = docker.Transport
	case strings.HasPrefix(name, "oci:"):
		tr = layout.Transport
	}
	if tr == nil {
		t.Fatalf("unsupported transport in %s", name)
	}
	ref, err := tr.ParseReference(strings.TrimPrefix(name, tr.Name()+":"))
	if err != nil {
		t.Fatalf("parsing %s: %v", name, err)
	}
	if transports.ImageName(ref) == "" {
		t.Fatalf("parsing %s: empty reference", name)
	}
	return ref
}
