package transfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/types"

	"github.com/gapmirror/gapmirror/failure"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
	"github.com/gapmirror/gapmirror/ocistore"
)

func testOptions(t *testing.T) RegistryOptions {
	conf, auth := registrytest.ClientFiles(t)
	return RegistryOptions{TLSVerify: types.OptionalBoolFalse, RegistriesConf: conf, AuthFile: auth}
}

// TestSharedLayerIsMounted: a base layer shared by ten images in ten
// repositories is uploaded once; the other nine get it by cross-repository
// mount through the run's shared client for the mirror (see HasBlob).
func TestSharedLayerIsMounted(t *testing.T) {
	up := registrytest.Start(t, registrytest.Options{})
	dst := registrytest.Start(t, registrytest.Options{})
	u := registrytest.NewUploads()
	dst.SetWrap(u.Wrap)
	base := imagebuilder.RandomLayer(1, 64<<10)
	set := &imageset.Set{}
	var baseDigest digest.Digest
	for i := 0; i < 10; i++ {
		img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{base, imagebuilder.RandomLayer(uint64(10+i), 8<<10)}})
		if err != nil {
			t.Fatal(err)
		}
		baseDigest = img.Layers[0].Descriptor().Digest
		repo := fmt.Sprintf("ns/app-%d", i)
		if err := imagebuilder.Push(context.Background(), imagebuilder.Target{URL: up.URL()}, repo, "v1", img); err != nil {
			t.Fatal(err)
		}
		set.Images = append(set.Images, imageset.Image{Source: up.Host() + "/" + repo + "@" + img.Digest.String(), Origin: up.Host() + "/" + repo + ":v1",
			Digest: img.Digest.String(), Destination: repo + ":v1", Kind: imageset.KindAdditional})
	}
	src := NewUpstream(testOptions(t))
	mir, err := NewMirror(dst.Host()+"/m", testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	res := Copy(context.Background(), set, src, mir, Options{ParallelImages: 4})
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if n := u.Put(baseDigest); n != 1 {
		t.Errorf("shared base layer uploaded %d times, want once", n)
	}
	if n := u.Mounted(baseDigest); n != 9 {
		t.Errorf("shared base layer mounted %d times, want 9", n)
	}
	if d, n := u.MaxPut(); n > 1 {
		t.Errorf("blob %s uploaded %d times", d, n)
	}
}

// TestVerifyingReader: short, long and corrupt streams fail before EOF is
// reported, so a destination never commits them.
func TestVerifyingReader(t *testing.T) {
	good := bytes.Repeat([]byte("x"), 10000)
	desc := descOf(good)
	for _, c := range []struct {
		name string
		data []byte
		ok   bool
	}{
		{"good", good, true},
		{"short", good[:9999], false},
		{"long", append(append([]byte{}, good...), 'y'), false},
		{"corrupt", append([]byte("y"), good[1:]...), false},
	} {
		vr := &verifyingReader{r: bytes.NewReader(c.data), desc: desc, v: desc.Digest.Verifier(), progress: nopProgress{}}
		_, err := io.Copy(io.Discard, vr)
		if (err == nil) != c.ok {
			t.Errorf("%s: err = %v", c.name, err)
		}
	}
}

func TestTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{docker.UnexpectedHTTPStatusError{StatusCode: 503}, true},
		{docker.UnexpectedHTTPStatusError{StatusCode: 429}, true},
		{docker.UnexpectedHTTPStatusError{StatusCode: 404}, false},
		{docker.UnexpectedHTTPStatusError{StatusCode: 401}, false},
		{fmt.Errorf("reading blob: %w", syscall.ECONNRESET), true},
		{fmt.Errorf("x: %w", io.ErrUnexpectedEOF), true},
		{&failure.DigestError{Digest: "sha256:00", Msg: "bad"}, true},
		{context.Canceled, false},
		{errors.New("manifest unknown"), false},
		{errors.New("read: connection reset by peer"), true},
	} {
		if got := failure.Transient(c.err); got != c.want {
			t.Errorf("Transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func descOf(b []byte) ocispec.Descriptor {
	return ocispec.Descriptor{Digest: digest.FromBytes(b), Size: int64(len(b))}
}

// TestSharedBlobSurvivesOtherImageFailure: image A transfers a blob that B
// also needs, then fails on a blob of its own, which cancels A's transfers.
// B, waiting on the shared blob, must transfer it itself rather than fail
// with A's cancellation. In a planned copy, where the shared blob's
// transfer belongs to no image's turn, B gets it all the same.
func TestSharedBlobSurvivesOtherImageFailure(t *testing.T) {
	t.Run("Copy", func(t *testing.T) { sharedBlobSurvivesOtherImageFailure(t, Copy) })
	t.Run("copyPlanned", func(t *testing.T) { sharedBlobSurvivesOtherImageFailure(t, CopyPlanned) })
}

func sharedBlobSurvivesOtherImageFailure(t *testing.T, copyAll func(context.Context, *imageset.Set, Source, Destination, Options) *Result) {
	up := registrytest.Start(t, registrytest.Options{})
	base := imagebuilder.RandomLayer(1, 256<<10)
	a, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{base, imagebuilder.RandomLayer(2, 8<<10)}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{base, imagebuilder.RandomLayer(3, 8<<10)}})
	if err != nil {
		t.Fatal(err)
	}
	set := &imageset.Set{}
	for name, img := range map[string]*imagebuilder.Image{"a": a, "b": b} {
		if err := imagebuilder.Push(context.Background(), imagebuilder.Target{URL: up.URL()}, "ns/"+name, "v1", img); err != nil {
			t.Fatal(err)
		}
		set.Images = append(set.Images, imageset.Image{Source: up.Host() + "/ns/" + name + "@" + img.Digest.String(), Origin: up.Host() + "/ns/" + name + ":v1",
			Digest: img.Digest.String(), Destination: "ns/" + name + ":v1", Kind: imageset.KindAdditional})
	}
	baseDigest := a.Layers[0].Descriptor().Digest.String()
	broken := a.Layers[1].Descriptor().Digest.String()
	up.SetWrap(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case strings.HasSuffix(r.URL.Path, "/blobs/"+broken):
				time.Sleep(100 * time.Millisecond) // A holds the shared blob by now
				http.Error(w, `{"errors":[{"code":"BLOB_UNKNOWN","message":"blob unknown"}]}`, http.StatusNotFound)
				return
			case strings.HasPrefix(r.URL.Path, "/v2/ns/b/"):
				time.Sleep(50 * time.Millisecond) // let A start first
			case strings.HasSuffix(r.URL.Path, "/blobs/"+baseDigest) && r.Method == http.MethodGet:
				time.Sleep(400 * time.Millisecond) // still running when A fails
			}
			next.ServeHTTP(w, r)
		})
	})
	store, err := ocistore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := NewUpstream(testOptions(t))
	defer src.Close()
	res := copyAll(context.Background(), set, src, StoreDestination(store), Options{ParallelImages: 2, Retries: -1})
	if len(res.Failed) != 1 || res.Failed[0].Image.Destination != "ns/a:v1" {
		t.Fatalf("failed = %v, want only ns/a:v1", res.Failed)
	}
	if len(res.Copied) != 1 || res.Copied[0].Destination != "ns/b:v1" {
		t.Fatalf("copied = %v, want ns/b:v1", res.Copied)
	}
	if !store.Has(digest.Digest(baseDigest)) {
		t.Error("shared blob missing from the store")
	}
}

// TestInstances: the instances a copy takes of an index, by platform.
func TestInstances(t *testing.T) {
	d := digest.FromString("index")
	kids := []ocispec.Descriptor{
		{Digest: digest.FromString("a"), Platform: &ocispec.Platform{OS: "linux", Architecture: "amd64"}},
		{Digest: digest.FromString("b"), Platform: &ocispec.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}},
		{Digest: digest.FromString("c"), Platform: &ocispec.Platform{OS: "unknown", Architecture: "unknown"}},
	}
	for _, c := range []struct {
		platforms []string
		want      int
		err       string
	}{
		{nil, 3, ""},
		{[]string{"linux/arm64"}, 1, ""},
		{[]string{"linux/amd64", "linux/arm64"}, 2, ""},
		{[]string{"linux/s390x"}, 0, "has none of the platforms linux/s390x (it has linux/amd64, linux/arm64)"},
	} {
		got, err := instances(imageset.Image{Platforms: c.platforms}, d, kids)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: error %v, want %q", c.platforms, err, c.err)
			}
			continue
		}
		if err != nil || len(got) != c.want {
			t.Errorf("%v: %d instances (%v), want %d", c.platforms, len(got), err, c.want)
		}
	}
}

// TestBlobTallyAdd: adding two tallies sums every count (a field added to
// BlobTally and left out of Add fails here) and keeps Known only when both
// were known.
func TestBlobTallyAdd(t *testing.T) {
	var a, b BlobTally
	va, vb := reflect.ValueOf(&a).Elem(), reflect.ValueOf(&b).Elem()
	for i := range va.NumField() {
		switch va.Field(i).Kind() {
		case reflect.Int, reflect.Int64:
			va.Field(i).SetInt(int64(i + 1))
			vb.Field(i).SetInt(int64(100 * (i + 1)))
		case reflect.Bool:
			va.Field(i).SetBool(true)
			vb.Field(i).SetBool(false)
		default:
			t.Fatalf("BlobTally.%s is a %s: teach Add and this test how to sum it", va.Type().Field(i).Name, va.Field(i).Kind())
		}
	}
	sum := a
	sum.Add(b)
	vs := reflect.ValueOf(sum)
	for i := range vs.NumField() {
		name := vs.Type().Field(i).Name
		switch vs.Field(i).Kind() {
		case reflect.Int, reflect.Int64:
			if got, want := vs.Field(i).Int(), int64(101*(i+1)); got != want {
				t.Errorf("%s: %d, want %d", name, got, want)
			}
		case reflect.Bool:
			if vs.Field(i).Bool() {
				t.Errorf("%s: known after adding an unknown tally", name)
			}
		}
	}
}
