package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/cobra"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/mirror"
)

func newDescribeCommand() *cobra.Command {
	var quick bool
	cmd := &cobra.Command{
		Use:   "describe file://DIR",
		Short: "Say what an archive contains, what it builds on, and whether it is complete and intact",
		Example: `  gapmirror describe file:///media/mirror
  gapmirror describe --quick file:///media/mirror   # skip reading every blob`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := fileURL("archive", args[0])
			if err != nil {
				return err
			}
			found, err := archive.List(dir)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if len(found) > 1 {
				fmt.Fprintf(out, "%d archives in %s, oldest first; disk-to-mirror applies those not yet applied, in this order\n", len(found), dir)
			}
			for i, a := range found {
				if len(found) > 1 {
					fmt.Fprintf(out, "\n[%d/%d] %s\n", i+1, len(found), a.First)
				}
				if err := describeArchive(cmd, out, dir, a.First, quick); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&quick, "quick", false, "check chunks are present and sized right, without reading every blob")
	return cmd
}

// describeArchive describes and checks the archive whose chunk 1 is first.
func describeArchive(cmd *cobra.Command, out io.Writer, dir, first string, quick bool) error {
	r, err := archive.OpenFirst(dir, first)
	if err != nil {
		return err
	}
	describe(out, r.Index())
	for _, s := range r.Stray() {
		fmt.Fprintf(out, "stray file (not part of this archive): %s\n", s)
	}
	if quick {
		fmt.Fprintln(out, "complete: every chunk present with the right size (blobs not read: --quick)")
		return nil
	}
	if err := r.Verify(cmd.Context()); err != nil {
		return fmt.Errorf("archive %s in %s is damaged: %w", r.Index().ID, dir, err)
	}
	fmt.Fprintln(out, "intact: every chunk and blob verified against its checksum")
	return nil
}

func describe(w io.Writer, idx *archive.Index) {
	fmt.Fprintf(w, "archive:      %s\n", idx.ID)
	if idx.BasedOn != "" {
		fmt.Fprintf(w, "builds on:    %s (apply that archive first)\n", idx.BasedOn)
	} else {
		fmt.Fprintf(w, "builds on:    nothing (a full archive)\n")
	}
	fmt.Fprintf(w, "created:      %s by gapmirror %s\n", idx.Created.Format("2006-01-02 15:04:05 MST"), idx.ToolVersion)
	var bytes int64
	for _, b := range idx.Blobs {
		bytes += b.Size
	}
	fmt.Fprintf(w, "blobs:        %d new, %s\n", len(idx.Blobs), mirror.HumanBytes(bytes))
	for _, c := range idx.Chunks {
		fmt.Fprintf(w, "chunk:        %s %s\n", c.Name, mirror.HumanBytes(c.Size))
	}
	// What the archive lacks matters as much as what it holds: the mirror
	// will not have it either.
	if len(idx.LeftOut) > 0 {
		fmt.Fprintf(w, "partial:      mirror-to-disk left out %d images that failed there: %s\n", len(idx.LeftOut), strings.Join(idx.LeftOut, ", "))
	}
	if len(idx.Blocked) > 0 {
		fmt.Fprintf(w, "blocked:      %d images kept out by mirror.blockedImages\n", len(idx.Blocked))
	}
	var charts []string
	for _, e := range idx.Extras {
		if strings.HasPrefix(e.Name, "helm/charts/") {
			charts = append(charts, strings.TrimPrefix(e.Name, "helm/charts/"))
		}
	}
	if len(charts) > 0 {
		fmt.Fprintf(w, "helm charts:  %s (disk-to-mirror writes them to working-dir/helm/charts)\n", strings.Join(charts, ", "))
	}
	kinds := map[imageset.Kind]int{}
	if idx.Set != nil {
		for _, img := range idx.Set.Images {
			kinds[img.Kind]++
		}
		var names []string
		for k := range kinds {
			names = append(names, string(k))
		}
		sort.Strings(names)
		fmt.Fprintf(w, "images:       %d\n", len(idx.Set.Images))
		for _, k := range names {
			fmt.Fprintf(w, "  %-20s %d\n", k, kinds[imageset.Kind(k)])
		}
		carried := map[digest.Digest]bool{}
		for _, b := range idx.Blobs {
			carried[b.Digest] = true
		}
		for _, img := range idx.Set.Images {
			note := ""
			if !carried[digest.Digest(img.Digest)] {
				note = "  (manifest carried by an earlier archive)"
			}
			if len(img.Platforms) > 0 {
				note += "  [sparse: " + strings.Join(img.Platforms, ", ") + "]"
			}
			fmt.Fprintf(w, "  %s  %s%s\n", img.Destination, img.Digest, note)
		}
	}
}
