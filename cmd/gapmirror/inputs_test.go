package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// dirsUnder lists the directories under root, root itself left out.
func dirsUnder(t *testing.T, root string) []string {
	t.Helper()
	var dirs []string
	must(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root {
			dirs = append(dirs, strings.TrimPrefix(p, root+"/"))
		}
		return nil
	}))
	return dirs
}

// TestInputsCheckedFirst: a mirror or delete command line whose
// configuration file, --from, destination or containers configuration
// points at nothing stops with a sentence naming the flag and the path, and
// creates no directory (oc-mirror's documented lines, run literally, once
// created /home/user/... and /disk1/... for their logs).
func TestInputsCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	isc := filepath.Join(dir, "isc.yaml")
	must(t, os.WriteFile(isc, []byte("kind: ImageSetConfiguration\napiVersion: mirror.openshift.io/v2alpha1\nmirror:\n  additionalImages:\n  - name: 127.0.0.1:1/a:v1\n"), 0o644))
	empty := filepath.Join(dir, "empty")
	must(t, os.Mkdir(empty, 0o755))
	badConf := filepath.Join(dir, "bad-registries.conf")
	must(t, os.WriteFile(badConf, []byte("[[registry]]\nlocation = \n"), 0o644))
	home := "file://" + filepath.Join(dir, "home/user/oc-mirror/output")
	disk1 := "file://" + filepath.Join(dir, "disk1/enterprise-content")
	for _, c := range []struct {
		args []string
		env  string // CONTAINERS_REGISTRIES_CONF
		want string
	}{
		// oc-mirror's documented lines, with the configuration missing.
		{args: []string{"--v2", "-c", "./isc-missing.yaml", home}, want: "-c/--config ./isc-missing.yaml: the file does not exist"},
		{args: []string{"--v2", "-c", "./isc-missing.yaml", "--workspace", home, "docker://127.0.0.1:1/m"}, want: "-c/--config ./isc-missing.yaml: the file does not exist"},
		{args: []string{"--v2", "-c", "./isc-missing.yaml", "--from", disk1, "docker://127.0.0.1:1/m"}, want: "--from " + disk1 + ": "},
		// --from not there, not a directory, or without an archive.
		{args: []string{"--v2", "-c", isc, "--from", disk1, "docker://enterprise-registry.in/"}, want: "--from " + disk1 + ": " + strings.TrimPrefix(disk1, "file://") + " does not exist: give the directory mirror-to-disk wrote the archive into"},
		{args: []string{"mirror", "--from", "file://" + isc, "docker://127.0.0.1:1/m"}, want: "is not a directory"},
		{args: []string{"mirror", "--from", "file://" + empty, "docker://127.0.0.1:1/m"}, want: "no gapmirror archive in " + empty},
		// Destination forms.
		{args: []string{"mirror", "-c", isc, "--from", disk1, filepath.Join(dir, "out")}, want: "use file://DIR (mirror-to-disk) or docker://"},
		{args: []string{"mirror", "-c", isc, "--from", disk1, "file://" + filepath.Join(dir, "out")}, want: "mirror-to-disk (file://"},
		{args: []string{"mirror", "-c", isc, "docker://127.0.0.1:1/m"}, want: "needs --from file://DIR (disk-to-mirror) or --workspace"},
		{args: []string{"mirror", "--workspace", home, "docker://127.0.0.1:1/m"}, want: "mirror-to-mirror needs -c/--config"},
		// Flags checked before the workspace is made.
		{args: []string{"mirror", "-c", isc, "--parallel-images", "0", home}, want: "--parallel-images 0: use 1 to 64"},
		{args: []string{"mirror", "-c", isc, "--since", "June", home}, want: "--since \"June\""},
		// The containers configuration.
		{args: []string{"mirror", "--registries-conf", "/nonexistent/registries.conf", "-c", isc, home}, want: "--registries-conf /nonexistent/registries.conf: the file does not exist"},
		{args: []string{"mirror", "-c", isc, home}, env: "/nonexistent/registries.conf", want: "$CONTAINERS_REGISTRIES_CONF /nonexistent/registries.conf: the file does not exist"},
		{args: []string{"mirror", "--registries-conf", badConf, "-c", isc, home}, want: "--registries-conf " + badConf + ": "},
		{args: []string{"mirror", "--registries.d", "/nonexistent/registries.d", "-c", isc, home}, want: "--registries.d /nonexistent/registries.d: the directory does not exist"},
		{args: []string{"mirror", "--src-authfile", "/nonexistent/auth.json", "-c", isc, home}, want: "--src-authfile /nonexistent/auth.json: the file does not exist"},
		{args: []string{"mirror", "--dest-authfile", dir, "-c", isc, "--workspace", home, "docker://127.0.0.1:1/m"}, want: "--dest-authfile " + dir + " is a directory"},
		{args: []string{"delete", "--registries-conf", "/nonexistent/registries.conf", "--delete-yaml-file", isc, "docker://127.0.0.1:1/m"}, want: "--registries-conf /nonexistent/registries.conf: the file does not exist"},
		{args: []string{"list", "operators", "--catalog", "127.0.0.1:1/index:v1", "--registries-conf", "/nonexistent/registries.conf"}, want: "--registries-conf /nonexistent/registries.conf: the file does not exist"},
	} {
		t.Setenv("CONTAINERS_REGISTRIES_CONF", c.env)
		code, _, errOut := runPlain(t, c.args...)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: want exit 1 and %q, got exit %d: %s", c.args, c.want, code, errOut)
		}
		if strings.Contains(errOut, "transient") {
			t.Errorf("%v: a wrong path classified as a transient failure: %s", c.args, errOut)
		}
		if got := dirsUnder(t, dir); !slices.Equal(got, []string{"empty"}) {
			t.Fatalf("%v created directories: %v", c.args, got)
		}
	}
}

// TestPerSideAuthFiles: --src-authfile and --dest-authfile give each side
// its own auth file, as skopeo's do, over --authfile (here one without any
// credentials); swapped, the upstream refuses the run's requests.
func TestPerSideAuthFiles(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{Username: "up-user", Password: "up-Pass-1"})
	w.dst = registrytest.Start(t, registrytest.Options{Username: "dst-user", Password: "dst-Pass-2"})
	w.pushFleetAuth(3, "up-user", "up-Pass-1")
	isc := w.isc("")
	root := "docker://" + w.dst.Host() + "/m2m"
	code, out, _ := w.gapmirror("mirror", "-c", isc, "--src-authfile", w.up.AuthFile(), "--dest-authfile", w.dst.AuthFile(),
		"--workspace", "file://"+filepath.Join(w.dir, "ws"), root)
	if code != 0 || !strings.Contains(out, "3 images: 3 copied") {
		t.Fatalf("per-side auth files: exit %d:\n%s", code, out)
	}
	w.assertMirrored(w.dst, "m2m")
	code, _, errOut := w.gapmirror("mirror", "-c", isc, "--retry-times", "0", "--src-authfile", w.dst.AuthFile(), "--dest-authfile", w.dst.AuthFile(),
		"--workspace", "file://"+filepath.Join(w.dir, "ws2"), "docker://"+w.dst.Host()+"/again")
	if code == 0 || !strings.Contains(errOut, w.up.Host()) {
		t.Errorf("the mirror's auth file given for the upstream: exit %d, want a failure naming %s: %s", code, w.up.Host(), errOut)
	}
}
