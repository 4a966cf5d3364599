package transfer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// pushImages builds n small images into reg under repo-<i>:v1 and returns
// them as a Set read from host (the registry the images are named by).
func pushImages(t *testing.T, reg *registrytest.Registry, host, repo string, n int) *imageset.Set {
	t.Helper()
	set := &imageset.Set{}
	for i := range n {
		img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(uint64(100+i), 16<<10), imagebuilder.RandomLayer(uint64(200+i), 4<<10)}})
		if err != nil {
			t.Fatal(err)
		}
		r := fmt.Sprintf("%s-%d", repo, i)
		if err := imagebuilder.Push(context.Background(), imagebuilder.Target{URL: reg.URL()}, r, "v1", img); err != nil {
			t.Fatal(err)
		}
		set.Images = append(set.Images, imageset.Image{Source: host + "/" + r + "@" + img.Digest.String(), Origin: host + "/" + r + ":v1",
			Digest: img.Digest.String(), Destination: r + ":v1", Kind: imageset.KindAdditional})
	}
	return set
}

// copyAndCheck resolves every image of set by its tag through src, copies
// the set into dst under root and checks every image there by digest.
func copyAndCheck(t *testing.T, src *Registry, dst *registrytest.Registry, set *imageset.Set) {
	t.Helper()
	ctx := context.Background()
	for _, img := range set.Images {
		named, err := reference.ParseNormalizedNamed(img.Origin)
		if err != nil {
			t.Fatal(err)
		}
		d, err := src.ResolveDigest(ctx, named)
		if err != nil || d.String() != img.Digest {
			t.Fatalf("resolving %s: %s, %v (want %s)", img.Origin, d, err, img.Digest)
		}
	}
	mir, err := NewMirror(dst.Host()+"/m", testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := CopyPlanned(ctx, set, src, mir, Options{ParallelImages: 2, Retries: -1}).Err(); err != nil {
		t.Fatal(err)
	}
	// A Registry of its own: the copy's remembers what it saw before it pushed.
	check, err := NewMirror(dst.Host()+"/m", testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range set.Images {
		got, err := check.HasManifest(ctx, img, digest.Digest(img.Digest))
		if err != nil || !got {
			t.Errorf("%s is not at the mirror by digest: %v", img.Destination, err)
		}
	}
}

// TestDockerHubThroughTheSharedClient: images named docker.io/… are read
// through the run's one client, from Docker Hub's API host (here a
// registry on 127.0.0.1 standing in for registry-1.docker.io), not through
// a second engine.
func TestDockerHubThroughTheSharedClient(t *testing.T) {
	hub := registrytest.Start(t, registrytest.Options{})
	saved := dockerHubAPI
	dockerHubAPI = hub.Host()
	t.Cleanup(func() { dockerHubAPI = saved })
	set := pushImages(t, hub, "docker.io", "library/app", 3)
	count := registrytest.NewRequestCounter()
	hub.SetWrap(count.Wrap)

	src := NewUpstream(testOptions(t))
	dst := registrytest.Start(t, registrytest.Options{})
	copyAndCheck(t, src, dst, set)
	if count.N["GET ping"] != 1 {
		t.Errorf("Docker Hub's API host was pinged %d times, want once (one client for the run): %v", count.N["GET ping"], count.N)
	}
	if count.N["GET blob"] != 9 || count.N["GET manifest"] != 3 {
		t.Errorf("%d blob and %d manifest reads from Docker Hub's API host, want each image's config and 2 layers (9) and manifest (3) once: %v", count.N["GET blob"], count.N["GET manifest"], count.N)
	}
}

// TestMirrorsTriedInTurn: registries.conf gives the source a
// [[registry.mirror]]. Where the mirror holds the images, the source is
// never asked; where it lacks them, each image's manifest is asked there
// once, then the source serves the image, manifest and blobs, and no blob
// is asked of the mirror that did not serve the manifest.
func TestMirrorsTriedInTurn(t *testing.T) {
	for _, tc := range []struct {
		name        string
		mirrorHolds bool
	}{{"the mirror holds the images", true}, {"the mirror lacks them", false}} {
		t.Run(tc.name, func(t *testing.T) {
			source := registrytest.Start(t, registrytest.Options{})
			mirror := registrytest.Start(t, registrytest.Options{})
			set := pushImages(t, source, source.Host(), "team/app", 3)
			if tc.mirrorHolds {
				pushImages(t, mirror, mirror.Host(), "team/app", 3) // the same images: the same seeds
			}
			atSource, atMirror := registrytest.NewRequestCounter(), registrytest.NewRequestCounter()
			source.SetWrap(atSource.Wrap)
			mirror.SetWrap(atMirror.Wrap)
			conf := filepath.Join(t.TempDir(), "registries.conf")
			if err := os.WriteFile(conf, fmt.Appendf(nil, "[[registry]]\nlocation = %q\ninsecure = true\n[[registry.mirror]]\nlocation = %q\ninsecure = true\n", source.Host(), mirror.Host()), 0o644); err != nil {
				t.Fatal(err)
			}
			opts := testOptions(t)
			opts.RegistriesConf, opts.TLSVerify = conf, 0 // registries.conf decides TLS
			src := NewUpstream(opts)
			dst := registrytest.Start(t, registrytest.Options{})
			copyAndCheck(t, src, dst, set)
			if tc.mirrorHolds {
				if n := atSource.Total(); n != 0 {
					t.Errorf("the source was asked %d requests though its mirror holds every image: %v", n, atSource.N)
				}
				return
			}
			if n := atMirror.N["GET blob"] + atMirror.N["HEAD blob"]; n != 0 {
				t.Errorf("%d blob requests to a mirror that served no manifest: %v", n, atMirror.N)
			}
			if atSource.N["GET blob"] != 9 {
				t.Errorf("the source served %d blobs, want each image's config and 2 layers (9): %v", atSource.N["GET blob"], atSource.N)
			}
			if atSource.N["GET ping"] != 1 || atMirror.N["GET ping"] != 1 {
				t.Errorf("pings: source %d, mirror %d, want one each (one client per registry for the run)", atSource.N["GET ping"], atMirror.N["GET ping"])
			}
		})
	}
}

// TestMirrorsAllFailing: when neither the mirror nor the source has an
// image, the error is the source's, naming what the mirror answered, as
// containers/image words it.
func TestMirrorsAllFailing(t *testing.T) {
	source := registrytest.Start(t, registrytest.Options{})
	mirror := registrytest.Start(t, registrytest.Options{})
	conf := filepath.Join(t.TempDir(), "registries.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "[[registry]]\nlocation = %q\ninsecure = true\n[[registry.mirror]]\nlocation = %q\ninsecure = true\n", source.Host(), mirror.Host()), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := testOptions(t)
	opts.RegistriesConf, opts.TLSVerify = conf, 0
	named, err := reference.ParseNormalizedNamed(source.Host() + "/team/gone:v1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewUpstream(opts).ResolveDigest(context.Background(), named)
	if err == nil || !strings.Contains(err.Error(), "mirrors also failed: ["+mirror.Host()+"/team/gone:v1: ") {
		t.Fatalf("want the source's error naming the mirror's, got %v", err)
	}
}
