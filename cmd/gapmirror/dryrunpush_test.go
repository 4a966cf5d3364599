package main

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// authFileFor writes an auth.json with one account for host.
func authFileFor(t *testing.T, dir, host, user, password string) string {
	t.Helper()
	p := filepath.Join(dir, "auth-"+user+".json")
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	must(t, os.WriteFile(p, []byte(`{"auths":{"`+host+`":{"auth":"`+auth+`"}}}`), 0o600))
	return p
}

// TestDryRunRefusedPush: the go/no-go dry run against a mirror that lets
// the account read but not push (an htpasswd account limited to reads,
// answering 403 DENIED; a token account granted only pull, answering 401)
// says no-go, naming the registry, its answer and the fix, exits non-zero
// and leaves the registry as it was; the same dry run with an account that
// may push says go.
func TestDryRunRefusedPush(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(3, 16<<10)
	isc := w.isc("")
	archiveDir := filepath.Join(w.dir, "archive")
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "file://"+archiveDir); code != 0 {
		t.Fatal("mirror-to-disk failed")
	}
	htpasswd := registrytest.Start(t, registrytest.Options{Username: "admin", Password: "adminPw-1",
		ReadOnly: []registrytest.Account{{Username: "reader", Password: "readPw-2"}}})
	token := registrytest.Start(t, registrytest.Options{Username: "admin", Password: "adminPw-3",
		Token: &registrytest.TokenAuth{Users: []registrytest.TokenUser{{Username: "viewer", Password: "viewPw-4", Actions: []string{"pull"}}}}})
	for _, c := range []struct {
		name   string
		reg    *registrytest.Registry
		reader string // auth file of the account that may only read
		answer string // the registry's answer, as the dry run must quote it
		args   []string
	}{
		{"htpasswd read-only, disk-to-mirror", htpasswd, authFileFor(t, w.dir, htpasswd.Host(), "reader", "readPw-2"), "denied",
			[]string{"--from", "file://" + archiveDir}},
		{"token pull-only, mirror-to-mirror", token, authFileFor(t, w.dir, token.Host(), "viewer", "viewPw-4"), "401",
			[]string{"-c", isc, "--workspace", "file://" + filepath.Join(w.dir, "ws")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := c.reg.Host() + "/enclave"
			args := append([]string{"mirror", "--dry-run", "--retry-times", "0", "--dest-authfile", c.reader}, append(c.args, "docker://"+root)...)
			code, out, errOut := w.gapmirror(args...)
			for _, want := range []string{"no-go", "the mirror registry " + root + " does not let these credentials push", c.answer, "--dest-authfile"} {
				if code == 0 || !strings.Contains(errOut, want) {
					t.Errorf("dry run with an account that may only read: exit %d, want non-zero and %q:\n%s", code, want, errOut)
				}
			}
			if strings.Contains(out, "push accepted") {
				t.Errorf("the dry run said push accepted:\n%s", out)
			}
			if repos, err := c.reg.Catalog(); err != nil || len(repos) != 0 {
				t.Errorf("the dry run changed the mirror: %v, %v", repos, err)
			}
			// The account that may push: go.
			args = append([]string{"mirror", "--dry-run", "--dest-authfile", c.reg.AuthFile()}, append(c.args, "docker://"+root)...)
			if code, out, _ := w.gapmirror(args...); code != 0 || !strings.Contains(out, "mirror "+root+": reachable, credentials and push accepted; 0 images already there, 3 to copy") {
				t.Errorf("dry run with an account that may push: exit %d:\n%s", code, out)
			}
		})
	}
}
