package mirror

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/distribution/reference"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/sections"
	"github.com/gapmirror/gapmirror/workspace"
)

// Pinned configurations: after resolving, a run writes the configuration
// with every catalog and additional image it resolved by tag pinned to the
// digest it used (the tag kept as targetTag, so destinations do not move),
// and the matching DeleteImageSetConfiguration, as oc-mirror does
// (working-dir/isc_pinned_<time>.yaml, disc_pinned_<time>.yaml). Running
// the pinned file again mirrors exactly this image set; the delete file
// removes exactly it.

// pinnedConfig is cfg with the catalogs and additional images of set
// pinned by digest.
func pinnedConfig(cfg *imageset.ImageSetConfiguration, plan *workspace.Plan) (*imageset.ImageSetConfiguration, error) {
	set := plan.Set
	out := *cfg
	out.Mirror.Operators = append([]imageset.OperatorCatalog(nil), cfg.Mirror.Operators...)
	for i := range out.Mirror.Operators {
		oc := &out.Mirror.Operators[i]
		d := plan.PinnedCatalogs[fmt.Sprintf("mirror.operators[%d]", i)]
		if _, layout := oc.OCILayoutPath(); layout || d == "" {
			continue
		}
		pinned, tag, err := pin(oc.Catalog, d)
		if err != nil {
			return nil, fmt.Errorf("mirror.operators[%d].catalog: %w", i, err)
		}
		oc.Catalog = pinned
		if oc.TargetTag == "" {
			oc.TargetTag = tag
		}
	}
	digests := map[string]string{}
	for _, img := range set.Images {
		for _, why := range img.Why {
			if strings.HasPrefix(why, "mirror.additionalImages[") {
				digests[why] = img.Digest
			}
		}
	}
	out.Mirror.AdditionalImages = append([]imageset.AdditionalImage(nil), cfg.Mirror.AdditionalImages...)
	for i := range out.Mirror.AdditionalImages {
		ai := &out.Mirror.AdditionalImages[i]
		d := digests[fmt.Sprintf("mirror.additionalImages[%d]", i)]
		if _, layout := ai.OCILayoutPath(); layout || d == "" {
			continue // an OCI layout, blocked or unresolved: left as written
		}
		pinned, tag, err := pin(ai.Name, d)
		if err != nil {
			return nil, fmt.Errorf("mirror.additionalImages[%d].name: %w", i, err)
		}
		ai.Name = pinned
		if ai.TargetTag == "" {
			ai.TargetTag = tag
		}
	}
	out.Mirror.Helm = sections.PinnedHelm(cfg.Mirror.Helm, plan)
	return &out, nil
}

// mirroredAdditional leaves out of list the entries blockedImages skipped
// (listed and blocked, so never mirrored): the pinned delete configuration
// names what the run mirrors.
func mirroredAdditional(list []imageset.AdditionalImage, plan *workspace.Plan) []imageset.AdditionalImage {
	if len(plan.Blocked) == 0 {
		return list
	}
	inSet := map[string]bool{}
	for _, img := range plan.Set.Images {
		for _, why := range img.Why {
			inSet[why] = true
		}
	}
	var out []imageset.AdditionalImage
	for i, ai := range list {
		origin := ai.Name
		if _, layout := ai.OCILayoutPath(); !layout {
			if named, err := reference.ParseNormalizedNamed(ai.Name); err == nil {
				origin = reference.TagNameOnly(named).String()
			}
		}
		if !inSet[fmt.Sprintf("mirror.additionalImages[%d]", i)] && slices.Contains(plan.Blocked, origin) {
			continue
		}
		out = append(out, ai)
	}
	return out
}

// pin returns ref by digest d and the tag ref named ("" if none).
func pin(ref, d string) (pinned, tag string, err error) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return "", "", err
	}
	if t, ok := named.(reference.Tagged); ok {
		tag = t.Tag()
	} else if _, ok := named.(reference.Digested); !ok {
		tag = "latest"
	}
	// Keep the name as the user wrote it (docker.io stays implicit):
	// Parse, unlike ParseNormalizedNamed, does not normalize.
	asWritten, err := reference.Parse(ref)
	if err != nil {
		return "", "", err
	}
	return asWritten.(reference.Named).Name() + "@" + d, tag, nil
}

// pinPlan sets the plan's pinned ImageSetConfiguration and its
// DeleteImageSetConfiguration, and adds the first to the plan's files.
func (t *Trip) pinPlan(plan *workspace.Plan) error {
	cfg, err := pinnedConfig(imageset.Redacted(t.Config), plan)
	if err != nil {
		return err
	}
	isc, err := imageset.MarshalYAML(cfg)
	if err != nil {
		return err
	}
	del := imageset.DeleteImageSetConfiguration{
		Kind:       imageset.DeleteImageSetConfigurationKind,
		APIVersion: imageset.APIVersion,
		Delete: imageset.Delete{
			Platform:         cfg.Mirror.Platform,
			Operators:        cfg.Mirror.Operators,
			AdditionalImages: mirroredAdditional(cfg.Mirror.AdditionalImages, plan),
			Helm:             cfg.Mirror.Helm,
		},
	}
	disc, err := imageset.MarshalYAML(del)
	if err != nil {
		return err
	}
	plan.Pinned, plan.PinnedDelete = string(isc), string(disc)
	plan.AddFile(workspace.PinnedExtra, isc)
	return nil
}

// writePinned writes the plan's pinned ImageSetConfiguration and its
// DeleteImageSetConfiguration into the workspace and returns the first path.
func (t *Trip) writePinned(ws string, plan *workspace.Plan) (string, error) {
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return "", err
	}
	stamp := t.now().Format(time.RFC3339)
	path := filepath.Join(ws, "isc_pinned_"+stamp+".yaml")
	if err := archive.WriteFileAtomic(path, []byte(plan.Pinned)); err != nil {
		return "", err
	}
	if err := archive.WriteFileAtomic(filepath.Join(ws, "disc_pinned_"+stamp+".yaml"), []byte(plan.PinnedDelete)); err != nil {
		return "", err
	}
	return path, nil
}
