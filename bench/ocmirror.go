package main

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// oc-mirror v2 in scenario E (-oc-mirror PATH): the same trips on the same
// upstream in the same run, so that its ratios are measured rather than
// quoted. ../shared/tools/build-oc-mirror.sh builds it from source
// snapshots. It is told about the fixtures as its own docs say: the update
// service by UPDATE_URL_OVERRIDE, the signature store by OCP_SIGNATURE_URL,
// the release key by OCP_SIGNATURE_VERIFICATION_PK, the plain-HTTP
// registries by --src-tls-verify/--dest-tls-verify and registries.conf.

// ocTrips are oc-mirror's runs of scenario E's trips.
type ocTrips struct {
	m2d, d2m, m2m, m2dAgain tripResult
	archiveBytes            int64 // its first archive
	rerunArchiveBytes       int64 // its no-change rerun's archive
	images                  int   // images it reported, every trip alike
}

// ocResultRE matches oc-mirror v2's "=== Results ===" lines, e.g.
// "✓ 392 / 392 operator images mirrored successfully".
var ocResultRE = regexp.MustCompile(`(\d+) / (\d+) (release|operator|additional|helm) images mirrored`)

// ocMirrorTrips runs oc-mirror's mirror-to-disk, disk-to-mirror,
// mirror-to-mirror and no-change mirror-to-disk, each checked: exit 0, every
// image its results count mirrored, no mirroring_errors file.
func (b *bench) ocMirrorTrips(ctx context.Context, dir string, m *mixedUpstream, isc string) (t ocTrips, err error) {
	dir = filepath.Join(dir, "oc-mirror")
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return t, err
	}
	// oc-mirror builds the graph image on registry.access.redhat.com/ubi9/ubi
	// pulled through go-containerregistry, which no registries.conf
	// redirects: without internet it fails, so its configuration leaves the
	// graph image out (one image of 8 KiB that gapmirror builds and pushes).
	data, err := os.ReadFile(isc)
	if err != nil {
		return t, err
	}
	ocISC := filepath.Join(dir, "isc.yaml")
	if err := os.WriteFile(ocISC, []byte(strings.Replace(string(data), "graph: true", "graph: false", 1)), 0o644); err != nil {
		return t, err
	}
	env := []string{"HOME=" + home, "CONTAINERS_REGISTRIES_CONF=" + b.regsConf,
		"UPDATE_URL_OVERRIDE=" + m.services.GraphURL(), "OCP_SIGNATURE_URL=" + m.services.SignatureURL() + "/",
		"OCP_SIGNATURE_VERIFICATION_PK=" + filepath.Join(filepath.Dir(isc), mixedKeyFile)}
	archive := filepath.Join(dir, "archive")
	reg, err := b.registry(ctx, "e-ocmirror-d2m")
	if err != nil {
		return t, err
	}
	reg2, err := b.registry(ctx, "e-ocmirror-m2m")
	if err != nil {
		return t, err
	}
	m2d := []string{"-c", ocISC, "file://" + archive, "--cache-dir", filepath.Join(dir, "cache")}
	steps := []struct {
		label string
		res   *tripResult
		args  []string
		wan   bool
	}{
		{"mirror-to-disk", &t.m2d, m2d, true},
		{"disk-to-mirror", &t.d2m, []string{"-c", ocISC, "--from", "file://" + archive, "docker://" + reg.Host() + "/mirror", "--cache-dir", filepath.Join(dir, "cache-airgap")}, false},
		{"mirror-to-mirror", &t.m2m, []string{"-c", ocISC, "--workspace", "file://" + filepath.Join(dir, "workspace"), "docker://" + reg2.Host() + "/mirror", "--cache-dir", filepath.Join(dir, "cache-m2m")}, true},
		{"mirror-to-disk, no change", &t.m2dAgain, m2d, true},
	}
	defer b.underWAN(false)
	for i, s := range steps {
		if i == 3 {
			if t.archiveBytes, err = ocArchiveBytes(archive); err != nil {
				return t, err
			}
		}
		b.underWAN(s.wan && b.wan != nil)
		if *s.res, err = b.ocMirror(ctx, "E oc-mirror "+s.label, dir, s.args, env, s.wan); err != nil {
			return t, err
		}
		if i == 0 {
			t.images = s.res.counts.images
		}
	}
	t.rerunArchiveBytes, err = ocArchiveBytes(archive)
	return t, err
}

// ocMirror runs oc-mirror once through the launcher (for its peak RSS) on
// a free port for its local registry, and checks its results and that it
// wrote no mirroring_errors file under dir.
func (b *bench) ocMirror(ctx context.Context, label, dir string, args, env []string, wan bool) (tripResult, error) {
	port, err := freePort()
	if err != nil {
		return tripResult{}, err
	}
	wan = wan && b.wan != nil
	full := append([]string{"--v2"}, args...)
	// --remove-signatures: with sigstore signatures on, oc-mirror looks them
	// up but fails to archive them ("reading manifest sha256-<hex>.sig in
	// localhost:<port>/openshift/release: manifest unknown"), so it runs
	// without them, doing less than gapmirror (which looks up and copies them).
	full = append(full, "-p", strconv.Itoa(port), "--src-tls-verify=false", "--dest-tls-verify=false", "--authfile", b.authFile, "--remove-signatures")
	if wan {
		b.wan.Take()
	}
	before := b.requests.Load()
	r, out, err := b.measureOutput(ctx, label, b.ocMirrorBin, full, env)
	res := tripResult{row: row{op: strings.TrimPrefix(label, "E "), took: r.wall, requests: b.requests.Load() - before}, rss: r.maxRSS}
	if wan {
		w := b.wan.Take()
		res.wan = &w
	}
	if err != nil {
		return res, fmt.Errorf("%s failed: %w\n--- last lines of its output (log: %s) ---\n%s", label, err, b.log.Name(), tail(out, 30))
	}
	copied, total := 0, 0
	for _, m := range ocResultRE.FindAllStringSubmatch(out, -1) {
		c, _ := strconv.Atoi(m[1])
		n, _ := strconv.Atoi(m[2])
		copied, total = copied+c, total+n
	}
	res.counts = counts{images: total, copied: copied}
	if total == 0 || copied != total {
		return res, fmt.Errorf("%s: oc-mirror reported %d of %d images mirrored (log: %s)\n%s", label, copied, total, b.log.Name(), tail(out, 30))
	}
	if errs := ocErrorFiles(dir); len(errs) > 0 {
		return res, fmt.Errorf("%s: oc-mirror wrote %s", label, strings.Join(errs, ", "))
	}
	fmt.Printf("  %-52s %7.2fs  %d images, peak RSS %s, %.2f requests per image (both registries)\n", res.row.op, res.row.took.Seconds(), total, humanBytes(res.rss), float64(res.row.requests)/float64(total))
	return res, nil
}

// measureOutput is measure keeping the whole output (oc-mirror's results
// are at its end, its log is long).
func (b *bench) measureOutput(ctx context.Context, label, name string, args, env []string) (childRun, string, error) {
	outFile := filepath.Join(b.dir, "ocmirror-output.txt")
	f, err := os.Create(outFile)
	if err != nil {
		return childRun{}, "", err
	}
	f.Close()
	// Into the file through sh's redirect (sh execs: the launcher measures
	// oc-mirror itself); measure keeps only a tail of what it captures.
	script := `exec "$0" "$@" >>` + shellQuote(outFile) + ` 2>&1`
	r, err := b.measure(ctx, label, "/bin/sh", append([]string{"-c", script, name}, args...), env)
	data, rerr := os.ReadFile(outFile)
	if rerr != nil {
		return r, "", rerr
	}
	return r, string(data), err
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// ocErrorFiles lists the mirroring_errors files oc-mirror wrote under dir.
func ocErrorFiles(dir string) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), "mirroring_errors") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// freePort is a TCP port free on 127.0.0.1 now, for oc-mirror's local
// registry (-p).
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// printOCMirror prints gapmirror's trips beside oc-mirror's: time, peak RSS
// and requests, as ratios.
func printOCMirror(t *trips, oc *ocTrips, n int) {
	fmt.Println()
	fmt.Printf("  %-36s %11s %11s %7s  %13s %13s %7s  %9s %9s\n", "E beside oc-mirror v2, same run", "gapmirror s", "oc-mirror s", "ratio",
		"gapmirror RSS", "oc-mirror RSS", "ratio", "req/img g", "req/img o")
	for _, l := range []struct {
		what string
		g, o tripResult
	}{
		{"mirror-to-disk", t.m2d, oc.m2d}, {"disk-to-mirror", t.d2m, oc.d2m},
		{"mirror-to-mirror", t.m2m, oc.m2m}, {"mirror-to-disk, no change", t.m2dAgain, oc.m2dAgain},
	} {
		fmt.Printf("  %-36s %11.2f %11.2f %7.2f  %13s %13s %7.2f  %9.2f %9.2f\n", l.what, l.g.row.took.Seconds(), l.o.row.took.Seconds(),
			l.g.row.took.Seconds()/max(l.o.row.took.Seconds(), 1e-6), humanBytes(l.g.rss), humanBytes(l.o.rss),
			float64(l.g.rss)/float64(max(l.o.rss, 1)), float64(l.g.row.requests)/float64(n), float64(l.o.row.requests)/float64(max(oc.images, 1)))
	}
	fmt.Printf("  archives: gapmirror %s then %s (no change); oc-mirror %s then %s\n", humanBytes(t.archiveBytes), humanBytes(t.rerunArchiveBytes),
		humanBytes(oc.archiveBytes), humanBytes(oc.rerunArchiveBytes))
	fmt.Printf("  oc-mirror reported %d images (gapmirror %d: oc-mirror's configuration leaves out the graph image, which it cannot build offline);\n", oc.images, n)
	fmt.Println("  oc-mirror runs with --remove-signatures (it fails to archive this upstream's cosign signatures otherwise); gapmirror copies them.")
	fmt.Println("  req/img counts both registries' requests in the run ÷ the images that tool reported; ratio = gapmirror ÷ oc-mirror (lower is better).")
}

// ocArchiveBytes is the size of the archive oc-mirror wrote into dir: its
// mirror_*.tar files (a rerun writes them again).
func ocArchiveBytes(dir string) (int64, error) {
	files, err := filepath.Glob(filepath.Join(dir, "mirror_*.tar"))
	if err != nil || len(files) == 0 {
		return 0, fmt.Errorf("no oc-mirror archive (mirror_*.tar) in %s", dir)
	}
	var total int64
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			return 0, err
		}
		total += fi.Size()
	}
	return total, nil
}
