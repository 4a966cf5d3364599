// Command demo runs gapmirror's three trips end to end on example content,
// with no internet: it starts an "upstream" registry holding example images,
// a generated operator catalog and release payloads, an update service and a
// signature store for those releases, all in-process on 127.0.0.1; writes an
// ImageSetConfiguration; runs the real gapmirror binary for mirror-to-disk,
// gapmirror serve as the air-gapped registry (TLS from the CA it makes)
// filled from the archive (disk-to-mirror), mirror-to-mirror and a no-change
// rerun; prints what it generated; and then
// checks every image at the mirror by digest with plain HTTP requests (and
// skopeo, when installed), the rebuilt catalog's bundles and the cluster
// resources. It exits non-zero if anything is wrong.
//
// Usage: go run ./internal/demo -gapmirror bin/gapmirror [-keep]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// Names of the files and folders the demo creates in its directory; the
// commands it shows use them relative to that directory.
const (
	configFile     = "isc.yaml"
	registriesConf = "registries.conf"
	authFile       = "auth.json"
	cacheDir       = "cache"
	archiveDir     = "archive"
	workspaceDir   = "workspace"

	// archiveSize is small so that the example archive spans several chunks.
	archiveSize = "4MiB"

	// Mirror prefixes of the disk-to-mirror and mirror-to-mirror trips.
	fromDiskPrefix = "from-disk"
	directPrefix   = "direct"
)

func main() {
	bin := flag.String("gapmirror", "bin/gapmirror", "the gapmirror binary to run (build it with make build)")
	keep := flag.Bool("keep", false, "keep the demo directory (configuration, archive, store, workspace) and print where it is")
	flag.Parse()
	os.Exit(run(*bin, *keep))
}

// demo is one run of the demo.
type demo struct {
	out *console
	bin string
	dir string
	up  *registrytest.Registry
	// mirrorHost is where gapmirror serve, the air-gapped registry, listens.
	mirrorHost string
	served     *served
	images     []*example
	ops        *operators
	rel        *releases
	trips      []tripTime
	problems   int
}

// tripTime is how long one gapmirror run took.
type tripTime struct {
	name string
	took time.Duration
}

func run(bin string, keep bool) int {
	start := time.Now()
	out := newConsole(os.Stdout)
	abs, err := filepath.Abs(bin)
	if err == nil {
		_, err = os.Stat(abs)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: the gapmirror binary %q is not there (%v): run make build, or pass -gapmirror PATH\n", bin, err)
		return 2
	}
	dir, err := os.MkdirTemp("", "gapmirror-demo-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: creating a temporary directory: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	d := &demo{out: out, bin: abs, dir: dir}
	err = d.run(ctx)
	d.close()
	if keep {
		defer out.printf("Kept %s (isc.yaml, release-key.asc, archive/, cache/, workspace/, registry/ with the mirror's storage and CA); the registries stopped with the demo.\n", dir)
	} else if rmErr := os.RemoveAll(dir); rmErr != nil {
		fmt.Fprintf(os.Stderr, "demo: removing %s: %v\n", dir, rmErr)
	}
	switch {
	case err != nil:
		out.printf("\n")
		out.bad("demo failed: %v", err)
		return 1
	case d.problems > 0:
		out.printf("\n")
		out.bad("%d problem(s) found (see above) in %.1fs", d.problems, time.Since(start).Seconds())
		return 1
	}
	out.printf("\n%s\n", out.style(bold+green, fmt.Sprintf("Demo passed in %.1fs.", time.Since(start).Seconds())))
	return 0
}

// run tells the story; an error stops it, a failed check is counted and the
// story goes on so that the user sees everything that is wrong.
func (d *demo) run(ctx context.Context) error {
	d.out.printf("%s\n", d.out.style(bold, "gapmirror demo: additional images, an operator catalog and releases through the three trips, all on this machine, no internet"))

	if err := d.startRegistries(ctx); err != nil {
		return err
	}
	if err := d.pushExamples(ctx); err != nil {
		return err
	}
	if err := d.pushOperators(ctx); err != nil {
		return err
	}
	if err := d.publishReleases(ctx); err != nil {
		return err
	}
	if err := d.writeConfig(); err != nil {
		return err
	}
	if err := d.mirrorToDisk(ctx); err != nil {
		return err
	}
	if err := d.diskToMirror(ctx); err != nil {
		return err
	}
	if err := d.mirrorToMirror(ctx); err != nil {
		return err
	}
	return d.verify(ctx)
}

// close stops the registries and the release services.
func (d *demo) close() {
	d.rel.close()
	if err := d.stopServe(); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
	}
	if d.up != nil {
		if err := d.up.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		}
	}
}

// check counts a failed check and prints it, or prints a passed one.
func (d *demo) check(ok bool, format string, args ...any) {
	if ok {
		d.out.good(format, args...)
		return
	}
	d.problems++
	d.out.bad(format, args...)
}

func (d *demo) startRegistries(ctx context.Context) error {
	d.out.step("Starting the upstream registry on 127.0.0.1 (plain HTTP, in memory)")
	var err error
	if d.up, err = registrytest.New(ctx, registrytest.Options{}); err != nil {
		return fmt.Errorf("starting the upstream registry: %w", err)
	}
	if d.mirrorHost, err = pickMirrorAddress(); err != nil {
		return err
	}
	d.out.info("upstream  %-21s the connected world: example images, an operator catalog, release payloads", d.up.Host())
	d.out.info("mirror    %-21s the air-gapped registry: gapmirror serve, started at trip 2", d.mirrorHost)
	return nil
}

func (d *demo) pushExamples(ctx context.Context) error {
	d.images = examples()
	d.out.step("Pushing %d example images upstream (mirror.additionalImages)", len(d.images))
	target := imagebuilder.Target{URL: d.up.URL(), Client: d.up.Client()}
	distinct := map[digest.Digest]int64{}
	var perImage, unique int64
	shared := 0
	for _, ex := range d.images {
		if err := ex.push(ctx, target); err != nil {
			return err
		}
		d.out.info("%-42s %-26s %s", ex.Repo+":"+ex.Tag, ex.kind(), shortDigest(ex.Digest))
		for dg, size := range ex.Blobs {
			perImage += size
			if _, ok := distinct[dg]; !ok {
				distinct[dg] = size
				unique += size
			}
		}
		if ex.Base {
			shared++
		}
	}
	d.out.info("%d distinct blobs, %s (%s if every image had its own copy: %d images share a base layer)",
		len(distinct), humanBytes(unique), humanBytes(perImage), shared)
	return nil
}

func (d *demo) writeConfig() error {
	d.out.step("Writing the ImageSetConfiguration")
	isc := config(d.up.Host(), d.images, d.rel.config()+d.ops.config())
	files := []struct {
		name, data string
		mode       os.FileMode
	}{
		{configFile, isc, 0o644},
		// The public half of the key the releases are signed with: what
		// an enclave trusts instead of Red Hat's key.
		{releaseKeyFile, string(d.rel.key.PublicKey()), 0o644},
		// Empty: the host's registries.conf (mirrors, blocked registries)
		// and credentials must not change what the demo does.
		{registriesConf, "", 0o644},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(d.dir, f.name), []byte(f.data), f.mode); err != nil {
			return fmt.Errorf("writing %s: %w", f.name, err)
		}
	}
	// The mirror's user, for mirror-to-mirror's pushes and the checks.
	if err := d.writeMirrorCredentials(); err != nil {
		return fmt.Errorf("writing %s: %w", authFile, err)
	}
	d.out.info("Everything below runs in %s; paths in the commands are relative to it.", d.dir)
	d.out.info("gapmirror is %s.", d.bin)
	d.out.printf("\n")
	d.out.block("    │ ", "# "+configFile+"\n"+isc)
	return nil
}

// isolation are the flags every command gets: the upstream registry speaks
// plain HTTP, the mirror TLS with the CA gapmirror serve made, and the
// host's containers configuration must not leak in.
func isolation() [][]string {
	return [][]string{
		{"--cache-dir", cacheDir, "--registries-conf", registriesConf, "--authfile", authFile},
		{"--src-tls-verify=false", "--dest-cert-dir", filepath.Dir(caFile)},
	}
}

// gapmirror echoes and runs one gapmirror command in the demo directory,
// showing its output, and returns that output; each group of extra
// arguments goes on a line of its own.
func (d *demo) gapmirror(ctx context.Context, name string, args []string, extra ...[]string) (string, error) {
	groups := append([][]string{append([]string{"gapmirror"}, args...)}, extra...)
	groups = append(groups, isolation()...)
	d.out.command(groups...)
	var full []string
	for _, g := range groups[1:] {
		full = append(full, g...)
	}
	full = append(slices.Clone(args), full...)

	kept := &lockedBuffer{}
	stdout := &toolOutput{c: d.out, margin: "    │ ", kept: kept}
	stderr := &toolOutput{c: d.out, margin: "    │ ", kept: kept}
	cmd := exec.CommandContext(ctx, d.bin, full...)
	cmd.Dir = d.dir
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	stdout.flush()
	stderr.flush()
	d.trips = append(d.trips, tripTime{name: name, took: took})
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return kept.String(), fmt.Errorf("%s: gapmirror exited with code %d (its output is above)", name, exit.ExitCode())
		}
		return kept.String(), fmt.Errorf("%s: running %s: %w", name, d.bin, err)
	}
	d.out.info("%s", d.out.style(dim, fmt.Sprintf("(%s took %.1fs)", name, took.Seconds())))
	return kept.String(), nil
}

// summaryRE matches the counts in gapmirror's summary line.
var summaryRE = regexp.MustCompile(`(\d+) copied, (\d+) already at the destination, (\d+) built by gapmirror, (\d+) failed`)

// counts reads copied, already-there and failed from a run's output; the
// images gapmirror built itself (catalogs, the graph image) count as there.
func counts(output string) (copied, there, failed int, ok bool) {
	m := summaryRE.FindStringSubmatch(output)
	if m == nil {
		return 0, 0, 0, false
	}
	copied, _ = strconv.Atoi(m[1])
	there, _ = strconv.Atoi(m[2])
	built, _ := strconv.Atoi(m[3])
	failed, _ = strconv.Atoi(m[4])
	return copied, there + built, failed, true
}

// wantImages is how many images every trip mirrors: the additional
// images, the operator catalog's and the releases'.
func (d *demo) wantImages() int {
	return len(d.images) + d.ops.images() + d.rel.images()
}

// checkCounts checks that a run handled every image without failure and
// copied nothing when all is at the destination already (rerun), or
// something otherwise. Release components that do not change between
// versions are one image under two tags: the second is "already there".
func (d *demo) checkCounts(name, output string, rerun bool) {
	copied, there, failed, ok := counts(output)
	if !ok {
		d.check(false, "%s: no \"N copied, N already at the destination, N built by gapmirror, N failed\" summary in the output", name)
		return
	}
	want := d.wantImages()
	good := copied+there == want && failed == 0 && (copied == 0) == rerun
	d.check(good, "%s: %d images copied, %d already there, %d failed (want %d in all, %s, none failed)",
		name, copied, there, failed, want, map[bool]string{true: "none copied", false: "some copied"}[rerun])
}

func (d *demo) mirrorToDisk(ctx context.Context) error {
	d.out.step("Trip 1 of 3, mirror-to-disk: upstream → archive files (on the connected host)")
	output, err := d.gapmirror(ctx, "mirror-to-disk",
		[]string{"mirror", "-c", configFile, "--archive-size", archiveSize, "file://" + archiveDir}, d.rel.flags()...)
	if err != nil {
		return err
	}
	d.checkCounts("mirror-to-disk", output, false)

	chunks, err := filepath.Glob(filepath.Join(d.dir, archiveDir, "mirror_*.tar"))
	if err != nil || len(chunks) == 0 {
		return fmt.Errorf("mirror-to-disk wrote no mirror_*.tar in %s", filepath.Join(d.dir, archiveDir))
	}
	d.out.printf("\n")
	d.out.info("The archive to carry across the air gap (chunks of at most %s):", archiveSize)
	var total int64
	for _, c := range chunks {
		fi, err := os.Stat(c)
		if err != nil {
			return fmt.Errorf("reading the archive: %w", err)
		}
		total += fi.Size()
		d.out.info("  %s/%-22s %10s", archiveDir, filepath.Base(c), humanBytes(fi.Size()))
	}
	d.out.info("  %-31s %10s", "total", humanBytes(total))
	store := filepath.Join(d.dir, cacheDir, ".gapmirror", "store")
	if n, size, err := dirSize(filepath.Join(store, "blobs")); err == nil {
		d.out.info("The local store %s/.gapmirror/store holds %d blobs, %s: each shared layer once.", cacheDir, n, humanBytes(size))
	}
	return nil
}

func (d *demo) diskToMirror(ctx context.Context) error {
	d.out.step("Trip 2 of 3, disk-to-mirror: gapmirror serve runs the air-gapped registry and pushes the archive into it (on the air-gapped host)")
	d.out.info("A user for pushes from other hosts (mirror-to-mirror below); anonymous users may only pull:")
	if err := d.addMirrorUser(ctx); err != nil {
		return err
	}
	root := d.mirrorHost + "/" + fromDiskPrefix
	// No release flags: the update graph and the verified signatures
	// travelled in the archive. The registry keeps serving in the background.
	output, err := d.serve(ctx, []string{"serve", "--root", serveRoot, "--address", d.mirrorHost, "--htpasswd", htpasswdFile,
		"--from", "file://" + archiveDir, "--prefix", fromDiskPrefix})
	if err != nil {
		return err
	}
	d.checkCounts("disk-to-mirror", output, false)

	for _, r := range []struct{ glob, what string }{
		{"idms-gapmirror.yaml", "pull by digest from the mirror"},
		{"itms-gapmirror.yaml", "pull by tag from the mirror"},
		{"cs-*.yaml", "the filtered catalog for OLM"},
		{"cc-*.yaml", "the filtered catalog for OLM v1"},
		{"signature-configmap.yaml", "release signatures for the cluster-version operator"},
		{"updateService.yaml", "an in-cluster update service"},
	} {
		path, data, err := d.resource(fromDiskPrefix, r.glob)
		if err != nil {
			d.check(false, "cluster resource %s: %v", path, err)
			continue
		}
		d.out.printf("\n")
		d.out.info("Generated for the cluster, %s (oc apply -f %s):", r.what, path)
		// The signatures name the releases by digest, not by where they
		// are; their base64 is cut short on screen.
		if r.glob == "signature-configmap.yaml" {
			d.out.block("    │ ", clipLines(data, 110))
			continue
		}
		d.out.block("    │ ", data)
		d.check(strings.Contains(data, root+"/"), "%s points the cluster at %s", filepath.Base(path), root)
	}
	return nil
}

func (d *demo) mirrorToMirror(ctx context.Context) error {
	d.out.step("Trip 3 of 3, mirror-to-mirror: upstream → mirror registry directly (on a partially connected host)")
	root := "docker://" + d.mirrorHost + "/" + directPrefix
	args := []string{"mirror", "-c", configFile, "--workspace", "file://" + workspaceDir, root}
	output, err := d.gapmirror(ctx, "mirror-to-mirror", args, d.rel.flags()...)
	if err != nil {
		return err
	}
	d.checkCounts("mirror-to-mirror", output, false)

	d.out.step("Rerun of mirror-to-mirror with nothing new: every image is already at the mirror")
	output, err = d.gapmirror(ctx, "mirror-to-mirror rerun", args, d.rel.flags()...)
	if err != nil {
		return err
	}
	d.checkCounts("rerun", output, true)
	return nil
}

// verify checks every image at both mirror prefixes over plain HTTP, what
// the catalog and the releases need besides their images and, when skopeo
// is installed, one image with skopeo, then prints the summary.
func (d *demo) verify(ctx context.Context) error {
	d.out.step("Checking the mirror independently: HTTPS GETs trusting %s, sha256 of every manifest and blob", caFile)
	client, err := d.mirrorClient()
	if err != nil {
		return err
	}
	c := &checker{base: "https://" + d.mirrorHost, client: client}
	want := d.wantedImages()
	type total struct {
		prefix        string
		images, blobs int
		bytes         int64
		kinds         map[string]int
		built         map[string]digest.Digest // of the images gapmirror builds, by repository
		extrasOK      bool
	}
	var totals []total
	for _, prefix := range []string{fromDiskPrefix, directPrefix} {
		t := total{prefix: prefix, kinds: map[string]int{}, built: map[string]digest.Digest{}}
		for _, w := range want {
			repo := prefix + "/" + w.repo
			res, err := c.image(ctx, repo, w.tag, w.digest)
			if err != nil {
				d.check(false, "%s/%s: %v", d.mirrorHost, repo+":"+w.tag, err)
				continue
			}
			t.images++
			t.kinds[w.kind]++
			t.blobs += res.Blobs
			t.bytes += res.Bytes
			if w.digest == "" {
				t.built[w.repo] = res.Digest
			}
			if prefix == fromDiskPrefix && w.show {
				d.out.good("%-54s %s  %d manifest(s), %d blobs", repo+":"+shortTag(w.tag), shortDigest(res.Digest), res.Manifests, res.Blobs)
			}
		}
		if prefix == fromDiskPrefix {
			d.out.good("%-54s %d bundle and operand images and %d release components, each by digest", prefix+"/…",
				t.kinds[kindOperator]-1, t.kinds[kindRelease]-len(shortestPath)-1)
		}
		ops := t.built[catalogRepo] != "" && d.verifyOperators(ctx, c, prefix, t.built[catalogRepo])
		rel := d.verifyReleases(ctx, c, prefix)
		t.extrasOK = ops && rel
		if len(totals) > 0 {
			first := totals[0]
			d.check(t.images == first.images, "%s/: the same %d of %d images, %d blobs", prefix, t.images, len(want), t.blobs)
			// The catalog and the graph image are rebuilt the same way
			// from the store and from the archive.
			for repo, dg := range first.built {
				d.check(t.built[repo] == dg, "%s/%s is %s in both trips: rebuilt deterministically", prefix, repo, shortDigest(t.built[repo]))
			}
		}
		totals = append(totals, t)
	}

	skopeoDigest := d.skopeo(ctx)

	d.out.step("Summary")
	count := func(kind string) (n int) {
		for _, w := range want {
			if w.kind == kind {
				n++
			}
		}
		return n
	}
	both := func(kind string) bool {
		for _, t := range totals {
			if t.kinds[kind] != count(kind) || (kind != kindAdditional && !t.extrasOK) {
				return false
			}
		}
		return true
	}
	d.check(both(kindAdditional), "%-18s %d of %d at both prefixes, by digest: multi-arch indexes, Docker and OCI, renamed, by digest only",
		kindAdditional+":", totals[0].kinds[kindAdditional], count(kindAdditional))
	d.check(both(kindOperator), "%-18s rebuilt %s → %s with exactly the %d selected of %d bundles, %d bundle and operand images; CatalogSource and ClusterCatalog point at the mirror",
		kindOperator+":", shortDigest(d.ops.src.Digest), shortDigest(totals[0].built[catalogRepo]), d.ops.want.BundleCount(), d.ops.src.Cat.BundleCount(), count(kindOperator)-1)
	d.check(both(kindRelease), "%-18s %s of %d (shortest path) at openshift/release-images:<version>-x86_64, signatures verified, %d ConfigMaps; %d components and the graph image; UpdateService",
		kindRelease+":", strings.Join(shortestPath, " and "), len(releaseVersions), len(shortestPath), count(kindRelease)-len(shortestPath)-1)
	for _, t := range totals {
		d.check(t.images == len(want), "%d of %d images at %s/%s verified by digest; %d blobs (%s) read back and checked",
			t.images, len(want), d.mirrorHost, t.prefix, t.blobs, humanBytes(t.bytes))
	}
	if skopeoDigest != "" {
		d.out.good("skopeo inspect agrees: %s", shortDigest(digest.Digest(skopeoDigest)))
	}
	var parts []string
	for _, t := range d.trips {
		parts = append(parts, fmt.Sprintf("%s %.1fs", t.name, t.took.Seconds()))
	}
	d.out.info("Time per trip: %s", strings.Join(parts, " · "))
	return nil
}

// skopeo inspects one image at the mirror with skopeo, if it is installed,
// and returns the digest it reports.
func (d *demo) skopeo(ctx context.Context) string {
	path, err := exec.LookPath("skopeo")
	if err != nil {
		d.out.info("skopeo is not installed: skipping the cross-check with a second client")
		return ""
	}
	var ex *example
	for _, e := range d.images {
		if len(e.Platforms) == 1 && !e.ByDigest {
			ex = e
			break
		}
	}
	repo, tag := ex.destination(fromDiskPrefix)
	ref := "docker://" + d.mirrorHost + "/" + repo + ":" + tag
	d.out.printf("\n")
	d.out.info("And with a second client:")
	d.out.command([]string{"skopeo", "inspect", "--cert-dir", filepath.Dir(caFile), "--format", "{{.Digest}}", ref})
	cmd := exec.CommandContext(ctx, path, "inspect", "--cert-dir", filepath.Join(d.dir, filepath.Dir(caFile)), "--authfile", filepath.Join(d.dir, authFile),
		"--format", "{{.Digest}}", ref)
	cmd.Env = append(os.Environ(), "CONTAINERS_REGISTRIES_CONF="+filepath.Join(d.dir, registriesConf))
	out, err := cmd.CombinedOutput()
	got := strings.TrimSpace(string(out))
	d.out.block("    │ ", got)
	if err != nil {
		d.check(false, "skopeo inspect %s: %v", ref, err)
		return ""
	}
	if got != ex.Digest.String() {
		d.check(false, "skopeo inspect %s says %s, want %s", ref, got, ex.Digest)
		return ""
	}
	return got
}

// shortDigest is "sha256:" and the first 12 hex digits.
func shortDigest(d digest.Digest) string {
	s := d.String()
	if len(s) > len("sha256:")+12 {
		return s[:len("sha256:")+12] + "…"
	}
	return s
}

// shortTag shortens a sha256-<hex> tag for display.
func shortTag(tag string) string {
	if strings.HasPrefix(tag, "sha256-") && len(tag) > len("sha256-")+12 {
		return tag[:len("sha256-")+12] + "…"
	}
	return tag
}

// dirSize counts the regular files under dir and their bytes.
func dirSize(dir string) (files int, size int64, err error) {
	err = filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() {
			fi, err := e.Info()
			if err != nil {
				return err
			}
			files++
			size += fi.Size()
		}
		return nil
	})
	return files, size, err
}

// clipLines shortens lines longer than n characters (base64 signatures).
func clipLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if r := []rune(l); len(r) > n {
			lines[i] = string(r[:n]) + "…"
		}
	}
	return strings.Join(lines, "\n")
}
