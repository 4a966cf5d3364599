package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// copyChunksTo copies the chunk files of from into to, over any of the
// same name, as cp mirror_*.tar /media/usb/ does.
func copyChunksTo(t *testing.T, from, to string, pattern string) {
	t.Helper()
	must(t, os.MkdirAll(to, 0o755))
	names, err := filepath.Glob(filepath.Join(from, pattern))
	must(t, err)
	for _, name := range names {
		data, err := os.ReadFile(name)
		must(t, err)
		must(t, os.WriteFile(filepath.Join(to, filepath.Base(name)), data, 0o644))
	}
}

// TestArchiveOfAnotherWorkspace: an archive another connected host (another
// mirror-to-disk workspace) wrote, copied over the chunks of the archives a
// directory applies, is refused before anything is pushed, naming it: its
// set would have replaced theirs and --prune deleted their images. Two
// workspaces' archives side by side are refused the same way, and describe
// says they are mixed. Each workspace's archive in its own directory goes
// to the same mirror without touching the other's images.
func TestArchiveOfAnotherWorkspace(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(6, 32<<10)
	all := w.images
	outA, outB, air := filepath.Join(w.dir, "a"), filepath.Join(w.dir, "b"), filepath.Join(w.dir, "air")
	mirror := "docker://" + w.dst.Host() + "/m"

	w.images = all[:4]
	if code, _, _ := w.gapmirror("mirror", "-c", w.isc(""), "file://"+outA); code != 0 {
		t.Fatal("m2d of workspace a failed")
	}
	idxA := archiveOf(t, outA)
	copyChunksTo(t, outA, air, "mirror_*.tar")
	if code, _, _ := w.gapmirror("mirror", "--prune", "--from", "file://"+air, mirror); code != 0 {
		t.Fatal("d2m of workspace a's archive failed")
	}
	code, stdout, _ := w.gapmirror("describe", "--quick", "file://"+air)
	if code != 0 || !strings.Contains(stdout, "applied from this directory: ") || !strings.Contains(stdout, "to "+w.dst.Host()+"/m") {
		t.Errorf("describe after d2m (exit %d) does not say where the archive was applied:\n%s", code, stdout)
	}

	w.images = all[4:]
	iscB := w.isc("")
	if code, _, _ := w.gapmirror("mirror", "-c", iscB, "file://"+outB); code != 0 {
		t.Fatal("m2d of workspace b failed")
	}
	idxB := archiveOf(t, outB)
	if idxA.Workspace == "" || idxB.Workspace == "" || idxA.Workspace == idxB.Workspace {
		t.Fatalf("archives name workspaces %q and %q, want two different ones", idxA.Workspace, idxB.Workspace)
	}
	// The other host's archive lands on the media under the same names.
	copyChunksTo(t, outB, air, "mirror_*.tar")
	for _, args := range [][]string{{"--dry-run"}, {"--prune"}} {
		code, _, stderr := w.gapmirror(append(append([]string{"mirror"}, args...), "--from", "file://"+air, mirror)...)
		for _, want := range []string{"another mirror-to-disk workspace", idxB.ID, "mirror_000001.tar", idxA.ID, "directory of their own", "--skip-predecessor-check"} {
			if code != 1 || !strings.Contains(stderr, want) {
				t.Errorf("d2m %v of another workspace's archive: exit %d, stderr does not say %q:\n%s", args, code, want, stderr)
			}
		}
	}
	w.images = all[:4]
	w.assertMirrored(w.dst, "m") // nothing pruned
	for _, ex := range all[4:] {
		if _, err := w.dst.ManifestDigest("m/"+ex.Repo, ex.Tag); err == nil {
			t.Errorf("%s was pushed from the refused archive", ex.Ref)
		}
	}
	if applied, _ := filepath.Glob(filepath.Join(air, "working-dir", "applied", "*.json")); len(applied) != 1 {
		t.Errorf("%d archives recorded as applied, want 1", len(applied))
	}

	// Both workspaces' archives side by side in a new directory: refused
	// before anything is pushed; describe says they are mixed.
	if code, _, _ := w.gapmirror("mirror", "-c", iscB, "file://"+outB); code != 0 {
		t.Fatal("second m2d of workspace b failed")
	}
	mixed := filepath.Join(w.dir, "mixed")
	copyChunksTo(t, outA, mixed, "mirror_0*.tar")
	copyChunksTo(t, outB, mixed, "mirror_0002_*.tar")
	code, stdout, _ = w.gapmirror("describe", "--quick", "file://"+mixed)
	if !strings.Contains(stdout, "mixed: these archives were written by 2 mirror-to-disk workspaces") || !strings.Contains(stdout, "workspace: "+idxB.Workspace) {
		t.Errorf("describe of two workspaces' archives (exit %d):\n%s", code, stdout)
	}
	code, _, stderr := w.gapmirror("mirror", "--from", "file://"+mixed, "docker://"+w.dst.Host()+"/n")
	if code != 1 || !strings.Contains(stderr, "another mirror-to-disk workspace") || !strings.Contains(stderr, "mirror_0002_000001.tar") {
		t.Errorf("d2m of two workspaces' archives: exit %d, stderr:\n%s", code, stderr)
	}
	repos, err := w.dst.Catalog()
	must(t, err)
	for _, r := range repos {
		if strings.HasPrefix(r, "n/") {
			t.Errorf("the refused directory pushed %s", r)
		}
	}

	// Workspace b's archives from a directory of their own: both sets at the mirror.
	own := filepath.Join(w.dir, "m")
	copyChunksTo(t, outB, own, "mirror_*.tar")
	if code, _, _ := w.gapmirror("mirror", "--prune", "--from", "file://"+own, mirror); code != 0 {
		t.Fatal("d2m of workspace b's archives from their own directory failed")
	}
	w.images = all
	w.assertMirrored(w.dst, "m")
}

// TestMediaDamageAndInterruptedPush: two weeks' archives on the media.
// A missing or empty chunk of week 1 is named by describe, which still
// describes both archives (week 2 builds on week 1, in the directory too),
// and disk-to-mirror refuses the directory before pushing anything. Once
// the chunk is copied again, a disk-to-mirror interrupted mid-push records
// nothing as applied (describe: "not yet"), and the rerun applies both
// weeks, every image at the mirror by digest.
func TestMediaDamageAndInterruptedPush(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(8, 64<<10)
	all := w.images
	out, media := filepath.Join(w.dir, "out"), filepath.Join(w.dir, "usb stick")
	w.images = all[:5]
	if code, _, _ := w.gapmirror("mirror", "-c", w.isc(""), "--archive-size", "128KiB", "file://"+out); code != 0 {
		t.Fatal("week 1 m2d failed")
	}
	w.images = all
	if code, _, _ := w.gapmirror("mirror", "-c", w.isc(""), "--archive-size", "128KiB", "file://"+out); code != 0 {
		t.Fatal("week 2 m2d failed")
	}
	found, err := archive.List(out)
	must(t, err)
	if len(found) != 2 || found[1].Index.BasedOn != found[0].Index.ID {
		t.Fatalf("want two chained archives, have %+v", found)
	}
	copyChunksTo(t, out, media, "mirror_*.tar")
	chunk2 := filepath.Join(media, "mirror_000002.tar")
	good, err := os.ReadFile(chunk2)
	must(t, err)
	mirror := "docker://" + w.dst.Host() + "/m"
	for name, damage := range map[string]func(){
		"missing": func() { must(t, os.Remove(chunk2)) },
		"empty":   func() { must(t, os.WriteFile(chunk2, nil, 0o644)) },
	} {
		damage()
		code, stdout, stderr := w.gapmirror("describe", "file://"+media)
		for _, want := range []string{found[0].Index.ID, found[1].Index.ID, "damaged: ", "mirror_000002.tar is ", "builds on: " + found[0].Index.ID + ", in this directory too"} {
			if code != 1 || !strings.Contains(stdout, want) {
				t.Errorf("describe with a %s chunk (exit %d) does not say %q:\n%s", name, code, want, stdout)
			}
		}
		if !strings.Contains(stderr, "mirror_000002.tar") {
			t.Errorf("describe with a %s chunk: the error does not name the chunk:\n%s", name, stderr)
		}
		code, _, stderr = w.gapmirror("mirror", "--from", "file://"+media, mirror)
		if code != 1 || !strings.Contains(stderr, "mirror_000002.tar") || !strings.Contains(stderr, "copy every chunk") {
			t.Errorf("d2m with a %s chunk: exit %d, stderr:\n%s", name, code, stderr)
		}
		if repos, _ := w.dst.Catalog(); len(repos) > 0 {
			t.Errorf("d2m with a %s chunk pushed %v", name, repos)
		}
	}
	must(t, os.WriteFile(chunk2, good, 0o644))

	// Interrupted (SIGINT) once the mirror has taken a few blobs.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	uploads := 0
	w.dst.SetWrap(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/blobs/uploads/") {
				mu.Lock()
				uploads++
				if uploads == 4 {
					cancel()
				}
				mu.Unlock()
			}
			next.ServeHTTP(rw, r)
		})
	})
	code, _, _ := w.gapmirrorCtx(ctx, "mirror", "--from", "file://"+media, "--parallel-images", "1", mirror)
	w.dst.SetWrap(nil)
	if code == 0 {
		t.Fatal("the interrupted d2m exited 0")
	}
	if applied, _ := filepath.Glob(filepath.Join(media, "working-dir", "applied", "*.json")); len(applied) != 0 {
		t.Errorf("an interrupted d2m recorded %v as applied", applied)
	}
	code, stdout, _ := w.gapmirror("describe", "--quick", "file://"+media)
	if code != 0 || strings.Count(stdout, "applied from this directory: not yet") != 2 {
		t.Errorf("describe after the interrupted d2m (exit %d):\n%s", code, stdout)
	}
	if code, _, _ := w.gapmirror("mirror", "--from", "file://"+media, mirror); code != 0 {
		t.Fatal("d2m rerun failed")
	}
	w.assertMirrored(w.dst, "m")
	if applied, _ := filepath.Glob(filepath.Join(media, "working-dir", "applied", "*.json")); len(applied) != 2 {
		t.Errorf("%d archives recorded as applied after the rerun, want 2", len(applied))
	}
	code, stdout, _ = w.gapmirror("describe", "--quick", "file://"+media)
	if code != 0 || strings.Count(stdout, "applied from this directory: 20") != 2 {
		t.Errorf("describe after the rerun (exit %d):\n%s", code, stdout)
	}
}
