package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// disc writes a DeleteImageSetConfiguration.
func (w *world) disc(file string, body string) string {
	return w.writeFile(file, "kind: DeleteImageSetConfiguration\napiVersion: mirror.openshift.io/v2alpha1\ndelete:\n"+body)
}

// TestDelete: delete --generate writes a plan and deletes nothing;
// --delete-yaml-file --dry-run shows it; --delete-yaml-file deletes what
// it lists and nothing a kept tag uses; a plan the registry has outgrown
// is refused; deleted images are forgotten.
func TestDelete(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(5, 16<<10)
	im := w.images
	// 0 app-00, 1 app-01, 2 tool-02, 3 app-03 (index), 4 app-04 (by digest only).
	ws := filepath.Join(w.dir, "ws")
	root := w.dst.Host() + "/mirror"
	dst := "docker://" + root
	isc := w.iscOf("isc.yaml", entry{name: im[0].Ref}, entry{name: im[0].Ref, targetTag: "stable"}, entry{name: im[1].Ref},
		entry{name: im[2].Ref}, entry{name: im[3].Ref}, entry{name: im[4].Ref})
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+ws, dst); code != 0 {
		t.Fatal("m2m failed")
	}
	ctx := context.Background()
	target := imagebuilder.Target{URL: w.dst.URL()}
	m2, mt2, err := w.dst.Manifest("mirror/"+im[2].Repo, "v1")
	must(t, err)
	must(t, imagebuilder.PushManifest(ctx, target, "mirror/"+im[2].Repo, "theirs", mt2, m2))

	disc := w.disc("disc.yaml", "  additionalImages:\n"+
		"  - name: "+im[0].Ref+"\n    targetTag: stable\n"+
		"  - name: "+im[1].Ref+"\n"+
		"  - name: "+im[2].Ref+"\n"+
		"  - name: "+im[4].Ref+"\n")
	code, stdout, _ := w.gapmirror("delete", "-c", disc, "--generate", "--workspace", "file://"+ws, dst)
	plan := filepath.Join(ws, "working-dir", "delete", "delete-images.yaml")
	if code != 0 || !strings.Contains(stdout, plan) || !strings.Contains(stdout, "nothing was deleted") {
		t.Fatalf("generate: exit %d", code)
	}
	data, err := os.ReadFile(plan)
	must(t, err)
	for _, want := range []string{"kind: DeleteImageList", "imageReference: docker://" + root + "/" + im[1].Repo + ":v1", "delete.additionalImages[3]", "op: delete-tag"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("plan lacks %q:\n%s", want, data)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "working-dir", "delete", "delete-imageset-config.yaml")); err != nil {
		t.Errorf("the configuration is not kept next to the plan: %v", err)
	}
	w.present(w.dst, "mirror/"+im[1].Repo, "v1", im[1].Digest)

	code, stdout, _ = w.gapmirror("delete", "--delete-yaml-file", plan, "--dry-run", dst)
	if code != 0 || !strings.Contains(stdout, "dry run") || !strings.Contains(stdout, "mirror/"+im[1].Repo+"@"+im[1].Digest.String()) {
		t.Errorf("dry run: exit %d", code)
	}
	w.present(w.dst, "mirror/"+im[1].Repo, "v1", im[1].Digest)

	// Someone starts using app-01's manifest after the plan was made: the
	// plan's manifest delete is no longer safe and is refused.
	m1, mt1, err := w.dst.Manifest("mirror/"+im[1].Repo, "v1")
	must(t, err)
	must(t, imagebuilder.PushManifest(ctx, target, "mirror/"+im[1].Repo, "keep", mt1, m1))
	code, stdout, stderr := w.gapmirror("delete", "--delete-yaml-file", plan, dst)
	if code != 1 || !strings.Contains(stderr, "generate it again") || !strings.Contains(stdout, "SKIPPED") {
		t.Errorf("stale plan: exit %d (want 1)", code)
	}
	w.present(w.dst, "mirror/"+im[1].Repo, "keep", im[1].Digest)
	// The rest of the plan went.
	w.gone(w.dst, "mirror/apps/app-00", "stable", "")
	w.present(w.dst, "mirror/"+im[0].Repo, "v1", im[0].Digest)
	w.gone(w.dst, "mirror/"+im[2].Repo, "v1", "")
	w.present(w.dst, "mirror/"+im[2].Repo, "theirs", im[2].Digest)
	w.gone(w.dst, "mirror/"+im[4].Repo, im[4].Tag, im[4].Digest)
	w.present(w.dst, "mirror/"+im[3].Repo, im[3].Tag, im[3].Digest)

	// Generated again, the plan removes only app-01's tag.
	disc1 := w.disc("disc1.yaml", "  additionalImages:\n  - name: "+im[1].Ref+"\n")
	if code, _, _ := w.gapmirror("delete", "-c", disc1, "--generate", "--workspace", "file://"+ws, "--delete-id", "again", dst); code != 0 {
		t.Fatal("second generate failed")
	}
	plan2 := filepath.Join(ws, "working-dir", "delete", "delete-images-again.yaml")
	if code, _, _ := w.gapmirror("delete", "--delete-yaml-file", plan2, dst); code != 0 {
		t.Fatal("second delete failed")
	}
	w.gone(w.dst, "mirror/"+im[1].Repo, "v1", "")
	w.present(w.dst, "mirror/"+im[1].Repo, "keep", im[1].Digest)
	if files, _ := filepath.Glob(filepath.Join(ws, "working-dir", "delete", "*-deleted.json")); len(files) != 2 {
		t.Errorf("deletion records: %v", files)
	}
	// Deleted images are forgotten: asking again says so.
	code, _, stderr = w.gapmirror("delete", "-c", disc1, "--generate", "--workspace", "file://"+ws, dst)
	if code != 1 || !strings.Contains(stderr, "delete.additionalImages[0]") || !strings.Contains(stderr, "deleted already") {
		t.Errorf("generate for deleted images: exit %d\n%s", code, stderr)
	}
}

// TestDeleteBadInput: mistakes are refused with the file, field, mirror or
// registry answer, and nothing is deleted.
func TestDeleteBadInput(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(2, 16<<10)
	im := w.images
	ws := filepath.Join(w.dir, "ws")
	dst := "docker://" + w.dst.Host() + "/mirror"
	if code, _, _ := w.gapmirror("mirror", "-c", w.iscOf("isc.yaml", entry{name: im[0].Ref}), "--workspace", "file://"+ws, dst); code != 0 {
		t.Fatal("m2m failed")
	}
	good := w.disc("good.yaml", "  additionalImages:\n  - name: "+im[0].Ref+"\n")
	if code, _, _ := w.gapmirror("delete", "-c", good, "--generate", "--workspace", "file://"+ws, dst); code != 0 {
		t.Fatal("generate failed")
	}
	plan := filepath.Join(ws, "working-dir", "delete", "delete-images.yaml")
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"missing config", []string{"-c", filepath.Join(w.dir, "nope.yaml"), "--generate", "--workspace", "file://" + ws, dst}, []string{"nope.yaml", "no such file"}},
		{"mirror config given", []string{"-c", w.iscOf("m.yaml", entry{name: im[0].Ref}), "--generate", "--workspace", "file://" + ws, dst}, []string{"m.yaml:1", "kind"}},
		{"never mirrored", []string{"-c", w.disc("other.yaml", "  additionalImages:\n  - name: "+im[1].Ref+"\n"), "--generate", "--workspace", "file://" + ws, dst},
			[]string{"delete.additionalImages[0]", im[1].Ref, "was not mirrored to"}},
		{"operators", []string{"-c", w.disc("ops.yaml", "  operators:\n  - catalog: registry.example.com/redhat/redhat-operator-index:v4.18\n"), "--generate", "--workspace", "file://" + ws, dst},
			[]string{"delete.operators[0].catalog", "was not mirrored to", "it mirrored no operator catalog there"}},
		{"wrong root for generate", []string{"-c", good, "--generate", "--workspace", "file://" + ws, "docker://" + w.dst.Host() + "/other"},
			[]string{"no record of mirroring", "/other", "records for: " + w.dst.Host() + "/mirror"}},
		{"missing plan", []string{"--delete-yaml-file", filepath.Join(w.dir, "gone.yaml"), dst}, []string{"gone.yaml", "--generate"}},
		{"not a plan", []string{"--delete-yaml-file", good, dst}, []string{"good.yaml", "not a gapmirror delete plan"}},
		{"wrong root for execute", []string{"--delete-yaml-file", plan, "docker://" + w.dst.Host() + "/other"}, []string{"is a plan for docker://" + w.dst.Host() + "/mirror"}},
		{"no mode", []string{dst}, []string{"--generate", "--delete-yaml-file"}},
		{"file destination", []string{"--delete-yaml-file", plan, "file://" + ws}, []string{"docker://"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := w.gapmirror(append([]string{"delete"}, c.args...)...)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			for _, s := range c.want {
				if !strings.Contains(stderr, s) {
					t.Errorf("error does not mention %q:\n%s", s, stderr)
				}
			}
			if strings.Contains(stderr, "panic") {
				t.Errorf("panic:\n%s", stderr)
			}
		})
	}
	w.present(w.dst, "mirror/"+im[0].Repo, "v1", im[0].Digest)

	// An unreachable mirror: named, with what to check.
	must(t, w.dst.Close())
	code, _, stderr := w.gapmirror("delete", "-c", good, "--generate", "--workspace", "file://"+ws, dst)
	if code != 1 || !strings.Contains(stderr, w.dst.Host()) || !strings.Contains(stderr, "unreachable") {
		t.Errorf("unreachable mirror: exit %d\n%s", code, stderr)
	}
}

// TestDeleteRelease: delete.platform with a pinned release removes the
// release image and its components that the workspace's records show at
// the mirror (oc-mirror's layout), and leaves the other release; a version
// range is resolved with the workspace's saved update graph (refused, saying
// what to run, without it). The records are written as a release mirroring
// run leaves them.
func TestDeleteRelease(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	ctx := context.Background()
	root := w.dst.Host() + "/m"
	target := imagebuilder.Target{URL: w.dst.URL()}
	type rec struct {
		dest, kind string
		d          string
	}
	var recs []rec
	for i, dest := range []struct{ dest, kind string }{
		{"openshift/release-images:4.18.1-x86_64", "release"},
		{"openshift/release:4.18.1-x86_64-etcd", "release-component"},
		{"openshift/release:4.18.1-x86_64-kube-virt-container", "release-component"},
		{"openshift/release-images:4.18.2-x86_64", "release"},
		{"openshift/release:4.18.2-x86_64-etcd", "release-component"},
	} {
		img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(uint64(100+i), 2048)}})
		must(t, err)
		repo, tag, _ := strings.Cut(dest.dest, ":")
		must(t, imagebuilder.Push(ctx, target, "m/"+repo, tag, img))
		recs = append(recs, rec{dest.dest, dest.kind, img.Digest.String()})
	}
	ws := filepath.Join(w.dir, "ws")
	var b strings.Builder
	b.WriteString(`{"formatVersion": 1, "mirror": "` + root + `", "blobs": {}, "images": [`)
	for i, r := range recs {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"destination": "` + r.dest + `", "digest": "` + r.d + `", "kind": "` + r.kind + `", "origin": "quay.io/openshift-release-dev/ocp-v4.0-art-dev@` + r.d + `", "pushed": true, "firstSeen": "2026-11-01T00:00:00Z", "lastSeen": "2026-11-01T00:00:00Z"}`)
	}
	b.WriteString("]}")
	must(t, os.MkdirAll(filepath.Join(ws, "working-dir", "mirrors"), 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "working-dir", "mirrors", strings.NewReplacer("/", "_", ":", "_").Replace(root)+".json"), []byte(b.String()), 0o644))

	disc := w.disc("disc.yaml", "  platform:\n    channels:\n    - name: stable-4.18\n      minVersion: 4.18.1\n      maxVersion: 4.18.1\n")
	code, stdout, _ := w.gapmirror("delete", "-c", disc, "--generate", "--workspace", "file://"+ws, "docker://"+root)
	if code != 0 || !strings.Contains(stdout, "3 images, 3 deletes") {
		t.Fatalf("generate: exit %d", code)
	}
	plan := filepath.Join(ws, "working-dir", "delete", "delete-images.yaml")
	if code, _, _ := w.gapmirror("delete", "--delete-yaml-file", plan, "docker://"+root); code != 0 {
		t.Fatal("delete failed")
	}
	for _, r := range recs[:3] {
		repo, tag, _ := strings.Cut(r.dest, ":")
		w.gone(w.dst, "m/"+repo, tag, digest.Digest(r.d))
	}
	for _, r := range recs[3:] {
		repo, tag, _ := strings.Cut(r.dest, ":")
		w.present(w.dst, "m/"+repo, tag, digest.Digest(r.d))
	}
	// A range needs the update graph the mirror runs saved: without it,
	// refused, saying what to run.
	rng := w.disc("range.yaml", "  platform:\n    channels:\n    - name: stable-4.18\n      minVersion: 4.18.2\n      maxVersion: 4.18.3\n")
	code, _, stderr := w.gapmirror("delete", "-c", rng, "--generate", "--workspace", "file://"+ws, "docker://"+root)
	if code != 1 || !strings.Contains(stderr, "delete.platform.channels") || !strings.Contains(stderr, "stable-4.18") ||
		!strings.Contains(stderr, "run mirror-to-disk with this channel") || !strings.Contains(stderr, "minVersion = maxVersion") {
		t.Errorf("range without a saved graph: exit %d\n%s", code, stderr)
	}
	// With the saved graph (4.18.1 to 4.18.3, of which 4.18.3 was never
	// mirrored), the range deletes 4.18.2 and passes over 4.18.3.
	var g strings.Builder
	g.WriteString(`{"nodes": [`)
	for i, v := range []string{"4.18.1", "4.18.2", "4.18.3"} {
		if i > 0 {
			g.WriteString(",")
		}
		g.WriteString(`{"version": "` + v + `", "payload": "quay.io/openshift-release-dev/ocp-release@sha256:` + strings.Repeat(string(rune('a'+i)), 64) + `"}`)
	}
	g.WriteString(`], "edges": [[0, 1], [1, 2]]}`)
	graphs := filepath.Join(ws, "working-dir", "release-graphs")
	must(t, os.MkdirAll(graphs, 0o755))
	must(t, os.WriteFile(filepath.Join(graphs, "amd64-stable-4.18.json"), []byte(g.String()), 0o644))
	// A selection of releases none of which was mirrored: said so.
	unmirrored := w.disc("unmirrored.yaml", "  platform:\n    channels:\n    - name: stable-4.18\n      minVersion: 4.18.3\n")
	code, _, stderr = w.gapmirror("delete", "-c", unmirrored, "--generate", "--workspace", "file://"+ws, "docker://"+root)
	if code != 1 || !strings.Contains(stderr, "delete.platform.channels[0]") || !strings.Contains(stderr, "none of the releases") {
		t.Errorf("range of unmirrored releases: exit %d\n%s", code, stderr)
	}
	code, stdout, _ = w.gapmirror("delete", "-c", rng, "--generate", "--workspace", "file://"+ws, "docker://"+root)
	if code != 0 || !strings.Contains(stdout, "2 images, 2 deletes") {
		t.Fatalf("range generate: exit %d", code)
	}
	if code, _, _ := w.gapmirror("delete", "--delete-yaml-file", plan, "docker://"+root); code != 0 {
		t.Fatal("range delete failed")
	}
	for _, r := range recs[3:] {
		repo, tag, _ := strings.Cut(r.dest, ":")
		w.gone(w.dst, "m/"+repo, tag, digest.Digest(r.d))
	}
}

// TestDeletePlanOutlivedByAMirrorRun: a plan executed after a mirror run
// whose image set still held what it deletes (the image could be needed
// again) deletes none of it, says why, and exits 1; generated again, it
// deletes the image and notes that the configuration still lists it.
func TestDeletePlanOutlivedByAMirrorRun(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(3, 8<<10)
	im := w.images
	ws := filepath.Join(w.dir, "ws")
	dst := "docker://" + w.dst.Host() + "/m"
	isc := w.iscOf("isc.yaml", entry{name: im[0].Ref}, entry{name: im[1].Ref})
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+ws, dst); code != 0 {
		t.Fatal("m2m failed")
	}
	disc := w.disc("disc.yaml", "  additionalImages:\n  - name: "+im[1].Ref+"\n")
	plan := filepath.Join(ws, "working-dir", "delete", "delete-images.yaml")
	if code, _, _ := w.gapmirror("delete", "-c", disc, "--generate", "--workspace", "file://"+ws, dst); code != 0 {
		t.Fatal("generate failed")
	}
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+ws, dst); code != 0 {
		t.Fatal("second m2m failed")
	}
	code, stdout, stderr := w.gapmirror("delete", "--delete-yaml-file", plan, dst)
	if code != 1 || !strings.Contains(stdout, "SKIPPED") || !strings.Contains(stdout, "after the plan was generated") || !strings.Contains(stderr, "generate it again") {
		t.Errorf("outlived plan: exit %d (want 1)", code)
	}
	w.present(w.dst, "m/"+im[1].Repo, "v1", im[1].Digest)
	code, stdout, _ = w.gapmirror("delete", "-c", disc, "--generate", "--workspace", "file://"+ws, dst)
	if code != 0 || !strings.Contains(stdout, "is still mirror.additionalImages[1] of the latest run's ImageSetConfiguration") {
		t.Fatalf("generate again: exit %d", code)
	}
	if code, _, _ := w.gapmirror("delete", "--delete-yaml-file", plan, dst); code != 0 {
		t.Fatal("delete failed")
	}
	w.gone(w.dst, "m/"+im[1].Repo, "v1", im[1].Digest)
	w.present(w.dst, "m/"+im[0].Repo, "v1", im[0].Digest)
}
