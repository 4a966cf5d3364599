package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gapmirror/gapmirror/imageset/catalog"
	"github.com/gapmirror/gapmirror/imageset/fbc"
	"github.com/gapmirror/gapmirror/internal/opmtest"
)

// Scenario C measures catalog filtering: gapmirror's catalog library loading
// an FBC directory, filtering it and writing the result, in a child process
// so that its peak memory is its own max RSS, next to opm render and opm
// validate of the same directory in the same run.

// childEnv selects the child mode of the bench binary: the filter to run.
const (
	childEnv    = "GAPMIRROR_BENCH_FILTER"
	childDirEnv = "GAPMIRROR_BENCH_CATALOG"
)

// filterSpec is a named filter the child can run.
type filterSpec struct {
	name string
	desc string
	spec func(c *fbc.Catalog) catalog.FilterSpec
}

// realSelect is an ImageSetConfiguration-like selection over the real
// catalogs: packages with channels, min versions and an OLM v1 range.
var realSelect = []catalog.PackageSpec{
	{Name: "project-quay", MinVersion: "3.10.0"},
	{Name: "infinispan", Channels: []catalog.ChannelSpec{{Name: "stable", VersionRange: ">=2.4.0, <2.5.0"}}},
	{Name: "rabbitmq-messaging-topology-operator"},
	{Name: "sailoperator"},
}

var filterSpecs = []filterSpec{
	{"heads", "heads of every channel", func(*fbc.Catalog) catalog.FilterSpec { return catalog.FilterSpec{} }},
	{"real-select", "4 packages, channels and version ranges", func(*fbc.Catalog) catalog.FilterSpec {
		return catalog.FilterSpec{Packages: realSelect}
	}},
	{"gen-select", "every 3rd package, versions 2.0.0 to 3.5.0", func(c *fbc.Catalog) catalog.FilterSpec {
		var pkgs []catalog.PackageSpec
		for i, name := range c.PackageNames() {
			if i%3 == 0 {
				pkgs = append(pkgs, catalog.PackageSpec{Name: name, MinVersion: "2.0.0", MaxVersion: "3.5.0"})
			}
		}
		return catalog.FilterSpec{Packages: pkgs}
	}},
}

func findSpec(name string) (filterSpec, bool) {
	i := slices.IndexFunc(filterSpecs, func(f filterSpec) bool { return f.name == name })
	if i < 0 {
		return filterSpec{}, false
	}
	return filterSpecs[i], true
}

// runChild is the child process: load the catalog in $GAPMIRROR_BENCH_CATALOG,
// filter it with the spec named in $GAPMIRROR_BENCH_FILTER, write the result
// to a temporary directory (as gapmirror does before rebuilding the image),
// and print the phase times on one line for the parent.
func runChild() int {
	name, dir := os.Getenv(childEnv), os.Getenv(childDirEnv)
	fspec, ok := findSpec(name)
	if !ok || dir == "" {
		fmt.Fprintf(os.Stderr, "bench child: unknown filter %q or no catalog directory\n", name)
		return 2
	}
	start := time.Now()
	c, err := fbc.LoadFS(os.DirFS(dir), ".")
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench child: loading %s: %v\n", dir, err)
		return 1
	}
	loaded := time.Now()
	out, _, err := catalog.Filter(c, fspec.spec(c))
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench child: filter %s: %v\n", name, err)
		return 1
	}
	filtered := time.Now()
	tmp, err := os.MkdirTemp("", "gapmirror-bench-filtered-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench child: %v\n", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	if err := out.WriteDir(filepath.Join(tmp, "catalog")); err != nil {
		fmt.Fprintf(os.Stderr, "bench child: writing: %v\n", err)
		return 1
	}
	written := time.Now()
	fmt.Printf("load=%.4f filter=%.4f write=%.4f bundles=%d kept=%d\n", loaded.Sub(start).Seconds(),
		filtered.Sub(loaded).Seconds(), written.Sub(filtered).Seconds(), c.BundleCount(), out.BundleCount())
	return 0
}

// childRun is one measured process: wall time, peak RSS and, for the
// filter child, the phases it reported.
type childRun struct {
	wall    time.Duration
	maxRSS  int64 // bytes
	phases  map[string]float64
	summary string
}

// measure runs name args once, with extra environment, and returns its wall
// time and max RSS. It starts the command through a launcher (bench/launch)
// rather than directly: Go starts children with CLONE_VM|CLONE_VFORK, and
// Linux then carries the parent's peak RSS into the child's maxrss at exec,
// so a child of the bench process would report at least the bench's own
// peak. The launcher is a small program of its own (about 2 MiB): until
// 2026-11-29 it was this binary in a launcher mode, which starts at about
// 70 MiB (it links the registries), so no peak under that could be seen.
func (b *bench) measure(ctx context.Context, label, name string, args, env []string) (childRun, error) {
	launch, err := b.launcher()
	if err != nil {
		return childRun{}, err
	}
	result, err := os.CreateTemp(b.dir, "launch-")
	if err != nil {
		return childRun{}, err
	}
	result.Close()
	defer os.Remove(result.Name())
	cmd := exec.CommandContext(ctx, launch, append([]string{name}, args...)...)
	cmd.Env = append(os.Environ(), append(env, launchEnv+"="+result.Name())...)
	var stdout bytes.Buffer
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if slices.Contains(args, "render") {
		// opm render prints the whole catalog: straight to /dev/null, as a
		// file, so that neither a pipe nor this process's buffer is measured.
		null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return childRun{}, err
		}
		defer null.Close()
		cmd.Stdout = null
	}
	start := time.Now()
	err = cmd.Run()
	var r childRun
	r.wall, r.maxRSS = launched(result.Name())
	b.logRun(label, name, args, time.Since(start), err, append(tailBytes(stdout.Bytes(), 2000), stderr.Bytes()...))
	if err != nil {
		return r, fmt.Errorf("%s: %s %s: %w\n%s", label, name, strings.Join(args, " "), err, tail(stderr.String(), 20))
	}
	if r.wall == 0 {
		return r, fmt.Errorf("%s: the launcher reported no figures", label)
	}
	r.phases = map[string]float64{}
	line := strings.TrimSpace(stdout.String())
	if strings.HasPrefix(line, "load=") {
		r.summary = line
		for field := range strings.FieldsSeq(line) {
			if k, v, ok := strings.Cut(field, "="); ok {
				r.phases[k], _ = strconv.ParseFloat(v, 64)
			}
		}
	}
	return r, nil
}

// launchEnv names, for bench/launch, the file that receives "<wall ns>
// <maxrss KiB>" of the command it runs (launch.Env).
const launchEnv = "GAPMIRROR_BENCH_LAUNCH"

// launched reads what bench/launch wrote to result: the child's wall time
// and peak RSS in bytes (zeros when it wrote nothing).
func launched(result string) (wall time.Duration, maxRSS int64) {
	data, err := os.ReadFile(result)
	if err != nil {
		return 0, 0
	}
	var wallNS, rssKiB int64
	if _, err := fmt.Sscanf(string(data), "%d %d", &wallNS, &rssKiB); err != nil {
		return 0, 0
	}
	return time.Duration(wallNS), rssKiB << 10
}

// printLauncherFloor prints the floor under every peak RSS the bench
// reports: what a child that does nothing reports through the launcher.
func (b *bench) printLauncherFloor(ctx context.Context) {
	if t, err := exec.LookPath("true"); err == nil {
		if r, err := b.measure(ctx, "launcher floor", t, nil, nil); err == nil {
			fmt.Printf("  launcher floor: a child that does nothing reports %s peak RSS\n", humanBytes(r.maxRSS))
		}
	}
}

// launcher returns bench/launch, built into the work directory on first
// use (see measure for why it is a program of its own).
func (b *bench) launcher() (string, error) {
	b.launchOnce.Do(func() {
		out := filepath.Join(b.dir, "launch")
		gobin, err := exec.LookPath("go")
		if err != nil {
			gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		cmd := exec.Command(gobin, "build", "-o", out, "github.com/gapmirror/gapmirror/bench/launch")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			b.launchErr = fmt.Errorf("building the launcher bench/launch (run the bench from the repository, as make bench does): %v\n%s", err, msg)
			return
		}
		b.launchPath = out
	})
	return b.launchPath, b.launchErr
}

func tailBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// medianRun measures runs times and returns the run of median wall time,
// with the highest max RSS of all runs.
func (b *bench) medianRun(ctx context.Context, runs int, label, name string, args, env []string) (childRun, error) {
	var all []childRun
	for range runs {
		r, err := b.measure(ctx, label, name, args, env)
		if err != nil {
			return r, err
		}
		all = append(all, r)
	}
	slices.SortFunc(all, func(x, y childRun) int { return int(x.wall - y.wall) })
	med := all[len(all)/2]
	for _, r := range all {
		med.maxRSS = max(med.maxRSS, r.maxRSS)
	}
	return med, nil
}

// catalogCase is one catalog directory and the filters run on it.
type catalogCase struct {
	title   string
	dir     string
	filters []string
}

// catalogScenario runs scenario C: the real catalogs (when realDir exists)
// and a generated catalog of genBundles bundles.
func (b *bench) catalogScenario(ctx context.Context, realDir string, genBundles, runs int) error {
	fmt.Printf("\nScenario C: catalog filtering (median of %d runs; peak RSS = the process's max resident set)\n", runs)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	opm, opmErr := opmtest.Find()
	if opmErr != nil {
		fmt.Printf("opm: not measured: %v\n", opmErr)
	} else {
		fmt.Printf("opm: %s (%s)\n", opmVersion(opm), opm)
	}

	b.printLauncherFloor(ctx)

	var cases []catalogCase
	if _, err := os.Stat(realDir); err != nil {
		fmt.Printf("real catalogs: skipped, %s is not there (shared workspace data, not in the repository)\n", realDir)
	} else {
		cases = append(cases, catalogCase{dir: realDir, filters: []string{"heads", "real-select"}})
	}
	if genBundles > 0 {
		const perPackage = 200
		pkgs := max(1, (genBundles+perPackage-1)/perPackage)
		c, err := catalog.Generate(catalog.GenSpec{Seed: 1, Packages: pkgs, Bundles: perPackage, Channels: 4,
			DependencyRatio: 0.1, Deprecations: true, Others: true, ObjectBytes: 512})
		if err != nil {
			return fmt.Errorf("generating the catalog: %w", err)
		}
		dir := filepath.Join(b.dir, "scenario-c", "generated")
		if err := c.WriteDir(dir); err != nil {
			return err
		}
		cases = append(cases, catalogCase{title: "generated", dir: dir, filters: []string{"heads", "gen-select"}})
	}

	for _, cc := range cases {
		c, err := fbc.LoadFS(os.DirFS(cc.dir), ".")
		if err != nil {
			return fmt.Errorf("loading %s: %w", cc.dir, err)
		}
		size, err := warm(cc.dir)
		if err != nil {
			return err
		}
		title := cc.title
		if title == "" {
			title = "real " + filepath.Base(cc.dir)
		}
		fmt.Printf("\n%s: %d packages, %d bundles, %s of FBC in %s\n", title, len(c.PackageNames()), c.BundleCount(), humanBytes(size), cc.dir)
		c = nil

		type row struct {
			what string
			r    childRun
		}
		var rows []row
		var base, validate *childRun
		if opmErr == nil {
			// opm render reads the same directory and writes the catalog out,
			// the work gapmirror does minus the filter.
			r, err := b.medianRun(ctx, runs, "opm render "+title, opm, []string{"render", cc.dir, "-o", "json"}, nil)
			if err != nil {
				return err
			}
			base = &r
			v, err := b.medianRun(ctx, runs, "opm validate "+title, opm, []string{"validate", cc.dir}, nil)
			if err != nil {
				return err
			}
			validate = &v
		}
		for _, name := range cc.filters {
			fspec, _ := findSpec(name)
			r, err := b.medianRun(ctx, runs, "gapmirror filter "+name+" "+title, self, nil,
				[]string{childEnv + "=" + name, childDirEnv + "=" + cc.dir})
			if err != nil {
				return err
			}
			rows = append(rows, row{"gapmirror: " + fspec.desc, r})
		}
		if base != nil {
			rows = append(rows, row{"opm render -o json", *base}, row{"opm validate", *validate})
		}

		fmt.Printf("%-52s %8s %8s %8s %10s %10s %9s\n", "operation", "wall s", "load s", "filter s", "peak RSS", "× render s", "× render RSS")
		for _, rw := range rows {
			load, filt := "", ""
			if rw.r.phases != nil && rw.r.summary != "" {
				load = fmt.Sprintf("%.3f", rw.r.phases["load"])
				filt = fmt.Sprintf("%.3f", rw.r.phases["filter"])
			}
			rt, rm := "-", "-"
			if base != nil {
				rt = fmt.Sprintf("%.2f", rw.r.wall.Seconds()/base.wall.Seconds())
				rm = fmt.Sprintf("%.2f", float64(rw.r.maxRSS)/float64(base.maxRSS))
			}
			fmt.Printf("%-52s %8.3f %8s %8s %10s %10s %9s\n", rw.what, rw.r.wall.Seconds(), load, filt, humanBytes(rw.r.maxRSS), rt, rm)
		}
		for _, rw := range rows {
			if rw.r.summary != "" {
				fmt.Printf("  %s: %s\n", rw.what, rw.r.summary)
			}
		}
	}
	fmt.Println("gapmirror rows: one process that loads, filters and writes the result (wall includes process start and the write);")
	fmt.Println("opm render reads the same directory and writes it as JSON to /dev/null; opm validate loads it and checks the graph.")
	return nil
}

// opmVersion is the version opm reports, or "unknown".
func opmVersion(opm string) string {
	if v := opmtest.Version(opm); v != "" {
		if i := strings.Index(v, `OpmVersion:"`); i >= 0 {
			rest := v[i+len(`OpmVersion:"`):]
			if j := strings.IndexByte(rest, '"'); j >= 0 {
				return rest[:j]
			}
		}
		return v
	}
	return "unknown"
}

// warm reads every file under dir once so that no measured run pays for
// the first read from disk, and returns their total size.
func warm(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		n, err := io.Copy(io.Discard, bufio.NewReader(f))
		total += n
		return err
	})
	return total, err
}
