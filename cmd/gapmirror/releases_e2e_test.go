package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"sigs.k8s.io/yaml"

	"github.com/gapmirror/gapmirror/imageset/release"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
	"github.com/gapmirror/gapmirror/internal/releasetest"
)

// releaseWorld is a world whose upstream registry holds generated release
// payloads, with an update service, a signature store and the graph data
// served over HTTP on 127.0.0.1, and a throwaway signing key.
type releaseWorld struct {
	*world
	key      *releasetest.Key
	keyFile  string
	services *releasetest.Services
	graphs   *releasetest.GraphServer
	sigs     *releasetest.SignatureServer
	payloads map[string]*releasetest.Payload
	// served are the signatures the store serves, by version (re-signing
	// gives other bytes).
	served map[string][]byte
	// channel is stable-4.18 as served.
	channel *releasetest.Channel
}

// publish pushes and signs a payload per version and republishes channel
// stable-4.18 with them after the earlier ones (upstream shipping releases).
func (w *releaseWorld) publish(versions ...string) {
	w.t.Helper()
	must(w.t, w.channel.Add(context.Background(), versions...))
}

// newReleaseWorld pushes one payload per version (components images each,
// a KubeVirt disk when kubeVirt), publishes them as channel stable-4.18 and
// signs each with the world's key.
func newReleaseWorld(t *testing.T, versions []string, components int, kubeVirt bool) *releaseWorld {
	t.Helper()
	return newReleaseWorldIn(newWorld(t, registrytest.Options{}), versions, components, kubeVirt)
}

// newReleaseWorldIn is newReleaseWorld in the registries of in.
func newReleaseWorldIn(in *world, versions []string, components int, kubeVirt bool) *releaseWorld {
	t := in.t
	t.Helper()
	w := &releaseWorld{world: in}
	key, err := releasetest.NewKey("gapmirror e2e")
	must(t, err)
	w.key = key
	w.keyFile = filepath.Join(w.dir, "release-key.asc")
	must(t, os.WriteFile(w.keyFile, key.PublicKey(), 0o644))
	tgz, err := releasetest.GraphDataTarball(map[string][]string{"stable-4.18": {"4.18.1", "4.18.2", "4.18.3"}})
	must(t, err)
	w.services = releasetest.StartServices(tgz)
	t.Cleanup(w.services.Close)
	w.graphs, w.sigs = w.services.Graphs, w.services.Signatures

	ctx := context.Background()
	target := w.upTarget()
	w.channel, err = w.services.PublishChannel(ctx, target, key, "stable-4.18",
		releasetest.PayloadSpec{Host: w.up.Host(), Components: components, KubeVirt: kubeVirt}, versions...)
	must(t, err)
	w.payloads, w.served = w.channel.Payloads, w.channel.Signatures

	// The graph image's base: a tiny image upstream.
	base, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(77, 1<<10)}})
	must(t, err)
	must(t, imagebuilder.Push(ctx, target, "ubi9/ubi", "latest", base))
	return w
}

// flags point gapmirror at the world's services and key.
func (w *releaseWorld) flags() []string {
	return []string{
		"--graph-url", w.services.GraphURL(),
		"--release-signature-url", w.services.SignatureURL(),
		"--release-signature-key", w.keyFile,
		"--graph-data-url", w.services.GraphDataURL(),
		"--graph-base-image", w.up.Host() + "/ubi9/ubi:latest",
	}
}

// releaseISC writes an ImageSetConfiguration with the given mirror.platform body.
func (w *releaseWorld) releaseISC(name, platform string) string {
	path := filepath.Join(w.dir, name+".yaml")
	must(w.t, os.WriteFile(path, []byte("kind: ImageSetConfiguration\napiVersion: mirror.openshift.io/v2alpha1\nmirror:\n  platform:\n"+platform), 0o644))
	return path
}

func (w *releaseWorld) run(args ...string) (int, string, string) {
	w.t.Helper()
	return w.gapmirror(append(args, w.flags()...)...)
}

// assertRelease checks that a release and every component are at the
// mirror under prefix, by digest, at oc-mirror's layout.
func (w *releaseWorld) assertRelease(prefix string, p *releasetest.Payload, kubeVirt bool) {
	t := w.t
	t.Helper()
	check := func(repo, tag string, want digest.Digest) {
		t.Helper()
		got, err := w.dst.ManifestDigest(prefix+"/"+repo, tag)
		if err != nil || got != want {
			t.Errorf("%s/%s:%s: digest %s (%v), want %s", prefix, repo, tag, got, err, want)
			return
		}
		w.assertComplete(w.dst, prefix+"/"+repo, want)
	}
	check("openshift/release-images", p.Tag, p.Digest)
	for _, c := range p.Components {
		check("openshift/release", p.Tag+"-"+c.Name, c.Digest)
	}
	if kubeVirt {
		check("openshift/release", p.Tag+"-kube-virt-container", p.KubeVirt["amd64"].Digest)
	}
}

// TestReleasesDiskToMirror mirrors three signed release payloads (32
// components each, sharing layers, with KubeVirt disks) and the graph-data
// image to disk, carries the archive to an empty directory, and pushes it to
// a registry: every release and component is at the documented place by
// digest, the signature ConfigMaps hold the served signatures, IDMS maps both
// source repositories, the UpdateService names the graph image, and
// disk-to-mirror never asks the update service.
func TestReleasesDiskToMirror(t *testing.T) {
	t.Parallel()
	versions := []string{"4.18.1", "4.18.2", "4.18.3"}
	w := newReleaseWorld(t, versions, releasetest.DefaultComponents, true)
	isc := w.releaseISC("isc", "    graph: true\n    kubeVirtContainer: true\n    channels:\n    - name: stable-4.18\n      minVersion: 4.18.1\n      maxVersion: 4.18.3\n")
	m2d := filepath.Join(w.dir, "m2d")
	code, out, errOut := w.run("mirror", "-c", isc, "file://"+m2d)
	if code != 0 {
		t.Fatalf("mirror-to-disk exit %d", code)
	}
	// 3 releases × (32 components + KubeVirt + release image) + graph image;
	// components unchanged between versions are already in the store.
	var images, copied, there, built int
	if _, err := fmt.Sscanf(out, "mirror-to-disk: %d images: %d copied, %d already at the destination, %d built by gapmirror", &images, &copied, &there, &built); err != nil ||
		images != 3*(releasetest.DefaultComponents+2)+1 || copied+there+built != images {
		t.Errorf("summary does not account for %d images:\n%s", 3*(releasetest.DefaultComponents+2)+1, out)
	}
	if !strings.Contains(errOut, "release signature verified") {
		t.Errorf("no verification logged:\n%s", errOut)
	}

	// The air-gapped side gets the archive chunks only.
	airgap := filepath.Join(w.dir, "airgap")
	must(t, os.MkdirAll(airgap, 0o755))
	chunks, _ := filepath.Glob(filepath.Join(m2d, "mirror_*.tar"))
	if len(chunks) == 0 {
		t.Fatal("no archive chunk written")
	}
	for _, c := range chunks {
		data, err := os.ReadFile(c)
		must(t, err)
		must(t, os.WriteFile(filepath.Join(airgap, filepath.Base(c)), data, 0o644))
	}
	asked := w.graphs.Requests() + w.sigs.Requests()
	code, _, _ = w.run("mirror", "--from", "file://"+airgap, "docker://"+w.dst.Host()+"/mirror")
	if code != 0 {
		t.Fatalf("disk-to-mirror exit %d", code)
	}
	if n := w.graphs.Requests() + w.sigs.Requests(); n != asked {
		t.Errorf("disk-to-mirror asked the update service or signature store %d times", n-asked)
	}
	for _, v := range versions {
		w.assertRelease("mirror", w.payloads[v], true)
	}
	gd, err := w.dst.ManifestDigest("mirror/openshift/graph-image", "latest")
	if err != nil {
		t.Fatalf("graph image not mirrored: %v", err)
	}
	w.assertComplete(w.dst, "mirror/openshift/graph-image", gd)
	w.assertGraphImage("mirror/openshift/graph-image", gd)

	res := filepath.Join(airgap, "working-dir", "cluster-resources")
	w.assertSignatureConfigMaps(filepath.Join(res, "signature-configmap.yaml"), versions)
	w.assertReleaseIDMS(filepath.Join(res, "idms-gapmirror.yaml"), w.dst.Host()+"/mirror")

	us, err := os.ReadFile(filepath.Join(res, "updateService.yaml"))
	must(t, err)
	for _, want := range []string{"releases: " + w.dst.Host() + "/mirror/openshift/release-images", "graphDataImage: " + w.dst.Host() + "/mirror/openshift/graph-image:latest"} {
		if !strings.Contains(string(us), want) {
			t.Errorf("UpdateService lacks %q:\n%s", want, us)
		}
	}
	// The update graph travelled with the archive.
	if _, err := os.Stat(filepath.Join(airgap, "working-dir", "release-graphs", "amd64-stable-4.18.json")); err != nil {
		t.Errorf("update graph not restored on the air-gapped side: %v", err)
	}
	// The graph image stays out of the mirror sets.
	idms, _ := os.ReadFile(filepath.Join(res, "idms-gapmirror.yaml"))
	if strings.Contains(string(idms), "graph-image") {
		t.Errorf("IDMS names the graph image:\n%s", idms)
	}
}

// assertGraphImage checks the graph image's command and that its top layer
// holds the graph data under /var/lib/cincinnati-graph-data.
func (w *releaseWorld) assertGraphImage(repo string, d digest.Digest) {
	t := w.t
	data, _, err := w.dst.Manifest(repo, d.String())
	must(t, err)
	var m ocispec.Manifest
	must(t, json.Unmarshal(data, &m))
	cfgData, err := w.dst.Blob(repo, m.Config.Digest)
	must(t, err)
	var cfg ocispec.Image
	must(t, json.Unmarshal(cfgData, &cfg))
	if got := strings.Join(cfg.Config.Cmd, " "); !strings.Contains(got, "cp -rp /var/lib/cincinnati-graph-data/* /var/lib/cincinnati/graph-data") {
		t.Errorf("graph image command is %q", got)
	}
	top, err := w.dst.Blob(repo, m.Layers[len(m.Layers)-1].Digest)
	must(t, err)
	zr, err := gzip.NewReader(bytes.NewReader(top))
	must(t, err)
	tr := tar.NewReader(zr)
	found := false
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(t, err)
		if hdr.Name == "var/lib/cincinnati-graph-data/channels/stable-4.18.yaml" {
			found = hdr.Uid == 0 && hdr.Gid == 0
		}
	}
	if !found {
		t.Error("graph image's top layer lacks /var/lib/cincinnati-graph-data/channels/stable-4.18.yaml owned by root")
	}
}

// assertSignatureConfigMaps checks one ConfigMap per release whose binaryData
// decodes to the signature the store served, and none for other releases;
// releases are named by their key in w.payloads.
func (w *releaseWorld) assertSignatureConfigMaps(path string, versions []string) {
	t := w.t
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("signature ConfigMaps: %v", err)
	}
	type cm struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name      string            `json:"name"`
			Namespace string            `json:"namespace"`
			Labels    map[string]string `json:"labels"`
		} `json:"metadata"`
		BinaryData map[string][]byte `json:"binaryData"`
	}
	got := map[string][]byte{}
	n := 0
	for _, doc := range strings.Split(string(data), "---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var c cm
		must(t, yaml.Unmarshal([]byte(doc), &c))
		n++
		if c.Kind != "ConfigMap" || c.Metadata.Namespace != "openshift-config-managed" {
			t.Errorf("signature object %s is a %s in %q", c.Metadata.Name, c.Kind, c.Metadata.Namespace)
		}
		if _, ok := c.Metadata.Labels["release.openshift.io/verification-signatures"]; !ok {
			t.Errorf("ConfigMap %s lacks the verification-signatures label", c.Metadata.Name)
		}
		for k, v := range c.BinaryData {
			got[k] = v
		}
	}
	if n != len(versions) {
		t.Errorf("%d signature ConfigMaps, want %d", n, len(versions))
	}
	for _, v := range versions {
		p := w.payloads[v]
		key := "sha256-" + p.Digest.Encoded() + "-1"
		if want := w.served[v]; !bytes.Equal(got[key], want) {
			t.Errorf("release %s: binaryData[%s] is %d bytes, not the served signature", v, key, len(got[key]))
		}
	}
	// The same objects as JSON, a v1 List (oc-mirror writes both).
	js, err := os.ReadFile(strings.TrimSuffix(path, ".yaml") + ".json")
	if err != nil {
		t.Fatalf("signature ConfigMaps as JSON: %v", err)
	}
	var list struct {
		Kind  string `json:"kind"`
		Items []cm   `json:"items"`
	}
	must(t, json.Unmarshal(js, &list))
	if list.Kind != "List" || len(list.Items) != n {
		t.Errorf("JSON signature ConfigMaps: a %s of %d items, want a List of %d", list.Kind, len(list.Items), n)
	}
	for _, c := range list.Items {
		for k, v := range c.BinaryData {
			if !bytes.Equal(got[k], v) {
				t.Errorf("JSON ConfigMap %s: binaryData[%s] differs from the YAML one", c.Metadata.Name, k)
			}
		}
	}
}

// assertReleaseIDMS checks that IDMS maps the release image repository and
// the component repository to their mirrors.
func (w *releaseWorld) assertReleaseIDMS(path, root string) {
	t := w.t
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("IDMS: %v", err)
	}
	entries := map[string][]string{}
	for _, doc := range strings.Split(string(data), "---\n") {
		var o struct {
			Spec struct {
				ImageDigestMirrors []struct {
					Source  string   `json:"source"`
					Mirrors []string `json:"mirrors"`
				} `json:"imageDigestMirrors"`
			} `json:"spec"`
		}
		must(t, yaml.Unmarshal([]byte(doc), &o))
		for _, e := range o.Spec.ImageDigestMirrors {
			entries[e.Source] = e.Mirrors
		}
	}
	for src, mirror := range map[string]string{
		w.up.Host() + "/openshift-release-dev/ocp-release":      root + "/openshift/release-images",
		w.up.Host() + "/openshift-release-dev/ocp-v4.0-art-dev": root + "/openshift/release",
	} {
		if got := entries[src]; len(got) != 1 || got[0] != mirror {
			t.Errorf("IDMS maps %s to %v, want [%s]\n%s", src, got, mirror, data)
		}
	}
}

// TestReleasesRefusedSignatures: a release whose signature is missing, made
// with an untrusted key, or signs another digest is refused with the version
// and the reason, the good one is mirrored, and the exit code has the
// release bit.
func TestReleasesRefusedSignatures(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, []string{"4.18.1", "4.18.2", "4.18.3", "4.18.4"}, 6, false)
	w.sigs.Put(w.payloads["4.18.2"].Digest.String()) // no signature
	other, err := releasetest.NewKey("someone else")
	must(t, err)
	p3 := w.payloads["4.18.3"]
	sig, err := other.SignRelease(p3.Digest.String(), p3.Ref())
	must(t, err)
	w.sigs.Put(p3.Digest.String(), sig)
	p4 := w.payloads["4.18.4"]
	sig, err = w.key.SignRelease(w.payloads["4.18.1"].Digest.String(), p4.Ref())
	must(t, err)
	w.sigs.Put(p4.Digest.String(), sig)

	isc := w.releaseISC("isc", "    channels:\n    - name: stable-4.18\n      full: true\n")
	ws := filepath.Join(w.dir, "ws")
	code, out, errOut := w.run("mirror", "-c", isc, "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m")
	if code&2 == 0 {
		t.Fatalf("exit %d, want the release bit (2) set", code)
	}
	all := out + errOut
	for _, want := range []string{
		"release 4.18.2 (arch amd64, " + w.payloads["4.18.2"].Digest.String() + ") refused: no signature found",
		"release 4.18.3 (arch amd64, " + p3.Digest.String() + ") refused: signature-1 is made with an unknown key",
		"release 4.18.4 (arch amd64, " + p4.Digest.String() + ") refused: signature-1 signs another digest",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	w.assertRelease("m", w.payloads["4.18.1"], false)
	for _, v := range []string{"4.18.2", "4.18.3", "4.18.4"} {
		if _, err := w.dst.ManifestDigest("m/openshift/release-images", w.payloads[v].Tag); err == nil {
			t.Errorf("refused release %s reached the mirror", v)
		}
	}
	w.assertSignatureConfigMaps(filepath.Join(ws, "working-dir", "cluster-resources", "signature-configmap.yaml"), []string{"4.18.1"})
}

// closedURL is an http URL on 127.0.0.1 where nothing listens.
func closedURL(t *testing.T) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL
	srv.Close()
	return u
}

// runWith runs gapmirror with the world's flags, some replaced (an empty
// value drops the flag).
func (w *releaseWorld) runWith(over map[string]string, args ...string) (int, string, string) {
	w.t.Helper()
	fl := w.flags()
	var out []string
	for i := 0; i < len(fl); i += 2 {
		v, ok := over[fl[i]]
		switch {
		case !ok:
			out = append(out, fl[i], fl[i+1])
		case v != "":
			out = append(out, fl[i], v)
		}
	}
	for k, v := range over {
		if !strings.Contains(strings.Join(fl, " "), k) && v != "" {
			if v == "true" {
				out = append(out, k)
			} else {
				out = append(out, k, v)
			}
		}
	}
	return w.gapmirror(append(args, out...)...)
}

// TestReleasesBadInput: wrong channels, versions and unreachable services
// fail with a message naming what to fix, and no release is planned that
// was not verified.
func TestReleasesBadInput(t *testing.T) {
	w := newReleaseWorld(t, []string{"4.18.1", "4.18.2"}, 3, false)
	risky := releasetest.NewGraph("amd64", "4.18.1", "4.18.2").
		SetPayload("4.18.1", w.payloads["4.18.1"].PullSpec()).SetPayload("4.18.2", w.payloads["4.18.2"].PullSpec()).
		ConditionalEdge("4.18.1", "4.18.2", releasetest.Risk{Name: "TestRiskEtcdSlow", URL: "https://issues.example/ETCD-1", Message: "etcd is slow"})
	must(t, w.graphs.Put("fast-4.18", risky))
	// broken-4.18 names a signed payload digest that is not in the registry.
	missing := w.up.Host() + "/openshift-release-dev/ocp-release@" + releasetest.PayloadDigest("amd64", "4.18.9")
	must(t, w.graphs.Put("broken-4.18", releasetest.NewGraph("amd64", "4.18.9").SetPayload("4.18.9", missing)))
	sig, err := w.key.SignRelease(releasetest.PayloadDigest("amd64", "4.18.9"), missing)
	must(t, err)
	w.sigs.Put(releasetest.PayloadDigest("amd64", "4.18.9"), sig)
	// A key directory: the trusted key next to an unrelated one.
	keyDir := filepath.Join(w.dir, "keys")
	must(t, os.MkdirAll(keyDir, 0o755))
	other, err := releasetest.NewKey("unrelated")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(keyDir, "a-other.asc"), other.PublicKey(), 0o644))
	must(t, os.WriteFile(filepath.Join(keyDir, "b-release.gpg"), w.key.BinaryPublicKey(), 0o644))
	channel := func(body string) string { return "    channels:\n    - name: " + body + "\n" }
	noKey := os.Getenv("OCP_SIGNATURE_VERIFICATION_PK") == ""
	if _, err := os.Stat("/etc/pki/rpm-gpg/RPM-GPG-KEY-redhat-release"); err == nil {
		noKey = false
	}

	cases := []struct {
		name     string
		platform string
		over     map[string]string
		code     int
		want     []string
		released bool // the plan holds release images
		env      map[string]string
	}{
		{name: "unknown channel", platform: channel("stable-9.99"), code: 1,
			want: []string{"mirror.platform.channels", "channel stable-9.99 has no releases for arch amd64"}},
		{name: "version not in channel", platform: channel("stable-4.18\n      minVersion: 4.18.7"), code: 1,
			want: []string{".yaml:7: mirror.platform.channels[0].minVersion 4.18.7 is not in channel stable-4.18", "4.18.1, 4.18.2"}},
		{name: "mistyped minor", platform: channel("stable-4.81"), code: 1,
			want: []string{".yaml:6: mirror.platform.channels[0].name: channel stable-4.81 has no releases for arch amd64", "4.81 has no channel with releases", "did you mean stable-4.18?"}},
		{name: "mistyped channel kind", platform: channel("stabel-4.18"), code: 1,
			want: []string{".yaml:6: mirror.platform.channels[0].name: channel stabel-4.18", "the channels of 4.18 with releases for amd64: ", "stable-4.18", "did you mean stable-4.18?"}},
		{name: "min above max", platform: channel("stable-4.18\n      minVersion: 4.18.2\n      maxVersion: 4.18.1"), code: 1,
			want: []string{"mirror.platform.channels[0].maxVersion", "lower than minVersion 4.18.2"}},
		{name: "unreachable update service", platform: channel("stable-4.18"), over: map[string]string{"--graph-url": closedURL(t) + "/graph"}, code: 1,
			want: []string{"fetching update graph of channel stable-4.18", "connection refused"}},
		{name: "unreachable signature store", platform: channel("stable-4.18"), over: map[string]string{"--release-signature-url": closedURL(t)}, code: 2,
			want: []string{"release 4.18.2 (arch amd64, " + w.payloads["4.18.2"].Digest.String() + ") refused: its signatures could not be fetched", "connection refused"}},
		{name: "key file missing", platform: channel("stable-4.18"), over: map[string]string{"--release-signature-key": filepath.Join(w.dir, "nope.asc")}, code: 1,
			want: []string{"nope.asc", "--release-signature-key"}},
		{name: "conditional update not allowed", platform: channel("fast-4.18\n      minVersion: 4.18.1\n      maxVersion: 4.18.2\n      shortestPath: true"), code: 1,
			want: []string{"no upgrade path from 4.18.1 to 4.18.2", "TestRiskEtcdSlow"}},
		{name: "conditional update included", platform: channel("fast-4.18\n      minVersion: 4.18.1\n      maxVersion: 4.18.2\n      shortestPath: true"),
			over: map[string]string{"--include-conditional": "true"}, code: 0, released: true,
			want: []string{"conditional update 4.18.1 → 4.18.2 (channel fast-4.18) taken despite known risks: TestRiskEtcdSlow (https://issues.example/ETCD-1)"}},
		{name: "verification skipped", platform: channel("stable-4.18"),
			over: map[string]string{"--release-signature-url": closedURL(t), "--release-signature-key": "", "--skip-release-signature-verification": "true"}, code: 0, released: true,
			want: []string{"RELEASE SIGNATURE VERIFICATION IS OFF", "release 4.18.2 (arch amd64, " + w.payloads["4.18.2"].Digest.String() + ") is NOT verified"}},
		{name: "payload missing from the registry", platform: channel("broken-4.18"), code: 2,
			want: []string{missing + " (", "release 4.18.9 (arch amd64): reading release image", "manifest unknown"}},
		{name: "key directory", platform: channel("stable-4.18"), over: map[string]string{"--release-signature-key": keyDir}, code: 0, released: true,
			want: []string{"release signature verified version=4.18.2"}},
		{name: "environment instead of flags", platform: channel("stable-4.18"), code: 0, released: true,
			over: map[string]string{"--graph-url": "", "--release-signature-url": "", "--release-signature-key": ""},
			env:  map[string]string{"UPDATE_URL_OVERRIDE": w.services.GraphURL(), "OCP_SIGNATURE_URL": w.services.SignatureURL(), "OCP_SIGNATURE_VERIFICATION_PK": w.keyFile},
			want: []string{"release signature verified version=4.18.2", "store=" + w.services.SignatureURL()}},
		{name: "blocked component", platform: channel("stable-4.18") + "  blockedImages:\n  - name: " + w.payloads["4.18.2"].Components[2].Digest.Encoded() + "\n",
			code: 0, released: true,
			want: []string{"component " + w.payloads["4.18.2"].Components[2].Name + " of release 4.18.2 is blocked by mirror.blockedImages[0]"}},
		{name: "blocked release", platform: channel("stable-4.18") + "  blockedImages:\n  - name: ^openshift/release-images$\n", code: 0,
			want: []string{"release 4.18.2 (arch amd64) is blocked by mirror.blockedImages[0]"}},
		{name: "mistyped architecture", platform: "    architectures: [amd64, amd46]\n" + channel("stable-4.18"), code: 1,
			want: []string{".yaml:", "mirror.platform.architectures[1]: \"amd46\" is not a release architecture", "did you mean amd64?"}},
		{name: "platform named like a release", platform: "    platforms:\n    - os: linux\n      architecture: x86_64\n" + channel("stable-4.18"), code: 1,
			want: []string{"mirror.platform.platforms[0].architecture", `"x86_64" is a release name, not an image architecture: use amd64`}},
	}
	if noKey {
		cases = append(cases, struct {
			name     string
			platform string
			over     map[string]string
			code     int
			want     []string
			released bool
			env      map[string]string
		}{name: "no trusted key", platform: channel("stable-4.18"), over: map[string]string{"--release-signature-key": ""}, code: 1,
			want: []string{"no trusted release signing key", "--release-signature-key", "OCP_SIGNATURE_VERIFICATION_PK"}})
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			isc := w.releaseISC(fmt.Sprintf("bad-%d", i), c.platform)
			dir := filepath.Join(w.dir, fmt.Sprintf("bad-%d", i))
			code, out, errOut := w.runWith(c.over, "mirror", "-c", isc, "--dry-run", "file://"+dir)
			if code != c.code {
				t.Errorf("exit %d, want %d", code, c.code)
			}
			for _, s := range c.want {
				if !strings.Contains(out+errOut, s) {
					t.Errorf("output lacks %q", s)
				}
			}
			plan, err := os.ReadFile(filepath.Join(dir, "working-dir", "dry-run", "set.json"))
			if has := err == nil && strings.Contains(string(plan), `"kind": "release"`); has != c.released {
				t.Errorf("plan holds release images: %v, want %v", has, c.released)
			}
		})
	}
}

// plannedReleases lists the destinations of the release images in the
// plan a --dry-run wrote in dir's working-dir.
func plannedReleases(t *testing.T, dir string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "working-dir", "dry-run", "set.json"))
	must(t, err)
	var set struct {
		Images []struct {
			Destination string `json:"destination"`
			Kind        string `json:"kind"`
		} `json:"images"`
	}
	must(t, json.Unmarshal(raw, &set))
	var out []string
	for _, img := range set.Images {
		if img.Kind == "release" {
			out = append(out, img.Destination)
		}
	}
	return out
}

// publishMulti pushes and signs the multi payload of spec and makes it the
// multi-architecture graph of channel stable-4.18, as payloads["<version>-multi"].
func (w *releaseWorld) publishMulti(spec releasetest.PayloadSpec) *releasetest.Payload {
	t := w.t
	t.Helper()
	spec.Arch, spec.Host = "multi", w.up.Host()
	multi, err := releasetest.NewPayload(spec)
	must(t, err)
	must(t, multi.Push(context.Background(), imagebuilder.Target{URL: w.up.URL()}))
	sig, err := w.key.SignRelease(multi.Digest.String(), multi.Ref())
	must(t, err)
	w.sigs.Put(multi.Digest.String(), sig)
	w.payloads[spec.Version+"-multi"], w.served[spec.Version+"-multi"] = multi, sig
	must(t, w.graphs.Put("stable-4.18", releasetest.NewGraph("multi", spec.Version).SetPayload(spec.Version, multi.PullSpec())))
	return multi
}

// TestReleasesMultiArchAndSingle mirrors the amd64 and the multi payload of
// a channel head, and plans a single release named by tag and by digest.
func TestReleasesMultiArchAndSingle(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, []string{"4.18.1", "4.18.2"}, 4, false)
	multi := w.publishMulti(releasetest.PayloadSpec{Version: "4.18.2", Components: 4})

	isc := w.releaseISC("multi", "    graph: true\n    architectures: [amd64, multi]\n    channels:\n    - name: stable-4.18\n")
	code, _, _ := w.run("mirror", "-c", isc, "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/m")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	// mirror-to-mirror pushes the graph image it built from the local store.
	gd, err := w.dst.ManifestDigest("m/openshift/graph-image", "latest")
	if err != nil {
		t.Fatalf("graph image not mirrored: %v", err)
	}
	w.assertGraphImage("m/openshift/graph-image", gd)
	w.assertSignatureConfigMaps(filepath.Join(w.dir, "ws", "working-dir", "cluster-resources", "signature-configmap.yaml"), []string{"4.18.2", "4.18.2-multi"})
	w.assertRelease("m", w.payloads["4.18.2"], false)
	w.assertRelease("m", multi, false)
	if multi.Tag != "4.18.2-multi" {
		t.Errorf("multi payload tag %s", multi.Tag)
	}

	p1 := w.payloads["4.18.1"]
	for name, ref := range map[string]string{"tag": p1.Ref(), "digest": multi.PullSpec()} {
		isc := w.releaseISC("single-"+name, "    release: "+ref+"\n")
		code, out, _ := w.run("mirror", "-c", isc, "--dry-run", "file://"+filepath.Join(w.dir, "single-"+name))
		want := "openshift/release-images:4.18.1-x86_64"
		if name == "digest" {
			want = "openshift/release-images:4.18.2-multi"
		}
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("release by %s: exit %d, plan lacks %s:\n%s", name, code, want, out)
		}
	}
}

// TestReleasesIncremental: a second mirror-to-disk that adds a release
// carries only the new blobs and verifies the earlier releases with the
// signatures it saved, and disk-to-mirror of it still writes the signature
// ConfigMaps of every release of the image set.
func TestReleasesIncremental(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, []string{"4.18.1", "4.18.2", "4.18.3"}, 6, false)
	out, airgap := filepath.Join(w.dir, "out"), filepath.Join(w.dir, "airgap")
	must(t, os.MkdirAll(airgap, 0o755))
	carry := func() *archiveIndexInfo {
		t.Helper()
		chunks, _ := filepath.Glob(filepath.Join(out, "mirror_*.tar"))
		old, _ := filepath.Glob(filepath.Join(airgap, "mirror_*.tar"))
		for _, c := range old {
			must(t, os.Remove(c))
		}
		for _, c := range chunks {
			must(t, os.Rename(c, filepath.Join(airgap, filepath.Base(c))))
		}
		idx := archiveOf(t, airgap)
		return &archiveIndexInfo{id: idx.ID, blobs: len(idx.Blobs)}
	}
	isc := func(maxVersion string) string {
		return w.releaseISC("isc-"+maxVersion, "    channels:\n    - name: stable-4.18\n      minVersion: 4.18.1\n      maxVersion: "+maxVersion+"\n")
	}
	if code, _, _ := w.run("mirror", "-c", isc("4.18.2"), "file://"+out); code != 0 {
		t.Fatal("first mirror-to-disk failed")
	}
	first := carry()
	if code, _, _ := w.run("mirror", "--from", "file://"+airgap, "docker://"+w.dst.Host()+"/m"); code != 0 {
		t.Fatal("first disk-to-mirror failed")
	}
	// The store loses the old releases' signatures: the rerun verifies them
	// with the ones the first run saved.
	w.sigs.Put(w.payloads["4.18.1"].Digest.String())
	w.sigs.Put(w.payloads["4.18.2"].Digest.String())
	if code, _, _ := w.run("mirror", "-c", isc("4.18.3"), "file://"+out); code != 0 {
		t.Fatal("second mirror-to-disk failed")
	}
	second := carry()
	if second.blobs == 0 || second.blobs >= first.blobs {
		t.Errorf("second archive carries %d blobs, the first %d: want only the new release's", second.blobs, first.blobs)
	}
	if code, _, _ := w.run("mirror", "--from", "file://"+airgap, "docker://"+w.dst.Host()+"/m"); code != 0 {
		t.Fatal("second disk-to-mirror failed")
	}
	for _, v := range []string{"4.18.1", "4.18.2", "4.18.3"} {
		w.assertRelease("m", w.payloads[v], false)
	}
	w.assertSignatureConfigMaps(filepath.Join(airgap, "working-dir", "cluster-resources", "signature-configmap.yaml"), []string{"4.18.1", "4.18.2", "4.18.3"})
}

type archiveIndexInfo struct {
	id    string
	blobs int
}

// realChannels holds real cincinnati-graph-data channel lists (not in the repository).
const realChannels = "../../../shared/realdata/cincinnati/channels"

// TestReleasesRealChannel plans the shortest upgrade path through the real
// stable-4.17 channel (real versions, generated edges) with the CLI: the
// dry-run plan holds exactly the releases the release package selects,
// each one read from its payload and verified.
func TestReleasesRealChannel(t *testing.T) {
	t.Parallel()
	cf, err := releasetest.ReadChannelFile(filepath.Join(realChannels, "stable-4.17.yaml"))
	if err != nil {
		t.Skipf("real channel lists not available in %s: %v", realChannels, err)
	}
	var minor []string
	for _, v := range cf.Versions {
		if strings.HasPrefix(v, "4.17.") {
			minor = append(minor, v)
		}
	}
	if len(minor) < 2 {
		t.Skipf("stable-4.17 has %d 4.17 releases", len(minor))
	}
	from, to := minor[0], minor[len(minor)-1]
	w := newReleaseWorld(t, nil, 0, false)

	// Plan with the library on placeholder payloads, then publish real
	// payloads for the selected versions only.
	g := releasetest.NewGraph("amd64", cf.Versions...).GenerateEdges()
	data, err := g.JSON()
	must(t, err)
	parsed, err := release.ParseGraph(data, "stable-4.17", "amd64")
	must(t, err)
	spec := release.Spec{Channels: []release.ChannelSpec{{Name: "stable-4.17", MinVersion: from, MaxVersion: to, ShortestPath: true}}}
	plan, err := release.NewPlan(release.Graphs{{Channel: "stable-4.17", Type: release.TypeOCP, Arch: "amd64"}: parsed}, spec)
	must(t, err)
	want := map[string]bool{}
	for _, r := range plan.Releases {
		p, err := releasetest.NewPayload(releasetest.PayloadSpec{Version: r.Version, Host: w.up.Host(), Components: 2})
		must(t, err)
		must(t, p.Push(context.Background(), imagebuilder.Target{URL: w.up.URL()}))
		sig, err := w.key.SignRelease(p.Digest.String(), p.Ref())
		must(t, err)
		w.sigs.Put(p.Digest.String(), sig)
		g.SetPayload(r.Version, p.PullSpec())
		want["openshift/release-images:"+p.Tag] = true
	}
	must(t, w.graphs.Put("stable-4.17", g))

	isc := w.releaseISC("real", fmt.Sprintf("    channels:\n    - name: stable-4.17\n      minVersion: %s\n      maxVersion: %s\n      shortestPath: true\n", from, to))
	dir := filepath.Join(w.dir, "real")
	if code, _, _ := w.run("mirror", "-c", isc, "--dry-run", "file://"+dir); code != 0 {
		t.Fatalf("exit %d", code)
	}
	got := map[string]bool{}
	for _, d := range plannedReleases(t, dir) {
		got[d] = true
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(want) < 2 {
		t.Errorf("plan from %s to %s holds %v, want %v", from, to, got, want)
	}
	t.Logf("stable-4.17: %d releases, shortest path %s → %s takes %d", len(cf.Versions), from, to, len(want))
}

// TestPruneReleaseLeavesRange: when a release leaves the channel range,
// --prune deletes its release image and the components only it uses; the
// components it shares with the release that stays lose only the old
// release's tag and stay complete; the graph image stays, the signature
// ConfigMaps hold only the release that stays; the dry run's preview lists
// the same deletes.
func TestPruneReleaseLeavesRange(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, []string{"4.18.1", "4.18.2"}, 6, false)
	ws := "file://" + filepath.Join(w.dir, "ws")
	dst := "docker://" + w.dst.Host() + "/m"
	both := w.releaseISC("both", "    graph: true\n    channels:\n    - name: stable-4.18\n      minVersion: 4.18.1\n      maxVersion: 4.18.2\n")
	if code, _, _ := w.run("mirror", "-c", both, "--workspace", ws, dst); code != 0 {
		t.Fatal("first m2m failed")
	}
	one := w.releaseISC("one", "    graph: true\n    channels:\n    - name: stable-4.18\n      minVersion: 4.18.2\n      maxVersion: 4.18.2\n")
	dry, pruned := dryRunThenPrune(t, w.run, one, filepath.Join(w.dir, "ws"), dst)
	if a, b := actionKeys(dry.Plan.Actions), actionKeys(pruned.Outcome.Done); strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Errorf("dry\n%s\nreal\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	p1, p2 := w.payloads["4.18.1"], w.payloads["4.18.2"]
	w.assertRelease("m", p2, false)
	w.gone(w.dst, "m/openshift/release-images", p1.Tag, p1.Digest)
	shared := map[digest.Digest]bool{}
	for _, c := range p2.Components {
		shared[c.Digest] = true
	}
	n := 0
	for _, c := range p1.Components {
		if shared[c.Digest] {
			n++
			w.gone(w.dst, "m/openshift/release", p1.Tag+"-"+c.Name, "")
			w.assertComplete(w.dst, "m/openshift/release", c.Digest)
		} else {
			w.gone(w.dst, "m/openshift/release", p1.Tag+"-"+c.Name, c.Digest)
		}
	}
	if n == 0 || n == len(p1.Components) {
		t.Errorf("the fixture's releases share %d of %d components: the test needs some shared, some not", n, len(p1.Components))
	}
	gd, err := w.dst.ManifestDigest("m/openshift/graph-image", "latest")
	must(t, err)
	w.assertComplete(w.dst, "m/openshift/graph-image", gd)
	// The cluster's signature ConfigMaps are those of the release that stays.
	w.assertSignatureConfigMaps(filepath.Join(w.dir, "ws", "working-dir", "cluster-resources", "signature-configmap.yaml"), []string{"4.18.2"})
}
