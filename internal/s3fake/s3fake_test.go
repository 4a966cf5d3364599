package s3fake

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/distribution/distribution/v3/registry/storage/driver"
	"github.com/distribution/distribution/v3/registry/storage/driver/factory"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/s3-aws"
)

// TestDriver: distribution's S3 driver reads, writes (in parts), lists and
// deletes in the store with its key pair, and a wrong secret key or
// access key is refused with S3's error codes.
func TestDriver(t *testing.T) {
	s, err := Start("mirror")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	params := func(access, secret string) map[string]any {
		return map[string]any{"region": Region, "regionendpoint": s.Endpoint, "bucket": "mirror", "forcepathstyle": true,
			"accesskey": access, "secretkey": secret, "rootdirectory": "/reg", "chunksize": 5 << 20}
	}
	ctx := context.Background()
	d, err := factory.Create(ctx, "s3aws", params(s.AccessKey, s.SecretKey))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.PutContent(ctx, "/a/b_c-d.e", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	got, err := d.GetContent(ctx, "/a/b_c-d.e")
	if err != nil || string(got) != "hello" {
		t.Fatalf("GetContent: %q, %v", got, err)
	}
	w, err := d.Writer(ctx, "/big", false)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 12<<16) // 12 MiB: three parts
	if _, err := w.Write(big); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := d.GetContent(ctx, "/big"); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("GetContent of the multipart object: %d bytes, %v", len(got), err)
	}
	list, err := d.List(ctx, "/")
	if err != nil || len(list) != 2 {
		t.Fatalf("List: %v, %v", list, err)
	}
	if err := d.Delete(ctx, "/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Stat(ctx, "/a/b_c-d.e"); !errors.As(err, new(driver.PathNotFoundError)) {
		t.Fatalf("Stat after Delete: %v", err)
	}
	for _, p := range []struct{ access, secret, want string }{{s.AccessKey, "wrong", "SignatureDoesNotMatch"}, {"NOBODY", s.SecretKey, "InvalidAccessKeyId"}} {
		bad, err := factory.Create(ctx, "s3aws", params(p.access, p.secret))
		if err != nil {
			t.Fatal(err)
		}
		if err := bad.PutContent(ctx, "/x", []byte("x")); err == nil || !strings.Contains(err.Error(), p.want) {
			t.Errorf("PutContent with %s/%s: %v, want %s", p.access, p.secret, err, p.want)
		}
	}
	if s.Refused.Load() == 0 {
		t.Error("nothing was refused")
	}
}
