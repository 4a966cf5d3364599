package release_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/imageset/release"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
	"github.com/gapmirror/gapmirror/internal/releasetest"
)

// httpReader is a release.ImageReader over a registry's plain HTTP API; it
// records which blobs it was asked for.
type httpReader struct {
	reg *registrytest.Registry

	mu    sync.Mutex
	blobs []digest.Digest
}

// repoOf strips the host and the tag or digest from ref.
func (h *httpReader) repoOf(ref string) (string, error) {
	rest, ok := strings.CutPrefix(ref, h.reg.Host()+"/")
	if !ok {
		return "", fmt.Errorf("%s is not on the test registry %s", ref, h.reg.Host())
	}
	if at := strings.Index(rest, "@"); at >= 0 {
		rest = rest[:at]
	}
	if colon := strings.LastIndex(rest, ":"); colon >= 0 {
		rest = rest[:colon]
	}
	return rest, nil
}

func (h *httpReader) get(ctx context.Context, url, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := h.reg.Client().Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return resp, nil
}

func (h *httpReader) Manifest(ctx context.Context, ref string, d digest.Digest) ([]byte, string, error) {
	repo, err := h.repoOf(ref)
	if err != nil {
		return nil, "", err
	}
	resp, err := h.get(ctx, h.reg.URL()+"/v2/"+repo+"/manifests/"+d.String(),
		"application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, "+
			"application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.docker.distribution.manifest.v2+json")
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return data, resp.Header.Get("Content-Type"), err
}

func (h *httpReader) Blob(ctx context.Context, ref string, d digest.Digest, _ int64) (io.ReadCloser, error) {
	repo, err := h.repoOf(ref)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.blobs = append(h.blobs, d)
	h.mu.Unlock()
	resp, err := h.get(ctx, h.reg.URL()+"/v2/"+repo+"/blobs/"+d.String(), "")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// fetched returns the blobs asked for so far and forgets them.
func (h *httpReader) fetched() []digest.Digest {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.blobs
	h.blobs = nil
	return out
}

// pushPayload generates a payload on reg and pushes it.
func pushPayload(t *testing.T, reg *registrytest.Registry, spec releasetest.PayloadSpec) *releasetest.Payload {
	t.Helper()
	spec.Host = reg.Host()
	p, err := releasetest.NewPayload(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Push(context.Background(), imagebuilder.Target{URL: reg.URL(), Client: reg.Client()}); err != nil {
		t.Fatal(err)
	}
	return p
}

// releaseImage returns the payload's release image for arch (graph
// spelling; any for a single-architecture payload).
func releaseImage(t *testing.T, p *releasetest.Payload, arch string) *imagebuilder.Image {
	t.Helper()
	fi := p.Images[len(p.Images)-1]
	if fi.Index == nil {
		return fi.Image
	}
	for _, img := range fi.Index.Images {
		if img.Platform.Architecture == arch {
			return img
		}
	}
	t.Fatalf("payload %s has no %s image", p.Tag, arch)
	return nil
}

func wantComponents(p *releasetest.Payload) []release.Component {
	out := make([]release.Component, len(p.Components))
	for i, c := range p.Components {
		out[i] = release.Component{Name: c.Name, Image: c.Image, Digest: c.Digest}
	}
	return out
}

func TestReadPayload(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	r := &httpReader{reg: reg}
	cases := []struct {
		name     string
		spec     releasetest.PayloadSpec
		arch     string // asked for
		readArch string // instance expected to be read
		kubeVirt bool
	}{
		{"amd64 OCI", releasetest.PayloadSpec{Version: "4.18.1", Previous: []string{"4.18.0"}}, "amd64", "amd64", false},
		{"x86_64 spelling, Docker schema2, KubeVirt", releasetest.PayloadSpec{Version: "4.18.2", Format: imagebuilder.FormatDocker, KubeVirt: true}, "x86_64", "amd64", true},
		{"arch left out", releasetest.PayloadSpec{Version: "4.18.3", Components: 40}, "", "amd64", false},
		{"s390x KubeVirt", releasetest.PayloadSpec{Version: "4.18.1", Arch: "s390x", KubeVirt: true}, "s390x", "s390x", true},
		{"multi read as arm64", releasetest.PayloadSpec{Version: "4.18.1", Arch: "multi"}, "arm64", "arm64", false},
		{"multi read as multi", releasetest.PayloadSpec{Version: "4.18.2", Arch: "multi", Platforms: []string{"arm64", "s390x", "amd64"}, KubeVirt: true}, "multi", "amd64", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := pushPayload(t, reg, c.spec)
			r.fetched()
			var opts []release.PayloadOption
			if c.kubeVirt {
				opts = append(opts, release.WithKubeVirt())
			}
			got, err := release.ReadPayload(context.Background(), r, p.Ref(), p.Digest, c.arch, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if got.Version != c.spec.Version {
				t.Errorf("Version %q, want %q", got.Version, c.spec.Version)
			}
			if !slices.Equal(got.Previous, c.spec.Previous) && len(got.Previous)+len(c.spec.Previous) > 0 {
				t.Errorf("Previous %v, want %v", got.Previous, c.spec.Previous)
			}
			if !strings.Contains(string(got.Metadata), "release.openshift.io/architecture") {
				t.Errorf("Metadata %s lacks the architecture", got.Metadata)
			}
			if want := wantComponents(p); !slices.Equal(got.Components, want) {
				t.Errorf("Components:\n got %v\nwant %v", got.Components, want)
			}
			if n := max(c.spec.Components, releasetest.DefaultComponents); len(got.Components) != n {
				t.Errorf("%d components, want %d", len(got.Components), n)
			}
			img := releaseImage(t, p, c.readArch)
			if got.Instance != img.Digest || got.Arch != c.readArch {
				t.Errorf("read instance %s (%s), want %s (%s)", got.Instance, got.Arch, img.Digest, c.readArch)
			}
			if c.kubeVirt {
				// One disk for the architecture read; every architecture's
				// that has one for a multi release, each named after it.
				var want []release.Component
				if c.arch == "multi" {
					for _, arch := range []string{"s390x", "amd64"} {
						kv := p.KubeVirt[arch]
						want = append(want, release.Component{Name: release.KubeVirtComponentName + "-" + release.TagArch(arch), Image: kv.Image, Digest: kv.Digest})
					}
				} else {
					kv := p.KubeVirt[c.readArch]
					want = []release.Component{{Name: release.KubeVirtComponentName, Image: kv.Image, Digest: kv.Digest}}
				}
				if !slices.Equal(got.KubeVirt, want) {
					t.Errorf("KubeVirt %+v, want %+v", got.KubeVirt, want)
				}
			} else if got.KubeVirt != nil {
				t.Errorf("KubeVirt %+v read without being asked", got.KubeVirt)
			}
			// Only the top layer (and a single image's config) is fetched.
			top := img.Layers[len(img.Layers)-1].Digest
			for _, d := range r.fetched() {
				if d != top && d != img.Config.Digest {
					t.Errorf("fetched blob %s, which is not the top layer %s", d, top)
				}
			}
		})
	}
}

func TestReadPayloadLayers(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	r := &httpReader{reg: reg}
	stale := releasetest.ImageReferences("4.18.1", []releasetest.PayloadComponent{
		{Name: "stale", Image: reg.Host() + "/x/y@sha256:" + strings.Repeat("a", 64)},
	})
	cases := []struct {
		name     string
		files    map[string][]byte // top layer changes
		lower    map[string][]byte
		wantErr  string // empty: the components are the generated ones
		topOnly  bool
		wantName string // a component expected, when not the generated ones
	}{
		{name: "top layer hides an older file", lower: map[string][]byte{releasetest.ImageReferencesPath: stale}, topOnly: true},
		{name: "file only in a lower layer",
			files: map[string][]byte{releasetest.ImageReferencesPath: nil},
			lower: map[string][]byte{releasetest.ImageReferencesPath: stale}, wantName: "stale"},
		{name: "whiteout in the top layer",
			files:   map[string][]byte{releasetest.ImageReferencesPath: nil, "release-manifests/.wh.image-references": {}},
			lower:   map[string][]byte{releasetest.ImageReferencesPath: stale},
			wantErr: "has no release-manifests/image-references"},
		{name: "opaque directory in the top layer",
			files:   map[string][]byte{releasetest.ImageReferencesPath: nil, "release-manifests/.wh..wh..opq": {}},
			lower:   map[string][]byte{releasetest.ImageReferencesPath: stale},
			wantErr: "has no release-manifests/image-references"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := pushPayload(t, reg, releasetest.PayloadSpec{Version: fmt.Sprintf("4.18.%d", i), Files: c.files, LowerFiles: c.lower})
			r.fetched()
			got, err := release.ReadPayload(context.Background(), r, p.Ref(), p.Digest, "amd64")
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.wantName != "" {
				if len(got.Components) != 1 || got.Components[0].Name != c.wantName {
					t.Errorf("components %v, want only %s", got.Components, c.wantName)
				}
			} else if !slices.Equal(got.Components, wantComponents(p)) {
				t.Errorf("components are not the top layer's: %v", got.Components)
			}
			img := releaseImage(t, p, "amd64")
			fetched := r.fetched()
			lower := img.Layers[len(img.Layers)-2].Digest
			if c.topOnly && slices.Contains(fetched, lower) {
				t.Errorf("the lower layer %s was read although the top layer had every file", lower)
			}
			if !c.topOnly && !slices.Contains(fetched, lower) {
				t.Errorf("the lower layer %s was not read", lower)
			}
		})
	}
}

func TestReadPayloadErrors(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	r := &httpReader{reg: reg}
	host := reg.Host()
	comps := []releasetest.PayloadComponent{
		{Name: "etcd", Image: host + "/" + releasetest.ComponentRepo + "@sha256:" + strings.Repeat("b", 64)},
		{Name: "cli", Image: host + "/" + releasetest.ComponentRepo + ":latest"},
	}
	cases := []struct {
		name     string
		spec     releasetest.PayloadSpec
		arch     string
		kubeVirt bool
		want     []string
	}{
		{"no image-references", releasetest.PayloadSpec{Version: "4.18.1", Files: map[string][]byte{releasetest.ImageReferencesPath: nil}},
			"amd64", false, []string{"ocp-release", "has no release-manifests/image-references"}},
		{"no release-metadata", releasetest.PayloadSpec{Version: "4.18.2", Files: map[string][]byte{releasetest.ReleaseMetadataPath: nil}},
			"amd64", false, []string{"has no release-manifests/release-metadata"}},
		{"component by tag", releasetest.PayloadSpec{Version: "4.18.3", Files: map[string][]byte{releasetest.ImageReferencesPath: releasetest.ImageReferences("4.18.3", comps)}},
			"amd64", false, []string{"release-manifests/image-references", "spec.tags[1] (cli)", ":latest", "not pinned by digest"}},
		{"metadata not JSON", releasetest.PayloadSpec{Version: "4.18.4", Files: map[string][]byte{releasetest.ReleaseMetadataPath: []byte("{version: 4")}},
			"amd64", false, []string{"release-manifests/release-metadata", "not valid JSON"}},
		{"bad version", releasetest.PayloadSpec{Version: "4.18.5", Files: map[string][]byte{releasetest.ReleaseMetadataPath: []byte(`{"kind":"cincinnati-metadata-v0","version":"four"}`)}},
			"amd64", false, []string{"release-metadata", `"four" is not a semantic version`}},
		{"image-references not an ImageStream", releasetest.PayloadSpec{Version: "4.18.6", Files: map[string][]byte{releasetest.ImageReferencesPath: []byte(`{"kind":"ConfigMap"}`)}},
			"amd64", false, []string{"image-references", `kind is "ConfigMap", want ImageStream`}},
		{"boot images not a ConfigMap", releasetest.PayloadSpec{Version: "4.18.7", KubeVirt: true, Files: map[string][]byte{releasetest.BootImagesPath: []byte("kind: Secret\n")}},
			"amd64", true, []string{"0000_50_installer_coreos-bootimages.yaml", `kind is "Secret", want ConfigMap`}},
		{"wrong architecture", releasetest.PayloadSpec{Version: "4.18.1"},
			"arm64", false, []string{"is for architecture amd64, not arm64"}},
		{"platform missing from index", releasetest.PayloadSpec{Version: "4.18.1", Arch: "multi"},
			"ppc64le", false, []string{"has no linux/ppc64le image", "linux/amd64, linux/arm64"}},
		{"unknown architecture", releasetest.PayloadSpec{Version: "4.18.1"},
			"sparc", false, []string{`unknown architecture "sparc"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := pushPayload(t, reg, c.spec)
			var opts []release.PayloadOption
			if c.kubeVirt {
				opts = append(opts, release.WithKubeVirt())
			}
			got, err := release.ReadPayload(context.Background(), r, p.Ref(), p.Digest, c.arch, opts...)
			if err == nil {
				t.Fatalf("no error; read %d components", len(got.Components))
			}
			for _, s := range c.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error does not mention %q:\n%v", s, err)
				}
			}
		})
	}
}

// TestReadPayloadWithoutKubeVirt: a release that ships no KubeVirt
// container disk for its architecture (arm64 never does; an x86_64 one
// without the disk; one without the boot images file) is read, with
// NoKubeVirt saying why, so that kubeVirtContainer never costs a release
// (oc-mirror warns and mirrors it too).
func TestReadPayloadWithoutKubeVirt(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	r := &httpReader{reg: reg}
	cases := []struct {
		name string
		spec releasetest.PayloadSpec
		arch string
		want []string
	}{
		{"x86_64 release without a disk", releasetest.PayloadSpec{Version: "4.18.1"},
			"amd64", []string{"0000_50_installer_coreos-bootimages.yaml", "architectures.x86_64.images.kubevirt.digest-ref", "for amd64"}},
		{"aarch64 release", releasetest.PayloadSpec{Version: "4.18.1", Arch: "arm64", KubeVirt: true},
			"arm64", []string{"architectures.aarch64.images.kubevirt.digest-ref", "for arm64"}},
		{"no boot images file", releasetest.PayloadSpec{Version: "4.18.2", KubeVirt: true, Files: map[string][]byte{releasetest.BootImagesPath: nil}},
			"amd64", []string{"has no release-manifests/0000_50_installer_coreos-bootimages.yaml"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := pushPayload(t, reg, c.spec)
			got, err := release.ReadPayload(context.Background(), r, p.Ref(), p.Digest, c.arch, release.WithKubeVirt())
			if err != nil {
				t.Fatal(err)
			}
			if got.KubeVirt != nil || len(got.Components) == 0 || got.Version != c.spec.Version {
				t.Errorf("KubeVirt %+v, %d components, version %s", got.KubeVirt, len(got.Components), got.Version)
			}
			for _, s := range c.want {
				if !strings.Contains(got.NoKubeVirt, s) {
					t.Errorf("NoKubeVirt does not mention %q: %q", s, got.NoKubeVirt)
				}
			}
		})
	}
}

func TestReadPayloadCorruptLayer(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	r := &httpReader{reg: reg}
	p := pushPayload(t, reg, releasetest.PayloadSpec{Version: "4.18.1"})
	img := releaseImage(t, p, "amd64")
	top := img.Layers[len(img.Layers)-1].Digest

	corrupter := registrytest.NewBlobCorrupter(1, top)
	reg.SetWrap(corrupter.Wrap)
	_, err := release.ReadPayload(context.Background(), r, p.Ref(), p.Digest, "amd64")
	if !errors.Is(err, release.ErrDigestMismatch) {
		t.Fatalf("error %v, want one wrapping ErrDigestMismatch", err)
	}
	if !strings.Contains(err.Error(), top.String()) || !strings.Contains(err.Error(), p.Ref()) {
		t.Errorf("error does not name the layer and the release: %v", err)
	}
	if corrupter.Corrupted() != 1 {
		t.Errorf("%d corrupted answers, want 1", corrupter.Corrupted())
	}
	// The next read gets intact bytes.
	if _, err := release.ReadPayload(context.Background(), r, p.Ref(), p.Digest, "amd64"); err != nil {
		t.Errorf("reading intact bytes: %v", err)
	}
}

// memReader is a release.ImageReader over built images held in memory; it
// can damage chosen blobs.
type memReader struct {
	manifests map[digest.Digest][2]string // content, media type
	blobs     map[digest.Digest][]byte
}

func newMemReader(t *testing.T, images ...*imagebuilder.Image) *memReader {
	t.Helper()
	m := &memReader{manifests: map[digest.Digest][2]string{}, blobs: map[digest.Digest][]byte{}}
	for _, img := range images {
		m.manifests[img.Digest] = [2]string{string(img.Manifest), img.MediaType}
		for _, b := range img.Blobs() {
			data, err := b.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			m.blobs[b.Digest] = data
		}
	}
	return m
}

func (m *memReader) Manifest(_ context.Context, _ string, d digest.Digest) ([]byte, string, error) {
	v, ok := m.manifests[d]
	if !ok {
		return nil, "", fmt.Errorf("manifest %s not found", d)
	}
	return []byte(v[0]), v[1], nil
}

func (m *memReader) Blob(_ context.Context, _ string, d digest.Digest, _ int64) (io.ReadCloser, error) {
	b, ok := m.blobs[d]
	if !ok {
		return nil, fmt.Errorf("blob %s not found", d)
	}
	return io.NopCloser(strings.NewReader(string(b))), nil
}

// TestReadPayloadLayerForms reads release files from plain tar and gzip
// layers, with ./ and / prefixed names, and refuses damaged blobs whose
// damage comes after the files it needs.
func TestReadPayloadLayerForms(t *testing.T) {
	files := map[string][]byte{
		releasetest.ReleaseMetadataPath: releasetest.ReleaseMetadata("4.19.0", "amd64", nil),
		releasetest.ImageReferencesPath: releasetest.ImageReferences("4.19.0", []releasetest.PayloadComponent{
			{Name: "etcd", Image: "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + strings.Repeat("c", 64)},
		}),
		"zz/padding": []byte(strings.Repeat("padding after the release files ", 2000)),
	}
	build := func(t *testing.T, uncompressed bool) *imagebuilder.Image {
		t.Helper()
		top := imagebuilder.FileLayer(files)
		top.Uncompressed = uncompressed
		img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(1, 1024), top}})
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	for _, uncompressed := range []bool{false, true} {
		t.Run(fmt.Sprintf("uncompressed=%v", uncompressed), func(t *testing.T) {
			img := build(t, uncompressed)
			m := newMemReader(t, img)
			got, err := release.ReadPayload(context.Background(), m, "quay.io/openshift-release-dev/ocp-release:4.19.0-x86_64", img.Digest, "amd64")
			if err != nil {
				t.Fatal(err)
			}
			if got.Version != "4.19.0" || len(got.Components) != 1 || got.Components[0].Name != "etcd" {
				t.Errorf("read %+v", got)
			}

			// Damage the last byte: the files are read before it, yet the
			// blob must still be refused.
			top := img.Layers[len(img.Layers)-1].Digest
			b := []byte(string(m.blobs[top]))
			b[len(b)-1] ^= 0xff
			m.blobs[top] = b
			_, err = release.ReadPayload(context.Background(), m, "quay.io/openshift-release-dev/ocp-release:4.19.0-x86_64", img.Digest, "amd64")
			if !errors.Is(err, release.ErrDigestMismatch) {
				t.Errorf("damaged tail: error %v, want ErrDigestMismatch", err)
			}

			// A manifest that is not the one asked for.
			_, err = release.ReadPayload(context.Background(), m, "r", digest.FromString("other"), "amd64")
			if err == nil || !strings.Contains(err.Error(), "not found") {
				t.Errorf("unknown manifest: error %v", err)
			}
		})
	}
}

func TestReadPayloadManifestMismatch(t *testing.T) {
	img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(1, 64)}})
	if err != nil {
		t.Fatal(err)
	}
	m := newMemReader(t, img)
	m.manifests[img.Digest] = [2]string{strings.Replace(string(img.Manifest), "{", "{ ", 1), img.MediaType}
	_, err = release.ReadPayload(context.Background(), m, "example.com/r:t", img.Digest, "amd64")
	if !errors.Is(err, release.ErrDigestMismatch) {
		t.Errorf("error %v, want ErrDigestMismatch", err)
	}
}

func TestDestinations(t *testing.T) {
	cases := []struct{ got, want string }{
		{release.ReleaseImageDestination("4.18.1", "amd64"), "openshift/release-images:4.18.1-x86_64"},
		{release.ReleaseImageDestination("4.18.1", "x86_64"), "openshift/release-images:4.18.1-x86_64"},
		{release.ReleaseImageDestination("4.18.1", "arm64"), "openshift/release-images:4.18.1-aarch64"},
		{release.ReleaseImageDestination("4.18.1", "multi"), "openshift/release-images:4.18.1-multi"},
		{release.ComponentDestination("4.18.1", "amd64", "etcd"), "openshift/release:4.18.1-x86_64-etcd"},
		{release.ComponentDestination("4.13.10", "amd64", release.KubeVirtComponentName), "openshift/release:4.13.10-x86_64-kube-virt-container"},
		{release.ComponentDestination("4.18.1", "s390x", "cli"), "openshift/release:4.18.1-s390x-cli"},
		{release.GraphImageDestination, "openshift/graph-image:latest"},
		{release.Release{Version: "4.18.1", Arch: "ppc64le", Type: release.TypeOCP}.Destination(), "openshift/release-images:4.18.1-ppc64le"},
		{release.Release{Version: "4.18.1", Arch: "amd64", Type: release.TypeOCP}.ComponentDestination("etcd"), "openshift/release:4.18.1-x86_64-etcd"},
		{release.Release{Version: "4.15.0-0.okd-2024-03-10-010116", Arch: "amd64", Type: release.TypeOKD}.Destination(), "openshift/release-images:4.15.0-0.okd-2024-03-10-010116"},
	}
	for i, c := range cases {
		if c.got != c.want {
			t.Errorf("case %d: %q, want %q", i, c.got, c.want)
		}
	}
}
