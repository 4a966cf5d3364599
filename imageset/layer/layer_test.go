package layer

import (
	"bytes"
	"compress/gzip"
	"io"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// TestDecompress: gzip, zstd and plain streams come back as written, and a
// damaged gzip stream is an error, not short data.
func TestDecompress(t *testing.T) {
	plain := bytes.Repeat([]byte("catalog.json line\n"), 5000)
	var gz, zs bytes.Buffer
	gw := gzip.NewWriter(&gz)
	gw.Write(plain)
	gw.Close()
	zw, err := zstd.NewWriter(&zs)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(plain)
	zw.Close()
	for name, in := range map[string][]byte{"gzip": gz.Bytes(), "zstd": zs.Bytes(), "plain": plain} {
		rc, err := Decompress(bytes.NewReader(in))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, plain) {
			t.Errorf("%s: %d bytes, err %v; want the %d written", name, len(got), err, len(plain))
		}
	}
	damaged := bytes.Clone(gz.Bytes())
	damaged[len(damaged)-6] ^= 0xff // the CRC
	rc, err := Decompress(bytes.NewReader(damaged))
	if err == nil {
		_, err = io.ReadAll(rc)
	}
	if err == nil {
		t.Errorf("a gzip stream with a wrong checksum read without error")
	}
}
