package imageset

import (
	"slices"
	"testing"
)

// TestSetAddMergesSections: the same image needed by several sections is
// one entry with every reason and every section's group.
func TestSetAddMergesSections(t *testing.T) {
	s := &Set{}
	add := func(kind Kind, why string) {
		t.Helper()
		if err := s.Add(Image{Origin: "r/a@sha256:1", Digest: "sha256:1", Destination: "a:sha256-1", Kind: kind, Why: []string{why}}); err != nil {
			t.Fatal(err)
		}
	}
	add(KindAdditional, "mirror.additionalImages[0]")
	add(KindOperatorRelated, "bundle b1")
	add(KindOperatorRelated, "bundle b2")
	add(KindAdditional, "mirror.additionalImages[3]")
	if len(s.Images) != 1 {
		t.Fatalf("%d entries, want 1", len(s.Images))
	}
	img := s.Images[0]
	if img.Kind != KindAdditional || !slices.Equal(img.AlsoKinds, []Kind{KindOperatorRelated}) {
		t.Errorf("kind %s also %v, want additional also [operator-related]", img.Kind, img.AlsoKinds)
	}
	if !slices.Equal(img.Groups(), []string{"additional", "operator"}) {
		t.Errorf("groups %v", img.Groups())
	}
	if len(img.Why) != 4 {
		t.Errorf("reasons %v, want all four", img.Why)
	}
	if err := s.Add(Image{Origin: "r/b@sha256:2", Digest: "sha256:2", Destination: "a:sha256-1", Kind: KindRelease}); err == nil {
		t.Error("two digests for one destination accepted")
	}
}

// TestSignatureGroups: a signature fails for the images it signs (their
// exit code bits), and the set counts signatures apart.
func TestSignatureGroups(t *testing.T) {
	sig := Image{Digest: "sha256:2", Destination: "a:sha256-1.sig", Kind: KindSignature, AlsoKinds: []Kind{KindReleaseComponent, KindAdditional}}
	if got := sig.Groups(); !slices.Equal(got, []string{"release", "additional"}) {
		t.Errorf("signature groups %v, want [release additional]", got)
	}
	s := &Set{Images: []Image{{Digest: "sha256:1", Destination: "a:v1", Kind: KindAdditional}, sig}}
	if s.Signatures() != 1 {
		t.Errorf("Signatures() = %d, want 1", s.Signatures())
	}
}
