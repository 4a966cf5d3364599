// Command bench measures gapmirror's three trips on generated images and
// prints the figures next to baselines measured in the same run: a plain
// copy of the same blob files and skopeo copying the same images. It prints
// figures, not pass/fail; it fails only when a run fails.
//
// Scenario A (throughput): -images images sharing a base layer, -size bytes
// of unique blobs in all, from a registry on filesystem storage.
// Scenario B (per-image overhead): -small images of 20–100 KiB each, like
// operator bundles.
//
// Scenario E (the mixed workload, -mixed or -mixed-only): 735
// images, operator bundle and related images selected from the real
// catalogs, three signed release payloads with their components and update
// graph, 100 additional images of 4 × 512 KiB, next to a plain copy of the
// blob files and skopeo copying every image 4 at a time.
//
// -wan DELAY:RATE puts the upstream of scenarios A, B and E behind a WAN
// (a delay per request, one link of RATE shared by every response body) for
// the trips that read it, and prints their floors under it (wan.go).
//
// Scenario C (catalog filtering): gapmirror's catalog library loading,
// filtering and writing the real catalogs and a generated catalog of 20,000
// bundles, each in a child process for its peak RSS, next to opm render and
// opm validate of the same directories (bin/opm, built by make opm).
//
// Scenario F (-serve-s3, alone): disk-to-mirror into one gapmirror serve on
// the filesystem next to two replicas on S3-compatible object storage
// (gofakes3, in this process) with a Redis cache behind a round-robin
// balancer, as a ratio.
//
// Usage: go run ./bench -gapmirror bin/gapmirror [-size 256MiB] [-images 20] [-small 500] [-mixed | -mixed-only] [-wan 40ms:200mbit] [-catalog-only] [-serve-s3] [-keep]
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

func main() {
	// The bench re-executes itself as the measured catalog filter (scenario C).
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	bin := flag.String("gapmirror", "bin/gapmirror", "the gapmirror binary to measure (build it with make build)")
	size := flag.String("size", "256MiB", "scenario A: total bytes of unique blobs (at least 200MiB for the issue's figure), e.g. 256MiB or 1GiB")
	images := flag.Int("images", 20, "scenario A: number of images")
	small := flag.Int("small", 500, "scenario B: number of small images (0 skips scenario B)")
	trace := flag.Bool("trace", false, "write every HTTP request the registries serve into gapmirror.log, with the time it arrived")
	catalogs := flag.String("catalogs", "../shared/realdata/catalogs/v4.18", "scenario C: directory of real FBC catalogs (skipped when absent)")
	genBundles := flag.Int("gen-bundles", 20000, "scenario C: bundles of the generated catalog (0 skips it)")
	catalogRuns := flag.Int("catalog-runs", 3, "scenario C: runs per measurement (the median is printed)")
	catalogOnly := flag.Bool("catalog-only", false, "run only scenario C (no registries, no gapmirror binary needed)")
	scale := flag.Int("scale", 0, "scenario D: images of the scale run (also run at a tenth of that); 0 skips it")
	scaleOnly := flag.Bool("scale-only", false, "run only scenario D")
	mixed := flag.Bool("mixed", false, "also run scenario E, the issue's mixed workload (735 images: operators from -catalogs, releases, additional images; 2 to 3 minutes on 2 quiet CPUs)")
	mixedOnly := flag.Bool("mixed-only", false, "run only scenario E")
	mixedTiny := flag.Bool("mixed-tiny", false, "scenario E with a few images of each kind (the smoke test's size), to check that it works")
	profile := flag.String("profile", "", "write a CPU profile of every gapmirror run into this directory (<scenario>-<trip>.pprof), its heap at its peak (<scenario>-<trip>-heap.pprof), and the registries (this process) during it (<scenario>-<trip>-registries.pprof)")
	serveS3 := flag.Bool("serve-s3", false, "run only scenario F: disk-to-mirror of -images images (-size) into one gapmirror serve on the filesystem and into two replicas on S3-compatible object storage (gofakes3) with a Redis cache (miniredis) behind a round-robin balancer, same run, as a ratio")
	wan := flag.String("wan", "", "put the upstream of scenarios A, B and E behind a WAN for the trips that read it and print their floors under it: DELAY:RATE, a delay per request and one link shared by every response body, e.g. 40ms:200mbit or 20ms:1gbit")
	referrers := flag.Int("referrers", 0, "run only scenario R: what OCI referrers cost, on this many small images (every other one with three referrers); 0 leaves it out")
	mirrorStorage := flag.String("mirror-storage", "disk", "storage of the mirror-side registries: disk (the filesystem driver under the work directory) or memory (distribution's inmemory driver: on these 2 CPUs the mirror registry's file system calls take as much CPU as gapmirror, which a mirror on a machine of its own does not; see docs/benchmarks.md)")
	ocMirror := flag.String("oc-mirror", "", "scenario E: also run oc-mirror v2 (this binary; build it with ../shared/tools/build-oc-mirror.sh) through the same trips on the same upstream, and print time and peak memory ratios against it")
	keep := flag.Bool("keep", false, "keep the work directory (registries, stores, archives, gapmirror.log) and print where it is")
	flag.Parse()

	total, err := archive.ParseSize(*size)
	if err != nil {
		fail("-size: %v", err)
	}
	if *images < 1 || *images > 10000 {
		fail("-images %d: use 1 to 10000", *images)
	}
	if total < int64(*images)*(64<<10) {
		fail("-size %s is too small for %d images: give each image at least 64KiB", *size, *images)
	}
	if *small < 0 || *small > 100000 {
		fail("-small %d: use 0 to 100000", *small)
	}
	abs, err := filepath.Abs(*bin)
	if err == nil {
		_, err = os.Stat(abs)
	}
	if err != nil && !*catalogOnly {
		fail("the gapmirror binary %q is not there (%v): run make build, or pass -gapmirror PATH", *bin, err)
	}
	if *genBundles < 0 || *catalogRuns < 1 {
		fail("-gen-bundles must be at least 0 and -catalog-runs at least 1")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b, err := newBench(abs)
	if err != nil {
		fail("%v", err)
	}
	b.trace = *trace
	b.catalogs, b.genBundles, b.catalogRuns, b.catalogOnly = *catalogs, *genBundles, *catalogRuns, *catalogOnly
	b.scaleImages, b.scaleOnly, b.profile = *scale, *scaleOnly, *profile
	b.mixed, b.mixedOnly, b.mixedSpec = *mixed || *mixedOnly, *mixedOnly, fullMixed
	b.serveS3Only = *serveS3
	if *referrers < 0 || *referrers > 10000 {
		fail("-referrers %d: use 1 to 10000 images (0 leaves scenario R out)", *referrers)
	}
	b.referrersOnly = *referrers
	if *ocMirror != "" {
		if b.ocMirrorBin, err = filepath.Abs(*ocMirror); err == nil {
			_, err = os.Stat(b.ocMirrorBin)
		}
		if err != nil {
			fail("-oc-mirror %s: %v (build it with ../shared/tools/build-oc-mirror.sh, see its header)", *ocMirror, err)
		}
	}
	if *mixedTiny {
		b.mixedSpec = tinyMixed
	}
	if *mixedOnly && (*scaleOnly || *catalogOnly) {
		fail("-mixed-only runs scenario E alone: leave out -scale-only and -catalog-only")
	}
	if *scaleOnly && *scale < 10 {
		fail("-scale-only needs -scale of at least 10")
	}
	if *wan != "" {
		if *scaleOnly || *catalogOnly || *serveS3 {
			fail("-wan puts the upstream of scenarios A, B and E behind a WAN: leave out -scale-only, -catalog-only and -serve-s3")
		}
		delay, rate, err := parseWAN(*wan)
		if err != nil {
			fail("%v", err)
		}
		b.wan, b.wanSpec = registrytest.NewWAN(delay, int64(rate)), *wan
	}
	switch *mirrorStorage {
	case "disk":
	case "memory":
		b.mirrorInMemory = true
	default:
		fail("-mirror-storage %q: disk or memory", *mirrorStorage)
	}
	err = b.run(ctx, total, *images, *small)
	b.close(*keep)
	if err != nil {
		fail("%v", err)
	}
}

// fail prints a message and exits 1.
func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
	os.Exit(1)
}

// bench is one benchmark run: a work directory, the registries it started,
// the binaries it measures and a log of everything they printed.
type bench struct {
	bin    string
	skopeo string // "" when skopeo is not installed
	// ocMirrorBin is oc-mirror v2 (-oc-mirror), run in scenario E beside
	// gapmirror; "" leaves it out.
	ocMirrorBin string
	// referrersOnly runs scenario R alone on this many images (-referrers).
	referrersOnly int
	dir           string
	log           *os.File
	// mirrorInMemory keeps the mirror-side registries' storage in memory (-mirror-storage).
	mirrorInMemory bool
	// launchPath is bench/launch, built once (launcher).
	launchOnce sync.Once
	launchPath string
	launchErr  error
	regsConf   string
	authFile   string
	registries map[string]*registrytest.Registry // by name
	// requests counts the HTTP requests all the registries served.
	requests atomic.Int64
	// kinds counts them by side ("upstream", "mirror"), method and endpoint
	// kind (see requestKind).
	kindsMu sync.Mutex
	kinds   map[string]int64
	// capacity is the registry's bandwidth and request rate (scenario A
	// measures it; floors.go).
	capacity capacity
	// trace logs every request.
	trace bool
	// Scenario C: see catalogs.go.
	catalogs                string
	genBundles, catalogRuns int
	catalogOnly             bool
	// Scenario D: see scale.go. measureRSS runs gapmirror through the
	// launcher, which reports its peak RSS in lastRSS.
	scaleImages int
	scaleOnly   bool
	// Scenario E: see mixed.go.
	mixed, mixedOnly bool
	mixedSpec        mixedSpec
	measureRSS       bool
	lastRSS          int64
	// lastCPU is the user+system time of the last command run.
	lastCPU time.Duration
	// serveS3Only runs scenario F alone (serves3.go).
	serveS3Only bool
	// profile is where CPU profiles of the gapmirror runs go ("": none).
	profile string
	// wan, when set (-wan, spelled wanSpec), is in front of every upstream
	// registry, and requests go through it while wanOn is set (wan.go).
	wan     *registrytest.WAN
	wanSpec string
	wanOn   atomic.Bool
}

func newBench(bin string) (*bench, error) {
	dir, err := os.MkdirTemp("", "gapmirror-bench-")
	if err != nil {
		return nil, fmt.Errorf("creating the work directory: %w", err)
	}
	b := &bench{bin: bin, dir: dir, registries: map[string]*registrytest.Registry{},
		regsConf: filepath.Join(dir, "registries.conf"),
		authFile: filepath.Join(dir, "auth.json"),
	}
	b.skopeo, _ = exec.LookPath("skopeo")
	// Keep the host's containers configuration out of the measurements.
	if err := os.WriteFile(b.regsConf, nil, 0o644); err != nil {
		return nil, fmt.Errorf("writing %s: %w", b.regsConf, err)
	}
	if err := os.WriteFile(b.authFile, []byte(`{"auths":{}}`+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("writing %s: %w", b.authFile, err)
	}
	if b.log, err = os.Create(filepath.Join(dir, "gapmirror.log")); err != nil {
		return nil, fmt.Errorf("creating the log: %w", err)
	}
	return b, nil
}

// close stops the registries and removes the work directory unless keep.
func (b *bench) close(keep bool) {
	for _, r := range b.registries {
		if err := r.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		}
	}
	_ = b.log.Close()
	if keep {
		fmt.Printf("\nKept %s (registries/, scenario-a/, scenario-b/, scenario-e/, gapmirror.log).\n", b.dir)
		return
	}
	if err := os.RemoveAll(b.dir); err != nil {
		fmt.Fprintf(os.Stderr, "bench: removing %s: %v\n", b.dir, err)
	}
}

func (b *bench) run(ctx context.Context, size int64, images, small int) error {
	b.header()
	if b.scaleOnly {
		return b.scale(ctx, b.scaleImages)
	}
	if b.mixedOnly {
		return b.mixedScenario(ctx, b.mixedSpec)
	}
	if b.serveS3Only {
		return b.serveS3(ctx, size, images)
	}
	if b.referrersOnly > 0 {
		return b.referrersScenario(ctx, b.referrersOnly)
	}
	if !b.catalogOnly {
		if err := b.throughput(ctx, size, images); err != nil {
			return err
		}
		if small > 0 {
			if err := b.overhead(ctx, small); err != nil {
				return err
			}
		}
		if b.mixed {
			if err := b.mixedScenario(ctx, b.mixedSpec); err != nil {
				return err
			}
		}
	}
	if err := b.catalogScenario(ctx, b.catalogs, b.genBundles, b.catalogRuns); err != nil {
		return err
	}
	if b.scaleImages > 0 && !b.catalogOnly {
		return b.scale(ctx, b.scaleImages)
	}
	return nil
}

// header prints when, where and what is measured.
func (b *bench) header() {
	version := "unknown"
	if out, err := exec.Command(b.bin, "version").Output(); err == nil {
		version = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "gapmirror"))
	}
	skopeo := "not installed: skopeo baselines skipped"
	if b.skopeo != "" {
		if out, err := exec.Command(b.skopeo, "--version").Output(); err == nil {
			skopeo = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "skopeo version"))
		}
	}
	fmt.Printf("gapmirror bench, %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Printf("machine:   %s/%s, %d CPUs%s, %s\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), cpuModel(), runtime.Version())
	fmt.Printf("gapmirror: %s (%s)\n", version, b.bin)
	fmt.Printf("skopeo:    %s\n", skopeo)
	fmt.Printf("work dir:  %s (log of every run: gapmirror.log)\n", b.dir)
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		// Other work on the machine shows up in every figure.
		fmt.Printf("load:      %s (1, 5, 15 min averages before the run)\n", strings.Join(strings.Fields(string(la))[:3], " "))
	}
	storage := "filesystem storage"
	if b.mirrorInMemory {
		storage = "filesystem storage upstream, in-memory storage at the mirror (-mirror-storage memory)"
	}
	fmt.Printf("Registries run in this process on 127.0.0.1 with %s; every figure is wall time of the command, start to exit.\n", storage)
}

// cpuModel is ", <model name>" from /proc/cpuinfo, or "" where there is none.
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return " (" + strings.TrimSpace(v) + ")"
		}
	}
	return ""
}

// registry is the filesystem-backed registry stored under registries/name,
// started on first use.
func (b *bench) registry(ctx context.Context, name string) (*registrytest.Registry, error) {
	return b.registryBehind(ctx, name, nil)
}

// registryBehind is registry with front (nil: none) between the counting
// proxy and the registry: what the proxy counts is what a client sends.
func (b *bench) registryBehind(ctx context.Context, name string, front func(http.Handler) http.Handler) (*registrytest.Registry, error) {
	if r, ok := b.registries[name]; ok {
		return r, nil
	}
	return b.startRegistry(ctx, name, registrytest.Options{}, front)
}

// startRegistry starts registry name with opts (its Dir and Wrap set here).
func (b *bench) startRegistry(ctx context.Context, name string, opts registrytest.Options, front func(http.Handler) http.Handler) (*registrytest.Registry, error) {
	side := "mirror"
	if strings.HasSuffix(name, "upstream") {
		side = "upstream"
	}
	opts.Dir = filepath.Join(b.dir, "registries", name)
	if side == "mirror" && b.mirrorInMemory {
		opts.Dir = ""
	}
	wan := b.wan != nil && side == "upstream"
	if wan {
		opts.ConnState = b.wan.ConnState
	}
	opts.Wrap = func(next http.Handler) http.Handler {
		if front != nil {
			next = front(next)
		}
		if wan {
			// Outside any front: the WAN is between the client and
			// everything the registry's host answers.
			next = b.wanFront(next)
		}
		return b.count(side, next)
	}
	r, err := registrytest.New(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("starting registry %s: %w", name, err)
	}
	b.registries[name] = r
	return r, nil
}

// count wraps the handler of a registry on side ("upstream", "mirror") to
// count its requests: the counting proxy in front of each registry.
func (b *bench) count(side string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.requests.Add(1)
		b.kindsMu.Lock()
		if b.kinds == nil {
			b.kinds = map[string]int64{}
		}
		b.kinds[side+"\t"+r.Method+" "+requestKind(r)]++
		b.kindsMu.Unlock()
		if b.trace {
			logMu.Lock()
			fmt.Fprintf(b.log, "request %s %s %s %s\n", time.Now().UTC().Format("15:04:05.000"), r.Host, r.Method, r.URL.Path)
			logMu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

// requestKind names the endpoint of a distribution API request: ping,
// manifest, blob (GET/HEAD of content), upload (POST/PATCH/PUT of
// .../blobs/uploads/), mount (POST ...?mount=), tags, catalog or other.
func requestKind(r *http.Request) string {
	p := r.URL.Path
	switch {
	case p == "/v2/" || p == "/v2":
		return "ping"
	case strings.Contains(p, "/manifests/"):
		return "manifest"
	case strings.Contains(p, "/blobs/uploads"):
		if r.URL.Query().Get("mount") != "" {
			return "mount"
		}
		return "upload"
	case strings.Contains(p, "/blobs/"):
		return "blob"
	case strings.Contains(p, "/tags/"):
		return "tags"
	case p == "/v2/_catalog":
		return "catalog"
	}
	return "other"
}

// kindCounts is a copy of the counts by side, method and kind.
func (b *bench) kindCounts() map[string]int64 {
	b.kindsMu.Lock()
	defer b.kindsMu.Unlock()
	out := make(map[string]int64, len(b.kinds))
	for k, v := range b.kinds {
		out[k] = v
	}
	return out
}

// counts is what a gapmirror run's summary says it did.
type counts struct {
	// images is the summary's total; built are the images gapmirror made
	// itself (rebuilt catalogs, the graph image).
	images, copied, there, built, failed int
	// blobs transferred and reused (mounted or found), when the summary says.
	blobs, reused int
	// copySecs is how long the copy phase took, by the summary (the rest of
	// a mirror-to-disk is resolution and the archive).
	copySecs float64
}

var (
	// The summary's head line and blob tally (mirror.Report.Summary).
	summaryRE = regexp.MustCompile(`(\d+) images?: (\d+) copied, (\d+) already at the destination, (\d+) built by gapmirror, (\d+) failed`)
	blobsRE   = regexp.MustCompile(`blobs: \d+ [a-z ]+ \([^)]*\): (\d+) moved \([^)]*\), (\d+) already at the destination \([^)]*\); (\d+) shared references reused`)
	copyRE    = regexp.MustCompile(`shared references reused; ([0-9.]+)s,`)
)

// gapmirror runs the binary once with the isolation flags, its output going
// to the log, and returns the wall time and the summary counts. A non-zero
// exit is an error carrying the end of the output.
func (b *bench) gapmirror(ctx context.Context, label string, args ...string) (time.Duration, counts, error) {
	return b.gapmirrorAs(ctx, label, sourceConfig{}, args...)
}

// gapmirrorAs is gapmirror with the upstream configured as src says.
func (b *bench) gapmirrorAs(ctx context.Context, label string, src sourceConfig, args ...string) (time.Duration, counts, error) {
	regsConf := cmp.Or(src.regsConf, b.regsConf)
	full := append(slices.Clone(args), "--no-progress", "--registries-conf", regsConf, "--authfile", b.authFile, "--dest-tls-verify=false")
	if !src.noTLSFlag {
		full = append(full, "--src-tls-verify=false")
	}
	var out bytes.Buffer
	var env []string
	if b.profile != "" {
		name := strings.NewReplacer(" ", "-", ",", "").Replace(label)
		env = []string{"GAPMIRROR_CPUPROFILE=" + filepath.Join(b.profile, name+".pprof"), "GAPMIRROR_HEAPPROFILE=" + filepath.Join(b.profile, name+"-heap.pprof")}
		// The registries run in this process: their side of the same run.
		f, err := os.Create(filepath.Join(b.profile, name+"-registries.pprof"))
		if err != nil {
			return 0, counts{}, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return 0, counts{}, err
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	took, err := b.command(ctx, label, &out, b.bin, full, env)
	var c counts
	if m := summaryRE.FindStringSubmatch(out.String()); m != nil {
		c.images, _ = strconv.Atoi(m[1])
		c.copied, _ = strconv.Atoi(m[2])
		c.there, _ = strconv.Atoi(m[3])
		c.built, _ = strconv.Atoi(m[4])
		c.failed, _ = strconv.Atoi(m[5])
	}
	if m := blobsRE.FindStringSubmatch(out.String()); m != nil {
		c.blobs, _ = strconv.Atoi(m[1])
		found, _ := strconv.Atoi(m[2])
		shared, _ := strconv.Atoi(m[3])
		c.reused = found + shared
	}
	if m := copyRE.FindStringSubmatch(out.String()); m != nil {
		c.copySecs, _ = strconv.ParseFloat(m[1], 64)
	}
	if err != nil {
		return took, c, fmt.Errorf("%s failed: %w\n--- last lines of its output (run with -keep to keep the whole log, %s) ---\n%s",
			label, err, b.log.Name(), tail(out.String(), 30))
	}
	return took, c, nil
}

// command runs name with args, writing its output to out and to the log
// under a header, and returns the wall time.
func (b *bench) command(ctx context.Context, label string, out *bytes.Buffer, name string, args, env []string) (time.Duration, error) {
	var buf bytes.Buffer
	if out == nil {
		out = &buf
	}
	var result string
	if b.measureRSS && name == b.bin {
		// Through the launcher, for the peak RSS (see measure).
		launch, err := b.launcher()
		if err != nil {
			return 0, err
		}
		f, err := os.CreateTemp(b.dir, "launch-")
		if err != nil {
			return 0, err
		}
		f.Close()
		result = f.Name()
		defer os.Remove(result)
		args = append([]string{name}, args...)
		name = launch
		env = append(env, launchEnv+"="+result)
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	b.lastRSS, b.lastCPU = 0, 0
	if ps := cmd.ProcessState; ps != nil {
		// wait4's usage counts the descendants the child waited for (the
		// launcher's child).
		b.lastCPU = ps.UserTime() + ps.SystemTime()
	}
	if result != "" {
		_, b.lastRSS = launched(result)
	}
	b.logRun(label, name, args, took, err, out.Bytes())
	return took, err
}

var logMu sync.Mutex

// logRun appends one command and its output to the log.
func (b *bench) logRun(label, name string, args []string, took time.Duration, err error, output []byte) {
	logMu.Lock()
	defer logMu.Unlock()
	status := "ok"
	if err != nil {
		status = err.Error()
	}
	fmt.Fprintf(b.log, "=== %s: %s %s\n", label, name, strings.Join(args, " "))
	b.log.Write(output)
	fmt.Fprintf(b.log, "=== %s: %s after %.2fs\n\n", label, status, took.Seconds())
}

// selfCPU is the bench process's user+system time so far: what its
// registries spent while a trip ran.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// skopeoCopy copies every src[i] to dst[i] with `skopeo copy --all`, at most
// parallel at a time, as a shell script around skopeo would, and returns the
// wall time of the whole batch.
func (b *bench) skopeoCopy(ctx context.Context, label string, src, dst []string, parallel int) (time.Duration, error) {
	env := []string{"CONTAINERS_REGISTRIES_CONF=" + b.regsConf}
	start := time.Now()
	work := make(chan int)
	errs := make(chan error, len(src))
	var wg sync.WaitGroup
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				args := []string{"--insecure-policy", "copy", "--all", "--quiet", "--authfile", b.authFile,
					"--src-tls-verify=false", "--dest-tls-verify=false", src[i], dst[i]}
				if strings.HasPrefix(dst[i], "oci:") {
					args = slices.DeleteFunc(args, func(a string) bool { return a == "--dest-tls-verify=false" })
				}
				var out bytes.Buffer
				if _, err := b.command(ctx, label, &out, b.skopeo, args, env); err != nil {
					errs <- fmt.Errorf("%s: skopeo copy %s %s: %w\n%s", label, src[i], dst[i], err, tail(out.String(), 10))
				}
			}
		}()
	}
	for i := range src {
		if ctx.Err() != nil {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return time.Since(start), ctx.Err()
}

// plainCopy copies every regular file under src into dst with io.Copy (no
// fsync): the floor for moving these bytes on this disk.
func plainCopy(src, dst string, sync bool) (time.Duration, int64, error) {
	start := time.Now()
	var total int64
	err := filepath.WalkDir(src, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !e.Type().IsRegular() {
			return nil
		}
		n, err := copyFile(path, target, sync)
		total += n
		return err
	})
	if err == nil && sync {
		err = syncDirs(dst)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("plain copy of %s: %w", src, err)
	}
	return time.Since(start), total, nil
}

func copyFile(src, dst string, sync bool) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if err == nil && sync {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// syncDirs flushes the entries of every directory under dir, as the
// archive's commit does for its directory.
func syncDirs(dir string) error {
	return filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || !e.IsDir() {
			return err
		}
		d, err := os.Open(path)
		if err != nil {
			return err
		}
		defer d.Close()
		return d.Sync()
	})
}

// chunkBytes is the number and total size of the mirror_*.tar chunks in dir.
func chunkBytes(dir string) (int, int64, error) {
	// A directory keeps every archive written into it (none is overwritten):
	// measure the newest.
	found, err := archive.List(dir)
	if err != nil {
		return 0, 0, err
	}
	if len(found) == 0 {
		return 0, 0, fmt.Errorf("no archive in %s", dir)
	}
	r, err := archive.OpenFirst(dir, found[len(found)-1].First)
	if err != nil {
		return 0, 0, err
	}
	var total int64
	for _, c := range r.Index().Chunks {
		total += c.Size
	}
	return len(r.Index().Chunks), total, nil
}

// writeConfig writes an ImageSetConfiguration listing refs as additional images.
func writeConfig(path string, refs []string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "kind: ImageSetConfiguration\napiVersion: mirror.openshift.io/v2alpha1\nmirror:\n  additionalImages:\n")
	for _, r := range refs {
		fmt.Fprintf(w, "  - name: %s\n", r)
	}
	err = w.Flush()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// mib is n bytes in MiB.
func mib(n int64) float64 { return float64(n) / (1 << 20) }

// humanBytes formats n as B, KiB, MiB or GiB.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", mib(n))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%d B", n)
	}
}
