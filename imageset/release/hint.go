package release

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/gapmirror/gapmirror/imageset/spelling"
)

// noReleasesHint is the error for a required channel without releases: the
// field that names it, the channels the graph does have for that minor, and
// the closest of them (or of the minor with its digits swapped, a common
// typo) as a did-you-mean.
func noReleasesHint(ctx context.Context, src GraphSource, k GraphKey, spec Spec) noReleasesError {
	field := "mirror.platform.channels"
	for i, c := range spec.Channels {
		if c.Name == k.Channel {
			field = fmt.Sprintf("mirror.platform.channels[%d].name", i)
			break
		}
	}
	base := noReleasesError(fmt.Sprintf("%s: channel %s has no releases for arch %s", field, k.Channel, k.Arch))
	prefix, major, minor, ok := channelMinor(k.Channel)
	if !ok || k.Type == TypeOKD {
		return base + "; OpenShift channels are named <stable|fast|candidate|eus>-<major>.<minor>, e.g. stable-4.18"
	}
	minors := []uint64{minor}
	if s := strconv.FormatUint(minor, 10); len(s) == 2 && s[0] != s[1] {
		swapped, _ := strconv.ParseUint(string([]byte{s[1], s[0]}), 10, 32)
		minors = append(minors, swapped)
	}
	var have, all []string
	for i, m := range minors {
		found, err := DiscoverChannels(ctx, src, fmt.Sprintf("%d.%d", major, m), k.Arch)
		if err != nil {
			return base
		}

		for _, f := range found {
			if i == 0 {
				have = append(have, f.Channel)
			}
			all = append(all, f.Channel)
		}
	}
	var b strings.Builder
	if len(have) > 0 {
		fmt.Fprintf(&b, "; the channels of %d.%d with releases for %s: %s", major, minor, k.Arch, strings.Join(have, ", "))
	} else {
		fmt.Fprintf(&b, "; %d.%d has no channel with releases for %s", major, minor, k.Arch)
	}
	if best := closest(k.Channel, all); best != "" {
		fmt.Fprintf(&b, " (did you mean %s?)", best)
	} else if prefix != "" && len(have) == 0 {
		b.WriteString("; check the version with gapmirror list releases --version X.Y --channels")
	}
	return base + noReleasesError(b.String())
}

// noReleasesError is a channel without releases; it is ErrNoReleases.
type noReleasesError string

func (e noReleasesError) Error() string { return string(e) }

func (e noReleasesError) Is(target error) bool { return target == ErrNoReleases }

// closest is the name nearest to s by edit distance, if a likely typo.
func closest(s string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := spelling.Distance(s, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}
