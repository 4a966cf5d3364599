package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/prune"
	"github.com/gapmirror/gapmirror/workspace"
)

type deleteFlags struct {
	config     string
	generate   bool
	workspace  string
	deleteYAML string
	deleteID   string
	dryRun     bool
	maxNested  int
	deleteSigs bool
}

func newDeleteCommand(g *globalFlags) *cobra.Command {
	f := &deleteFlags{}
	cmd := &cobra.Command{
		Use:   "delete (-c disc.yaml --generate --workspace file://WS | --delete-yaml-file FILE) docker://HOST[/PREFIX]",
		Short: "Delete images this workspace mirrored from a mirror registry, in two reviewed steps",
		Long: `delete removes from a mirror registry images that gapmirror pushed there, as oc-mirror v2 does:

  1. gapmirror delete -c delete-isc.yaml --generate --workspace file://WS docker://HOST/PREFIX
     resolves the DeleteImageSetConfiguration against what the workspace recorded pushing to
     that mirror and writes the plan to WS/working-dir/delete/delete-images.yaml. Nothing is deleted.
  2. gapmirror delete --delete-yaml-file WS/working-dir/delete/delete-images.yaml docker://HOST/PREFIX
     checks the plan against the registry again and deletes (--dry-run: only shows).

Only manifests this workspace pushed are deleted, and never one a tag or index that stays still
uses (then only the tag is removed). The registry reclaims layer storage when its garbage
collection runs.`,
		Example: `  gapmirror delete -c delete-isc.yaml --generate --workspace file:///ws docker://registry:5000/mirror
  gapmirror delete --delete-yaml-file /ws/working-dir/delete/delete-images.yaml docker://registry:5000/mirror`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDelete(cmd, g, f, args[0])
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.config, "config", "c", "", "the DeleteImageSetConfiguration (with --generate)")
	fl.BoolVar(&f.generate, "generate", false, "write the delete plan, delete nothing")
	fl.StringVar(&f.workspace, "workspace", "", "with --generate: the file:// workspace (or disk-to-mirror directory) whose records say what was pushed")
	fl.StringVar(&f.deleteYAML, "delete-yaml-file", "", "execute this delete plan (written by --generate)")
	fl.StringVar(&f.deleteID, "delete-id", "", "with --generate: name the plan delete-images-<id>.yaml")
	fl.IntVar(&f.maxNested, "max-nested-paths", 0, "with --generate: the --max-nested-paths the images were mirrored with; checked against the workspace's records, which know the names they were pushed under")
	fl.BoolVar(&f.dryRun, "dry-run", false, "with --delete-yaml-file: check the plan against the registry and show what would be deleted")
	addRefusals(fl, refusedDelete)
	fl.BoolVar(&f.deleteSigs, "delete-signatures", false, "with --generate: also delete the sigstore signatures (sha256-<digest>.sig tags) this workspace mirrored for the deleted images and their platform manifests")
	return cmd
}

func runDelete(cmd *cobra.Command, g *globalFlags, f *deleteFlags, target string) (err error) {
	mode, ws := deleteWorkspace(f)
	log, rl, err := g.runLogger(ws, mode)
	if err != nil {
		return err
	}
	defer func() { rl.Finish(log, err) }()
	if !strings.HasPrefix(target, "docker://") {
		return fmt.Errorf("destination %q: delete works on a mirror registry, docker://HOST[:PORT][/PREFIX]", target)
	}
	mo, err := g.mirror()
	if err != nil {
		return err
	}
	d := &prune.Delete{Mirror: mo, Out: cmd.OutOrStdout(), ToolVersion: version, DeleteSignatures: f.deleteSigs, Log: log}
	root := strings.TrimPrefix(target, "docker://")
	switch {
	case f.generate && f.deleteYAML != "":
		return fmt.Errorf("give either --generate (write a plan) or --delete-yaml-file (execute one), not both")
	case f.generate:
		if f.config == "" {
			return fmt.Errorf("delete --generate needs -c/--config, a DeleteImageSetConfiguration")
		}
		if f.workspace == "" {
			return fmt.Errorf("delete --generate needs --workspace file://DIR: the workspace (or disk-to-mirror directory) that mirrored the images")
		}
		if f.dryRun {
			return fmt.Errorf("--dry-run goes with --delete-yaml-file; --generate never deletes anything")
		}
		if err := checkMaxNestedPaths(f.maxNested); err != nil {
			return err
		}
		if cmd.Flags().Changed("max-nested-paths") {
			d.MaxNestedPaths = &f.maxNested
		}
		dir, err := fileURL("--workspace", f.workspace)
		if err != nil {
			return err
		}
		cfg, err := imageset.LoadDeleteImageSetConfiguration(f.config)
		if err != nil {
			return err
		}
		if len(cfg.Delete.Operators) > 0 {
			// delete.operators reads the mirrored catalogs' FBC from the store.
			if d.StoreDir, err = g.storeDir(); err != nil {
				return err
			}
		}
		_, _, err = d.Generate(cmd.Context(), cfg, f.config, dir, root, f.deleteID)
		return err
	case f.deleteYAML != "":
		if f.config != "" || f.workspace != "" || f.deleteID != "" || f.deleteSigs || cmd.Flags().Changed("max-nested-paths") {
			return fmt.Errorf("--delete-yaml-file takes the plan alone (it names the images as they were pushed): -c, --workspace, --delete-id, --delete-signatures and --max-nested-paths go with --generate")
		}
		_, err := d.Execute(cmd.Context(), f.deleteYAML, root, f.dryRun)
		return err
	default:
		return fmt.Errorf("delete needs --generate (with -c and --workspace) to write a plan, or --delete-yaml-file to execute one")
	}
}

// deleteWorkspace is where a delete keeps its log, as a mirror run does:
// the working-dir of --workspace (--generate) or of the workspace the plan
// was generated from (--delete-yaml-file; a --dry-run's in its dry-run
// directory, as it writes nothing else). "" when there is none yet: a
// mistyped --workspace is not made into one.
func deleteWorkspace(f *deleteFlags) (mode, ws string) {
	switch {
	case f.generate && f.deleteYAML == "":
		d, err := fileURL("--workspace", f.workspace)
		if err != nil {
			return "", ""
		}
		mode, ws = "delete-generate", filepath.Join(d, workspace.WorkingDir)
		if filepath.Base(d) == workspace.WorkingDir {
			ws = d
		}
	case f.deleteYAML != "" && !f.generate:
		l, err := prune.LoadDeleteList(f.deleteYAML)
		if err != nil {
			return "", ""
		}
		mode, ws = "delete", l.Workspace
	default:
		return "", ""
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		return "", ""
	}
	if f.dryRun {
		ws = filepath.Join(ws, "dry-run")
	}
	return mode, ws
}
