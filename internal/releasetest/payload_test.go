package releasetest

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestNewPayloadIsDeterministicAndShares(t *testing.T) {
	spec := PayloadSpec{Version: "4.18.1", Host: "127.0.0.1:5000", KubeVirt: true}
	a, err := NewPayload(spec)
	if err != nil {
		t.Fatal(err)
	}
	componentCache.Clear() // build again from scratch
	b, err := NewPayload(spec)
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest != b.Digest || a.Tag != "4.18.1-x86_64" {
		t.Fatalf("digests %s and %s, tag %s", a.Digest, b.Digest, a.Tag)
	}
	if len(a.Components) != DefaultComponents || DefaultComponents < 30 {
		t.Fatalf("%d components", len(a.Components))
	}
	if a.PullSpec() != "127.0.0.1:5000/openshift-release-dev/ocp-release@"+a.Digest.String() ||
		a.Ref() != "127.0.0.1:5000/openshift-release-dev/ocp-release:4.18.1-x86_64" {
		t.Errorf("PullSpec %s, Ref %s", a.PullSpec(), a.Ref())
	}
	for _, c := range a.Components {
		if !strings.HasPrefix(c.Image, "127.0.0.1:5000/openshift-release-dev/ocp-v4.0-art-dev@sha256:") || !strings.HasSuffix(c.Image, c.Digest.String()) {
			t.Errorf("component %s is %s", c.Name, c.Image)
		}
	}
	// Every component starts with the same base layer.
	base := a.Images[0].Image.Layers[0].Digest
	for _, fi := range a.Images[:len(a.Components)] {
		if fi.Image.Layers[0].Digest != base {
			t.Errorf("component %s does not share the base layer", fi.Image.Digest)
		}
	}
	// Image-references lists every component; the boot images name the disk.
	refs := string(a.Files[ImageReferencesPath])
	for _, c := range a.Components {
		if !strings.Contains(refs, c.Image) {
			t.Errorf("image-references lacks %s", c.Name)
		}
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(a.Files[BootImagesPath], &cm); err != nil {
		t.Fatal(err)
	}
	if kv, ok := a.KubeVirt["amd64"]; !ok || !strings.Contains(cm.Data["stream"], `"digest-ref":"`+kv.Image+`"`) {
		t.Errorf("boot images stream %s lacks the KubeVirt disk %v", cm.Data["stream"], a.KubeVirt)
	}

	// The next version changes a third of the components and the release.
	next, err := NewPayload(PayloadSpec{Version: "4.18.2", Host: "127.0.0.1:5000"})
	if err != nil {
		t.Fatal(err)
	}
	changed := 0
	for i, c := range next.Components {
		if c.Digest != a.Components[i].Digest {
			changed++
		}
	}
	if want := (DefaultComponents + 2) / 3; changed != want || next.Digest == a.Digest {
		t.Errorf("%d components changed, want %d", changed, want)
	}
}

func TestNewPayloadMulti(t *testing.T) {
	p, err := NewPayload(PayloadSpec{Version: "4.18.1", Arch: "multi", Host: "h:1", Platforms: []string{"amd64", "s390x", "arm64"}, KubeVirt: true, Components: 3})
	if err != nil {
		t.Fatal(err)
	}
	release := p.Images[len(p.Images)-1]
	if release.Index == nil || len(release.Index.Images) != 3 || p.Digest != release.Index.Digest || p.Tag != "4.18.1-multi" {
		t.Fatalf("release image %+v, tag %s", release, p.Tag)
	}
	if len(p.KubeVirt) != 2 || p.KubeVirt["amd64"].Digest == "" || p.KubeVirt["s390x"].Digest == "" {
		t.Errorf("KubeVirt disks %v, want amd64 and s390x", p.KubeVirt)
	}
	for _, fi := range p.Images[:3] {
		if fi.Index == nil {
			t.Errorf("component %s is not multi-architecture", fi.Digest())
		}
	}
}

func TestNewPayloadSpecErrors(t *testing.T) {
	cases := []struct {
		spec PayloadSpec
		want string
	}{
		{PayloadSpec{Host: "h:1"}, "PayloadSpec.Version"},
		{PayloadSpec{Version: "4.18.1"}, "PayloadSpec.Host"},
		{PayloadSpec{Version: "4.18.1", Host: "h:1", Arch: "sparc"}, "PayloadSpec.Arch"},
		{PayloadSpec{Version: "4.18.1", Host: "h:1", Components: -1}, "PayloadSpec.Components"},
		{PayloadSpec{Version: "4.18.1", Host: "h:1", Arch: "multi", Platforms: []string{"amd64", "amd64"}}, "PayloadSpec.Platforms"},
		{PayloadSpec{Version: "4.18.1", Host: "h:1", Arch: "multi", Platforms: []string{}}, "PayloadSpec.Platforms"},
	}
	for _, c := range cases {
		if _, err := NewPayload(c.spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one naming %s", c.spec, err, c.want)
		}
	}
}
