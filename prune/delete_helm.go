package prune

// delete.helm: a repository or local chart entry of a DeleteImageSetConfiguration
// selects charts this workspace mirrored, by the records alone (no chart
// repository is reached and nothing is rendered): the latest run Set for the
// mirror root says which images each chart version deploys (its Why entries
// name the configuration entry, chart and version) and working-dir/helm/
// charts.json which repository or local path each chart came from. The
// selected charts' images the workspace pushed are deleted, except those
// that something staying mirrored still needs.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/sections"
	"github.com/gapmirror/gapmirror/workspace"
)

// mirroredChart is one chart version the latest run to a root mirrored.
type mirroredChart struct {
	source, name, ver string
	// repo is the repository name ("local" for local charts) and url its
	// redacted URL or the local path, from charts.json; empty when it has
	// no record of the chart.
	repo, url string
	images    []string // Set destination@digest
}

func (c *mirroredChart) key() string { return c.source + " " + c.name + " " + c.ver }

// helmImages resolves delete.helm against the charts the latest run to root
// mirrored (latest gives that run's Set), adding what it selects to sel.
func helmImages(sel *selection, h imageset.Helm, cfgPath, root string, w workspace.Workspace, images []workspace.MirroredImage, latest func() (*imageset.Set, error)) []error {
	if len(h.Repositories) == 0 && len(h.Local) == 0 {
		return nil
	}
	set, err := latest()
	if err != nil {
		return []error{err}
	}
	charts, err := mirroredCharts(w, set)
	if err != nil {
		return []error{err}
	}
	byKey := map[string]workspace.MirroredImage{}
	for _, m := range images {
		if m.Pushed {
			byKey[m.SetName()+"@"+m.Digest] = m
		}
	}
	var errs []error
	deleted := map[string]bool{} // mirroredChart.key of every selected chart
	// pick selects the charts match accepts for the entry at path.
	pick := func(path, what string, match func(c *mirroredChart) bool) {
		var hit []*mirroredChart
		for _, c := range charts {
			if match(c) {
				hit = append(hit, c)
			}
		}
		if len(hit) == 0 {
			errs = append(errs, fmt.Errorf("%s: %s: %s was not mirrored to %s by this workspace (its records of the latest run there%s; delete reads only the records, it does not fetch or render charts): check the name, version and repository as the ImageSetConfiguration gave them", cfgPath, path, what, root, chartList(charts)))
			return
		}
		found := 0
		for _, c := range hit {
			deleted[c.key()] = true
			for _, k := range c.images {
				if m, ok := byKey[k]; ok {
					found++
					sel.picked = append(sel.picked, matchedImage{m, fmt.Sprintf("%s (helm chart %s %s)", path, c.name, c.ver)})
				}
			}
		}
		if found == 0 {
			errs = append(errs, fmt.Errorf("%s: %s: the images of %s were not pushed to %s by this workspace (already deleted, or they were there before gapmirror mirrored them)", cfgPath, path, what, root))
		}
	}
	for i, repo := range h.Repositories {
		rp := fmt.Sprintf("delete.helm.repositories[%d]", i)
		fromRepo := func(c *mirroredChart) bool {
			if c.repo != "" {
				return c.repo == repo.Name
			}
			// No charts.json record: any repository chart of that name.
			return strings.HasPrefix(c.source, "mirror.helm.repositories[")
		}
		if len(repo.Charts) == 0 {
			// The whole repository: only charts charts.json says came from it.
			pick(rp, fmt.Sprintf("any chart of helm repository %s", repo.Name), func(c *mirroredChart) bool { return c.repo == repo.Name })
			continue
		}
		for j, ch := range repo.Charts {
			path := fmt.Sprintf("%s.charts[%d]", rp, j)
			if len(ch.Platforms) > 0 {
				errs = append(errs, fmt.Errorf("%s: %s.platforms: deleting some platforms of a chart's images is not supported; remove the field", cfgPath, path))
				continue
			}
			ver := ch.Version
			if ver == "" {
				ver = "(any version)"
			}
			pick(path, fmt.Sprintf("helm chart %s %s from repository %s", ch.Name, ver, repo.Name), func(c *mirroredChart) bool {
				return fromRepo(c) && c.name == ch.Name && (ch.Version == "" || c.ver == ch.Version)
			})
		}
	}
	for i, lc := range h.Local {
		path := fmt.Sprintf("delete.helm.local[%d]", i)
		if len(lc.Platforms) > 0 {
			errs = append(errs, fmt.Errorf("%s: %s.platforms: deleting some platforms of a chart's images is not supported; remove the field", cfgPath, path))
			continue
		}
		pick(path, fmt.Sprintf("local helm chart %s (%s)", lc.Name, lc.Path), func(c *mirroredChart) bool {
			if !strings.HasPrefix(c.source, "mirror.helm.local[") {
				return false
			}
			return c.name == lc.Name || lc.Path != "" && c.url == lc.Path
		})
	}
	if len(errs) > 0 {
		return errs
	}
	sel.drops = append(sel.drops, func(why string) bool {
		m := sections.HelmWhy.FindStringSubmatch(why)
		return m != nil && deleted[m[1]+" "+m[2]+" "+m[3]]
	})
	return nil
}

// mirroredCharts lists the chart versions of the Set, with the repository
// charts.json gives each.
func mirroredCharts(w workspace.Workspace, set *imageset.Set) ([]*mirroredChart, error) {
	if set == nil {
		return nil, nil
	}
	byKey := map[string]*mirroredChart{}
	var out []*mirroredChart
	for _, img := range set.Images {
		for _, why := range img.Why {
			m := sections.HelmWhy.FindStringSubmatch(why)
			if m == nil {
				continue
			}
			c := &mirroredChart{source: m[1], name: m[2], ver: m[3]}
			if have := byKey[c.key()]; have != nil {
				c = have
			} else {
				byKey[c.key()] = c
				out = append(out, c)
			}
			k := img.Destination + "@" + img.Digest
			if !slices.Contains(c.images, k) {
				c.images = append(c.images, k)
			}
		}
	}
	data, err := os.ReadFile(w.Path(workspace.HelmChartsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	var records []sections.ChartRecord
	if err := json.Unmarshal(data, &records); err != nil {
		return nil, fmt.Errorf("%s: not a chart list: %w", w.Path(workspace.HelmChartsFile), err)
	}
	for _, r := range records {
		if c := byKey[r.Source+" "+r.Name+" "+r.Version]; c != nil {
			c.repo, c.url = r.Repository, r.URL
		}
	}
	return out, nil
}

// chartList names the mirrored charts, for errors.
func chartList(charts []*mirroredChart) string {
	if len(charts) == 0 {
		return " hold no helm chart"
	}
	var names []string
	for _, c := range charts {
		from := c.repo
		if from == "" {
			from = c.source
		}
		if n := fmt.Sprintf("%s %s (%s)", c.name, c.ver, from); !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return " hold: " + joinFew(names)
}
