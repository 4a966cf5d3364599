package catalog

import (
	"os"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/gapmirror/gapmirror/imageset/fbc"
	"github.com/gapmirror/gapmirror/internal/fbctest"
)

// heapPeak samples the live heap every millisecond (runtime/metrics does not
// stop the world) and keeps the highest value seen.
type heapPeak struct {
	stop chan struct{}
	wg   sync.WaitGroup
	peak uint64
}

const heapMetric = "/memory/classes/heap/objects:bytes"

func startHeapPeak() *heapPeak {
	runtime.GC()
	h := &heapPeak{stop: make(chan struct{})}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		sample := []metrics.Sample{{Name: heapMetric}}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > h.peak {
				h.peak = v
			}
			select {
			case <-h.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return h
}

func (h *heapPeak) report(b *testing.B) {
	close(h.stop)
	h.wg.Wait()
	b.ReportMetric(float64(h.peak)/(1<<20), "peak-heap-MiB")
}

// BenchmarkLoadFilterReal loads the 35 real catalogs together and filters
// them twice: to every channel's head, and to version ranges of several packages.
func BenchmarkLoadFilterReal(b *testing.B) {
	fbctest.RealCatalog(b) // skips when absent
	fsys := os.DirFS(fbctest.RealCatalogDir)
	spec := FilterSpec{Packages: []PackageSpec{
		{Name: "project-quay", MinVersion: "3.10.0"},
		{Name: "infinispan", Channels: []ChannelSpec{{Name: "stable", VersionRange: ">=2.4.0, <2.5.0"}}},
		{Name: "rabbitmq-messaging-topology-operator"},
		{Name: "sailoperator"},
	}}
	b.ReportAllocs()
	peak := startHeapPeak()
	for b.Loop() {
		c, err := fbc.LoadFS(fsys, ".")
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := Filter(c, FilterSpec{}); err != nil {
			b.Fatal(err)
		}
		if _, _, err := Filter(c, spec); err != nil {
			b.Fatal(err)
		}
	}
	peak.report(b)
}

// BenchmarkLoadFilterGenerated loads a generated catalog of 20,000 bundles
// (100 packages × 200 bundles, 4 channels each) from its written form and
// filters it to heads, and to version ranges of a third of the packages.
func BenchmarkLoadFilterGenerated(b *testing.B) {
	c, err := Generate(GenSpec{Seed: 1, Packages: 100, Bundles: 200, Channels: 4, Deprecations: true, Others: true, ObjectBytes: 512})
	if err != nil {
		b.Fatal(err)
	}
	fsys := fstest.MapFS{}
	if err := c.WriteFiles(func(name string, data []byte) error {
		fsys[name] = &fstest.MapFile{Data: data}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	var pkgs []PackageSpec
	for i := 0; i < 100; i += 3 {
		pkgs = append(pkgs, PackageSpec{Name: GenPackageName(i), MinVersion: "2.0.0", MaxVersion: "3.5.0"})
	}
	c = nil
	b.ReportAllocs()
	peak := startHeapPeak()
	for b.Loop() {
		c, err := fbc.LoadFS(fsys, ".")
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := Filter(c, FilterSpec{}); err != nil {
			b.Fatal(err)
		}
		if _, _, err := Filter(c, FilterSpec{Packages: pkgs}); err != nil {
			b.Fatal(err)
		}
	}
	peak.report(b)
}
