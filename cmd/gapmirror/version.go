package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// Set at build time (make build, make dist) with
// -ldflags "-X main.version=… -X main.commit=… -X main.buildDate=…". A
// `go install …@vX.Y.Z` build leaves them empty and the module's build
// information fills them in.
var (
	version   = ""
	commit    = ""
	buildDate = ""
)

func init() {
	info, ok := debug.ReadBuildInfo()
	if version == "" {
		version = "dev"
		if ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
			version = info.Main.Version
		}
	}
	if !ok {
		return
	}
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision" && commit == "":
			commit = s.Value
		case s.Key == "vcs.time" && buildDate == "":
			buildDate = s.Value
		}
	}
}

// versionInfo is what `gapmirror version` reports.
type versionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	BuildDate string `json:"buildDate,omitempty"`
	GoVersion string `json:"goVersion,omitempty"`
	Platform  string `json:"platform,omitempty"`
	// Companion is, in the lean build, the gapmirror-full it runs for serve
	// and helm charts (or why there is none); empty in the whole program.
	Companion string `json:"companion,omitempty"`
}

func newVersionCommand() *cobra.Command {
	var output string
	var short bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the gapmirror version, commit and build date",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := versionInfo{Version: version, Commit: commit, BuildDate: buildDate, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, Companion: companionInfo()}
			if short {
				v = versionInfo{Version: v.Version}
			}
			out := cmd.OutOrStdout()
			switch {
			case short && output == "":
				fmt.Fprintln(out, v.Version)
			case output == "json":
				data, err := json.MarshalIndent(v, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintln(out, string(data))
			case output == "yaml":
				data, err := yaml.Marshal(v)
				if err != nil {
					return err
				}
				fmt.Fprint(out, string(data))
			case output == "":
				fmt.Fprintf(out, "gapmirror %s\ncommit: %s\nbuilt: %s\ngo: %s %s\n", v.Version, orUnknown(v.Commit), orUnknown(v.BuildDate), v.GoVersion, v.Platform)
				if v.Companion != "" {
					fmt.Fprintf(out, "serve and helm charts: %s\n", v.Companion)
				}
			default:
				return fmt.Errorf("--output %q: use json or yaml", output)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "print as json or yaml")
	cmd.Flags().BoolVar(&short, "short", false, "print the version number only")
	return cmd
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
