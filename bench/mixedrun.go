package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/distribution/reference"

	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// mixedScenario is scenario E: the workload (fullMixed, or spec) through
// the five trips, next to a plain copy of the same blob bytes and skopeo
// copying every image, 4 at a time, in the same run.
func (b *bench) mixedScenario(ctx context.Context, spec mixedSpec) error {
	dir := filepath.Join(b.dir, "scenario-e")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	fmt.Printf("\nScenario E, the issue's mixed workload: operator bundle and related images from catalogs, release payloads with their components, additional images\n")
	up, err := b.registry(ctx, "e-upstream")
	if err != nil {
		return err
	}
	start := time.Now()
	m, err := buildMixed(ctx, up, dir, b.catalogs, spec)
	if err != nil {
		return fmt.Errorf("scenario E: %w", err)
	}
	defer m.close()
	fmt.Printf("  catalogs: %s\n", m.source)
	fmt.Printf("  packages: %v\n", m.packages)
	fmt.Printf("  %s\n", m.describe(time.Since(start)))
	isc := filepath.Join(dir, "isc.yaml")
	if err := os.WriteFile(isc, []byte(m.config), 0o644); err != nil {
		return err
	}
	if b.capacity.rate == 0 {
		// Scenario A did not run: measure the floors on this upstream.
		if b.capacity, err = measureCapacity(ctx, up, m.largestRepo, m.largest.Digest, m.largest.Size); err != nil {
			return err
		}
	}
	n := m.want
	// Peak memory is measured on every trip (the launcher, see measure).
	b.measureRSS = true
	defer func() { b.measureRSS = false }()
	b.printLauncherFloor(ctx)
	set := tripSet{isc: isc, upstreamArgs: m.flags, mixed: true}
	if b.wan != nil {
		set.wanUpstream = up.Host()
	}
	t, err := b.runTripSet(ctx, dir, "E", n, set)
	if err != nil {
		return err
	}
	if b.wan == nil {
		if err := b.verifyMirror(ctx, dir, t.d2m); err != nil {
			return err
		}
	}
	// Under the WAN, the single-request upload and CDN rows (which measure
	// the mirror side, and a CDN on loopback) are left out.
	var single trips
	if b.wan == nil {
		if single, err = b.singlePostTrips(ctx, dir, n, isc, m.flags); err != nil {
			return err
		}
	}

	// Baselines: the blob files of the upstream registry copied (what
	// mirror-to-disk fetches and writes), and skopeo copying every image
	// gapmirror copies (the catalog as it is upstream; not the graph image,
	// which gapmirror builds), 4 at a time, then again with all there.
	var copies []time.Duration
	var plainBytes int64
	for i := range 3 {
		took, nb, err := plainCopy(filepath.Join(b.dir, "registries", "e-upstream", "docker", "registry", "v2", "blobs"), filepath.Join(dir, fmt.Sprintf("plain-copy-%d", i)), false)
		if err != nil {
			return err
		}
		copies, plainBytes = append(copies, took), nb
		if err := os.RemoveAll(filepath.Join(dir, fmt.Sprintf("plain-copy-%d", i))); err != nil {
			return err
		}
	}
	slices.Sort(copies)
	plain := &row{op: "plain copy of the blob files (io.Copy, no fsync)", took: copies[1], bytes: plainBytes}
	fmt.Printf("  %-52s %7.2fs  %s, median of 3\n", plain.op, plain.took.Seconds(), humanBytes(plainBytes))
	var skopeo, skopeoAgain *row
	var skopeoWAN []tripResult // under -wan: skopeo's runs through the WAN
	if b.skopeo != "" {
		reg, err := b.registry(ctx, "e-skopeo")
		if err != nil {
			return err
		}
		src, dst, err := skopeoPairs(m.refs, reg.Host())
		if err != nil {
			return err
		}
		for i, op := range []string{"skopeo copy --all, 4 at a time", "skopeo copy --all, 4 at a time, again (all there)"} {
			if b.wan != nil {
				// The same upstream as gapmirror's, through the same WAN.
				op += ", under the WAN"
				b.underWAN(true)
				b.wan.Take()
			}
			before := b.requests.Load()
			took, err := b.skopeoCopy(ctx, "E "+op, src, dst, 4)
			b.underWAN(false)
			if err != nil {
				return err
			}
			r := &row{op: op, took: took, requests: b.requests.Load() - before}
			fmt.Printf("  %-52s %7.2fs  %d images, %.2f requests per image (both registries)\n", op, took.Seconds(), len(src), float64(r.requests)/float64(len(src)))
			if b.wan != nil {
				w := b.wan.Take()
				res := tripResult{row: *r, wan: &w, parallel: 4}
				fmt.Printf("      %s\n", strings.Replace(b.wanLines(res), "--parallel-images", "at a time", 1))
				skopeoWAN = append(skopeoWAN, res)
			}
			if i == 0 {
				skopeo = r
			} else {
				skopeoAgain = r
			}
		}
	}

	var oc *ocTrips
	if b.ocMirrorBin != "" {
		r, err := b.ocMirrorTrips(ctx, dir, m, isc)
		if err != nil {
			return err
		}
		oc = &r
	}

	var cdn cdnTrips
	if b.wan == nil {
		if cdn, err = b.cdnTrips(ctx, dir, n, isc, m.flags, m.refs); err != nil {
			return err
		}
	}

	fmt.Println()
	fmt.Printf("  %-50s %11s  %-32s %10s %7s %15s %9s\n", fmt.Sprintf("E: %d images, %d blobs, %s", n, m.blobs, humanBytes(m.bytes)),
		"gapmirror s", "baseline", "baseline s", "ratio", "req/img mirror", "upstream")
	perImage := func(r tripResult, side string) string {
		v := r.sideRequests(side)
		if v == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", float64(v)/float64(n))
	}
	for _, l := range []struct {
		what     string
		r        tripResult
		baseName string
		base     *row
	}{
		{"mirror-to-disk", t.m2d, "plain copy of the blob files", plain},
		{"disk-to-mirror", t.d2m, "skopeo, 4 at a time", skopeo},
		{"mirror-to-mirror", t.m2m, "skopeo, 4 at a time", skopeo},
		{fmt.Sprintf("mirror-to-disk, no change (archive %s)", humanBytes(t.rerunArchiveBytes)), t.m2dAgain, "", nil},
		{"mirror-to-mirror, no change", t.m2mAgain, "skopeo, 4 at a time, all there", skopeoAgain},
	} {
		baseName, baseSecs, ratio := "-", "-", "-"
		if l.base != nil {
			baseName, baseSecs = l.baseName, fmt.Sprintf("%.2f", l.base.took.Seconds())
			ratio = fmt.Sprintf("%.2f", l.r.row.took.Seconds()/max(l.base.took.Seconds(), 1e-6))
		}
		fmt.Printf("  %-50s %11.2f  %-32s %10s %7s %15s %9s\n", l.what, l.r.row.took.Seconds(), baseName, baseSecs, ratio, perImage(l.r, "mirror"), perImage(l.r, "upstream"))
	}
	if b.wan == nil {
		for _, l := range []struct {
			what string
			r    tripResult
		}{{"disk-to-mirror, single-request uploads", single.d2m}, {"mirror-to-mirror, single-request uploads", single.m2m},
			{"mirror-to-disk, CDN-backed upstream", cdn.m2d}} {
			fmt.Printf("  %-50s %11.2f  %-32s %10s %7s %15s %9s\n", l.what, l.r.row.took.Seconds(), "-", "-", "-", perImage(l.r, "mirror"), perImage(l.r, "upstream"))
		}
		baseName, baseSecs, ratio := "-", "-", "-"
		if cdn.skopeo != nil {
			baseName, baseSecs = "skopeo, 4 at a time, same upstream", fmt.Sprintf("%.2f", cdn.skopeo.took.Seconds())
			ratio = fmt.Sprintf("%.2f", cdn.m2m.row.took.Seconds()/max(cdn.skopeo.took.Seconds(), 1e-6))
		}
		fmt.Printf("  %-50s %11.2f  %-32s %10s %7s %15s %9s\n", "mirror-to-mirror, CDN-backed upstream", cdn.m2m.row.took.Seconds(), baseName, baseSecs, ratio, perImage(cdn.m2m, "mirror"), perImage(cdn.m2m, "upstream"))
		fmt.Println("  single-request uploads: into a registry that stores a blob from one POST ?digest= with its body, as the OCI")
		fmt.Println("  distribution spec allows (distribution itself opens a session for a PUT: two requests per blob).")
		fmt.Println("  CDN-backed upstream: the same upstream storage served by a registry that answers blob GETs with a redirect to a")
		fmt.Printf("  file server, as quay.io and registry.redhat.io redirect to their CDNs; upstream req/img counts the registry's\n")
		fmt.Printf("  requests, the file server served %.2f more per image (mirror-to-disk) and %.2f (mirror-to-mirror).\n",
			float64(cdn.m2dCDN)/float64(n), float64(cdn.m2mCDN)/float64(n))
	} else {
		fmt.Printf("  under -wan %s: mirror-to-disk, mirror-to-mirror, their no-change reruns and skopeo read upstream through the WAN;\n", b.wanSpec)
		fmt.Println("  disk-to-mirror and the plain copy do not read it (the plain copy's ratio compares a WAN trip with a local copy).")
		fmt.Println("  The update service and signature store are servers of their own, not behind the WAN.")
	}
	if oc != nil {
		printOCMirror(t, oc, n)
	}
	fmt.Println()
	printFloors(b.capacity, m.bytes, t)
	fmt.Println()
	b.printWAN(t, skopeoWAN...)
	fmt.Println()
	fmt.Printf("  archive of the first mirror-to-disk: %d chunk(s), %s; of the no-change rerun: %s\n", t.chunks, humanBytes(t.archiveBytes), humanBytes(t.rerunArchiveBytes))
	for _, r := range []tripResult{t.m2d, t.d2m, t.m2m, t.m2dAgain, t.m2mAgain} {
		fmt.Printf("  %-44s %d images: %d copied, %d already there, %d built by gapmirror; CPU gapmirror %.2fs, registries %.2fs\n",
			r.row.op+":", r.counts.images, r.counts.copied, r.counts.there, r.counts.built, r.cpu.Seconds(), r.registryCPU.Seconds())
	}
	if b.skopeo == "" {
		fmt.Println("  skopeo is not installed: the skopeo baselines were skipped")
	}
	fmt.Println("  ratio = gapmirror's seconds ÷ the baseline's, both measured in this run (lower is faster). req/img = requests the registry of")
	fmt.Println("  that side served during the run ÷ images (the update service and signature store are not registries and are not counted).")
	fmt.Println("  skopeo copies each image once (release components shared by payloads once), the catalog as it is upstream, not the graph image.")
	return nil
}

// cdnTrips is trips of a first mirror-to-disk and mirror-to-mirror with the
// upstream restarted (same address, same storage) as a registry behind a
// CDN: blob GETs answered 307 to a file server (registrytest.BlobCDN), as
// quay.io and registry.redhat.io answer them. Run last: the upstream stays
// that way.
type cdnTrips struct {
	m2d, m2m       tripResult
	m2dCDN, m2mCDN int64 // requests the file server served in each
	skopeo         *row  // skopeo copying every image from it, 4 at a time (nil without skopeo)
}

func (b *bench) cdnTrips(ctx context.Context, dir string, n int, isc string, upstreamArgs, refs []string) (t cdnTrips, err error) {
	old := b.registries["e-upstream"]
	if old == nil {
		return t, fmt.Errorf("CDN-backed upstream: no upstream to restart")
	}
	addr := old.Host()
	if err := old.Close(); err != nil {
		return t, fmt.Errorf("CDN-backed upstream: closing the upstream: %w", err)
	}
	delete(b.registries, "e-upstream")
	up, err := b.startRegistry(ctx, "e-upstream", registrytest.Options{Addr: addr, BlobCDN: true}, nil)
	if err != nil {
		return t, fmt.Errorf("CDN-backed upstream: %w", err)
	}
	before := up.CDNRequests()
	args := append([]string{"mirror", "-c", isc, "--cache-dir", filepath.Join(dir, "cache-cdn"), "file://" + filepath.Join(dir, "archive-cdn")}, upstreamArgs...)
	if t.m2d, err = b.trip(ctx, "E mirror-to-disk, CDN-backed upstream", n, false, true, args...); err != nil {
		return t, err
	}
	t.m2dCDN = up.CDNRequests() - before
	m2m, err := b.registry(ctx, "e-m2m-cdn")
	if err != nil {
		return t, err
	}
	before = up.CDNRequests()
	args = append([]string{"mirror", "-c", isc, "--cache-dir", filepath.Join(dir, "cache-m2m-cdn"),
		"--workspace", "file://" + filepath.Join(dir, "workspace-cdn"), "docker://" + m2m.Host() + "/mirror"}, upstreamArgs...)
	if t.m2m, err = b.trip(ctx, "E mirror-to-mirror, CDN-backed upstream", n, false, true, args...); err != nil {
		return t, err
	}
	t.m2mCDN = up.CDNRequests() - before
	if b.skopeo != "" {
		reg, err := b.registry(ctx, "e-skopeo-cdn")
		if err != nil {
			return t, err
		}
		src, dst, err := skopeoPairs(refs, reg.Host())
		if err != nil {
			return t, err
		}
		op := "skopeo copy --all, 4 at a time, CDN-backed upstream"
		took, err := b.skopeoCopy(ctx, "E "+op, src, dst, 4)
		if err != nil {
			return t, err
		}
		t.skopeo = &row{op: op, took: took}
		fmt.Printf("  %-52s %7.2fs  %d images\n", op, took.Seconds(), len(src))
	}
	return t, nil
}

// singlePostTrips pushes the archive of runTripSet and mirrors the set
// again, each into a fresh registry that takes the spec's single-request
// upload (registrytest.SinglePost): the requests per image where the
// registry allows one request per new blob.
func (b *bench) singlePostTrips(ctx context.Context, dir string, n int, isc string, upstreamArgs []string) (t trips, err error) {
	d2m, err := b.registryBehind(ctx, "e-d2m-single", (&registrytest.SinglePost{}).Wrap)
	if err != nil {
		return t, err
	}
	// The first archive alone (the directory holds the no-change rerun's
	// too by now, which disk-to-mirror would apply after it).
	first := filepath.Join(dir, "archive-first")
	if err := os.MkdirAll(first, 0o755); err != nil {
		return t, err
	}
	chunks, err := filepath.Glob(filepath.Join(dir, "archive", "mirror_[0-9][0-9][0-9][0-9][0-9][0-9].tar"))
	if err != nil || len(chunks) == 0 {
		return t, fmt.Errorf("single-request uploads: no chunks of the first archive in %s", filepath.Join(dir, "archive"))
	}
	for _, c := range chunks {
		if err := os.Link(c, filepath.Join(first, filepath.Base(c))); err != nil {
			return t, err
		}
	}
	if t.d2m, err = b.trip(ctx, "E disk-to-mirror, single-request uploads", n, false, true, "mirror", "-c", isc, "--cache-dir", filepath.Join(dir, "cache-airgap-single"),
		"--from", "file://"+first, "docker://"+d2m.Host()+"/mirror"); err != nil {
		return t, err
	}
	m2m, err := b.registryBehind(ctx, "e-m2m-single", (&registrytest.SinglePost{}).Wrap)
	if err != nil {
		return t, err
	}
	args := append([]string{"mirror", "-c", isc, "--cache-dir", filepath.Join(dir, "cache-m2m-single"),
		"--workspace", "file://" + filepath.Join(dir, "workspace-single"), "docker://" + m2m.Host() + "/mirror"}, upstreamArgs...)
	t.m2m, err = b.trip(ctx, "E mirror-to-mirror, single-request uploads", n, false, true, args...)
	return t, err
}

// skopeoPairs are the docker:// sources and destinations on host of every
// reference: the repository path kept under mirror/, an image named by
// digest tagged sha256-<hex> as gapmirror tags it.
func skopeoPairs(refs []string, host string) (src, dst []string, err error) {
	for _, ref := range refs {
		named, err := reference.ParseNormalizedNamed(ref)
		if err != nil {
			return nil, nil, fmt.Errorf("skopeo baseline: %s: %w", ref, err)
		}
		tag := "latest"
		switch v := named.(type) {
		case reference.Canonical:
			tag = v.Digest().Algorithm().String() + "-" + v.Digest().Encoded()
		case reference.NamedTagged:
			tag = v.Tag()
		}
		src = append(src, "docker://"+ref)
		dst = append(dst, "docker://"+host+"/mirror/"+reference.Path(named)+":"+tag)
	}
	return src, dst, nil
}
