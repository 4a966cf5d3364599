package imageset

import (
	"strings"
	"testing"
)

func TestFlattenDestinations(t *testing.T) {
	img := func(dest, dig string) Image {
		return Image{Destination: dest, Digest: dig, Origin: "quay.io/" + dest, Kind: KindAdditional, Why: []string{dest}}
	}
	cases := []struct {
		root string
		n    int
		in   string
		want string
	}{
		// The root's own components count towards n (oc-mirror's rule).
		{"mirror", 2, "ubi9/ubi:9.4", "ubi9-ubi:9.4"},
		{"", 2, "ubi9/ubi:9.4", "ubi9/ubi:9.4"},
		{"", 2, "a/b/c/d:1", "a/b-c-d:1"},
		{"mirror", 3, "a/b/c/d:1", "a/b-c-d:1"},
		{"mirror", 2, "openshift/release-images:4.16.1-x86_64", "openshift-release-images:4.16.1-x86_64"},
		{"mirror", 3, "openshift/release:4.16.1-x86_64-etcd", "openshift/release:4.16.1-x86_64-etcd"},
		{"", 1, "a/b/c:1", "a-b-c:1"},
		{"mirror", 2, "single:1", "single:1"},
		{"a/b", 0, "x/y/z:1", "x/y/z:1"},
		// A referrer, by digest.
		{"", 2, "a/b/c@sha256:1", "a/b-c@sha256:1"},
	}
	for _, c := range cases {
		s := &Set{Images: []Image{img(c.in, "sha256:1")}}
		got, err := s.FlattenDestinations(c.root, c.n)
		if err != nil {
			t.Fatalf("root %q n %d %s: %v", c.root, c.n, c.in, err)
		}
		g := got.Images[0]
		if g.Destination != c.want {
			t.Errorf("root %q n %d: %s became %s, want %s", c.root, c.n, c.in, g.Destination, c.want)
		}
		if g.OriginalDestination() != c.in {
			t.Errorf("root %q n %d: original destination %q, want %q", c.root, c.n, g.OriginalDestination(), c.in)
		}
		if (g.Unflattened != "") != (c.in != c.want) {
			t.Errorf("root %q n %d %s: Unflattened %q", c.root, c.n, c.in, g.Unflattened)
		}
		// Without a limit a flattened set gets its own names back.
		if back, err := got.FlattenDestinations(c.root, 0); err != nil || back.Images[0].Destination != c.in || back.Images[0].Unflattened != "" {
			t.Errorf("root %q n %d: unflattening gave %+v, %v", c.root, c.n, back.Images[0], err)
		}
		// Flattening is idempotent: a retry flattens a flattened set again.
		again, err := got.FlattenDestinations(c.root, c.n)
		if err != nil || again.Images[0].Destination != c.want || again.Images[0].OriginalDestination() != c.in {
			t.Errorf("root %q n %d: second flattening gave %+v, %v", c.root, c.n, again.Images[0], err)
		}
	}
}

func TestFlattenDestinationsErrors(t *testing.T) {
	s := &Set{Images: []Image{
		{Destination: "a/b/c:1", Digest: "sha256:1", Origin: "quay.io/a/b/c:1"},
		{Destination: "a/b-c:1", Digest: "sha256:2", Origin: "quay.io/a/b-c:1"},
	}}
	_, err := s.FlattenDestinations("", 2)
	if err == nil || !strings.Contains(err.Error(), "a/b/c:1") || !strings.Contains(err.Error(), "a/b-c:1 (quay.io/a/b-c:1") || !strings.Contains(err.Error(), "both become a/b-c:1") {
		t.Fatalf("collision: %v", err)
	}
	// The same image under both names is one image with both reasons.
	s.Images[1].Digest = "sha256:1"
	s.Images[0].Why, s.Images[1].Why = []string{"one"}, []string{"two"}
	got, err := s.FlattenDestinations("", 2)
	if err != nil || len(got.Images) != 1 || len(got.Images[0].Why) != 2 {
		t.Fatalf("same digest: %+v, %v", got, err)
	}
	if _, err := s.FlattenDestinations("org/mirror", 2); err == nil || !strings.Contains(err.Error(), `"org/mirror" has 2 components`) {
		t.Fatalf("root too deep: %v", err)
	}
	if _, err := s.FlattenDestinations("", -1); err == nil {
		t.Fatal("negative n accepted")
	}
}
