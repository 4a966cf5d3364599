package main

import (
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/imageset/catalog"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// login is one auth.json entry: the registry host and its credentials
// (identity, when set, is an OAuth2 refresh token used instead of the password).
type login struct{ host, user, password, identity string }

// setAuth replaces the world's auth file with these credentials.
func (w *world) setAuth(logins ...login) {
	w.t.Helper()
	auths := map[string]map[string]string{}
	for _, l := range logins {
		auths[l.host] = map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(l.user + ":" + l.password)), "identitytoken": l.identity}
	}
	data, err := json.Marshal(map[string]any{"auths": auths})
	must(w.t, err)
	must(w.t, os.WriteFile(w.authFile, data, 0o600))
}

// Passwords and the identity token of the token-auth worlds.
const upPush, upPull, dstAdmin, dstView, dstRobot = "pushPass-7x", "pullPass-3x", "adminPass-5x", "viewPass-9x", "robotRefresh-1x"

// newTokenWorld is a world whose registries use the bearer token flow: an
// HTTPS upstream (pusher may push, puller only pull) and a plain-HTTP
// mirror (admin may do anything, viewer only pull, robot has an identity
// token), each with its own token server.
func newTokenWorld(t *testing.T) *world {
	w := newWorld(t, registrytest.Options{TLS: true, Username: "pusher", Password: upPush,
		Token: &registrytest.TokenAuth{Users: []registrytest.TokenUser{{Username: "puller", Password: upPull, Actions: []string{"pull"}}}}})
	w.upUser, w.upPassword = "pusher", upPush
	w.dst = registrytest.Start(t, registrytest.Options{Username: "admin", Password: dstAdmin,
		Token: &registrytest.TokenAuth{Users: []registrytest.TokenUser{{Username: "viewer", Password: dstView, Actions: []string{"pull"}},
			{Username: "robot", Password: "unused-" + dstRobot, RefreshToken: dstRobot}}}})
	return w
}

// TestTokenAuth: every registry path works against registries that use the
// bearer token flow (as Quay, Harbor and registry.redhat.io do): an HTTPS
// upstream and a plain-HTTP mirror, each with its own token server. Wrong
// passwords and pull-only accounts fail with clear errors, and no password
// or token ever reaches the output or the files gapmirror writes.
func TestTokenAuth(t *testing.T) {
	t.Parallel()
	w := newTokenWorld(t)
	robot := login{w.dst.Host(), "robot", "", dstRobot}
	uploads := registrytest.NewUploads()
	w.dst.SetWrap(uploads.Wrap)
	w.pushFleetTo(w.upTarget(), 6, 16<<10)
	im := w.images
	up := login{w.up.Host(), "puller", upPull, ""}
	var output strings.Builder
	run := func(args ...string) (int, string, string) {
		t.Helper()
		code, stdout, stderr := w.gapmirror(args...)
		output.WriteString(stdout + stderr)
		return code, stdout, stderr
	}
	isc := w.isc("")
	ws := "file://" + filepath.Join(w.dir, "ws")
	m2m := "docker://" + w.dst.Host() + "/m2m"

	// A wrong mirror password: the run stops up front, naming the registry
	// and --authfile.
	w.setAuth(up, login{w.dst.Host(), "admin", "wrong-" + dstAdmin, ""})
	code, _, stderr := run("mirror", "-c", isc, "--workspace", ws, m2m)
	if code == 0 || !strings.Contains(stderr, w.dst.Host()) || !strings.Contains(stderr, "--authfile") {
		t.Errorf("wrong mirror password: exit %d, stderr:\n%s", code, stderr)
	}
	// A wrong upstream password fails the images the same way.
	w.setAuth(login{w.up.Host(), "puller", "wrong-" + upPull, ""}, login{w.dst.Host(), "admin", dstAdmin, ""})
	code, stdout, stderr := run("mirror", "-c", isc, "--workspace", ws, m2m)
	if code == 0 || !strings.Contains(stderr, w.up.Host()) || !strings.Contains(stdout, "--authfile") {
		t.Errorf("wrong upstream password: exit %d, stdout:\n%s", code, stdout)
	}
	// A pull-only mirror account may not push.
	w.setAuth(up, login{w.dst.Host(), "viewer", dstView, ""})
	code, stdout, stderr = run("mirror", "-c", isc, "--workspace", ws, m2m)
	if code == 0 || !strings.Contains(stderr, "denied") || !strings.Contains(stderr, w.dst.Host()) || !strings.Contains(stdout, "--authfile") {
		t.Errorf("pull-only mirror account: exit %d, stdout:\n%s", code, stdout)
	}
	if _, err := w.dst.ManifestDigest("m2m/"+im[0].Repo, im[0].Tag); err == nil {
		t.Errorf("%s reached the mirror without the right credentials", im[0].Ref)
	}

	// The right accounts: mirror to mirror, the shared base layer uploaded
	// once and mounted into the other repositories.
	w.setAuth(up, login{w.dst.Host(), "admin", dstAdmin, ""})
	if code, _, _ := run("mirror", "-c", isc, "--workspace", ws, "--log-level", "debug", m2m); code != 0 {
		t.Fatalf("m2m: exit %d", code)
	}
	w.assertMirrored(w.dst, "m2m")
	data, _, err := w.up.Manifest(im[0].Repo, im[0].Digest.String())
	must(t, err)
	base := layersOf(t, data)[1] // [0] is the config
	if n, m := uploads.Put(base), uploads.Mounted(base); n != 1 || m < 3 {
		t.Errorf("shared base layer uploaded %d times (want 1), mounted %d times (want 3 or more)", n, m)
	}

	// Mirror to disk from the token upstream, then disk to the token mirror
	// with an identity token (OAuth2 refresh token) instead of a password.
	archive := filepath.Join(w.dir, "archive")
	if code, _, _ := run("mirror", "-c", isc, "file://"+archive); code != 0 {
		t.Fatalf("m2d: exit %d", code)
	}
	w.setAuth(up, robot)
	if code, _, _ := run("mirror", "-c", isc, "--from", "file://"+archive, "docker://"+w.dst.Host()+"/d2m"); code != 0 {
		t.Fatalf("d2m: exit %d", code)
	}
	w.assertMirrored(w.dst, "d2m")
	if n, m := uploads.Put(base), uploads.Mounted(base); n != 2 || m < 6 {
		t.Errorf("after d2m: shared base layer uploaded %d times (want once per prefix), mounted %d times (want 6 or more)", n, m)
	}

	// Pruning lists tags and deletes through its own client. A pull-only
	// account cannot, says so and deletes nothing; the admin can.
	kept := w.iscOf("kept.yaml", entry{name: im[0].Ref}, entry{name: im[1].Ref}, entry{name: im[2].Ref})
	w.setAuth(up, login{w.dst.Host(), "viewer", dstView, ""})
	code, stdout, _ = run("mirror", "-c", kept, "--workspace", ws, "--prune", m2m)
	if code == 0 || !strings.Contains(stdout, "denied") || !strings.Contains(stdout, "--authfile") {
		t.Errorf("prune as a pull-only account: exit %d, stdout:\n%s", code, stdout)
	}
	w.present(w.dst, "m2m/"+im[3].Repo, im[3].Tag, im[3].Digest)
	w.setAuth(up, login{w.dst.Host(), "admin", dstAdmin, ""})
	if code, _, _ := run("mirror", "-c", kept, "--workspace", ws, "--prune", m2m); code != 0 {
		t.Fatalf("m2m --prune: exit %d", code)
	}
	_, pruned := deletionFile(t, filepath.Join(w.dir, "ws", "working-dir", "prune", "*-pruned.json"))
	if pruned.Outcome == nil || len(pruned.Outcome.Failed) != 0 || len(pruned.Outcome.Done) == 0 {
		t.Fatalf("prune outcome: %+v", pruned.Outcome)
	}
	for _, ex := range im[3:] {
		w.gone(w.dst, "m2m/"+ex.Repo, ex.Tag, ex.Digest)
	}
	for _, ex := range im[:3] {
		w.present(w.dst, "m2m/"+ex.Repo, ex.Tag, ex.Digest)
	}

	// gapmirror delete: generate a plan, then run it, with the identity token.
	w.setAuth(up, robot)
	disc := w.disc("disc.yaml", "  additionalImages:\n  - name: "+im[0].Ref+"\n")
	if code, _, _ := run("delete", "-c", disc, "--generate", "--workspace", ws, m2m); code != 0 {
		t.Fatalf("delete --generate: exit %d", code)
	}
	plan := filepath.Join(w.dir, "ws", "working-dir", "delete", "delete-images.yaml")
	if code, _, _ := run("delete", "--delete-yaml-file", plan, m2m); code != 0 {
		t.Fatalf("delete --delete-yaml-file: exit %d", code)
	}
	w.gone(w.dst, "m2m/"+im[0].Repo, im[0].Tag, im[0].Digest)
	w.present(w.dst, "m2m/"+im[1].Repo, im[1].Tag, im[1].Digest)

	// No secret in what gapmirror printed or wrote.
	secrets := []string{upPush, upPull, dstAdmin, dstView, dstRobot}
	for _, l := range []login{up, {w.dst.Host(), "admin", dstAdmin, ""}, {w.dst.Host(), "viewer", dstView, ""}} {
		secrets = append(secrets, base64.StdEncoding.EncodeToString([]byte(l.user+":"+l.password)))
	}
	tokens := append(w.up.IssuedTokens(), w.dst.IssuedTokens()...)
	if len(tokens) == 0 {
		t.Fatal("the token servers issued no tokens")
	}
	for _, tok := range tokens {
		// The signature alone identifies a token; its header is shared.
		secrets = append(secrets, tok[strings.LastIndex(tok, ".")+1:])
	}
	texts := map[string]string{"output": output.String()}
	must(t, filepath.WalkDir(w.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path == w.authFile {
			return err
		}
		data, err := os.ReadFile(path)
		texts[path] = string(data)
		return err
	}))
	for where, text := range texts {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s contains a password or token (%.6s…)", where, s)
			}
		}
	}
}

// TestTokenAuthOperatorCatalog: an operator catalog and the images it names
// mirror from a token-auth upstream into a token-auth mirror.
func TestTokenAuthOperatorCatalog(t *testing.T) {
	t.Parallel()
	w := newTokenWorld(t)
	oc := w.pushCatalog("catalogs/test-index", "v1", catalogOptions{Spec: catalog.GenSpec{Seed: 5, Packages: 3, Bundles: 2, RelatedImages: 1}})
	w.setAuth(login{w.up.Host(), "puller", upPull, ""}, login{w.dst.Host(), "admin", dstAdmin, ""})
	isc := w.writeISC("isc.yaml", "  operators:\n  - catalog: "+oc.Ref+"\n    packages:\n    - name: operator-001\n")
	code, stdout, stderr := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+filepath.Join(w.dir, "ws"), "docker://"+w.dst.Host()+"/m2m")
	if code != 0 {
		t.Fatalf("m2m: exit %d", code)
	}
	want, _, err := catalog.Filter(oc.Cat, catalog.FilterSpec{Packages: []catalog.PackageSpec{{Name: "operator-001"}}})
	must(t, err)
	d, err := w.dst.ManifestDigest("m2m/"+oc.Repo, oc.Tag)
	if err != nil {
		t.Fatalf("filtered catalog not mirrored: %v", err)
	}
	if got := bundleNames(mirroredCatalog(t, w.dst, "m2m/"+oc.Repo, d)); strings.Join(got, " ") != strings.Join(bundleNames(want), " ") {
		t.Errorf("mirrored catalog has %v, want %v", got, bundleNames(want))
	}
	if n := w.checkImages(w.dst, "m2m", want); n == 0 {
		t.Error("no operator image checked")
	}
	for _, s := range []string{upPull, dstAdmin} {
		if strings.Contains(stdout+stderr, s) {
			t.Errorf("a password is in the output")
		}
	}
}

// TestTokenAuthReleases: a signed release payload, its components and the
// graph image (built on a base image from the upstream) go to disk from a
// token-auth upstream and from there into a token-auth mirror.
func TestTokenAuthReleases(t *testing.T) {
	t.Parallel()
	w := newReleaseWorldIn(newTokenWorld(t), []string{"4.18.1"}, 4, false)
	w.setAuth(login{w.up.Host(), "puller", upPull, ""}, login{w.dst.Host(), "admin", dstAdmin, ""})
	isc := w.releaseISC("isc", "    graph: true\n    channels:\n    - name: stable-4.18\n")
	archive := filepath.Join(w.dir, "archive")
	if code, _, _ := w.run("mirror", "-c", isc, "file://"+archive); code != 0 {
		t.Fatalf("m2d: exit %d", code)
	}
	code, stdout, stderr := w.run("mirror", "--from", "file://"+archive, "docker://"+w.dst.Host()+"/mirror")
	if code != 0 {
		t.Fatalf("d2m: exit %d", code)
	}
	w.assertRelease("mirror", w.payloads["4.18.1"], false)
	gd, err := w.dst.ManifestDigest("mirror/openshift/graph-image", "latest")
	if err != nil {
		t.Fatalf("graph image not mirrored: %v", err)
	}
	w.assertGraphImage("mirror/openshift/graph-image", gd)
	if strings.Contains(stdout+stderr, dstAdmin) {
		t.Error("the mirror password is in the output")
	}
}
