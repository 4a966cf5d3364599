package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/archivesign"
	"github.com/gapmirror/gapmirror/failure"
	"github.com/gapmirror/gapmirror/progress"
	"github.com/gapmirror/gapmirror/transfer"
	"github.com/gapmirror/gapmirror/workspace"
)

func newDescribeCommand(g *globalFlags) *cobra.Command {
	var quick, images bool
	var output, verifyKey string
	cmd := &cobra.Command{
		Use:   "describe file://DIR",
		Short: "Say what an archive contains, what changed since the one it builds on, and whether it is complete and intact",
		Example: `  gapmirror describe file:///media/mirror
  gapmirror describe --images file:///media/mirror   # also every image, by digest
  gapmirror describe -o json file:///media/mirror    # everything, as one JSON document
  gapmirror describe --quick file:///media/mirror    # skip reading every blob`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("--output %q: use text or json", output)
			}
			log, err := g.logger(nil)
			if err != nil {
				return err
			}
			dir, err := fileURL("archive", args[0])
			if err != nil {
				return err
			}
			trust, err := loadVerifyKey(verifyKey)
			if err != nil {
				return err
			}
			found, err := archive.List(dir)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if len(found) > 1 && output == "text" {
				fmt.Fprintf(out, "%d archives in %s, oldest first; disk-to-mirror applies those not yet applied, in this order\n", len(found), dir)
			}
			present := map[string]bool{}
			var workspaces []string
			for _, a := range found {
				present[a.Index.ID] = true
				if w := a.Index.Workspace; w != "" && !slices.Contains(workspaces, w) {
					workspaces = append(workspaces, w)
				}
			}
			if len(workspaces) > 1 && output == "text" {
				fmt.Fprintf(out, "mixed: these archives were written by %d mirror-to-disk workspaces (%s); disk-to-mirror applies one workspace's archives to a mirror and refuses the others': carry each workspace's archives in a directory of their own\n",
					len(workspaces), strings.Join(workspaces, ", "))
			}
			var docs []describedArchive
			var damaged []string
			for i, a := range found {
				if len(found) > 1 && output == "text" {
					fmt.Fprintf(out, "\n[%d/%d] %s\n", i+1, len(found), a.First)
				}
				d, check := checkArchive(cmd, g, log, dir, a, quick, trust)
				if d.BasedOn != nil {
					d.BasedOn.InDirectory = present[d.BasedOn.ID]
				}
				if len(workspaces) > 1 && output == "text" {
					fmt.Fprintf(out, "workspace: %s\n", cmp.Or(d.Workspace, "not named (an older gapmirror wrote it)"))
				}
				if output == "json" {
					docs = append(docs, describedArchive{d, check})
				} else {
					describe(out, d, check, images)
				}
				switch {
				case check.Damage == "":
				case strings.Contains(check.Damage, d.ID):
					damaged = append(damaged, check.Damage)
				default:
					damaged = append(damaged, fmt.Sprintf("archive %s in %s is damaged: %s", d.ID, dir, check.Damage))
				}
			}
			if output == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				var v any = docs
				if len(docs) == 1 {
					v = docs[0]
				}
				if err := enc.Encode(v); err != nil {
					return err
				}
			}
			if len(damaged) > 0 {
				return errors.New(strings.Join(damaged, "; "))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&quick, "quick", false, "check chunks are present and sized right, without reading every blob")
	cmd.Flags().BoolVar(&images, "images", false, "also list every image with its digest")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json (json always has every image)")
	cmd.Flags().StringVar(&verifyKey, "verify-key", "", "check each archive's signature with this public key (cosign.pub) before reading its chunks; an archive it did not sign is refused")
	return cmd
}

// describeCheck is what checking the archive found.
type describeCheck struct {
	Quick  bool     `json:"quick"`
	Intact bool     `json:"intact"`
	Damage string   `json:"damage,omitempty"`
	Stray  []string `json:"strayFiles,omitempty"`
	// Signature: "verified" (--verify-key), "refused" (see Damage),
	// "unchecked" (a signature file, no --verify-key) or "none".
	Signature string `json:"signature"`
}

// describedArchive is one archive in -o json (several archives in one
// directory make a JSON array of them).
type describedArchive struct {
	*workspace.Description
	Check describeCheck `json:"check"`
}

// checkArchive describes the archive a (from its verified index) and
// checks it: its chunks present and sized right, and (but with quick)
// every blob against its checksum. An archive that fails a check is still
// described; check.Damage says what is wrong and what to do.
func checkArchive(cmd *cobra.Command, g *globalFlags, log *slog.Logger, dir string, a archive.Listed, quick bool, trust *archivesign.Verifier) (*workspace.Description, describeCheck) {
	d := workspace.Describe(dir, a.Index)
	sig := "none"
	switch {
	case trust != nil:
		// Before any chunk is read for content.
		if err := trust.VerifyArchive(dir, a.First, a.Index); err != nil {
			return d, describeCheck{Quick: quick, Damage: err.Error(), Signature: "refused"}
		}
		sig = "verified"
	case archivesign.Signed(dir, a.First):
		sig = "unchecked"
	}
	r, err := archive.OpenFirst(dir, a.First)
	if err != nil {
		return d, describeCheck{Quick: quick, Damage: failure.Message(err), Signature: sig}
	}
	check := describeCheck{Quick: quick, Stray: r.Stray(), Signature: sig}
	if quick {
		return d, check
	}
	p := g.progress(log)
	var total int64
	for _, c := range r.Index().Chunks {
		total += c.Size
	}
	p.Phase("checking archive", 0, transfer.Totals{Blobs: int64(len(r.Index().Blobs)), Bytes: total})
	r.SetProgress(progress.ArchiveProgress(p))
	verr := r.Verify(cmd.Context())
	p.Finish()
	if verr != nil {
		check.Damage = failure.Message(verr)
	} else {
		check.Intact = true
	}
	return d, check
}

// describe prints the summary first, then what changed, then (asked for)
// every image.
func describe(w io.Writer, d *workspace.Description, c describeCheck, images bool) {
	fmt.Fprintf(w, "archive %s, made %s by gapmirror %s\n", d.ID, d.Created.UTC().Format("2006-01-02 15:04 MST"), d.ToolVersion)
	fmt.Fprintf(w, "  %d images", d.Images)
	if d.Signatures > 0 {
		fmt.Fprintf(w, " and %d signatures", d.Signatures)
	}
	fmt.Fprintf(w, "; %d blobs, %s in %d chunk(s)\n", d.Blobs, progress.HumanBytes(d.Bytes), len(d.Chunks))
	switch {
	case d.BasedOn == nil:
		fmt.Fprintln(w, "builds on: nothing (a full archive)")
	case d.BasedOn.Applied:
		fmt.Fprintf(w, "builds on: %s, applied here %s to %s\n", d.BasedOn.ID, d.BasedOn.AppliedAt.UTC().Format("2006-01-02 15:04 MST"), d.BasedOn.Mirror)
	case d.BasedOn.InDirectory:
		fmt.Fprintf(w, "builds on: %s, in this directory too and not applied from it yet (disk-to-mirror applies it first)\n", d.BasedOn.ID)
	default:
		fmt.Fprintf(w, "builds on: %s, not in this directory and not applied from it (copy that archive's chunks here too, or pass --skip-predecessor-check if the mirror has it)\n", d.BasedOn.ID)
	}
	if len(d.AppliedTo) == 0 {
		fmt.Fprintln(w, "applied from this directory: not yet")
	}
	for _, a := range d.AppliedTo {
		fmt.Fprintf(w, "applied from this directory: %s to %s\n", a.Applied.UTC().Format("2006-01-02 15:04 MST"), a.Mirror)
	}
	if len(d.Releases) > 0 {
		fmt.Fprintf(w, "releases (%d):\n", len(d.Releases))
		for _, r := range d.Releases {
			ch := ""
			if len(r.Channels) > 0 {
				ch = "  channel " + strings.Join(r.Channels, ", ")
			}
			fmt.Fprintf(w, "  %-12s %-8s%s\n", r.Version, r.Arch, ch)
		}
	}
	for _, cat := range d.Catalogs {
		fmt.Fprintf(w, "operator catalog %s (%d packages):\n", cat.Catalog, len(cat.Packages))
		for _, p := range cat.PackageNames() {
			fmt.Fprintf(w, "  %s: %s\n", p, strings.Join(cat.Packages[p], ", "))
		}
	}
	if len(d.HelmCharts) > 0 {
		fmt.Fprintf(w, "helm charts (%d): %s\n", len(d.HelmCharts), strings.Join(d.HelmCharts, ", "))
	}
	if len(d.Additional) > 0 {
		fmt.Fprintf(w, "additional images (%d):\n", len(d.Additional))
		for _, a := range d.Additional {
			fmt.Fprintf(w, "  %s\n", a)
		}
	}
	if len(d.LeftOut) > 0 {
		fmt.Fprintf(w, "partial: mirror-to-disk left out %d images that failed there: %s\n", len(d.LeftOut), strings.Join(d.LeftOut, ", "))
	}
	if len(d.Blocked) > 0 {
		fmt.Fprintf(w, "blocked: %d images kept out by mirror.blockedImages\n", len(d.Blocked))
	}
	if ch := d.Changes; ch != nil {
		fmt.Fprintf(w, "changes since %s: %d images added, %d removed; releases %s; bundles %s\n", d.BasedOn.ID,
			len(ch.AddedImages), len(ch.RemovedImages), plusMinus(ch.AddedReleases, ch.RemovedReleases), plusMinus(ch.AddedBundles, ch.RemovedBundles))
	} else if d.BasedOn != nil {
		fmt.Fprintf(w, "changes since %s: unknown here (this directory has no record of that archive's images)\n", d.BasedOn.ID)
	}
	for _, s := range c.Stray {
		fmt.Fprintf(w, "stray file (not part of this archive): %s\n", s)
	}
	switch c.Signature {
	case "verified":
		fmt.Fprintln(w, "signed: the index's signature verified with --verify-key")
	case "unchecked":
		fmt.Fprintln(w, "signed: a signature file is beside it (check it with --verify-key cosign.pub)")
	case "none":
		fmt.Fprintln(w, "signed: no")
	}
	switch {
	case c.Damage != "":
		fmt.Fprintf(w, "damaged: %s\n", c.Damage)
	case c.Quick:
		fmt.Fprintln(w, "complete: every chunk present with the right size (blobs not read: --quick)")
	case c.Intact:
		fmt.Fprintln(w, "intact: every chunk and blob verified against its checksum")
	}
	if !images {
		fmt.Fprintln(w, "(every image with its digest: --images; everything as JSON: -o json)")
		return
	}
	fmt.Fprintln(w, "images:")
	for _, img := range d.ImageList {
		note := ""
		if !img.Carried {
			note = "  (manifest carried by an earlier archive)"
		}
		if len(img.Platforms) > 0 {
			note += "  [sparse: " + strings.Join(img.Platforms, ", ") + "]"
		}
		fmt.Fprintf(w, "  %-18s %s@%s%s\n", img.Kind, img.Destination, img.Digest, note)
	}
}

// plusMinus renders added and removed names as "+a +b -c", or "unchanged".
func plusMinus(added, removed []string) string {
	var parts []string
	for _, a := range added {
		parts = append(parts, "+"+a)
	}
	for _, r := range removed {
		parts = append(parts, "-"+r)
	}
	if len(parts) == 0 {
		return "unchanged"
	}
	if len(parts) > 8 {
		return strings.Join(parts[:8], " ") + fmt.Sprintf(" and %d more", len(parts)-8)
	}
	return strings.Join(parts, " ")
}
