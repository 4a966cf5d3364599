package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// TestThreeTrips mirrors 22 images (multi-arch, Docker and OCI, shared
// layers, one by digest only) to disk and from disk into a registry, and
// straight registry to registry, and checks every manifest and blob by
// digest at the destination.
func TestThreeTrips(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(22, 256<<10)
	isc := w.isc("")
	archiveDir := filepath.Join(w.dir, "archive")

	code, out, _ := w.gapmirror("mirror", "-c", isc, "--archive-size", "1MiB", "file://"+archiveDir)
	if code != 0 {
		t.Fatalf("mirror-to-disk exit %d", code)
	}
	chunks, _ := filepath.Glob(filepath.Join(archiveDir, "mirror_*.tar"))
	if len(chunks) < 2 {
		t.Errorf("want several 1 MiB chunks, got %v", chunks)
	}
	for _, c := range chunks {
		if fi, _ := os.Stat(c); fi.Size() > 1<<20 {
			t.Errorf("%s is %d bytes, over the 1 MiB chunk size", c, fi.Size())
		}
	}
	if !strings.Contains(out, "22 copied") {
		t.Errorf("summary does not say 22 copied:\n%s", out)
	}

	code, _, _ = w.gapmirror("mirror", "-c", isc, "--from", "file://"+archiveDir, "docker://"+w.dst.Host()+"/d2m")
	if code != 0 {
		t.Fatalf("disk-to-mirror exit %d", code)
	}
	w.assertMirrored(w.dst, "d2m")
	idms, err := os.ReadFile(filepath.Join(archiveDir, "working-dir", "cluster-resources", "idms-gapmirror.yaml"))
	must(t, err)
	if !strings.Contains(string(idms), w.dst.Host()+"/d2m/") {
		t.Errorf("IDMS does not point at the mirror:\n%s", idms)
	}
	itms, err := os.ReadFile(filepath.Join(archiveDir, "working-dir", "cluster-resources", "itms-gapmirror.yaml"))
	must(t, err)
	if !strings.Contains(string(itms), w.up.Host()+"/apps") {
		t.Errorf("ITMS does not map the tag-referenced sources:\n%s", itms)
	}

	ws := filepath.Join(w.dir, "ws")
	code, _, _ = w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m2m")
	if code != 0 {
		t.Fatalf("mirror-to-mirror exit %d", code)
	}
	w.assertMirrored(w.dst, "m2m")

	// A rerun with nothing new skips every image.
	code, out, _ = w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m2m")
	if code != 0 || !strings.Contains(out, "0 copied, 22 already at the destination") {
		t.Errorf("no-change rerun: exit %d, summary:\n%s", code, out)
	}

	// The extracted archive is an OCI layout that skopeo can read.
	if skopeo, err := exec.LookPath("skopeo"); err == nil {
		layout := filepath.Join(w.dir, "layout")
		must(t, os.MkdirAll(layout, 0o755))
		for _, c := range chunks {
			if out, err := exec.Command("tar", "-xf", c, "-C", layout).CombinedOutput(); err != nil {
				t.Fatalf("tar -xf %s: %v\n%s", c, err, out)
			}
		}
		ex := w.images[0]
		out, err := exec.Command(skopeo, "inspect", "--raw", "oci:"+layout+":"+ex.Repo+":"+ex.Tag).CombinedOutput()
		if err != nil {
			t.Errorf("skopeo inspect of the extracted archive: %v\n%s", err, out)
		}
		out, err = exec.Command(skopeo, "inspect", "--tls-verify=false", "--format", "{{.Digest}}", "docker://"+w.dst.Host()+"/d2m/"+ex.Repo+":"+ex.Tag).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != ex.Digest.String() {
			t.Errorf("skopeo inspect of the mirror: %v: %s", err, out)
		}
	} else {
		t.Log("skopeo not installed: skipping the independent-client cross-check")
	}
}

// TestRegistriesConfMirror: images named under a registry this machine
// cannot reach are pulled through the mirror registries.conf gives for it,
// as podman and skopeo would, and keep their original names in IDMS.
func TestRegistriesConfMirror(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(3, 16<<10)
	conf := "[[registry]]\nprefix = \"registry.example.invalid\"\nlocation = \"registry.example.invalid\"\n" +
		"[[registry.mirror]]\nlocation = \"" + w.up.Host() + "\"\ninsecure = true\n"
	must(t, os.WriteFile(w.regsConf, []byte(conf), 0o644))
	for i := range w.images {
		w.images[i].Ref = strings.Replace(w.images[i].Ref, w.up.Host(), "registry.example.invalid", 1)
	}
	ws := filepath.Join(w.dir, "ws")
	code, _, _ := w.gapmirror("mirror", "-c", w.isc(""), "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	w.assertMirrored(w.dst, "m")
	itms, err := os.ReadFile(filepath.Join(ws, "working-dir", "cluster-resources", "itms-gapmirror.yaml"))
	must(t, err)
	if !strings.Contains(string(itms), "registry.example.invalid/apps") {
		t.Errorf("ITMS does not keep the original registry name:\n%s", itms)
	}
}
