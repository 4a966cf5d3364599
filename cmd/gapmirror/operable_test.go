//go:build !gapmirror_lean

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// TestPlainHTTPFailsFast: a plain-HTTP source without --src-tls-verify=false
// is a failure no retry fixes: mirror, dry run and list operators stop in
// well under 2 s with the cause said once, its fix, and no repeated lines.
func TestPlainHTTPFailsFast(t *testing.T) {
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(30, 4<<10)
	isc := w.isc("")
	// Like the world's runs, but verifying TLS on the source, and with the
	// default retries (5, from 500ms).
	run := func(args ...string) (int, string, string, time.Duration) {
		t.Helper()
		var out, errb bytes.Buffer
		full := append([]string{args[0], "--dest-tls-verify=false", "--no-progress", "--registries-conf", w.regsConf,
			"--authfile", w.authFile, "--cache-dir", filepath.Join(w.dir, "cache")}, args[1:]...)
		start := time.Now()
		code := run(context.Background(), full, &out, &errb)
		took := time.Since(start)
		t.Logf("gapmirror %s → exit %d in %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, took, out.String(), errb.String())
		return code, out.String(), errb.String(), took
	}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"mirror-to-mirror", []string{"mirror", "-c", isc, "--workspace", "file://" + filepath.Join(w.dir, "ws"), "docker://" + w.dst.Host() + "/m"}},
		{"dry run", []string{"mirror", "-c", isc, "--dry-run", "--workspace", "file://" + filepath.Join(w.dir, "ws"), "docker://" + w.dst.Host() + "/m"}},
		{"mirror-to-disk", []string{"mirror", "-c", isc, "file://" + filepath.Join(w.dir, "disk")}},
		{"list operators", []string{"list", "operators", "--catalog", w.images[0].Ref}},
	} {
		code, out, errOut, took := run(c.args...)
		all := out + errOut
		if code == 0 {
			t.Errorf("%s: exit 0", c.name)
		}
		if took > 2*time.Second {
			t.Errorf("%s: took %s to fail, want under 2 s", c.name, took)
		}
		if !strings.Contains(all, "--src-tls-verify=false") || !strings.Contains(all, "plain HTTP") {
			t.Errorf("%s: the fix is not said:\n%s", c.name, all)
		}
		if c.name == "list operators" {
			continue
		}
		if n := strings.Count(out, "FAILED "); n != 1 {
			t.Errorf("%s: %d FAILED lines, want one for the one cause:\n%s", c.name, n, out)
		}
		if n := strings.Count(all, "pass --src-tls-verify=false"); n > 2 {
			t.Errorf("%s: the hint is repeated %d times", c.name, n)
		}
		// The image pinned by digest needs no lookup to plan, so a dry run
		// finds 29 failures.
		if !strings.Contains(out, "images at "+w.up.Host()+" (plain-http)") || !strings.Contains(out, "more") {
			t.Errorf("%s: the cause does not count the 30 images of %s, five named:\n%s", c.name, w.up.Host(), out)
		}
		if c.name == "dry run" && (!strings.Contains(all, "nothing was copied") || strings.Contains(all, "others were mirrored") || strings.Contains(all, "at the destination")) {
			t.Errorf("dry run: the outcome does not say nothing was copied:\n%s", all)
		}
		if strings.Contains(all, "rerun") || strings.Contains(all, "retry exactly") {
			t.Errorf("%s: advice to rerun for a failure no rerun fixes:\n%s", c.name, all)
		}
	}
}

// TestRunLogFile: every run keeps a full debug log in working-dir/logs,
// whatever the terminal's --log-level, with an RFC 3339 time on every line
// (containers/image's lines too), each image and blob, and no credential
// or upload token; the terminal at info has no debug line, at debug it has.
func TestRunLogFile(t *testing.T) {
	const user, password = "alice", "s3cret-Pa55"
	w := newWorld(t, registrytest.Options{})
	w.dst.Close()
	w.dst = registrytest.Start(t, registrytest.Options{Username: user, Password: password})
	auth := `{"auths":{"` + w.dst.Host() + `":{"auth":"` + base64.StdEncoding.EncodeToString([]byte(user+":"+password)) + `"}}}`
	must(t, os.WriteFile(w.authFile, []byte(auth), 0o600))
	w.pushFleet(3, 8<<10)
	ws := filepath.Join(w.dir, "ws")
	code, out, errOut := w.gapmirror("mirror", "-c", w.isc(""), "--log-level", "info", "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	logs, _ := filepath.Glob(filepath.Join(ws, "working-dir", "logs", "*.log"))
	if len(logs) != 1 {
		t.Fatalf("%d log files in working-dir/logs, want 1", len(logs))
	}
	if !strings.Contains(errOut, logs[0]) {
		t.Errorf("the log file's path is not printed:\n%s", errOut)
	}
	if strings.Contains(errOut, " DEBUG ") {
		t.Errorf("debug lines on an info terminal:\n%s", errOut)
	}
	data, err := os.ReadFile(logs[0])
	must(t, err)
	checkLog := func(name, s string) {
		t.Helper()
		sc := bufio.NewScanner(strings.NewReader(s))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			stamp, _, _ := strings.Cut(sc.Text(), " ")
			if _, err := time.Parse(time.RFC3339, stamp); err != nil {
				t.Errorf("%s: a line without an RFC 3339 time: %q", name, sc.Text())
			}
		}
		for _, secret := range []string{password, base64.StdEncoding.EncodeToString([]byte(user + ":" + password)), "_state=" + "A", "Authorization: Basic"} {
			if strings.Contains(s, secret) {
				t.Errorf("%s holds a secret (%q)", name, secret)
			}
		}
	}
	checkLog("log file", string(data))
	checkLog("terminal", errOut)
	for _, want := range []string{" DEBUG image copied image=", " DEBUG blob moved ", " INFO  image set resolved"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the log file lacks %q", want)
		}
	}
	if strings.Contains(string(data), "_state=") && !strings.Contains(string(data), "_state=REDACTED") {
		t.Errorf("an upload token in the log file")
	}
	_ = out

	// At --log-level trace the terminal has containers/image's lines too,
	// in the same format, still without secrets.
	w.pushFleet(4, 8<<10)
	code, _, errOut = w.gapmirror("mirror", "-c", w.isc(""), "--log-level", "trace", "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m")
	if code != 0 {
		t.Fatalf("trace run: exit %d", code)
	}
	checkLog("trace terminal", errOut)
	for _, want := range []string{" DEBUG image already at the destination, skipped", " DEBUG blob moved ", " TRACE GET http", "lib=logrus"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the trace terminal lacks %q", want)
		}
	}

	// At --log-level debug: each image and blob, not each request.
	w.pushFleet(5, 8<<10)
	code, _, errOut = w.gapmirror("mirror", "-c", w.isc(""), "--log-level", "debug", "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m")
	if code != 0 {
		t.Fatalf("debug run: exit %d", code)
	}
	checkLog("debug terminal", errOut)
	if !strings.Contains(errOut, " DEBUG image copied image=") || !strings.Contains(errOut, " DEBUG blob ") || strings.Contains(errOut, " TRACE ") {
		t.Errorf("the debug terminal does not show each image and blob, or shows requests:\n%s", errOut)
	}
}

// TestRetryFailedUnresolved: an image the failed run never resolved cannot
// be retried; --retry-failed says it is still missing and exits non-zero.
func TestRetryFailedUnresolved(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(2, 8<<10)
	isc := w.isc("  - name: " + w.up.Host() + "/apps/nowhere:v1\n")
	ws := filepath.Join(w.dir, "ws")
	code, out, _ := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m")
	if code != 8 {
		t.Fatalf("exit %d, want 8", code)
	}
	failed, _ := filepath.Glob(filepath.Join(ws, "working-dir", "failed", "*.json"))
	if len(failed) != 1 || !strings.Contains(out, failed[0]) {
		t.Fatalf("no failure file named in the summary (%v):\n%s", failed, out)
	}
	code, out, errOut := w.gapmirror("mirror", "--retry-failed", failed[0], "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m")
	if code == 0 {
		t.Errorf("--retry-failed of an image never resolved: exit 0")
	}
	if !strings.Contains(out, "1 failed") || !strings.Contains(out, "apps/nowhere:v1") || !strings.Contains(out, "still missing") {
		t.Errorf("the retry does not report the image still missing:\n%s\n%s", out, errOut)
	}
}

// TestDeleteKeepsItsLog: delete has a workspace, so like a mirror run it
// keeps its full debug log in working-dir/logs whatever the terminal
// shows, and names it at the end: --generate's has each delete it plans,
// --delete-yaml-file's each delete it did; a --dry-run keeps its log in
// working-dir/dry-run/logs; an info terminal shows no debug line.
func TestDeleteKeepsItsLog(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(2, 4<<10)
	ws := filepath.Join(w.dir, "ws")
	dst := "docker://" + w.dst.Host() + "/m"
	if code, _, _ := w.gapmirror("mirror", "-c", w.isc(""), "--workspace", "file://"+ws, dst); code != 0 {
		t.Fatalf("m2m: exit %d", code)
	}
	gone := "m/" + w.images[0].Repo + "@" + w.images[0].Digest.String() // as a delete names it
	disc := w.disc("disc.yaml", "  additionalImages:\n  - name: "+w.images[0].Ref+"\n")
	plan := filepath.Join(ws, "working-dir", "delete", "delete-images.yaml")
	logs := filepath.Join(ws, "working-dir", "logs")
	newLog := func(name, dir, errOut string, seen map[string]bool) string {
		t.Helper()
		all, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		var fresh []string
		for _, l := range all {
			if !seen[l] {
				fresh = append(fresh, l)
				seen[l] = true
			}
		}
		if len(fresh) != 1 || !strings.Contains(errOut, "INFO  the full log of this run path="+fresh[0]) {
			t.Fatalf("%s: new logs %v in %s, or the path not printed at the end:\n%s", name, fresh, dir, errOut)
		}
		if strings.Contains(errOut, " DEBUG ") {
			t.Errorf("%s: debug lines on an info terminal", name)
		}
		data := readFile(t, fresh[0])
		for _, line := range strings.Split(strings.TrimSpace(data), "\n") {
			if _, err := time.Parse(time.RFC3339, strings.SplitN(line, " ", 2)[0]); err != nil {
				t.Errorf("%s: a log line without an RFC 3339 time: %q", name, line)
			}
		}
		return data
	}
	seen := map[string]bool{}
	mirrorLogs, _ := filepath.Glob(filepath.Join(logs, "*.log"))
	for _, l := range mirrorLogs {
		seen[l] = true
	}

	code, _, errOut := w.gapmirror("delete", "-c", disc, "--generate", "--workspace", "file://"+ws, dst)
	if code != 0 {
		t.Fatalf("delete --generate: exit %d", code)
	}
	if data := newLog("delete --generate", logs, errOut, seen); !strings.Contains(data, " DEBUG delete planned action=") || !strings.Contains(data, gone) ||
		!strings.Contains(data, " INFO  delete plan written path="+plan) {
		t.Errorf("the --generate log lacks the planned deletes of %s or the plan:\n%s", gone, data)
	}

	code, _, errOut = w.gapmirror("delete", "--delete-yaml-file", plan, "--dry-run", dst)
	if code != 0 {
		t.Fatalf("delete --dry-run: exit %d", code)
	}
	if data := newLog("delete --dry-run", filepath.Join(ws, "working-dir", "dry-run", "logs"), errOut, seen); !strings.Contains(data, " DEBUG would delete action=") {
		t.Errorf("the dry run's log lacks what it would delete:\n%s", data)
	}

	code, _, errOut = w.gapmirror("delete", "--delete-yaml-file", plan, dst)
	if code != 0 {
		t.Fatalf("delete --delete-yaml-file: exit %d", code)
	}
	if data := newLog("delete --delete-yaml-file", logs, errOut, seen); !strings.Contains(data, " DEBUG deleted action=") || !strings.Contains(data, gone) ||
		!strings.Contains(data, " INFO  deletes done ") {
		t.Errorf("the delete log lacks the deletes of %s:\n%s", gone, data)
	}
}

// TestNeverResolvedIsNotRetried: a source registry failing at the registry
// level (plain HTTP to an HTTPS client) for 8 images is one grouped cause,
// recorded with its kind and registry, and the advice is to run the
// configuration again, not --retry-failed, which cannot copy images that
// never resolved; --retry-failed of that file (the registry since fixed)
// reports the 8 as one grouped "still missing" cause, names each image
// once, exits non-zero and does not advise --retry-failed again.
func TestNeverResolvedIsNotRetried(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(9, 4<<10)
	var entries []entry
	for _, ex := range w.images[:8] { // by tag: each needs the registry to resolve
		entries = append(entries, entry{name: ex.Ref})
	}
	isc := w.iscOf("tagged.yaml", entries...)
	ws := filepath.Join(w.dir, "ws")
	dst := "docker://" + w.dst.Host() + "/m"
	retryAdvice := regexp.MustCompile(`--retry-failed \S+\.json`)
	head := "FAILED 8 images at " + w.up.Host() + " (plain-http)"
	code, out, errOut := w.gapmirror("mirror", "-c", isc, "--src-tls-verify=true", "--workspace", "file://"+ws, dst)
	if code != 8 {
		t.Fatalf("exit %d, want 8", code)
	}
	if n := strings.Count(out, "FAILED "); n != 1 || !strings.Contains(out, head+": ") {
		t.Errorf("want one grouped cause %q, got %d FAILED lines", head, n)
	}
	if m := retryAdvice.FindString(out + errOut); m != "" || !strings.Contains(out, "once fixed, run the configuration again") {
		t.Errorf("images that never resolved: advice %q, or not to run the configuration again", m)
	}
	failed, _ := filepath.Glob(filepath.Join(ws, "working-dir", "failed", "*.json"))
	if len(failed) != 1 || !strings.Contains(out, failed[0]) {
		t.Fatalf("the failure file %v is not named", failed)
	}
	var ff struct {
		Failed []struct{ Image, Cause, Host string }
	}
	must(t, json.Unmarshal([]byte(readFile(t, failed[0])), &ff))
	if len(ff.Failed) != 8 {
		t.Fatalf("%d failure records, want 8", len(ff.Failed))
	}
	for _, f := range ff.Failed {
		if f.Cause != "plain-http" || f.Host != w.up.Host() {
			t.Errorf("%s recorded with cause %q at %q, want plain-http at %s", f.Image, f.Cause, f.Host, w.up.Host())
		}
	}

	code, out, errOut = w.gapmirror("mirror", "--retry-failed", failed[0], "--workspace", "file://"+ws, dst)
	all := out + errOut
	if code != 8 {
		t.Errorf("--retry-failed of images never resolved: exit %d, want 8", code)
	}
	if n := strings.Count(out, "FAILED "); n != 1 || !strings.Contains(out, head+", still missing: the run that wrote "+failed[0]) {
		t.Errorf("want one grouped still-missing cause %q, got %d FAILED lines", head, n)
	}
	if !strings.Contains(out, "8 images: 0 copied, 0 already at the destination, 0 built by gapmirror, 8 failed") {
		t.Errorf("the counts do not say the 8 images failed")
	}
	named := 0
	for _, ex := range w.images[:8] {
		n := strings.Count(all, ex.Ref)
		if n > 1 {
			t.Errorf("%s named %d times, want once", ex.Ref, n)
		}
		named += n
	}
	if named != 5 || !strings.Contains(out, " and 3 more\n") {
		t.Errorf("%d of the 8 images named, want five and 3 more", named)
	}
	if n := strings.Count(all, "pass --src-tls-verify=false"); n != 1 {
		t.Errorf("the fix said %d times, want once", n)
	}
	if m := retryAdvice.FindString(all); m != "" || !strings.Contains(out, "once fixed, run the configuration again") || strings.Contains(out, "stopped at once") {
		t.Errorf("a retry of images never resolved: advice %q, or not to run the configuration again, or says they were stopped", m)
	}

	// A failure file an older gapmirror wrote, without cause and host:
	// the same one group, from the recorded errors.
	var old map[string]any
	must(t, json.Unmarshal([]byte(readFile(t, failed[0])), &old))
	for _, f := range old["failed"].([]any) {
		delete(f.(map[string]any), "cause")
		delete(f.(map[string]any), "host")
	}
	data, err := json.Marshal(old)
	must(t, err)
	must(t, os.WriteFile(failed[0], data, 0o644))
	code, out, _ = w.gapmirror("mirror", "--retry-failed", failed[0], "--workspace", "file://"+ws, dst)
	if n := strings.Count(out, "FAILED "); code != 8 || n != 1 || !strings.Contains(out, head+", still missing") || strings.Count(out, "pass --src-tls-verify=false") != 1 {
		t.Errorf("a failure file without causes: exit %d, %d FAILED lines; want 8 and one grouped still-missing cause with its fix once", code, n)
	}
}

// TestPushRefusedSaidOnce: a mirror that reads anonymously but wants
// credentials for pushes (an nginx limit_except in front of it) refuses
// the copy of two releases after an earlier run mirrored other images:
// one grouped unauthorized cause whose fix is said once in all the output
// (not again in the heading or the error line), each image named once
// although components the releases share go to two destinations each, and
// the held IDMS/ITMS warning naming five images and how many more, not
// the whole list again.
func TestPushRefusedSaidOnce(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, fix string
		login     *login
	}{
		{name: "no credentials", fix: "podman login"},
		{name: "wrong password", fix: "check the credentials for this registry", login: &login{user: "alice", password: "wrong-Pa55"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newReleaseWorld(t, []string{"4.18.1", "4.18.2"}, 6, false)
			w.pushFleet(2, 4<<10)
			if c.login != nil {
				c.login.host = w.dst.Host()
				w.setAuth(*c.login)
			}
			ws := "file://" + filepath.Join(w.dir, "ws")
			dst := "docker://" + w.dst.Host() + "/m"
			if code, _, _ := w.run("mirror", "-c", w.isc(""), "--workspace", ws, dst); code != 0 {
				t.Fatalf("the first run: exit %d", code)
			}
			w.dst.SetWrap(func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
					if r.Method != http.MethodGet && r.Method != http.MethodHead {
						rw.Header().Set("WWW-Authenticate", `Basic realm="mirror"`)
						rw.Header().Set("Content-Type", "application/json")
						rw.WriteHeader(http.StatusUnauthorized)
						_, _ = rw.Write([]byte(`{"errors":[{"code":"UNAUTHORIZED","message":"authentication required","detail":null}]}`))
						return
					}
					next.ServeHTTP(rw, r)
				})
			})
			var body strings.Builder
			body.WriteString("  platform:\n    channels:\n    - name: stable-4.18\n      minVersion: 4.18.1\n      maxVersion: 4.18.2\n  additionalImages:\n")
			for _, ex := range w.images {
				body.WriteString("  - name: " + ex.Ref + "\n")
			}
			code, out, errOut := w.run("mirror", "-c", w.writeISC("releases.yaml", body.String()), "--workspace", ws, dst)
			all := out + errOut
			if code == 0 {
				t.Fatalf("exit 0 with every push refused")
			}
			head := regexp.MustCompile(`FAILED (\d+) images at ` + regexp.QuoteMeta(w.dst.Host()) + ` \(unauthorized\): `)
			if n := strings.Count(out, "FAILED "); n != 1 || !head.MatchString(out) {
				t.Fatalf("want one grouped unauthorized cause at %s, got %d FAILED lines", w.dst.Host(), n)
			}
			if n := strings.Count(all, c.fix); n != 1 {
				t.Errorf("the fix (%q) said %d times, want once", c.fix, n)
			}
			if n := strings.Count(all, "--authfile"); n != 1 {
				t.Errorf("--authfile named %d times, want once (in the fix)", n)
			}
			// The images: two releases and their components, the two thirds
			// 4.18.2 shares with 4.18.1 mirrored twice (one destination per
			// release) but named once.
			distinct := map[string]bool{}
			for _, p := range w.payloads {
				distinct[p.PullSpec()] = true
				for _, comp := range p.Components {
					distinct[comp.Image] = true
				}
			}
			images, _ := strconv.Atoi(head.FindStringSubmatch(out)[1])
			list := regexp.MustCompile(`(?m)^  (\S+[^\n]*) and (\d+) more; (\d+) more failures are these at other destinations$`).FindStringSubmatch(out)
			if list == nil {
				t.Fatalf("no list of five images, how many more, and how many failures are the same images again")
			}
			names := strings.Split(list[1], ", ")
			more, _ := strconv.Atoi(list[2])
			again, _ := strconv.Atoi(list[3])
			if len(names) != 5 || len(names)+more != len(distinct) || images != len(distinct)+again || images != 14 {
				t.Errorf("FAILED %d images naming %d, %d more and %d again; want 14 (2 releases and 12 components), the %d distinct images named once", images, len(names), more, again, len(distinct))
			}
			if !strings.Contains(out, "0 copied, 2 already at the destination, 0 built by gapmirror, 14 failed") {
				t.Errorf("the counts do not say the 14 images failed")
			}
			for _, n := range names {
				if !distinct[n] {
					t.Errorf("%s listed, which is not one of the releases' images", n)
				}
			}
			held := regexp.MustCompile(`(?m)^IDMS/ITMS left as the earlier run wrote them: applying new ones would drop the mirror of (\d+) failed images: (.*) and (\d+) more; once they are mirrored, the next run rewrites them$`).FindStringSubmatch(out)
			if held == nil {
				t.Fatalf("no held IDMS/ITMS warning naming five images and how many more")
			}
			heldNames := strings.Split(held[2], ", ")
			total, _ := strconv.Atoi(held[1])
			heldMore, _ := strconv.Atoi(held[3])
			if len(heldNames) != 5 || total != len(distinct) || 5+heldMore != total {
				t.Errorf("held warning: %d failed images, %d named and %d more; want %d, five named", total, len(heldNames), heldMore, len(distinct))
			}
			for i, n := range heldNames {
				if !distinct[n] || slices.Contains(heldNames[:i], n) {
					t.Errorf("held warning names %s: not a release image, or twice", n)
				}
			}
		})
	}
}

// TestAuthFileMissing: a named auth file that does not exist is an error
// naming it (flag or $REGISTRY_AUTH_FILE), not an anonymous pull, for the
// commands that contact registries; describe and serve --from, which
// contact none, run.
func TestAuthFileMissing(t *testing.T) {
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(1, 4<<10)
	missing := filepath.Join(w.dir, "no", "such", "auth.json")
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"mirror", "-c", w.isc(""), "--authfile", missing, "--dest-tls-verify=false", "--src-tls-verify=false",
		"--workspace", "file://" + filepath.Join(w.dir, "ws"), "docker://" + w.dst.Host() + "/m"}, &out, &errb)
	if code == 0 || !strings.Contains(errb.String(), "--authfile "+missing+": the file does not exist") {
		t.Errorf("--authfile missing: exit %d\n%s", code, errb.String())
	}
	t.Setenv("REGISTRY_AUTH_FILE", missing)
	errb.Reset()
	code = run(context.Background(), []string{"list", "operators", "--catalog", w.images[0].Ref}, &out, &errb)
	if code == 0 || !strings.Contains(errb.String(), "$REGISTRY_AUTH_FILE "+missing) {
		t.Errorf("$REGISTRY_AUTH_FILE missing: exit %d\n%s", code, errb.String())
	}

	// describe reads a directory and contacts no registry: a missing auth
	// file, named either way, is none of its business.
	disk := filepath.Join(w.dir, "disk")
	if code, _, _ := w.gapmirror("mirror", "-c", w.isc(""), "file://"+disk); code != 0 {
		t.Fatalf("mirror-to-disk: exit %d", code)
	}
	for _, args := range [][]string{{"describe", "file://" + disk}, {"describe", "--authfile", missing, "file://" + disk}} {
		out.Reset()
		errb.Reset()
		code = run(context.Background(), args, &out, &errb)
		if code != 0 || !strings.Contains(out.String(), "intact: every chunk and blob verified") {
			t.Errorf("%s with $REGISTRY_AUTH_FILE=%s: exit %d\n%s%s", strings.Join(args, " "), missing, code, out.String(), errb.String())
		}
	}
	// Nor does serve --from: it pushes the archive into the registry it
	// serves, with credentials of its own.
	if s := w.serve("--root", filepath.Join(w.dir, "served"), "--address", freeAddress(t), "--from", "file://"+disk); s.code != 0 || !strings.Contains(s.out.String(), "1 image: 1 copied") {
		t.Errorf("serve --from with $REGISTRY_AUTH_FILE=%s: exit %d\n%s%s", missing, s.code, s.out, s.errb)
	}
}

// statusLine is one progress line: phase, images done/total, bytes
// done/total (as printed, IEC).
var statusLine = regexp.MustCompile(`(?m) INFO  (resolving|planning|copying|writing archive|checking archive)( [a-z])?(?: (\d+)/(\d+) images)?(?: \[[= ]*\])?(?: +\d+%)?(?: ([\d.]+ [KMGTPE]?i?B)/([\d.]+ [KMGTPE]?i?B))?`)

type status struct {
	phase               string
	images, imagesTotal int
	done, total         string
	doneBytes, totalB   float64
}

func parseStatus(t *testing.T, stderr string) []status {
	t.Helper()
	var out []status
	for _, m := range statusLine.FindAllStringSubmatch(stderr, -1) {
		if m[2] != "" {
			continue // a log line, not a status ("copying to the local store")
		}
		s := status{phase: m[1], done: m[5], total: m[6]}
		s.images, _ = strconv.Atoi(m[3])
		s.imagesTotal, _ = strconv.Atoi(m[4])
		s.doneBytes, s.totalB = iecBytes(m[5]), iecBytes(m[6])
		out = append(out, s)
	}
	return out
}

func iecBytes(s string) float64 {
	if s == "" {
		return 0
	}
	num, unit, _ := strings.Cut(s, " ")
	f, _ := strconv.ParseFloat(num, 64)
	return f * float64(int64(1)<<(10*strings.Index("BKMGTPE", unit[:1])))
}

// TestProgressLines: with --no-progress, each phase prints its status line
// every interval; the copy's total is right from its first line (it equals
// the bytes of the set in the summary), nothing goes back, the last line
// reaches the total; mirror-to-disk shows resolving, planning, copying and
// writing the archive, disk-to-mirror and describe their own phases.
func TestProgressLines(t *testing.T) {
	defer func(d time.Duration) { lineEvery = d }(lineEvery)
	lineEvery = 40 * time.Millisecond
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(8, 48<<10)
	slow := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if strings.Contains(r.URL.Path, "/blobs/") {
				time.Sleep(60 * time.Millisecond)
			}
			h.ServeHTTP(rw, r)
		})
	}
	check := func(name, stdout, stderr string, phases ...string) {
		t.Helper()
		lines := parseStatus(t, stderr)
		seen := map[string]bool{}
		var copying []status
		for _, s := range lines {
			seen[s.phase] = true
			if s.phase == "copying" {
				copying = append(copying, s)
			}
		}
		for _, p := range phases {
			if !seen[p] {
				t.Errorf("%s: no %q status line:\n%s", name, p, stderr)
			}
		}
		if len(copying) < 3 {
			t.Fatalf("%s: %d copying lines, want a line every interval:\n%s", name, len(copying), stderr)
		}
		first, last := copying[0], copying[len(copying)-1]
		for i, s := range copying {
			if s.total != first.total || s.imagesTotal != first.imagesTotal {
				t.Errorf("%s: the total changed from %s (%d images) to %s (%d images)", name, first.total, first.imagesTotal, s.total, s.imagesTotal)
			}
			if i > 0 && (s.doneBytes < copying[i-1].doneBytes || s.images < copying[i-1].images) {
				t.Errorf("%s: progress went back: %+v after %+v", name, s, copying[i-1])
			}
		}
		if last.done != last.total || last.images != last.imagesTotal {
			t.Errorf("%s: the last copying line does not reach its total: %+v", name, last)
		}
		if !strings.Contains(stdout, "in the set ("+first.total+")") {
			t.Errorf("%s: the first line's total %s is not the set's bytes in the summary:\n%s", name, first.total, stdout)
		}
	}

	out := filepath.Join(w.dir, "disk")
	w.up.SetWrap(slow)
	code, stdout, stderr := w.gapmirror("mirror", "-c", w.isc(""), "file://"+out)
	w.up.SetWrap(nil)
	if code != 0 {
		t.Fatalf("mirror-to-disk: exit %d", code)
	}
	check("mirror-to-disk", stdout, stderr, "resolving", "planning", "copying", "writing archive")
	if !regexp.MustCompile(`8 images: 8 copied, 0 already at the destination, 0 built by gapmirror, 0 failed`).MatchString(stdout) ||
		!regexp.MustCompile(`archive: \d+ blobs and manifests \([\d.]+ KiB\) in 2 chunk`).MatchString(stdout) {
		t.Errorf("mirror-to-disk summary:\n%s", stdout)
	}

	inSet := regexp.MustCompile(`blobs: \d+ in the set \([^)]*\)`)
	m2dBlobs := inSet.FindString(stdout)
	w.dst.SetWrap(slow)
	code, stdout, stderr = w.gapmirror("mirror", "-c", w.isc(""), "--from", "file://"+out, "docker://"+w.dst.Host()+"/m")
	w.dst.SetWrap(nil)
	if code != 0 {
		t.Fatalf("disk-to-mirror: exit %d", code)
	}
	check("disk-to-mirror", stdout, stderr, "planning", "copying")
	// A rerun checks the images at the destination without reading them:
	// its blob figures are those of the images to copy, none.
	if code, stdout, _ := w.gapmirror("mirror", "-c", w.isc(""), "--from", "file://"+out, "docker://"+w.dst.Host()+"/m"); code != 0 ||
		!strings.Contains(stdout, "8 images: 0 copied, 8 already at the destination") || !strings.Contains(stdout, "blobs: 0 in the images to copy (0 B)") {
		t.Errorf("disk-to-mirror rerun: exit %d\n%s", code, stdout)
	}
	if d2m := inSet.FindString(stdout); m2dBlobs == "" || d2m != m2dBlobs {
		t.Errorf("the trips count the set's blobs apart: mirror-to-disk %q, disk-to-mirror %q", m2dBlobs, d2m)
	}

	code, _, stderr = w.gapmirror("describe", "file://"+out)
	if code != 0 || !strings.Contains(stderr, "checking archive 100% ") {
		t.Errorf("describe: exit %d, no final checking line:\n%s", code, stderr)
	}
}

// TestNestedCopyProgress: the copies resolution needs, the catalog image
// into the local store and the graph image's base, each show a planning
// line and then copying lines whose total is fixed from the first (the
// planning pass, not a total that grows as manifests are read) and reaches
// it; the resolving phase then resumes and ends last.
func TestNestedCopyProgress(t *testing.T) {
	defer func(d time.Duration) { lineEvery = d }(lineEvery)
	lineEvery = 40 * time.Millisecond
	w, isc := retryWorld(t)
	w.up.SetWrap(func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if strings.Contains(r.URL.Path, "/catalogs/index/blobs/") || strings.Contains(r.URL.Path, "/ubi9/ubi/blobs/") {
				time.Sleep(100 * time.Millisecond) // longer than a line's interval
			}
			h.ServeHTTP(rw, r)
		})
	})
	code, _, stderr := w.run("mirror", "-c", isc, "file://"+filepath.Join(w.dir, "disk"))
	if code != 0 {
		t.Fatalf("mirror-to-disk: exit %d", code)
	}
	end := strings.Index(stderr, " INFO  resolving, took ")
	if end < 0 {
		t.Fatalf("no end of the resolving phase")
	}
	// The nested copies, in order: a planning line, then copying lines.
	var copies [][]status
	planned := false
	for _, s := range parseStatus(t, stderr[:end]) {
		switch s.phase {
		case "planning":
			planned = true
		case "copying":
			if planned {
				copies = append(copies, nil)
				planned = false
			}
			if len(copies) == 0 {
				t.Fatalf("copying lines before any planning line: %+v", s)
			}
			copies[len(copies)-1] = append(copies[len(copies)-1], s)
		}
	}
	if len(copies) != 2 {
		t.Fatalf("%d nested copies with a planning line while resolving, want 2 (the catalog, the graph image base)", len(copies))
	}
	for i, lines := range copies {
		first, last := lines[0], lines[len(lines)-1]
		if len(lines) < 2 || first.imagesTotal != 1 || first.totalB == 0 {
			t.Errorf("nested copy %d: %d copying lines, the first %+v; want a line every interval, for 1 image of known size", i, len(lines), first)
		}
		for _, s := range lines {
			if s.total != first.total || s.imagesTotal != first.imagesTotal {
				t.Errorf("nested copy %d: the total changed from %s to %s", i, first.total, s.total)
			}
		}
		if last.done != last.total || last.images != 1 {
			t.Errorf("nested copy %d: the last line does not reach its total: %+v", i, last)
		}
	}
	if rest := parseStatus(t, stderr[end:]); len(rest) == 0 || rest[0].phase != "resolving" {
		t.Errorf("the resolving phase does not end after the nested copies")
	}
}

// TestFailureWording: a mistyped tag is a failure no retry fixes: it is
// said once, grouped under its cause, without advice to rerun; a dry run
// says nothing was copied; a flaky registry's retries are counted on the
// status line and logged with their cause in the run's log.
func TestFailureWording(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	w.pushFleet(3, 8<<10)
	typo := w.up.Host() + "/apps/app-00:v9"
	isc := w.isc("  - name: " + typo + "\n")
	dst := "docker://" + w.dst.Host() + "/m"
	ws := filepath.Join(w.dir, "ws")
	for _, dry := range []bool{true, false} {
		args := []string{"mirror", "-c", isc, "--workspace", "file://" + ws, dst}
		if dry {
			args = append(args, "--dry-run")
		}
		code, out, errOut := w.gapmirror(args...)
		all := out + errOut
		if code == 0 {
			t.Errorf("dry run %v: exit 0 with an image missing", dry)
		}
		if n := strings.Count(all, "apps/app-00:v9"); n != 1 {
			t.Errorf("dry run %v: the failed image is named %d times, want once:\n%s", dry, n, all)
		}
		if !strings.Contains(out, "FAILED 1 image at "+w.up.Host()+" (not-found)") {
			t.Errorf("dry run %v: no grouped not-found cause:\n%s", dry, out)
		}
		for _, wrong := range []string{"rerun", "retry exactly", "others were mirrored", "once their registry answers"} {
			if strings.Contains(all, wrong) {
				t.Errorf("dry run %v: says %q for a tag that does not exist:\n%s", dry, wrong, all)
			}
		}
		if dry && !strings.Contains(all, "nothing was copied") {
			t.Errorf("dry run: does not say nothing was copied:\n%s", all)
		}
		if logs, _ := filepath.Glob(filepath.Join(ws, "working-dir", "dry-run", "logs", "*.log")); dry && (len(logs) != 1 || !strings.Contains(errOut, logs[0])) {
			t.Errorf("dry run: %d log files in working-dir/dry-run/logs, or its path not printed", len(logs))
		}
		if !dry && !strings.Contains(out, "3 copied, 0 already at the destination, 0 built by gapmirror, 1 failed") {
			t.Errorf("the counts do not add up to the 4 images:\n%s", out)
		}
	}

	faults, err := registrytest.NewFaultInjector(registrytest.FaultConfig{Rate: 0.3, Seed: 3, Faults: []registrytest.Fault{registrytest.FaultServerError},
		Match: func(r *http.Request) bool { return strings.Contains(r.URL.Path, "/blobs/") }})
	must(t, err)
	w.pushFleet(6, 8<<10)
	w.up.SetWrap(faults.Wrap)
	ws2 := filepath.Join(w.dir, "ws2")
	code, _, errOut := w.gapmirror("mirror", "-c", w.isc(""), "--retry-times", "8", "--workspace", "file://"+ws2, "docker://"+w.dst.Host()+"/flaky")
	w.up.SetWrap(nil)
	if code != 0 || faults.Injected() == 0 {
		t.Fatalf("flaky upstream: exit %d, %d faults", code, faults.Injected())
	}
	if !regexp.MustCompile(`INFO  copying (\d+)/(\d+) images .* \d+ retries`).MatchString(errOut) {
		t.Errorf("the last status line does not count the retries (%d faults):\n%s", faults.Injected(), errOut)
	}
	logs, _ := filepath.Glob(filepath.Join(ws2, "working-dir", "logs", "*.log"))
	if len(logs) != 1 {
		t.Fatalf("%d run logs", len(logs))
	}
	if data := readFile(t, logs[0]); !regexp.MustCompile(`DEBUG retrying .*cause=transient`).MatchString(data) {
		t.Errorf("the run log has no retry with its cause")
	}

	// Retries of the signature tag lookups, which run beside the copy,
	// are counted and said.
	faults, err = registrytest.NewFaultInjector(registrytest.FaultConfig{Rate: 1, Limit: 2, Faults: []registrytest.Fault{registrytest.FaultServerError},
		Match: func(r *http.Request) bool {
			// The sigstore signature tag looked up for each image.
			return strings.Contains(r.URL.Path, "/apps/app-00/manifests/sha256-")
		}})
	must(t, err)
	w.up.SetWrap(faults.Wrap)
	code, _, errOut = w.gapmirror("mirror", "-c", w.isc(""), "--workspace", "file://"+ws2, "docker://"+w.dst.Host()+"/flaky")
	w.up.SetWrap(nil)
	if code != 0 || faults.Injected() != 2 {
		t.Fatalf("flaky tags: exit %d, %d faults", code, faults.Injected())
	}
	if !regexp.MustCompile(`INFO  signatures and referrers looked up beside the copy retries=2`).MatchString(errOut) {
		t.Errorf("the search for signatures does not count its retries:\n%s", errOut)
	}
}

// TestRegistryLevelCauses: an untrusted certificate and refused
// credentials are registry-level causes: no retry, every image of that
// registry stopped at once, one grouped line with its fix, in well under
// 2 s with the default retries.
func TestRegistryLevelCauses(t *testing.T) {
	cases := []struct {
		name, cause, fix string
		opts             registrytest.Options
		auth             func(w *world)
	}{
		{name: "untrusted certificate", cause: "tls", fix: "--src-cert-dir", opts: registrytest.Options{TLS: true}},
		{name: "wrong password", cause: "unauthorized", fix: "--authfile", opts: registrytest.Options{Username: "alice", Password: "right-Pa55"},
			auth: func(w *world) { w.setAuth(login{host: w.up.Host(), user: "alice", password: "wrong-Pa55"}) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, c.opts)
			if c.opts.Username != "" {
				w.upUser, w.upPassword = c.opts.Username, c.opts.Password
			}
			w.pushFleetTo(w.upTarget(), 12, 4<<10)
			if c.auth != nil {
				c.auth(w)
			}
			var out, errb bytes.Buffer
			args := []string{"mirror", "--dest-tls-verify=false", "--no-progress", "--registries-conf", w.regsConf, "--authfile", w.authFile,
				"--cache-dir", filepath.Join(w.dir, "cache"), "-c", w.isc(""), "--workspace", "file://" + filepath.Join(w.dir, "ws"), "docker://" + w.dst.Host() + "/m"}
			if !c.opts.TLS {
				args = append(args, "--src-tls-verify=false")
			}
			start := time.Now()
			code := run(context.Background(), args, &out, &errb)
			took := time.Since(start)
			t.Logf("exit %d in %s\nstdout:\n%s\nstderr:\n%s", code, took, out.String(), errb.String())
			if code == 0 || took > 2*time.Second {
				t.Errorf("exit %d after %s; want a failure in under 2 s", code, took)
			}
			head := "FAILED 12 images at " + w.up.Host() + " (" + c.cause + ")"
			if n := strings.Count(out.String(), "FAILED "); n != 1 || !strings.Contains(out.String(), head) {
				t.Errorf("want one grouped line %q, got %d FAILED lines", head, n)
			}
			for _, want := range []string{"fix: ", c.fix, "every image of " + w.up.Host() + " stopped at once", "and 7 more"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("the summary lacks %q", want)
				}
			}
			if strings.Contains(out.String()+errb.String(), "wrong-Pa55") {
				t.Errorf("a password in the output")
			}
		})
	}
}
