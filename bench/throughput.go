package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// row is one line of the throughput table.
type row struct {
	op    string
	took  time.Duration
	bytes int64 // bytes moved, for MiB/s; 0 prints "-"
	// requests is the number of HTTP requests the registries served.
	requests int64
	// skopeo is the comparable skopeo baseline and its name; nil prints "-".
	skopeo *row
}

// throughput is scenario A: n images sharing a base layer, size bytes of
// unique blobs, each trip and each baseline measured once.
func (b *bench) throughput(ctx context.Context, size int64, n int) error {
	dir := filepath.Join(b.dir, "scenario-a")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := size / 4
	own := (size - base) / int64(n)
	fmt.Printf("\nScenario A, throughput: %d images, a %s base layer shared by all and %s of their own each\n",
		n, humanBytes(base), humanBytes(own))

	up, err := b.registry(ctx, "a-upstream")
	if err != nil {
		return err
	}
	start := time.Now()
	fleet := imagebuilder.Fleet{Count: n, Seed: 42, RepoPrefix: "bench/app-", Tag: "v1", BaseLayerSize: base, UniqueLayerSize: own}
	images, err := fleet.Build()
	if err != nil {
		return fmt.Errorf("building scenario A's images: %w", err)
	}
	if err := imagebuilder.PushFleet(ctx, imagebuilder.Target{URL: up.URL(), Client: up.Client()}, images); err != nil {
		return fmt.Errorf("pushing scenario A's images: %w", err)
	}
	unique := imagebuilder.DistinctBytes(images)
	fmt.Printf("  %s of unique blobs (tar+gzip, random content) generated and pushed upstream in %.1fs\n",
		humanBytes(unique), time.Since(start).Seconds())

	var refs, repoTags []string
	for _, fi := range images {
		refs = append(refs, fi.Ref(up.Host()))
		repoTags = append(repoTags, fi.Repo+":"+fi.Tag)
	}
	baseBlob := images[0].Image.Layers[0].Descriptor()
	if b.capacity, err = measureCapacity(ctx, up, images[0].Repo, baseBlob.Digest, baseBlob.Size); err != nil {
		return err
	}
	t, err := b.runTrips(ctx, dir, "A", n, refs, up.Host())
	if err != nil {
		return err
	}
	m2d, d2m, m2m, m2dAgain, m2mAgain := t.m2d, t.d2m, t.m2m, t.m2dAgain, t.m2mAgain
	chunks, archiveBytes, rerunArchiveBytes := t.chunks, t.archiveBytes, t.rerunArchiveBytes

	// Baselines.
	// The plain copy takes a fraction of a second: the median of three runs
	// keeps one hiccup from skewing every ratio.
	// The fsynced copy is the floor of an archive, which must be on disk
	// before the run says it is written.
	var plain, synced *row
	for _, sync := range []bool{false, true} {
		var copies []time.Duration
		var plainBytes int64
		for i := range 3 {
			// The upstream registry's blob files: the same bytes mirror-to-disk
			// fetches (its store keeps only manifests).
			took, n, err := plainCopy(filepath.Join(b.dir, "registries", "a-upstream", "docker", "registry", "v2", "blobs"), filepath.Join(dir, fmt.Sprintf("plain-copy-%t-%d", sync, i)), sync)
			if err != nil {
				return err
			}
			copies, plainBytes = append(copies, took), n
		}
		slices.Sort(copies)
		r := &row{op: "plain copy of the blob files (io.Copy, no fsync)", took: copies[1], bytes: plainBytes}
		if sync {
			r.op = "plain copy of the blob files, each fsynced"
			synced = r
		} else {
			plain = r
		}
		fmt.Printf("  %-52s %7.2fs  median of 3\n", r.op, r.took.Seconds())
	}
	var skSeq, skPar, skParAgain, skOCI *row
	if b.skopeo != "" {
		if skSeq, err = b.skopeoRow(ctx, "skopeo copy --all, one image at a time", "a-skopeo-seq", up.Host(), repoTags, 1, unique); err != nil {
			return err
		}
		if skPar, err = b.skopeoRow(ctx, "skopeo copy --all, 4 images at a time", "a-skopeo-par", up.Host(), repoTags, 4, unique); err != nil {
			return err
		}
		if skParAgain, err = b.skopeoRow(ctx, "skopeo copy --all, 4 at a time, again (all there)", "a-skopeo-par", up.Host(), repoTags, 4, 0); err != nil {
			return err
		}
		var dst []string
		layout := filepath.Join(dir, "skopeo-oci")
		for _, rt := range repoTags {
			dst = append(dst, "oci:"+layout+":"+rt)
		}
		took, err := b.skopeoCopy(ctx, "A skopeo to oci:", dockerRefs(up.Host(), repoTags), dst, 1)
		if err != nil {
			return err
		}
		skOCI = &row{op: "skopeo copy --all to one oci: layout, one at a time", took: took, bytes: unique}
		fmt.Printf("  %-52s %7.2fs\n", skOCI.op, took.Seconds())
	}

	m2d.row.bytes, d2m.row.bytes, m2m.row.bytes = unique, unique, unique
	m2d.row.skopeo, d2m.row.skopeo, m2m.row.skopeo, m2mAgain.row.skopeo = skOCI, skPar, skPar, skParAgain
	rows := []*row{&m2d.row, &d2m.row, &m2m.row, &m2dAgain.row, &m2mAgain.row, plain, synced}
	for _, r := range []*row{skSeq, skPar, skParAgain, skOCI} {
		if r != nil {
			rows = append(rows, r)
		}
	}
	fmt.Println()
	printThroughput(rows, plain)

	fmt.Println()
	printFloors(b.capacity, unique, t)
	fmt.Println()
	if b.wan != nil {
		b.printWAN(t)
		fmt.Println()
	}
	fmt.Printf("  archive: %d chunk(s), %s for %s of unique blobs (%.3f×)\n", chunks, humanBytes(archiveBytes), humanBytes(unique),
		float64(archiveBytes)/float64(unique))
	fmt.Printf("  no-change mirror-to-disk rerun: %s, archive of %s (the first run's: %s)\n",
		m2dAgain.summary(), humanBytes(rerunArchiveBytes), humanBytes(archiveBytes))
	fmt.Printf("  no-change mirror-to-mirror rerun: %s\n", m2mAgain.summary())
	if b.skopeo == "" {
		fmt.Println("  skopeo is not installed: the skopeo baselines were skipped")
	}
	fmt.Println("  × = seconds ÷ the baseline's seconds, both measured in this run (lower is faster; 1.00 = as fast).")
	fmt.Println("  MiB/s = unique blob bytes ÷ seconds. mirror-to-disk writes each blob once, straight into the archive (fsynced).")
	if c := m2d.counts.copySecs; c > 0 {
		rest := m2d.row.took.Seconds() - c
		fmt.Printf("  mirror-to-disk (%.2f× the fsynced copy): copy into the archive's chunks %.1fs (%.2f× plain copy), the rest (resolution, chunk 1, chunks synced and hashed) %.2fs (%.2f× the fsynced copy)\n",
			m2d.row.took.Seconds()/synced.took.Seconds(), c, c/plain.took.Seconds(), rest, rest/synced.took.Seconds())
	}
	fmt.Println("  × skopeo compares mirror-to-disk with skopeo → oci:, the others with skopeo docker → docker, 4 at a time.")
	return nil
}

// tripResult is one measured gapmirror run.
type tripResult struct {
	row    row
	counts counts
	// kinds are the requests of the run by side, method and endpoint kind.
	kinds map[string]int64
	// rss is the run's peak RSS, when measured (scenario D).
	rss int64
	// cpu is gapmirror's user+system time; registryCPU the bench process's
	// (its registries') during the run.
	cpu, registryCPU time.Duration
	// wan is what went through the WAN when the run was under it (-wan),
	// else nil; parallel is the run's --parallel-images.
	wan      *registrytest.WANStats
	parallel int
}

// sideRequests is the number of requests of the run on side.
func (t tripResult) sideRequests(side string) int64 {
	var n int64
	for k, v := range t.kinds {
		if strings.HasPrefix(k, side+"\t") {
			n += v
		}
	}
	return n
}

// requestLine says, for side, the requests per image, per blob placed
// (transferred or reused) and by method and endpoint kind.
func (t tripResult) requestLine(side string, images int) string {
	var keys []string
	for k := range t.kinds {
		if strings.HasPrefix(k, side+"\t") {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return side + ": no requests"
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", strings.TrimPrefix(k, side+"\t"), t.kinds[k]))
	}
	n := t.sideRequests(side)
	perBlob := "-"
	if placed := t.counts.blobs + t.counts.reused; placed > 0 && side == "mirror" {
		perBlob = fmt.Sprintf("%.2f", float64(t.kinds[side+"\tPOST upload"]+t.kinds[side+"\tPUT upload"]+t.kinds[side+"\tPATCH upload"]+
			t.kinds[side+"\tPOST mount"]+t.kinds[side+"\tHEAD blob"])/float64(placed))
	}
	return fmt.Sprintf("%-8s %5.2f/image %s/blob placed (%d): %s", side+":", float64(n)/float64(images), perBlob, t.counts.blobs+t.counts.reused, strings.Join(parts, ", "))
}

// summary says what the run reported.
func (t tripResult) summary() string {
	return fmt.Sprintf("%d images copied, %d already at the destination", t.counts.copied, t.counts.there)
}

// trip runs one gapmirror trip over n images and checks its summary: a
// first run must copy every image, a rerun must find every image there. In
// a mixed set (scenario E) some images are built by gapmirror (catalogs, the
// graph image) or listed twice (release components shared by payloads): a
// first run must handle all n without failure and copy some, a rerun copy
// none.
func (b *bench) trip(ctx context.Context, label string, n int, rerun, mixed bool, args ...string) (tripResult, error) {
	return b.tripAs(ctx, label, n, rerun, mixed, sourceConfig{}, args...)
}

// tripAs is trip with the upstream configured as src says.
func (b *bench) tripAs(ctx context.Context, label string, n int, rerun, mixed bool, src sourceConfig, args ...string) (tripResult, error) {
	wan := b.wan != nil && b.wanOn.Load()
	if wan {
		b.wan.Take()
	}
	before, kindsBefore, cpuBefore := b.requests.Load(), b.kindCounts(), selfCPU()
	took, c, err := b.gapmirrorAs(ctx, label, src, args...)
	_, short, _ := strings.Cut(label, " ")
	res := tripResult{row: row{op: "gapmirror " + short, took: took,
		requests: b.requests.Load() - before}, counts: c, kinds: b.kindCounts(), rss: b.lastRSS,
		cpu: b.lastCPU, registryCPU: selfCPU() - cpuBefore, parallel: parallelImages(args)}
	if wan {
		w := b.wan.Take()
		res.wan = &w
	}
	for k, v := range kindsBefore {
		if res.kinds[k] -= v; res.kinds[k] == 0 {
			delete(res.kinds, k)
		}
	}
	if err != nil {
		return res, err
	}
	fmt.Printf("  %-52s %7.2fs  %s\n", res.row.op, took.Seconds(), res.summary())
	for _, side := range []string{"mirror", "upstream"} {
		fmt.Printf("      %s\n", res.requestLine(side, n))
	}
	// Where the wall time went: gapmirror's CPU, the registries' CPU (they
	// run in the bench process), out of wall × CPUs.
	rss := ""
	if res.rss > 0 {
		rss = "; peak RSS " + humanBytes(res.rss)
	}
	fmt.Printf("      CPU: gapmirror %.2fs, registries %.2fs, of %.2fs wall × %d CPUs%s\n",
		res.cpu.Seconds(), res.registryCPU.Seconds(), took.Seconds(), runtime.NumCPU(), rss)
	if res.wan != nil {
		fmt.Printf("      %s\n", b.wanLines(res))
	}
	if mixed {
		if c.images != n || c.failed != 0 || (c.copied == 0) != rerun {
			return res, fmt.Errorf("%s: gapmirror reported %d images: %d copied, %d already there, %d built, %d failed; want %d images, none failed, %s (log: %s)",
				label, c.images, c.copied, c.there, c.built, c.failed, n, map[bool]string{true: "none copied", false: "some copied"}[rerun], b.log.Name())
		}
		return res, nil
	}
	want := counts{copied: n}
	if rerun {
		want = counts{there: n}
	}
	if c.copied != want.copied || c.there != want.there || c.failed != 0 {
		return res, fmt.Errorf("%s: gapmirror reported %d copied, %d already there, %d failed; want %d, %d, 0 (log: %s)",
			label, c.copied, c.there, c.failed, want.copied, want.there, b.log.Name())
	}
	return res, nil
}

// skopeoRow copies every image from upstream to the registry named reg with
// skopeo, parallel at a time.
func (b *bench) skopeoRow(ctx context.Context, op, reg, upstream string, repoTags []string, parallel int, bytes int64) (*row, error) {
	r, err := b.registry(ctx, reg)
	if err != nil {
		return nil, err
	}
	var dst []string
	for _, rt := range repoTags {
		dst = append(dst, "docker://"+r.Host()+"/mirror/"+rt)
	}
	took, err := b.skopeoCopy(ctx, "A "+op, dockerRefs(upstream, repoTags), dst, parallel)
	if err != nil {
		return nil, err
	}
	fmt.Printf("  %-52s %7.2fs\n", op, took.Seconds())
	return &row{op: op, took: took, bytes: bytes}, nil
}

// dockerRefs is docker://host/repoTag for each repoTag.
func dockerRefs(host string, repoTags []string) []string {
	var refs []string
	for _, rt := range repoTags {
		refs = append(refs, "docker://"+host+"/"+rt)
	}
	return refs
}

// printThroughput prints the table of scenario A.
func printThroughput(rows []*row, plain *row) {
	// "×" is one column wide but two bytes: the header is spelled out.
	fmt.Printf("  %-52s %8s %8s  × plain copy  × skopeo\n", "operation", "seconds", "MiB/s")
	for _, r := range rows {
		speed, vsSkopeo := "-", "-"
		if r.bytes > 0 {
			speed = fmt.Sprintf("%.1f", mib(r.bytes)/max(r.took.Seconds(), 1e-6))
		}
		if r.skopeo != nil {
			vsSkopeo = fmt.Sprintf("%.2f", r.took.Seconds()/r.skopeo.took.Seconds())
		}
		fmt.Printf("  %-52s %8.2f %8s %13.2f %9s\n", r.op, r.took.Seconds(), speed, r.took.Seconds()/plain.took.Seconds(), vsSkopeo)
	}
}

// trips is what the five gapmirror runs of a scenario measured.
type trips struct {
	m2d, d2m, m2m, m2dAgain, m2mAgain tripResult
	// chunks, archiveBytes: the first archive; rerunArchiveBytes: the no-change one.
	chunks                          int
	archiveBytes, rerunArchiveBytes int64
	// Under -wan: the first mirror-to-disk again, each run into a new cache
	// and archive, with the upstream given by --src-tls-verify=false
	// (wanFlag) and by a registries.conf entry marking it insecure and no
	// TLS flag (wanConf), twice each in the order flag, conf, conf, flag.
	wanFlag, wanConf []tripResult
}

// runTrips mirrors refs to disk, from disk into a fresh registry, registry to
// registry, then reruns mirror-to-disk and mirror-to-mirror with no change.
// scenario prefixes the labels ("A", "B"). Under -wan, the runs that read
// upstream (the registry at host wanUpstream; "": none) go through the WAN.
func (b *bench) runTrips(ctx context.Context, dir, scenario string, n int, refs []string, wanUpstream string) (*trips, error) {
	isc := filepath.Join(dir, "isc.yaml")
	if err := writeConfig(isc, refs); err != nil {
		return nil, err
	}
	return b.runTripSet(ctx, dir, scenario, n, tripSet{isc: isc, wanUpstream: wanUpstream})
}

// tripSet is what the five runs of a scenario mirror.
type tripSet struct {
	// isc is the ImageSetConfiguration file.
	isc string
	// upstreamArgs go to the runs that read upstream (mirror-to-disk,
	// mirror-to-mirror): scenario E's update service and signature flags.
	upstreamArgs []string
	// mixed: see trip.
	mixed bool
	// wanUpstream is the upstream's host when the runs that read it go
	// through the WAN (-wan); "" leaves them on loopback.
	wanUpstream string
}

// runTripSet is runTrips with a configuration of the caller's; n is the
// number of images gapmirror's summaries must count.
func (b *bench) runTripSet(ctx context.Context, dir, scenario string, n int, set tripSet) (*trips, error) {
	isc := set.isc
	archiveDir := filepath.Join(dir, "archive")
	m2dArgs := append([]string{"mirror", "-c", isc, "--cache-dir", filepath.Join(dir, "cache"), "file://" + archiveDir}, set.upstreamArgs...)
	label := func(s string) string { return scenario + " " + s }
	lower := strings.ToLower(scenario)
	t := &trips{}
	var err error
	wan := b.wan != nil && set.wanUpstream != ""
	defer b.underWAN(false)
	b.underWAN(wan)
	if t.m2d, err = b.trip(ctx, label("mirror-to-disk"), n, false, set.mixed, m2dArgs...); err != nil {
		return nil, err
	}
	if t.chunks, t.archiveBytes, err = chunkBytes(archiveDir); err != nil {
		return nil, fmt.Errorf("%s: %w", label("mirror-to-disk"), err)
	}
	d2mReg, err := b.registry(ctx, lower+"-d2m")
	if err != nil {
		return nil, err
	}
	b.underWAN(false) // disk-to-mirror reads no upstream
	if t.d2m, err = b.trip(ctx, label("disk-to-mirror"), n, false, set.mixed, "mirror", "-c", isc, "--cache-dir", filepath.Join(dir, "cache-airgap"),
		"--from", "file://"+archiveDir, "docker://"+d2mReg.Host()+"/mirror"); err != nil {
		return nil, err
	}
	m2mReg, err := b.registry(ctx, lower+"-m2m")
	if err != nil {
		return nil, err
	}
	m2mArgs := append([]string{"mirror", "-c", isc, "--cache-dir", filepath.Join(dir, "cache-m2m"),
		"--workspace", "file://" + filepath.Join(dir, "workspace"), "docker://" + m2mReg.Host() + "/mirror"}, set.upstreamArgs...)
	b.underWAN(wan)
	if t.m2m, err = b.trip(ctx, label("mirror-to-mirror"), n, false, set.mixed, m2mArgs...); err != nil {
		return nil, err
	}
	if t.m2dAgain, err = b.trip(ctx, label("mirror-to-disk, no change"), n, true, set.mixed, m2dArgs...); err != nil {
		return nil, err
	}
	if _, t.rerunArchiveBytes, err = chunkBytes(archiveDir); err != nil {
		return nil, fmt.Errorf("%s: %w", label("mirror-to-disk rerun"), err)
	}
	if t.m2mAgain, err = b.trip(ctx, label("mirror-to-mirror, no change"), n, true, set.mixed, m2mArgs...); err != nil {
		return nil, err
	}
	if !wan {
		return t, nil
	}
	// The first mirror-to-disk four times more, each into a new cache and
	// archive: the upstream given by the flag, or as the containers tools
	// are told about it, in the order flag, conf, conf, flag (a machine
	// getting busier or quieter weighs on both alike).
	conf, err := insecureConf(dir, set.wanUpstream)
	if err != nil {
		return nil, err
	}
	for i, byConf := range []bool{false, true, true, false} {
		name := fmt.Sprintf("wan-%d-", i+1)
		args := append([]string{"mirror", "-c", isc, "--cache-dir", filepath.Join(dir, name+"cache"), "file://" + filepath.Join(dir, name+"archive")}, set.upstreamArgs...)
		what, src := "upstream by --src-tls-verify=false", sourceConfig{}
		if byConf {
			what, src = "upstream by registries.conf insecure", sourceConfig{regsConf: conf, noTLSFlag: true}
		}
		r, err := b.tripAs(ctx, label(fmt.Sprintf("mirror-to-disk, %s (%d)", what, i+1)), n, false, set.mixed, src, args...)
		if err != nil {
			return nil, err
		}
		if byConf {
			t.wanConf = append(t.wanConf, r)
		} else {
			t.wanFlag = append(t.wanFlag, r)
		}
	}
	return t, nil
}
