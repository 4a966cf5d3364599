package mirror

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/sections"
	"github.com/gapmirror/gapmirror/transfer"
	"github.com/gapmirror/gapmirror/workspace"
)

// Disk-to-mirror with a subset: -c may name a configuration whose entries
// are entries of the archive's configuration (as written, or as the pinned
// configuration wrote them): fewer additional images, operator catalogs or
// release channels (or a channel's version range narrowed), or no platform
// or helm section. The run then pushes
// and generates resources for exactly those images, as oc-mirror does to
// serve several enclaves from one archive. What the archive cannot answer
// (an entry it does not hold, a catalog filtered differently, which would
// need the catalog rebuilt) is refused, every such entry named.

// subset narrows plan, read from an archive, to the -c configuration.
// The rebuilt catalogs (a catalog entry of -c that selects otherwise)
// are in a store of their own, removed with Close, and pushed from there.
//
// root is the mirror root pushed to: the catalog images a subset filters again are kept for it in
// working-dir/subset-catalogs/, so the next, incremental, archive (which
// does not carry their unchanged blobs) can be filtered again too.
func (t *Trip) subset(ctx context.Context, plan *workspace.Plan, ar transfer.BlobReader, archiveDir, root string) (*sections.Rebuilt, error) {
	if t.Config == nil || plan.Config == "" {
		return nil, nil
	}
	mine := imageset.Redacted(t.Config)
	data, err := imageset.MarshalYAML(mine)
	if err != nil {
		return nil, err
	}
	if string(data) == plan.Config {
		return nil, nil
	}
	made, err := imageset.ParseImageSetConfiguration([]byte(plan.Config), archiveDir+" (the archive's configuration)")
	if err != nil {
		return nil, fmt.Errorf("reading the configuration the archive in %s was made from: %w", archiveDir, err)
	}
	pinned := made
	if p, ok := plan.File(workspace.PinnedExtra); ok {
		if pinned, err = imageset.ParseImageSetConfiguration(p, archiveDir+" (the archive's pinned configuration)"); err != nil {
			return nil, fmt.Errorf("reading the pinned configuration of the archive in %s: %w", archiveDir, err)
		}
	}
	s := imageset.Subset{Made: made, Pinned: pinned}
	keep := s.Match(&mine.Mirror)
	var rb *sections.Rebuilt
	// Filtered even when something else is refused, so every refusal is named.
	if len(s.Refilter) > 0 {
		if rb, err = sections.Refilter(ctx, plan.Set, ar, &s, filepath.Join(archiveDir, workspace.WorkingDir), root, t.DryRun, t.Log); err != nil {
			return nil, err
		}
	}
	if len(s.Refused) > 0 && t.partialSubset {
		t.Log.Warn("an earlier archive lacks entries of the subset: pushing what it holds of it (the latest archive holds them all)", "archive", archiveDir, "lacking", strings.Join(s.Refused, "; "))
	} else if len(s.Refused) > 0 {
		rb.Close()
		return nil, fmt.Errorf("%s asks for what the archive in %s does not hold:\n  - %s\ndisk-to-mirror pushes the archive's images or a subset of its configuration's entries (each written as in the archive's configuration or its pinned one): remove or correct these entries, or run mirror-to-disk with this configuration for a new archive",
			t.ConfigPath, archiveDir, strings.Join(s.Refused, "\n  - "))
	}
	if rb != nil {
		inner := keep
		keep = func(img imageset.Image) bool { return rb.Keeps(img) || inner(img) }
	}
	kept := imageset.SubsetOf(plan.Set, keep, rb.Catalog)
	t.Log.Info("pushing a subset of the archive", "config", t.ConfigPath, "images", len(kept.Images), "of", len(plan.Set.Images))
	plan.Set, plan.Config = kept, string(data)
	if !s.Helm {
		plan.Files = slices.DeleteFunc(plan.Files, func(f workspace.PlanFile) bool { return strings.HasPrefix(f.Name, workspace.HelmDir+"/") })
	}
	return rb, nil
}
