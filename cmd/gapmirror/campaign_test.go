package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/internal/helmtest"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// TestFaultCampaign: a mixed image set (an operator catalog, signed
// releases with the update graph, additional images, a helm chart's
// images) through registries that fail 5 % of requests with 500, 2 % with
// 429 and Retry-After, and reset 1 % of connections half-way through a
// body. Each trip (mirror-to-disk, disk-to-mirror, mirror-to-mirror) is
// first killed with SIGKILL at a random point, then run again under the
// same faults; every image of the set then is at the mirror by digest,
// with every blob, and the summaries count the retries. The seed is logged; GAPMIRROR_CAMPAIGN_SEED replays it.
func TestFaultCampaign(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("GAPMIRROR_CAMPAIGN_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		must(t, err)
	}
	t.Logf("campaign seed %d (GAPMIRROR_CAMPAIGN_SEED=%d replays it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))

	w := newReleaseWorld(t, []string{"4.18.1", "4.18.2"}, 3, false)
	w.pushFleet(4, 32<<10)
	fleet := w.images
	oc := w.pushCatalog("redhat/redhat-operator-index", "v4.18", catalogOptions{Spec: monthSpec})
	reg := w.up.Host()
	for i, name := range []string{"web", "init", "operand", "worker"} {
		w.pushApp(name, "v1", uint64(300+i))
	}
	charts := helmtest.Serve(t, helmtest.Web("1.2.0", reg, "v1"))
	var b strings.Builder
	b.WriteString("  additionalImages:\n")
	for _, ex := range fleet {
		fmt.Fprintf(&b, "  - name: %s\n", ex.Ref)
	}
	fmt.Fprintf(&b, "  operators:\n  - catalog: %s\n    packages:\n    - name: operator-000\n      channels:\n      - name: stable\n", oc.Ref)
	b.WriteString("  platform:\n    graph: true\n    channels:\n    - name: stable-4.18\n      minVersion: 4.18.1\n")
	fmt.Fprintf(&b, "  helm:\n    repositories:\n    - name: demo\n      url: %s\n      charts:\n      - name: web\n        version: 1.2.0\n", charts.URL())
	isc := w.writeISC("campaign.yaml", b.String())

	newFaults := func(seed uint64) *registrytest.FaultInjector {
		se, tmr, mid := registrytest.FaultServerError, registrytest.FaultTooManyRequests, registrytest.FaultResetMidBody
		f, err := registrytest.NewFaultInjector(registrytest.FaultConfig{Rate: 0.08, Seed: seed, Status: http.StatusInternalServerError,
			RetryAfterSeconds: 1, Faults: []registrytest.Fault{se, se, se, se, se, tmr, tmr, mid}})
		must(t, err)
		return f
	}
	upFaults, dstFaults := newFaults(rng.Uint64()), newFaults(rng.Uint64())
	slow := func(next http.Handler) http.Handler { // long enough runs to kill them part-way
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if strings.Contains(r.URL.Path, "/blobs/") {
				time.Sleep(15 * time.Millisecond)
			}
			next.ServeHTTP(rw, r)
		})
	}
	faultsOn := func() {
		w.up.SetWrap(registrytest.Chain(upFaults.Wrap, slow))
		w.dst.SetWrap(registrytest.Chain(dstFaults.Wrap, slow))
	}
	faultsOff := func() { w.up.SetWrap(nil); w.dst.SetWrap(nil) }

	bin := buildBinary(t)
	global := []string{"--src-tls-verify=false", "--dest-tls-verify=false", "--no-progress", "--registries-conf", w.regsConf,
		"--authfile", w.authFile, "--cache-dir", filepath.Join(w.dir, "cache"), "--retry-delay", "20ms"}
	out, ws := filepath.Join(w.dir, "out"), filepath.Join(w.dir, "ws")
	retries := 0
	trip := func(name string, args ...string) {
		t.Helper()
		faultsOn()
		kill := time.Duration(50+rng.IntN(700)) * time.Millisecond // trips here take about 0.5-1.5 s
		cmd := exec.Command(bin, append(append(append([]string{"mirror"}, global...), args...), w.flags()...)...)
		var first bytes.Buffer
		cmd.Stdout = &first
		must(t, cmd.Start())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			// Too fast to kill: its own summary counts the faults it met.
			t.Logf("%s ended (%v) before the kill at %v", name, err, kill)
			if i := strings.Index(first.String(), "retries: "); i >= 0 {
				var n int
				fmt.Sscanf(first.String()[i:], "retries: %d", &n)
				retries += n
			}
		case <-time.After(kill):
			must(t, cmd.Process.Signal(syscall.SIGKILL))
			<-done
			t.Logf("%s killed after %v", name, kill)
		}
		code, stdout, _ := w.run(append([]string{"mirror"}, args...)...)
		if code != 0 {
			t.Fatalf("%s rerun under faults: exit %d", name, code)
		}
		if !strings.Contains(stdout, " 0 failed") {
			t.Errorf("%s rerun: failures in the summary:\n%s", name, stdout)
		}
		if i := strings.Index(stdout, "retries: "); i >= 0 {
			var n int
			fmt.Sscanf(stdout[i:], "retries: %d", &n)
			retries += n
		}
		faultsOff()
	}

	trip("mirror-to-disk", "-c", isc, "file://"+out)
	set := archiveOf(t, out).Set
	kinds := map[imageset.Kind]int{}
	for _, img := range set.Images {
		kinds[img.Kind]++
	}
	t.Logf("the set: %d images %v", len(set.Images), kinds)
	if len(kinds) < 4 {
		t.Errorf("the campaign's set lacks a kind of image: %v", kinds)
	}
	trip("disk-to-mirror", "--from", "file://"+out, "docker://"+w.dst.Host()+"/d")
	verifySet(w.world, "d", set)
	trip("mirror-to-mirror", "-c", isc, "--workspace", "file://"+ws, "docker://"+w.dst.Host()+"/m")
	verifySet(w.world, "m", set)

	for _, side := range []struct {
		name string
		f    *registrytest.FaultInjector
	}{{"upstream", upFaults}, {"mirror", dstFaults}} {
		t.Logf("%s: %d faults injected: %d 500s, %d 429s, %d resets mid-body", side.name, side.f.Injected(),
			side.f.InjectedOf(registrytest.FaultServerError), side.f.InjectedOf(registrytest.FaultTooManyRequests), side.f.InjectedOf(registrytest.FaultResetMidBody))
		if side.f.Injected() == 0 {
			t.Errorf("no fault was injected on the %s side: the campaign proves nothing", side.name)
		}
	}
	if retries == 0 {
		t.Error("no summary counted a retry, though faults were injected")
	}
	t.Logf("the reruns' summaries count %d retries", retries)
}

// verifySet checks that every image of set is in the mirror under prefix
// by digest, with every manifest and blob it references.
func verifySet(w *world, prefix string, set *imageset.Set) {
	t := w.t
	t.Helper()
	for _, img := range set.Images {
		repo := prefix + "/" + img.DestinationRepo()
		got, err := w.dst.ManifestDigest(repo, img.DestinationTag())
		if err != nil || got.String() != img.Digest {
			t.Errorf("%s (%s): mirror has %s:%s at %s (%v), want %s", img.Origin, img.Kind, repo, img.DestinationTag(), got, err, img.Digest)
			continue
		}
		w.assertComplete(w.dst, repo, digest.Digest(img.Digest))
	}
}
