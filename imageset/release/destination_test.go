package release

import "testing"

// TestTagVersion: TagVersion undoes releaseTag for every architecture.
func TestTagVersion(t *testing.T) {
	for _, arch := range []string{"amd64", "x86_64", "arm64", "ppc64le", "s390x", "multi"} {
		for _, v := range []string{"4.18.1", "4.19.0-rc.2"} {
			if got := TagVersion(releaseTag(v, arch)); got != v {
				t.Errorf("TagVersion(ReleaseTag(%s, %s)) = %s", v, arch, got)
			}
		}
	}
	if got := TagVersion("sha256-abc"); got != "sha256-abc" {
		t.Errorf("a tag without an architecture: %s", got)
	}
}
