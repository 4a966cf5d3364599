package imagebuilder

import (
	"testing"
	"time"
)

func TestTimeFleet(t *testing.T) {
	st := time.Now()
	images, err := Fleet{Count: 40, BaseLayerSize: 200 << 20, UniqueLayerSize: 25 << 20, MultiArchEvery: 10}.Build()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d images, %d MB distinct, in %v", len(images), DistinctBytes(images)>>20, time.Since(st))
}

func TestTimeLayer(t *testing.T) {
	st := time.Now()
	b, err := buildLayer(RandomLayer(1, 512<<20), FormatOCI)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d MB in %v", len(b.Data)>>20, time.Since(st))
}
