package main

import (
	"context"
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
