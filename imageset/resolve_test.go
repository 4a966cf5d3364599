package imageset

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// tags is a Resolver over a fixed table of tag references.
type tags map[string]digest.Digest

func (t tags) ResolveDigest(_ context.Context, ref reference.Named) (digest.Digest, error) {
	if d, ok := t[ref.String()]; ok {
		return d, nil
	}
	return "", errors.New("manifest unknown")
}

func TestResolveAdditionalImages(t *testing.T) {
	d1 := digest.FromString("one")
	d2 := digest.FromString("two")
	cfg, err := ParseImageSetConfiguration([]byte(`kind: ImageSetConfiguration
apiVersion: mirror.openshift.io/v2alpha1
mirror:
  additionalImages:
  - name: quay.io/org/app:1.0
  - name: registry.example.com/team/tool@`+d2.String()+`
  - name: docker.io/library/busybox
    targetRepo: tools/busybox
    targetTag: stable
  - name: quay.io/org/gone:1.0
  blockedImages:
  - name: internal/
`), "isc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	set, res, err := Resolve(context.Background(), cfg, ResolveOptions{Resolver: tags{
		"quay.io/org/app:1.0":              d1,
		"docker.io/library/busybox:latest": d1,
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Image{
		"org/app:1.0":                      {Source: "quay.io/org/app@" + d1.String(), Origin: "quay.io/org/app:1.0", Digest: d1.String()},
		"team/tool:sha256-" + d2.Encoded(): {Source: "registry.example.com/team/tool@" + d2.String(), Origin: "registry.example.com/team/tool@" + d2.String(), Digest: d2.String()},
		"tools/busybox:stable":             {Source: "docker.io/library/busybox@" + d1.String(), Origin: "docker.io/library/busybox:latest", Digest: d1.String()},
	}
	if len(set.Images) != len(want) {
		t.Fatalf("got %d images: %+v", len(set.Images), set.Images)
	}
	for _, img := range set.Images {
		w, ok := want[img.Destination]
		if !ok {
			t.Errorf("unexpected destination %s", img.Destination)
			continue
		}
		if img.Source != w.Source || img.Origin != w.Origin || img.Digest != w.Digest || img.Kind != KindAdditional {
			t.Errorf("%s: got %+v, want %+v", img.Destination, img, w)
		}
		if len(img.Why) != 1 || !strings.HasPrefix(img.Why[0], "mirror.additionalImages[") {
			t.Errorf("%s: why = %v", img.Destination, img.Why)
		}
	}
	if len(res.Failed) != 1 || res.Failed[0].Origin != "quay.io/org/gone:1.0" || res.Failed[0].Why != "mirror.additionalImages[3]" {
		t.Errorf("failed = %+v", res.Failed)
	}
	// Deterministic: sorted by destination.
	for i := 1; i < len(set.Images); i++ {
		if set.Images[i-1].Destination > set.Images[i].Destination {
			t.Errorf("set not sorted")
		}
	}
}

func TestResolveErrors(t *testing.T) {
	head := "kind: ImageSetConfiguration\napiVersion: mirror.openshift.io/v2alpha1\nmirror:\n"
	d := digest.FromString("x")
	for _, c := range []struct{ name, body, want string }{
		{"two images one tag", "  additionalImages:\n  - name: quay.io/a/app:1\n  - name: quay.io/b/x:1\n    targetRepo: a/app\n", "destination a/app:1 is claimed by"},
		{"operators", "  operators:\n  - catalog: quay.io/c/index:v1\n", "mirror.operators: not supported"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := ParseImageSetConfiguration([]byte(head+c.body), "isc.yaml")
			if err != nil {
				// Said at load, before Resolve could say it.
				if !strings.Contains(err.Error(), c.want) {
					t.Errorf("got %v, want %q", err, c.want)
				}
				return
			}
			all := tags{"quay.io/a/app:1": d, "quay.io/b/x:1": digest.FromString("y"), "quay.io/internal/app:1": d}
			_, _, err = Resolve(context.Background(), cfg, ResolveOptions{Resolver: all})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want %q", err, c.want)
			}
		})
	}
}

// TestResolveListedAndBlocked: an additional image the configuration lists
// and blocks (by origin, or by its targetRepo) is skipped, not refused, as
// oc-mirror skips it: recorded as blocked, with one warning per entry
// naming the entry's file and line and the rule's.
func TestResolveListedAndBlocked(t *testing.T) {
	d := digest.FromString("x")
	cfg, err := ParseImageSetConfiguration([]byte(`kind: ImageSetConfiguration
apiVersion: mirror.openshift.io/v2alpha1
mirror:
  additionalImages:
  - name: quay.io/internal/app:1
  - name: quay.io/a/app:1
  - name: quay.io/a/tool:1
    targetRepo: internal/tool
  blockedImages:
  - name: internal/
`), "isc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	set, res, err := Resolve(context.Background(), cfg, ResolveOptions{Resolver: tags{"quay.io/internal/app:1": d, "quay.io/a/app:1": d, "quay.io/a/tool:1": d}})
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Images) != 1 || set.Images[0].Origin != "quay.io/a/app:1" {
		t.Errorf("set %+v, want quay.io/a/app:1 alone", set.Images)
	}
	if want := []string{"quay.io/a/tool:1", "quay.io/internal/app:1"}; !slices.Equal(res.Blocked, want) {
		t.Errorf("blocked %v, want %v", res.Blocked, want)
	}
	want := []string{
		`isc.yaml:5: mirror.additionalImages[0].name: quay.io/internal/app:1 is listed and also blocked by mirror.blockedImages[0].name at isc.yaml:10 ("internal/"): skipped`,
		`isc.yaml:7: mirror.additionalImages[2].name: quay.io/a/tool:1 is listed and also blocked by mirror.blockedImages[0].name at isc.yaml:10 ("internal/"): skipped`,
	}
	if len(res.Warnings) != len(want) {
		t.Fatalf("warnings %q, want one per entry", res.Warnings)
	}
	for i, w := range want {
		if !strings.HasPrefix(res.Warnings[i], w) {
			t.Errorf("warning %q, want it to start %q", res.Warnings[i], w)
		}
	}
}

// TestResolvePlatforms: additionalImages[].platforms reaches the Set sorted;
// an image two sections need is sparse only if both want it sparse.
func TestResolvePlatforms(t *testing.T) {
	cfg, err := ParseImageSetConfiguration([]byte(`kind: ImageSetConfiguration
apiVersion: mirror.openshift.io/v2alpha1
mirror:
  additionalImages:
  - name: quay.io/a/app:1
    platforms:
    - os: linux
      architecture: s390x
    - os: linux
      architecture: arm64
`), "isc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	set, _, err := Resolve(context.Background(), cfg, ResolveOptions{Resolver: tags{"quay.io/a/app:1": digest.FromString("x")}})
	if err != nil {
		t.Fatal(err)
	}
	img := set.Images[0]
	if !slices.Equal(img.Platforms, []string{"linux/arm64", "linux/s390x"}) {
		t.Fatalf("platforms %v", img.Platforms)
	}
	if !img.WantsPlatform(&ocispec.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}) || img.WantsPlatform(&ocispec.Platform{OS: "linux", Architecture: "amd64"}) || img.WantsPlatform(nil) {
		t.Error("WantsPlatform does not select by os/architecture")
	}
	more := img
	more.Platforms, more.Why = []string{"linux/amd64"}, []string{"other"}
	if err := set.Add(more); err != nil {
		t.Fatal(err)
	}
	if got := set.Images[0].Platforms; !slices.Equal(got, []string{"linux/amd64", "linux/arm64", "linux/s390x"}) {
		t.Errorf("union of two sparse needs: %v", got)
	}
	more.Platforms = nil
	if err := set.Add(more); err != nil {
		t.Fatal(err)
	}
	if got := set.Images[0].Platforms; got != nil {
		t.Errorf("an image one section needs whole is copied whole, got platforms %v", got)
	}
}

// TestAddPinned: the one path every section adds its images by. An image
// named by tag and digest keeps its tag; one that cannot be pinned or
// whose destination is taken fails alone, except that a conflict of images
// the configuration names itself stops the resolution.
func TestAddPinned(t *testing.T) {
	d1, d2 := digest.FromString("one"), digest.FromString("two")
	named := func(s string) reference.Named {
		n, err := reference.ParseNormalizedNamed(s)
		if err != nil {
			t.Fatal(err)
		}
		return reference.TagNameOnly(n)
	}
	r := &Resolving{Set: &Set{}, Resolution: &Resolution{}, Resolver: tags{"quay.io/a/app:v1": d1}}
	err := r.AddPinned(context.Background(), []Wanted{
		{Named: named("quay.io/a/app:v1"), Kind: KindHelm, Why: []string{"chart x"}, ByTag: "chart x:"},
		{Named: named("quay.io/a/db:v2@" + d2.String()), Kind: KindAdditional, Why: []string{"mirror.additionalImages[1]"}, Tag: "v2"},
		{Named: named("quay.io/a/gone:v1"), Kind: KindOperatorRelated, Why: []string{"bundle b"}, Failing: "needed by bundle b"},
		{Named: named("quay.io/other/app@" + d2.String()), Kind: KindHelm, Why: []string{"chart y"}, Repo: "a/app", Tag: "v1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var dests []string
	for _, img := range r.Set.Images {
		dests = append(dests, img.Destination+"="+img.Digest)
	}
	slices.Sort(dests)
	if want := []string{"a/app:v1=" + d1.String(), "a/db:v2=" + d2.String()}; !slices.Equal(dests, want) {
		t.Errorf("set = %v, want %v", dests, want)
	}
	if len(r.Resolution.Failed) != 2 || r.Resolution.Failed[0].Why != "needed by bundle b" || r.Resolution.Failed[1].Why != "chart y" {
		t.Errorf("failed = %+v, want gone (needed by bundle b) and the conflict (chart y)", r.Resolution.Failed)
	}
	if len(r.Resolution.Warnings) != 1 || !strings.HasPrefix(r.Resolution.Warnings[0], "chart x: names quay.io/a/app:v1 by tag only") {
		t.Errorf("warnings = %q", r.Resolution.Warnings)
	}
	err = r.AddPinned(context.Background(), []Wanted{{Named: named("quay.io/b/app@" + d2.String()), Kind: KindAdditional, Why: []string{"mirror.additionalImages[5]"}, Repo: "a/app", Tag: "v1", Configured: true}})
	if err == nil || !strings.Contains(err.Error(), "mirror.additionalImages[5]") || !strings.Contains(err.Error(), "another targetRepo or targetTag") {
		t.Errorf("a configured conflict: %v", err)
	}
}
