//go:build tools

package gapmirror

import (
	_ "github.com/Masterminds/semver/v3"
	_ "github.com/distribution/distribution/v3/registry/handlers"
	_ "github.com/opencontainers/image-spec/specs-go/v1"
	_ "github.com/schollz/progressbar/v3"
	_ "github.com/spf13/cobra"
	_ "go.podman.io/image/v5/copy"
	_ "sigs.k8s.io/yaml"
)
