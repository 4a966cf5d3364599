package catalog

import (
	"slices"

	"github.com/gapmirror/gapmirror/imageset/fbc"
)

// PackageSummary describes a package for discovery (gapmirror list operators).
type PackageSummary struct {
	Name           string           `json:"name"`
	DefaultChannel string           `json:"defaultChannel"`
	Channels       []ChannelSummary `json:"channels"`
}

// ChannelSummary describes a channel: its head and the versions it holds.
type ChannelSummary struct {
	Name string `json:"name"`
	// Head is the channel's head bundle, "" when the channel has no single head.
	Head        string `json:"head"`
	HeadVersion string `json:"headVersion,omitempty"`
	// Versions are the versions of the channel's bundles, oldest first.
	Versions []string `json:"versions"`
}

// Packages summarises every package of c, in name order.
func Packages(c *fbc.Catalog) []PackageSummary {
	names := c.PackageNames()
	out := make([]PackageSummary, 0, len(names))
	for _, name := range names {
		p := c.Package(name)
		ps := PackageSummary{Name: name, DefaultChannel: p.DefaultChannel}
		for _, ch := range p.Channels {
			g := newGraph(p, ch)
			cs := ChannelSummary{Name: ch.Name}
			if hs := g.heads(g.all()); len(hs) == 1 {
				cs.Head = g.names[hs[0]]
				if v := g.version[hs[0]]; v != nil {
					cs.HeadVersion = v.Original()
				}
			}
			members := g.members(g.all())
			g.byVersionDesc(members)
			slices.Reverse(members)
			for _, i := range members {
				if v := g.version[i]; v != nil {
					cs.Versions = append(cs.Versions, v.Original())
				}
			}
			ps.Channels = append(ps.Channels, cs)
		}
		out = append(out, ps)
	}
	return out
}
