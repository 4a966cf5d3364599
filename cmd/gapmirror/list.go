package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/spf13/cobra"

	"github.com/gapmirror/gapmirror/imageset/release"
)

// newListCommand is `gapmirror list`: what can be mirrored (releases and
// operator catalogs).
func newListCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List what can be mirrored: OpenShift releases and channels, operator catalog packages",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(newListReleasesCommand(g), newListOperatorsCommand(g))
	return cmd
}

// listReleasesFlags are the flags of `gapmirror list releases`.
type listReleasesFlags struct {
	channel     string
	version     string
	channels    bool
	arch        string
	graphURL    string
	channelType string
	output      string
	archs       []string
}

func newListReleasesCommand(_ *globalFlags) *cobra.Command {
	f := &listReleasesFlags{}
	cmd := &cobra.Command{
		Use:   "releases",
		Short: "List OpenShift release versions of a channel, or the channels of a minor version",
		Long: `List what the OpenShift Update Service offers, to write mirror.platform.channels.

  gapmirror list releases                                      minor versions with a stable channel, and their heads
  gapmirror list releases --channel stable-4.18                versions of a channel and its head
  gapmirror list releases --version 4.18                       channels of 4.18 with their heads
  gapmirror list releases --version 4.18 --channels            channel names of 4.18, one per line
  gapmirror list releases --version 4.18 --channel fast-4.18   versions 4.18.z of that channel

Plain output is one item per line under a header line starting with "#", so
scripts can drop it with grep -v '^#'; --output json prints one JSON document.
The update service is $UPDATE_URL_OVERRIDE when set (an enclave's own OSUS),
else ` + release.DefaultOCPGraphURL + ` (OKD: ` + release.DefaultOKDGraphURL + `);
--graph-url overrides both.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.channel, "channel", "", "channel to list the versions of, e.g. stable-4.18")
	fl.StringVar(&f.version, "version", "", "minor version X.Y: list its channels, or with --channel only its X.Y.z versions")
	fl.BoolVar(&f.channels, "channels", false, "with --version: print only the names of the channels that have releases")
	fl.StringVar(&f.arch, "arch", release.DefaultArch, "architecture: amd64, arm64, ppc64le, s390x or multi")
	fl.StringVar(&f.graphURL, "graph-url", "", "update graph endpoint; default $"+release.EnvUpdateURLOverride+", then the OpenShift (or OKD) update service")
	fl.StringVar(&f.channelType, "channel-type", string(release.TypeOCP), "product of the channel: ocp or okd")
	fl.StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	fl.StringSliceVar(&f.archs, "filter-by-archs", nil, "list for each of these architectures in turn, e.g. amd64,arm64 (oc-mirror's flag; --arch for one)")
	return cmd
}

// channelListing is the JSON form of one channel's releases.
type channelListing struct {
	Channel  string   `json:"channel"`
	Arch     string   `json:"arch"`
	Type     string   `json:"type"`
	Head     string   `json:"head"`
	Versions []string `json:"versions"`
}

// minorListing is the JSON form of a minor version's channels.
type minorListing struct {
	Version  string           `json:"version"`
	Arch     string           `json:"arch"`
	Type     string           `json:"type"`
	Channels []channelListing `json:"channels"`
}

// check validates the flag combination and normalises values.
func (f *listReleasesFlags) check() (arch string, t release.ChannelType, err error) {
	arch, err = release.GraphArch(f.arch)
	if err != nil {
		return "", "", fmt.Errorf("--arch: %w", err)
	}
	switch t = release.ChannelType(strings.ToLower(f.channelType)); t {
	case release.TypeOCP, release.TypeOKD:
	default:
		return "", "", fmt.Errorf("--channel-type %q: use ocp or okd", f.channelType)
	}
	if f.output != "text" && f.output != "json" {
		return "", "", fmt.Errorf("--output %q: use text or json", f.output)
	}
	switch {
	case f.channels && f.version == "":
		return "", "", errors.New("--channels lists the channels of a minor version: add --version, e.g. --version 4.18")
	case f.channels && f.channel != "":
		return "", "", errors.New("--channels and --channel do not go together: --channels lists channel names, --channel lists one channel's versions")
	case f.version != "" && f.channel == "" && t == release.TypeOKD:
		return "", "", errors.New("OKD channels cannot be found from a version: name one with --channel")
	}
	if f.version != "" {
		if _, err := release.CandidateChannels(f.version); err != nil {
			return "", "", fmt.Errorf("--version: %w", err)
		}
	}
	return arch, t, nil
}

func (f *listReleasesFlags) run(ctx context.Context, out io.Writer) error {
	if len(f.archs) == 0 {
		return f.runArch(ctx, out)
	}
	for _, a := range f.archs {
		g := *f
		g.arch, g.archs = strings.TrimSpace(a), nil
		if err := g.runArch(ctx, out); err != nil {
			return err
		}
	}
	return nil
}

func (f *listReleasesFlags) runArch(ctx context.Context, out io.Writer) error {
	arch, t, err := f.check()
	if err != nil {
		return err
	}
	client := &release.GraphClient{UserAgent: "gapmirror/" + version}
	if f.graphURL != "" {
		client.OCPURL, client.OKDURL = f.graphURL, f.graphURL
	}
	if f.channel == "" && f.version == "" {
		return f.listMinors(ctx, out, client, release.GraphKey{Type: t, Arch: arch})
	}
	if f.channel == "" {
		return f.listChannels(ctx, out, client, arch)
	}
	return f.listVersions(ctx, out, client, release.GraphKey{Channel: f.channel, Type: t, Arch: arch})
}

// listVersions prints the versions of one channel (of one minor with --version).
func (f *listReleasesFlags) listVersions(ctx context.Context, out io.Writer, client *release.GraphClient, key release.GraphKey) error {
	g, err := client.Graph(ctx, key)
	if err != nil {
		return fmt.Errorf("listing channel %s: %w", key.Channel, err)
	}
	g.Channel, g.Arch = key.Channel, key.Arch
	s := release.Summarize(g)
	if len(s.Versions) == 0 {
		return fmt.Errorf("channel %s has no releases for arch %s at %s: check the channel name and --arch; `gapmirror list releases --version X.Y` lists the channels of a minor version",
			key.Channel, key.Arch, client.URL(key.Type))
	}
	if f.version != "" {
		kept, err := inMinor(s.Versions, f.version)
		if err != nil {
			return err
		}
		if len(kept) == 0 {
			return fmt.Errorf("channel %s has no %s.z release for arch %s (it has %s to %s)",
				key.Channel, f.version, key.Arch, s.Versions[0], s.Versions[len(s.Versions)-1])
		}
		s.Versions, s.Head = kept, kept[len(kept)-1]
	}
	l := channelListing{Channel: key.Channel, Arch: key.Arch, Type: string(key.Type), Head: s.Head, Versions: s.Versions}
	if f.output == "json" {
		return writeJSON(out, l)
	}
	var b strings.Builder
	what := ""
	if f.version != "" {
		what = " " + f.version + ".z"
	}
	plural := "s"
	if len(l.Versions) == 1 {
		plural = ""
	}
	fmt.Fprintf(&b, "# channel %s, arch %s: %d%s release%s, head %s\n", l.Channel, l.Arch, len(l.Versions), what, plural, l.Head)
	for _, v := range l.Versions {
		b.WriteString(v + "\n")
	}
	_, err = io.WriteString(out, b.String())
	return err
}

// listChannels prints the channels of --version that have releases.
func (f *listReleasesFlags) listChannels(ctx context.Context, out io.Writer, client *release.GraphClient, arch string) error {
	found, err := release.DiscoverChannels(ctx, client, f.version, arch)
	if err != nil {
		return fmt.Errorf("listing the channels of %s: %w", f.version, err)
	}
	if len(found) == 0 {
		return fmt.Errorf("no channel of %s has releases for arch %s at %s: check the version and --arch",
			f.version, arch, client.URL(release.TypeOCP))
	}
	l := minorListing{Version: f.version, Arch: arch, Type: string(release.TypeOCP), Channels: []channelListing{}}
	for _, s := range found {
		l.Channels = append(l.Channels, channelListing{Channel: s.Channel, Arch: s.Arch, Type: string(release.TypeOCP), Head: s.Head, Versions: s.Versions})
	}
	if f.output == "json" {
		return writeJSON(out, l)
	}
	var b strings.Builder
	if f.channels {
		fmt.Fprintf(&b, "# channels of %s, arch %s\n", f.version, arch)
		for _, c := range l.Channels {
			b.WriteString(c.Channel + "\n")
		}
	} else {
		fmt.Fprintf(&b, "# channels of %s, arch %s: channel, releases, head\n", f.version, arch)
		width := 0
		for _, c := range l.Channels {
			width = max(width, len(c.Channel))
		}
		for _, c := range l.Channels {
			fmt.Fprintf(&b, "%-*s  %3d  %s\n", width, c.Channel, len(c.Versions), c.Head)
		}
	}
	_, err = io.WriteString(out, b.String())
	return err
}

// listMinors prints the minor versions that have a stable channel (OKD:
// none can be found without a channel name) with their heads: the update
// service has no list of channels, so stable-4.1, stable-4.2, … are asked
// for until three in a row are missing after one was found.
func (f *listReleasesFlags) listMinors(ctx context.Context, out io.Writer, client *release.GraphClient, key release.GraphKey) error {
	if key.Type == release.TypeOKD {
		return errors.New("OKD channels cannot be found without a name: name one with --channel")
	}
	type minor struct {
		Version string `json:"version"`
		Channel string `json:"channel"`
		Head    string `json:"head"`
	}
	found := []minor{}
	misses := 0
	for n := 1; n <= 99 && (len(found) == 0 || misses < 3); n++ {
		key.Channel = fmt.Sprintf("stable-4.%d", n)
		g, err := client.Graph(ctx, key)
		if errors.Is(err, release.ErrNoReleases) {
			misses++
			continue
		}
		if err != nil {
			return fmt.Errorf("listing channel %s: %w", key.Channel, err)
		}
		g.Channel, g.Arch = key.Channel, key.Arch
		s := release.Summarize(g)
		if len(s.Versions) == 0 {
			misses++
			continue
		}
		misses = 0
		found = append(found, minor{Version: fmt.Sprintf("4.%d", n), Channel: key.Channel, Head: s.Head})
	}
	if len(found) == 0 {
		return fmt.Errorf("no stable-4.N channel has releases for arch %s at %s: check --arch and --graph-url", key.Arch, client.URL(key.Type))
	}
	if f.output == "json" {
		return writeJSON(out, map[string]any{"arch": key.Arch, "minors": found})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# OpenShift minor versions, arch %s: version, head of stable-X.Y (`--version X.Y` lists its channels)\n", key.Arch)
	for _, m := range found {
		fmt.Fprintf(&b, "%-5s  %s\n", m.Version, m.Head)
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// inMinor keeps the versions of minor (X.Y, or X.Y.Z meaning X.Y), in order.
func inMinor(versions []string, minor string) ([]string, error) {
	m, err := semver.NewVersion(strings.TrimSpace(minor))
	if err != nil {
		return nil, fmt.Errorf("--version %q: write it as X.Y, e.g. 4.18", minor)
	}
	var out []string
	for _, v := range versions {
		if sv, err := semver.NewVersion(v); err == nil && sv.Major() == m.Major() && sv.Minor() == m.Minor() {
			out = append(out, v)
		}
	}
	return out, nil
}

// writeJSON prints v as indented JSON.
func writeJSON(out io.Writer, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the listing: %w", err)
	}
	_, err = out.Write(append(data, '\n'))
	return err
}
