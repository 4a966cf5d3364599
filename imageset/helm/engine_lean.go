//go:build gapmirror_lean

package helm

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/gapmirror/gapmirror/companion"
)

// The lean build leaves Helm's engine out (with it Kubernetes' API scheme,
// which its initialisers register at every start): gapmirror-full renders
// and packages charts. Its messages are those of engine.go.

// Template renders the chart archive (.tgz) with its default values, as
// `helm template` would for a first install, and returns each rendered
// file's text by its name.
func Template(ctx context.Context, tgz []byte) (map[string]string, error) {
	out, err := companion.Run(ctx, tgz, "companion", "helm-template")
	if err != nil {
		return nil, err
	}
	var files map[string]string
	if err := json.Unmarshal(out, &files); err != nil {
		return nil, fmt.Errorf("%s answered with no rendered chart: %w", companion.Name, err)
	}
	return files, nil
}

// Package returns the .tgz of the chart directory dir, as `helm package`
// writes it, but with fixed file times (Repack).
func Package(ctx context.Context, dir string) ([]byte, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	return companion.Run(ctx, nil, "companion", "helm-package", abs)
}
