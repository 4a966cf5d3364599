package audit

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/types"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
	"github.com/gapmirror/gapmirror/transfer"
	"github.com/gapmirror/gapmirror/workspace"
)

// TestSharedMissingBlob: two images of a repository share a blob that is
// gone from the mirror. It is asked about once, and both images are found
// incomplete (the second was taken whole because the first had asked), so
// that what names either (a rebuilt catalog) is reported too.
func TestSharedMissingBlob(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	ctx := context.Background()
	shared := imagebuilder.RandomLayer(7, 8<<10)
	set := &imageset.Set{}
	var gone string
	for i, tag := range []string{"v1", "v2", "v3"} {
		layers := []imagebuilder.LayerSpec{imagebuilder.RandomLayer(uint64(20+i), 4<<10)}
		if tag != "v3" {
			layers = append(layers, shared)
		}
		img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: layers})
		if err != nil {
			t.Fatal(err)
		}
		if err := imagebuilder.Push(ctx, imagebuilder.Target{URL: reg.URL()}, "m/apps/app", tag, img); err != nil {
			t.Fatal(err)
		}
		if tag == "v1" {
			gone = img.Layers[1].Descriptor().Digest.String()
		}
		set.Images = append(set.Images, imageset.Image{Source: "upstream.example/apps/app:" + tag, Origin: "upstream.example/apps/app:" + tag,
			Digest: img.Digest.String(), Destination: "apps/app:" + tag, Kind: imageset.KindAdditional})
	}
	if err := reg.DeleteBlob("m/apps/app", digest.Digest(gone)); err != nil {
		t.Fatal(err)
	}
	conf, auth := registrytest.ClientFiles(t)
	mir, err := transfer.NewMirror(reg.Host()+"/m", transfer.RegistryOptions{TLSVerify: types.OptionalBoolFalse, RegistriesConf: conf, AuthFile: auth})
	if err != nil {
		t.Fatal(err)
	}
	a := &Audit{Mirror: mir, Expected: &Expected{Mode: "mirror-to-mirror", Workspace: t.TempDir(), Plan: &workspace.Plan{Set: set}}, ParallelImages: 1}
	rep, err := a.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a.found["apps/app:v1"] || a.found["apps/app:v2"] || !a.found["apps/app:v3"] {
		t.Errorf("found whole: %v; want v3 only (v1 and v2 share the missing blob)", a.found)
	}
	if rep.ok() || a.counts.Blobs != 7 {
		t.Errorf("report ok %v, %d blobs asked about (want 7: the shared one once), problems %+v", rep.ok(), a.counts.Blobs, rep.Groups)
	}
}

// TestDeepReadsNoMoreThanTheSize: with Deep, a blob whose body goes on
// past its size (here without end) is read one byte past it and reported
// damaged, not read until the registry stops.
func TestDeepReadsNoMoreThanTheSize(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(9, 4<<10)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := imagebuilder.Push(ctx, imagebuilder.Target{URL: reg.URL()}, "m/apps/app", "v1", img); err != nil {
		t.Fatal(err)
	}
	layer := img.Layers[0].Descriptor().Digest.String()
	reg.SetWrap(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/blobs/"+layer) {
				next.ServeHTTP(w, r)
				return
			}
			w.WriteHeader(http.StatusOK) // no Content-Length: chunked
			zeros := make([]byte, 32<<10)
			for r.Context().Err() == nil {
				if _, err := w.Write(zeros); err != nil {
					return
				}
			}
		})
	})
	set := &imageset.Set{Images: []imageset.Image{{Source: "upstream.example/apps/app:v1", Origin: "upstream.example/apps/app:v1",
		Digest: img.Digest.String(), Destination: "apps/app:v1", Kind: imageset.KindAdditional}}}
	conf, auth := registrytest.ClientFiles(t)
	mir, err := transfer.NewMirror(reg.Host()+"/m", transfer.RegistryOptions{TLSVerify: types.OptionalBoolFalse, RegistriesConf: conf, AuthFile: auth})
	if err != nil {
		t.Fatal(err)
	}
	a := &Audit{Mirror: mir, Expected: &Expected{Mode: "mirror-to-mirror", Workspace: t.TempDir(), Plan: &workspace.Plan{Set: set}}, ParallelImages: 1, Deep: true}
	rep, err := a.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var details []string
	for _, g := range rep.Groups {
		for _, p := range g.Problems {
			details = append(details, p.Detail)
		}
	}
	if ctx.Err() != nil || len(details) != 1 || !strings.Contains(details[0], layer+" of ") || !strings.Contains(details[0], "is damaged") {
		t.Errorf("a blob sent without end: %q (context: %v); want it reported damaged at once", details, ctx.Err())
	}
}
