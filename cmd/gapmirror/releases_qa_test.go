package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/internal/releasetest"
)

// TestReleasesKubeVirtTwoArchitectures: kubeVirtContainer with the amd64
// and arm64 releases of a channel mirrors the amd64 release with its
// KubeVirt container disk and the arm64 one without (arm64 releases ship
// none), with a warning, not a refused arm64 release: the configuration
// cannot ask for the disk per architecture, and oc-mirror mirrors both.
func TestReleasesKubeVirtTwoArchitectures(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, []string{"4.18.1", "4.18.2"}, 3, true)
	arm, err := w.services.PublishChannel(context.Background(), w.upTarget(), w.key, "stable-4.18",
		releasetest.PayloadSpec{Host: w.up.Host(), Components: 3, KubeVirt: true, Arch: "arm64"}, "4.18.1", "4.18.2")
	must(t, err)
	w.payloads["4.18.2-arm64"], w.served["4.18.2-arm64"] = arm.Payloads["4.18.2"], arm.Signatures["4.18.2"]

	isc := w.releaseISC("isc", "    kubeVirtContainer: true\n    architectures: [amd64, arm64]\n    channels:\n    - name: stable-4.18\n")
	ws := filepath.Join(w.dir, "ws")
	code, out, errOut := w.run("mirror", "-c", isc, "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if want := "release 4.18.2 (arch arm64) is mirrored without a KubeVirt container disk"; !strings.Contains(out+errOut, want) {
		t.Errorf("output lacks %q", want)
	}
	w.assertRelease("m", w.payloads["4.18.2"], true)
	w.assertRelease("m", w.payloads["4.18.2-arm64"], false)
	if _, err := w.dst.ManifestDigest("m/openshift/release", "4.18.2-aarch64-kube-virt-container"); err == nil {
		t.Error("an arm64 KubeVirt container disk reached the mirror")
	}
	w.assertSignatureConfigMaps(filepath.Join(ws, "working-dir", "cluster-resources", "signature-configmap.yaml"), []string{"4.18.2", "4.18.2-arm64"})
}

// TestReleasesSignatureStoreFailsAfterGoodSignature: a signature store that
// serves a trusted signature-1 and then fails on signature-2 (HTTP 503) has
// proved the release: it is mirrored, with signature-1 in its ConfigMap,
// instead of refused for a lookup it did not need.
func TestReleasesSignatureStoreFailsAfterGoodSignature(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, []string{"4.18.1"}, 3, false)
	flaky := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/signature-2") {
			http.Error(rw, "try again later", http.StatusServiceUnavailable)
			return
		}
		w.sigs.ServeHTTP(rw, r)
	}))
	t.Cleanup(flaky.Close)
	isc := w.releaseISC("isc", "    channels:\n    - name: stable-4.18\n")
	ws := filepath.Join(w.dir, "ws")
	code, out, errOut := w.runWith(map[string]string{"--release-signature-url": flaky.URL + "/signatures"},
		"mirror", "-c", isc, "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if !strings.Contains(errOut, "release signature verified version=4.18.1") {
		t.Errorf("no verification logged:\n%s", errOut)
	}
	w.assertRelease("m", w.payloads["4.18.1"], false)
	w.assertSignatureConfigMaps(filepath.Join(ws, "working-dir", "cluster-resources", "signature-configmap.yaml"), []string{"4.18.1"})
}
