package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
)

// scale is scenario D: the same five trips at n/10 and at n images shaped
// like a real catalog mirror: four fifths small bundle images (4–20 KiB, five
// versions per repository), one fifth operands sharing a base layer, every
// fourth of them a multi-arch index. It prints seconds per 1,000 images,
// requests per image, the peak RSS of each run and how long the
// workspace's records take to load.
func (b *bench) scale(ctx context.Context, n int) error {
	fmt.Printf("\nScenario D, scale: %d and %d images (4/5 bundles of 4–20 KiB, 5 versions per repository; 1/5 operands on a shared 256 KiB base, every 4th multi-arch)\n", n/10, n)
	if b.wan != nil {
		fmt.Println("  (on loopback: -wan applies to scenarios A, B and E only)")
	}
	b.measureRSS = true
	defer func() { b.measureRSS = false }()
	b.printLauncherFloor(ctx)
	var per1000 [2]float64
	for i, count := range []int{n / 10, n} {
		res, err := b.scaleRun(ctx, count)
		if err != nil {
			return err
		}
		per1000[i] = res
	}
	fmt.Printf("  first mirror-to-mirror: %.2f s per 1,000 images at %d, %.2f at %d: %d images took %.1f× the time of %d (linear: 10×)\n",
		per1000[0], n/10, per1000[1], n, n, per1000[1]*10/max(per1000[0], 1e-6), n/10)
	return nil
}

// scaleRun runs the trips over count images and returns the first
// mirror-to-mirror's seconds per 1,000 images.
func (b *bench) scaleRun(ctx context.Context, count int) (float64, error) {
	dir := filepath.Join(b.dir, fmt.Sprintf("scenario-d-%d", count))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	up, err := b.registry(ctx, fmt.Sprintf("d%d-upstream", count))
	if err != nil {
		return 0, err
	}
	bundles := smallImages(count - count/5)
	for i := range bundles {
		bundles[i].size = int64(4+(i*7919)%17) << 10
	}
	start := time.Now()
	built, err := buildSmall(bundles)
	if err != nil {
		return 0, err
	}
	if err := pushSmall(ctx, imagebuilder.Target{URL: up.URL(), Client: up.Client()}, bundles, built); err != nil {
		return 0, err
	}
	fleet := imagebuilder.Fleet{Count: count / 5, Seed: 7, RepoPrefix: "operands/op-", Tag: "v1", BaseLayerSize: 256 << 10, UniqueLayerSize: 8 << 10, MultiArchEvery: 4}
	operands, err := fleet.Build()
	if err != nil {
		return 0, err
	}
	if err := imagebuilder.PushFleet(ctx, imagebuilder.Target{URL: up.URL(), Client: up.Client()}, operands); err != nil {
		return 0, err
	}
	var refs []string
	for _, si := range bundles {
		refs = append(refs, up.Host()+"/"+si.repo+":"+si.tag)
	}
	for _, fi := range operands {
		refs = append(refs, fi.Ref(up.Host()))
	}
	fmt.Printf("  %d images generated and pushed upstream in %.1fs\n", len(refs), time.Since(start).Seconds())
	t, err := b.runTrips(ctx, dir, fmt.Sprintf("D%d", count), len(refs), refs, "") // never under -wan
	if err != nil {
		return 0, err
	}
	fmt.Printf("\n  %-44s %8s %12s %10s %14s %10s\n", fmt.Sprintf("%d images", len(refs)), "seconds", "s per 1,000", "peak RSS", "mirror req/img", "all req/img")
	for _, r := range []tripResult{t.m2d, t.d2m, t.m2m, t.m2dAgain, t.m2mAgain} {
		secs := r.row.took.Seconds()
		fmt.Printf("  %-44s %8.2f %12.2f %10s %14.2f %10.2f\n", r.row.op, secs, secs*1000/float64(len(refs)), humanBytes(r.rss),
			float64(r.sideRequests("mirror"))/float64(len(refs)), float64(r.row.requests)/float64(len(refs)))
	}
	for _, ws := range []string{filepath.Join(dir, "archive", "working-dir"), filepath.Join(dir, "workspace", "working-dir")} {
		took, files, bytes, err := loadRecords(ws)
		if err != nil {
			return 0, err
		}
		fmt.Printf("  workspace records %s: %d JSON files, %s, decoded in %.3fs\n", strings.TrimPrefix(ws, dir+"/"), files, humanBytes(bytes), took.Seconds())
	}
	return t.m2m.row.took.Seconds() * 1000 / float64(len(refs)), nil
}

// loadRecords reads and decodes every JSON record under a workspace, as a
// run starting there does (and more: it needs the latest of each kind).
func loadRecords(dir string) (time.Duration, int, int64, error) {
	start := time.Now()
	var files int
	var bytes int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		files++
		bytes += int64(len(data))
		return nil
	})
	return time.Since(start), files, bytes, err
}
