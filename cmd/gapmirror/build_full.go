//go:build !gapmirror_lean

package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gapmirror/gapmirror/imageset/helm"
)

// maxChartArchive bounds what helm-template reads: a chart archive, not a
// disk image (helm's own loader refuses files over 5 MiB uncompressed each).
const maxChartArchive = 256 << 20

// newBuildCommands are the commands of this build beyond the common ones:
// the registry server, and what the lean build asks of this one
// (companion/companion.go).
func newBuildCommands(g *globalFlags) []*cobra.Command {
	comp := &cobra.Command{
		Use:    "companion",
		Short:  "What the lean gapmirror asks of gapmirror-full (not for use by hand)",
		Hidden: true,
		Args:   cobra.NoArgs,
	}
	comp.AddCommand(&cobra.Command{
		Use:   "helm-template",
		Short: "Render the chart archive on stdin with its default values; print the files as a JSON object",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxChartArchive+1))
			if err != nil {
				return fmt.Errorf("reading the chart archive: %w", err)
			}
			if len(data) > maxChartArchive {
				return fmt.Errorf("the chart archive is over %d MiB", maxChartArchive>>20)
			}
			files, err := helm.Template(cmd.Context(), data)
			if err != nil {
				return err
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(files)
		},
	}, &cobra.Command{
		Use:   "helm-package DIR",
		Short: "Print the .tgz of the chart directory DIR, as gapmirror carries it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := helm.Package(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(data)
			return err
		},
	})
	return []*cobra.Command{newServeCommand(g), comp}
}

// companionInfo: this build is the whole program.
func companionInfo() string { return "" }
