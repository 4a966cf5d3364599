//go:build !gapmirror_lean

package helm

import (
	"bytes"
	"context"
	"fmt"
	"os"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
)

// Template renders the chart archive (.tgz) with its default values, as
// `helm template` would for a first install (conditions, tags, aliases and
// import-values of its dependencies applied), and returns each rendered
// file's text by its name. This build holds Helm's engine; the lean one
// (engine_lean.go) asks gapmirror-full.
func Template(_ context.Context, tgz []byte) (map[string]string, error) {
	ch, err := loader.LoadArchive(bytes.NewReader(tgz))
	if err != nil {
		return nil, fmt.Errorf("not a helm chart archive: %w", err)
	}
	vals := map[string]any{}
	if err := chartutil.ProcessDependenciesWithMerge(ch, vals); err != nil {
		return nil, fmt.Errorf("cannot resolve the chart's dependencies: %w", err)
	}
	opts := chartutil.ReleaseOptions{Name: ch.Name(), Namespace: "default", Revision: 1, IsInstall: true}
	rv, err := chartutil.ToRenderValues(ch, vals, opts, chartutil.DefaultCapabilities.Copy())
	if err != nil {
		return nil, fmt.Errorf("cannot compute the default values: %w", err)
	}
	files, err := engine.Render(ch, rv)
	if err != nil {
		return nil, fmt.Errorf("cannot render the templates with the default values: %w", err)
	}
	return files, nil
}

// Package returns the .tgz of the chart directory dir, as `helm package`
// writes it, but with fixed file times (Repack): the same directory packs
// into the same bytes on every run, so the chart keeps its digest (and its
// OCI artifact its manifest digest) at the mirror.
func Package(_ context.Context, dir string) ([]byte, error) {
	ch, err := Load(dir)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "gapmirror-helm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	p, err := chartutil.Save(ch, tmp)
	if err != nil {
		return nil, fmt.Errorf("cannot package chart %s: %w", ch.Name(), err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("reading packaged chart: %w", err)
	}
	return Repack(data)
}
