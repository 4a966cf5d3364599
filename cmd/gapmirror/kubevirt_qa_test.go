package main

import (
	"path/filepath"
	"testing"

	"github.com/gapmirror/gapmirror/internal/releasetest"
)

// TestKubeVirtMultiQAPruneDelete: multi releases with KubeVirt disks for
// two of three architectures, mirrored with kubeVirtContainer; --prune
// after the older release leaves the set deletes its disks with it, and a
// DeleteImageSetConfiguration with kubeVirtContainer for the newer one
// deletes its release, components and every disk.
func TestKubeVirtMultiQAPruneDelete(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, []string{"4.18.1", "4.18.2"}, 2, false)
	w.publishMultiSpecs(releasetest.PayloadSpec{Components: 3, KubeVirt: true, Platforms: []string{"amd64", "arm64", "s390x"}}, "4.18.1", "4.18.2")
	head := "    kubeVirtContainer: true\n    architectures: [multi]\n"
	ws := "file://" + filepath.Join(w.dir, "ws")
	dst := "docker://" + w.dst.Host() + "/m"
	if code, _, _ := w.run("mirror", "-c", w.releaseISC("both", head+narrowChannel("4.18.1", "4.18.2")), "--workspace", ws, dst); code != 0 {
		t.Fatal("mirror-to-mirror failed")
	}
	disks := func(v string) map[string]string {
		p := w.payloads[v+"-multi"]
		out := map[string]string{}
		for arch, tagArch := range map[string]string{"amd64": "x86_64", "s390x": "s390x"} {
			out[p.Tag+"-kube-virt-container-"+tagArch] = p.KubeVirt[arch].Digest.String()
		}
		return out
	}
	for _, v := range []string{"4.18.1", "4.18.2"} {
		w.assertRelease("m", w.payloads[v+"-multi"], false)
		for tag, d := range disks(v) {
			if got, err := w.dst.ManifestDigest("m/openshift/release", tag); err != nil || got.String() != d {
				t.Fatalf("disk %s not mirrored: %s %v", tag, got, err)
			}
		}
	}
	if code, _, _ := w.run("mirror", "-c", w.releaseISC("newer", head+narrowChannel("4.18.2", "4.18.2")), "--workspace", ws, "--prune", dst); code != 0 {
		t.Fatal("--prune failed")
	}
	for tag := range disks("4.18.1") {
		w.gone(w.dst, "m/openshift/release", tag, "")
	}
	w.gone(w.dst, "m/openshift/release-images", w.payloads["4.18.1-multi"].Tag, "")
	w.assertRelease("m", w.payloads["4.18.2-multi"], false)
	for tag, d := range disks("4.18.2") {
		if got, err := w.dst.ManifestDigest("m/openshift/release", tag); err != nil || got.String() != d {
			t.Errorf("disk %s of the release that stays: %s %v", tag, got, err)
		}
	}

	disc := w.disc("disc.yaml", "  platform:\n"+head+narrowChannel("4.18.2", "4.18.2"))
	if code, _, _ := w.gapmirror("delete", "-c", disc, "--generate", "--workspace", ws, dst); code != 0 {
		t.Fatal("delete --generate failed")
	}
	if code, _, _ := w.gapmirror("delete", "--delete-yaml-file", filepath.Join(w.dir, "ws", "working-dir", "delete", "delete-images.yaml"), dst); code != 0 {
		t.Fatal("delete failed")
	}
	p2 := w.payloads["4.18.2-multi"]
	w.gone(w.dst, "m/openshift/release-images", p2.Tag, "")
	for _, c := range p2.Components {
		w.gone(w.dst, "m/openshift/release", p2.Tag+"-"+c.Name, "")
	}
	for tag := range disks("4.18.2") {
		w.gone(w.dst, "m/openshift/release", tag, "")
	}
}
