package catalog

import (
	"fmt"
	"io"
	"strings"
)

// ReasonKind says why a bundle is kept.
type ReasonKind string

// Reasons a bundle is kept.
const (
	// reasonHead: the bundle is (or becomes) the head of a kept channel.
	reasonHead ReasonKind = "head"
	// reasonInRange: the bundle's version is in the requested range.
	reasonInRange ReasonKind = "in-range"
	// reasonExplicit: the bundle is listed by name.
	reasonExplicit ReasonKind = "explicit"
	// reasonFull: the channel is kept whole.
	reasonFull ReasonKind = "full"
	// reasonUpgradePath: the bundle is needed so that kept bundles can upgrade to the head.
	reasonUpgradePath ReasonKind = "upgrade-path"
	// reasonDependency: another kept bundle requires it.
	reasonDependency ReasonKind = "dependency"
)

// Reason is one reason a bundle is kept.
type Reason struct {
	Kind ReasonKind `json:"kind"`
	// Channel is the channel the reason applies to.
	Channel string `json:"channel,omitempty"`
	// Detail explains the reason in words.
	Detail string `json:"detail,omitempty"`
}

// String renders the reason for people.
func (r Reason) String() string {
	s := string(r.Kind)
	if r.Channel != "" {
		s += " in " + r.Channel
	}
	if r.Detail != "" {
		s += ": " + r.Detail
	}
	return s
}

// Report explains a Filter result: what is kept and why.
type Report struct {
	Packages     []PackageReport    `json:"packages"`
	Dependencies []DependencyReport `json:"dependencies,omitempty"`
	Warnings     []string           `json:"warnings,omitempty"`
}

// PackageReport describes one kept package.
type PackageReport struct {
	Name           string `json:"name"`
	DefaultChannel string `json:"defaultChannel"`
	// Requested is false for packages kept only because a kept bundle depends on them.
	Requested bool            `json:"requested"`
	Channels  []ChannelReport `json:"channels"`
	Bundles   []BundleReport  `json:"bundles"`
	Warnings  []string        `json:"warnings,omitempty"`
}

// ChannelReport describes one kept channel.
type ChannelReport struct {
	Name string `json:"name"`
	// Head is the channel's head after filtering; SourceHead before.
	Head       string `json:"head"`
	SourceHead string `json:"sourceHead,omitempty"`
	// Bundles are the kept entries, oldest version first.
	Bundles []string `json:"bundles"`
}

// BundleReport describes one kept bundle and why it is kept.
type BundleReport struct {
	Name     string   `json:"name"`
	Version  string   `json:"version"`
	Image    string   `json:"image"`
	Channels []string `json:"channels"`
	Reasons  []Reason `json:"reasons"`
}

// DependencyReport records one requirement of a kept bundle and what satisfies it.
type DependencyReport struct {
	// Package and Bundle name the requiring bundle.
	Package string `json:"package"`
	Bundle  string `json:"bundle"`
	// Requirement is the property type and its value, e.g. `olm.package.required cert-manager >=1.12.2`.
	Requirement string `json:"requirement"`
	// SatisfiedBy is "package/bundle", or "" when nothing in the catalog satisfies it.
	SatisfiedBy string `json:"satisfiedBy,omitempty"`
	// Added is true when the satisfying bundle was kept because of this requirement.
	Added bool `json:"added,omitempty"`
}

// Package returns the report of the package called name, or nil.
func (r *Report) Package(name string) *PackageReport {
	for i := range r.Packages {
		if r.Packages[i].Name == name {
			return &r.Packages[i]
		}
	}
	return nil
}

// Bundle returns the report of the bundle called name, or nil.
func (p *PackageReport) Bundle(name string) *BundleReport {
	for i := range p.Bundles {
		if p.Bundles[i].Name == name {
			return &p.Bundles[i]
		}
	}
	return nil
}

// channel returns the report of the channel called name, or nil.
func (p *PackageReport) channel(name string) *ChannelReport {
	for i := range p.Channels {
		if p.Channels[i].Name == name {
			return &p.Channels[i]
		}
	}
	return nil
}

// Has reports whether the bundle is kept for a reason of kind k.
func (b *BundleReport) Has(k ReasonKind) bool {
	for _, r := range b.Reasons {
		if r.Kind == k {
			return true
		}
	}
	return false
}

// writeText writes the report for people: packages, channels with heads,
// bundles with reasons, dependencies and warnings.
func (r *Report) writeText(w io.Writer) error {
	var b strings.Builder
	for _, p := range r.Packages {
		extra := ""
		if !p.Requested {
			extra = " (dependency)"
		}
		fmt.Fprintf(&b, "package %s%s, default channel %s\n", p.Name, extra, p.DefaultChannel)
		for _, ch := range p.Channels {
			head := ch.Head
			if ch.SourceHead != "" && ch.SourceHead != ch.Head {
				head += " (source head " + ch.SourceHead + ")"
			}
			fmt.Fprintf(&b, "  channel %s: head %s, %d bundles\n", ch.Name, head, len(ch.Bundles))
		}
		for _, bu := range p.Bundles {
			reasons := make([]string, len(bu.Reasons))
			for i, re := range bu.Reasons {
				reasons[i] = re.String()
			}
			fmt.Fprintf(&b, "  bundle %s (%s): %s\n", bu.Name, bu.Version, strings.Join(reasons, "; "))
		}
		for _, wn := range p.Warnings {
			fmt.Fprintf(&b, "  warning: %s\n", wn)
		}
	}
	for _, d := range r.Dependencies {
		by := d.SatisfiedBy
		if by == "" {
			by = "NOTHING in the catalog"
		}
		fmt.Fprintf(&b, "dependency %s/%s %s: satisfied by %s\n", d.Package, d.Bundle, d.Requirement, by)
	}
	for _, wn := range r.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", wn)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
