package archive

import (
	"fmt"
	"os"
	"testing"
)

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		err  string
	}{
		{"4GiB", 4 * giB, ""},
		{"500MiB", 500 * miB, ""},
		{"1.5GiB", 3 * giB / 2, ""},
		{"100MB", 100_000_000, ""},
		{"123", 123 * giB, ""},
		{"0.5", giB / 2, ""},
		{"2 TiB", 2 * tiB, ""},
		{"10gb", 10_000_000_000, ""},
		{"64Ki", 64 * kiB, ""},
		{"4G", 4 * giB, ""},
		{"  8MiB ", 8 * miB, ""},
		{"4096B", 4096, ""},
		{"", 0, "expected a number"},
		{"GiB", 0, "expected a number"},
		{"4XB", 0, "unknown unit"},
		{"1.2.3GiB", 0, "is not a number"},
		{"0", 0, "at least 1 byte"},
		{"-1GiB", 0, "expected a number"},
		{"99999999999TiB", 0, "too large"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseSize(tc.in)
			if tc.err != "" {
				wantErr(t, err, tc.err, fmt.Sprintf("%q", tc.in))
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestHumanSize(t *testing.T) {
	cases := map[int64]string{0: "0 B", 511: "511 B", kiB: "1 KiB", 1536: "1.5 KiB", 4 * giB: "4 GiB", 5*giB + giB/5: "5.2 GiB"}
	for in, want := range cases {
		if got := humanSize(in); got != want {
			t.Errorf("humanSize(%d) = %q, want %q", in, got, want)
		}
	}
	recs := map[int64]string{1000: "1MiB", 600 * miB: "600MiB", giB + 1: "2GiB", 5*giB + 5: "6GiB"}
	for in, want := range recs {
		if got := recommendedSize(in); got != want {
			t.Errorf("recommendedSize(%d) = %q, want %q", in, got, want)
		}
	}
}

// BenchmarkOpen10000Blobs measures Open (index parse + header scan) of an
// archive of 10,000 small blobs in 4 MiB chunks.
func BenchmarkOpen10000Blobs(b *testing.B) {
	sizes := make([]int, 10000)
	for i := range sizes {
		sizes[i] = 64 + i%900
	}
	store, blobs := newStore(99, sizes...)
	dir := b.TempDir()
	writeArchive(b, dir, testIndex("bench", blobs), store, 4*miB)
	files := chunkFiles(b, dir)
	b.ReportMetric(float64(len(files)), "chunks")
	for b.Loop() {
		r, err := Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		if len(r.blobs) != len(blobs) {
			b.Fatalf("found %d blobs", len(r.blobs))
		}
	}
	_ = os.RemoveAll(dir)
}
