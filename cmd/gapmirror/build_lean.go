//go:build gapmirror_lean

package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/gapmirror/gapmirror/companion"
)

// newBuildCommands of the lean build: serve, which gapmirror-full runs
// (companion/companion.go says why the registry server is not in here).
func newBuildCommands(*globalFlags) []*cobra.Command {
	return []*cobra.Command{{
		Use:   serveUse,
		Short: serveShort,
		Long: `gapmirror serve runs gapmirror-full serve, with the same arguments: the registry server is
in gapmirror-full, installed beside gapmirror. 'gapmirror serve --help' lists its flags.
See docs/serve.md.`,
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			// The command line as given, global flags before "serve" included.
			return companion.Exec(os.Args[1:])
		},
	}}
}

// companionInfo is the gapmirror-full this build runs, or why there is none.
func companionInfo() string {
	p, err := companion.Path()
	if err != nil {
		return "not available: " + err.Error()
	}
	return p
}
