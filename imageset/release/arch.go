package release

import (
	"fmt"
	"strings"
)

// Architectures the update service publishes graphs for, in the spelling the
// graph API's arch parameter uses.
const (
	archAMD64   = "amd64"
	archARM64   = "arm64"
	archPPC64LE = "ppc64le"
	archS390X   = "s390x"
	// ArchMulti selects the multi-architecture (manifest list) payloads.
	ArchMulti = "multi"
)

// DefaultArch is the architecture used when a configuration names none.
const DefaultArch = archAMD64

// archAliases maps every accepted spelling to the graph API's arch value.
var archAliases = map[string]string{
	"amd64":   archAMD64,
	"x86_64":  archAMD64,
	"arm64":   archARM64,
	"aarch64": archARM64,
	"ppc64le": archPPC64LE,
	"s390x":   archS390X,
	"multi":   ArchMulti,
}

// releaseTagArch maps a graph architecture to the suffix OpenShift release
// tags use (4.18.1-x86_64).
var releaseTagArch = map[string]string{
	archAMD64:   "x86_64",
	archARM64:   "aarch64",
	archPPC64LE: "ppc64le",
	archS390X:   "s390x",
	ArchMulti:   "multi",
}

// GraphArch returns the update graph's arch parameter for an architecture
// written as in an ImageSetConfiguration (amd64, arm64, ppc64le, s390x,
// multi; x86_64 and aarch64 are accepted too).
func GraphArch(arch string) (string, error) {
	if a, ok := archAliases[strings.ToLower(strings.TrimSpace(arch))]; ok {
		return a, nil
	}
	return "", fmt.Errorf("unknown architecture %q: use one of amd64, arm64, ppc64le, s390x, multi", arch)
}

// TagArch returns the architecture suffix of OpenShift release tags
// (x86_64 for amd64, aarch64 for arm64, multi, …) for a graph architecture.
func TagArch(graphArch string) string {
	if a, ok := releaseTagArch[graphArch]; ok {
		return a
	}
	return graphArch
}
