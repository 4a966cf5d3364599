package release

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ChannelSummary describes one channel for `gapmirror list releases`.
type ChannelSummary struct {
	// Channel is the channel name.
	Channel string
	// Arch is the graph architecture.
	Arch string
	// Versions are the channel's releases, oldest first.
	Versions []string
	// Head is the newest release; empty when the channel has none.
	Head string
}

// Summarize describes a graph's channel.
func Summarize(g *Graph) ChannelSummary {
	s := ChannelSummary{Channel: g.Channel, Arch: g.Arch, Versions: g.Versions()}
	if h, ok := g.Head(); ok {
		s.Head = h.Version
	}
	return s
}

// channelPrefixes are OpenShift's channel kinds, least to most conservative.
var channelPrefixes = []string{"candidate", "fast", "stable", "eus"}

// CandidateChannels returns the OpenShift channel names that may exist for a
// minor version written as X.Y (or X.Y.Z): candidate, fast, stable and, for
// even minors from 4.6 on, eus.
func CandidateChannels(minor string) ([]string, error) {
	major, mnr, err := parseMinor(minor)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range channelPrefixes {
		if p == "eus" && (mnr%2 != 0 || (major == 4 && mnr < 6)) {
			continue
		}
		out = append(out, fmt.Sprintf("%s-%d.%d", p, major, mnr))
	}
	return out, nil
}

// parseMinor reads X.Y or X.Y.Z (a leading v is accepted).
func parseMinor(s string) (major, minor uint64, err error) {
	parts := strings.Split(strings.TrimPrefix(strings.TrimSpace(s), "v"), ".")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, 0, fmt.Errorf("version %q is not a minor version: write it as X.Y, e.g. 4.18", s)
	}
	major, err1 := strconv.ParseUint(parts[0], 10, 32)
	minor, err2 := strconv.ParseUint(parts[1], 10, 32)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("version %q is not a minor version: write it as X.Y, e.g. 4.18", s)
	}
	return major, minor, nil
}

// DiscoverChannels asks src for every candidate OpenShift channel of a minor
// version and returns those that have releases for arch, in the order
// candidate, fast, stable, eus.
func DiscoverChannels(ctx context.Context, src GraphSource, minor, arch string) ([]ChannelSummary, error) {
	names, err := CandidateChannels(minor)
	if err != nil {
		return nil, err
	}
	ga, err := GraphArch(arch)
	if err != nil {
		return nil, err
	}
	var out []ChannelSummary
	for _, name := range names {
		k := GraphKey{Channel: name, Type: TypeOCP, Arch: ga}
		g, err := src.Graph(ctx, k)
		if errors.Is(err, ErrNoReleases) || errors.Is(err, ErrGraphNotSaved) {
			continue
		}
		if err != nil {
			return nil, err
		}
		fillKey(g, k)
		if len(g.Nodes) == 0 {
			continue
		}
		out = append(out, Summarize(g))
	}
	return out, nil
}
