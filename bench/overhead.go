package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
)

// smallImage is one image of scenario B.
type smallImage struct {
	repo, tag string
	size      int64
}

// smallImages are n single-layer images of 20–100 KiB, five versions per
// repository, like the bundle images of operator catalogs.
func smallImages(n int) []smallImage {
	out := make([]smallImage, n)
	for i := range out {
		out[i] = smallImage{
			repo: fmt.Sprintf("bundles/operator-%03d-bundle", i/5),
			tag:  fmt.Sprintf("v1.%d.0", i%5),
			size: int64(20+(i*7919)%81) << 10,
		}
	}
	return out
}

// buildSmall builds the images (a few MiB in all, held in memory).
func buildSmall(images []smallImage) ([]*imagebuilder.Image, error) {
	built := make([]*imagebuilder.Image, len(images))
	for i, si := range images {
		img, err := imagebuilder.Build(imagebuilder.ImageSpec{
			Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(hashString(si.repo+":"+si.tag), si.size)},
			Labels: map[string]string{"operators.operatorframework.io.bundle.package.v1": si.repo},
		})
		if err != nil {
			return nil, fmt.Errorf("building %s:%s: %w", si.repo, si.tag, err)
		}
		built[i] = img
	}
	return built, nil
}

// pushSmall pushes the built images to target, four at a time, with the
// generator's bare HTTP pusher (no retries, no checks beyond the digests).
func pushSmall(ctx context.Context, target imagebuilder.Target, images []smallImage, built []*imagebuilder.Image) error {
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	work := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := imagebuilder.Push(ctx, target, images[i].repo, images[i].tag, built[i]); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("pushing %s:%s: %w", images[i].repo, images[i].tag, err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range images {
		if ctx.Err() != nil {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// hashString is FNV-1a of s.
func hashString(s string) uint64 {
	var h uint64 = 14695981039346656037
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// overhead is scenario B: n small images, where the cost is per image
// (resolving, HEADs, manifests, records) rather than per byte.
func (b *bench) overhead(ctx context.Context, n int) error {
	dir := filepath.Join(b.dir, "scenario-b")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	fmt.Printf("\nScenario B, per-image overhead: %d images of 20–100 KiB (one layer each, like operator bundles)\n", n)
	up, err := b.registry(ctx, "b-upstream")
	if err != nil {
		return err
	}
	images := smallImages(n)
	built, err := buildSmall(images)
	if err != nil {
		return err
	}
	var bytes int64
	for _, img := range built {
		for _, b := range img.Blobs() {
			bytes += b.Descriptor().Size
		}
	}
	before, start := b.requests.Load(), time.Now()
	if err := pushSmall(ctx, imagebuilder.Target{URL: up.URL(), Client: up.Client()}, images, built); err != nil {
		return err
	}
	bare, bareRequests := time.Since(start), b.requests.Load()-before
	fmt.Printf("  %s of blobs pushed upstream in %.1fs by the generator's bare HTTP pusher, 4 at a time\n", humanBytes(bytes), bare.Seconds())

	var refs []string
	for _, si := range images {
		refs = append(refs, up.Host()+"/"+si.repo+":"+si.tag)
	}
	t, err := b.runTrips(ctx, dir, "B", n, refs, up.Host())
	if err != nil {
		return err
	}
	m2d, d2m, m2m, m2dAgain, m2mAgain := t.m2d, t.d2m, t.m2m, t.m2dAgain, t.m2mAgain
	archiveBytes, rerunArchiveBytes := t.archiveBytes, t.rerunArchiveBytes

	rows := []row{m2d.row, d2m.row, m2m.row, m2dAgain.row, m2mAgain.row,
		{op: "bare HTTP push of the same images, 4 at a time", took: bare, requests: bareRequests}}
	// skopeo starts a process per image: a sample is enough to know its
	// per-image cost, and keeps the run short.
	if b.skopeo != "" {
		sample := min(n, 50)
		reg, err := b.registry(ctx, "b-skopeo")
		if err != nil {
			return err
		}
		var src, dst []string
		for _, si := range images[:sample] {
			src = append(src, "docker://"+up.Host()+"/"+si.repo+":"+si.tag)
			dst = append(dst, "docker://"+reg.Host()+"/mirror/"+si.repo+":"+si.tag)
		}
		before := b.requests.Load()
		took, err := b.skopeoCopy(ctx, "B skopeo copy", src, dst, 4)
		if err != nil {
			return err
		}
		requests := (b.requests.Load() - before) * int64(n) / int64(sample)
		perImage := took / time.Duration(sample)
		op := fmt.Sprintf("skopeo copy --all, 4 at a time (%d timed, scaled)", sample)
		fmt.Printf("  %-52s %7.2fs  for %d images\n", op, took.Seconds(), sample)
		rows = append(rows, row{op: op, took: perImage * time.Duration(n), requests: requests})
	}

	fmt.Println()
	fmt.Printf("  %-52s %8s %9s %17s %15s\n", "operation", "seconds", "images/s", "s per 100 images", "requests/image")
	for _, r := range rows {
		secs := r.took.Seconds()
		fmt.Printf("  %-52s %8.2f %9.1f %17.2f %15.1f\n", r.op, secs, float64(n)/secs, secs*100/float64(n), float64(r.requests)/float64(n))
	}
	fmt.Println()
	if b.capacity.rate > 0 {
		printFloors(b.capacity, bytes, t)
		fmt.Println()
	}
	if b.wan != nil {
		b.printWAN(t)
		fmt.Println()
	}
	// Weekly reruns are the common case: their cost next to the first run.
	for _, p := range []struct {
		what         string
		first, again time.Duration
	}{{"mirror-to-disk", m2d.row.took, m2dAgain.row.took}, {"mirror-to-mirror", m2m.row.took, m2mAgain.row.took}} {
		fmt.Printf("  no-change rerun, %-16s %6.2fs for %d images = %.3f× the first run (%.2fs), %.2fs per 100 images\n",
			p.what+":", p.again.Seconds(), n, p.again.Seconds()/max(p.first.Seconds(), 0.001), p.first.Seconds(), p.again.Seconds()*100/float64(n))
	}
	fmt.Printf("  archive of the first mirror-to-disk: %s; of the no-change rerun: %d bytes (%s)\n",
		humanBytes(archiveBytes), rerunArchiveBytes, humanBytes(rerunArchiveBytes))
	fmt.Println("  the skopeo row is the time of the timed images scaled to all of them.")
	fmt.Println("  requests/image counts the HTTP requests both registries served (upstream and mirror).")
	return nil
}
