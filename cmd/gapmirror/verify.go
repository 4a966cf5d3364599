package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gapmirror/gapmirror/audit"
	"github.com/gapmirror/gapmirror/transfer"
	"github.com/gapmirror/gapmirror/workspace"
)

func newVerifyCommand(g *globalFlags) *cobra.Command {
	var from, ws, output string
	var deep bool
	var parallel int
	cmd := &cobra.Command{
		Use:   "verify (--from file://DIR | --workspace file://WS) docker://HOST[/PREFIX]",
		Short: "Audit a mirror registry against what the trips to it pushed: every image by digest, its platform manifests and blobs, the tags the cluster resources name",
		Example: `  gapmirror verify --from file:///media/usb docker://registry.airgap:5000/mirror
  gapmirror verify --workspace file:///ws docker://registry:5000/mirror --deep   # read and hash every blob
  gapmirror verify --from file:///media/usb -o json docker://registry.airgap:5000/mirror`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("--output %q: use text or json", output)
			}
			if parallel < 1 || parallel > 64 {
				return fmt.Errorf("--parallel-images %d: use 1 to 64", parallel)
			}
			if err := g.checkAuthFile(); err != nil {
				return err
			}
			dir, wd, root, err := verifyLine(from, ws, args[0])
			if err != nil {
				return err
			}
			log, err := g.logger(nil)
			if err != nil {
				return err
			}
			opts, err := g.mirror()
			if err != nil {
				return err
			}
			dst, err := transfer.NewMirror(root, opts)
			if err != nil {
				return err
			}
			defer dst.Close()
			exp, err := audit.Load(dir, wd, dst.Root())
			if err != nil {
				return err
			}
			a := &audit.Audit{Mirror: dst, Expected: exp, ParallelImages: parallel, Deep: deep, Log: log}
			rep, err := a.Run(cmd.Context())
			if err != nil {
				return err
			}
			if output == "json" {
				if err := rep.JSON(cmd.OutOrStdout()); err != nil {
					return err
				}
			} else {
				rep.Print(cmd.OutOrStdout())
			}
			return rep.Err()
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the file:// directory disk-to-mirror pushed the archive from (its working-dir has the records)")
	cmd.Flags().StringVar(&ws, "workspace", "", "the file:// workspace of the mirror-to-mirror runs to the mirror")
	cmd.Flags().BoolVar(&deep, "deep", false, "read every blob and check it against its digest, instead of asking with a HEAD")
	cmd.Flags().IntVar(&parallel, "parallel-images", 8, "images checked at once (1-64); blob requests twice as many at once")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json (json lists every problem)")
	return cmd
}

// verifyLine checks verify's command line: the directory given, its
// working-dir and the mirror root.
func verifyLine(from, ws, target string) (dir, wd, root string, err error) {
	if !strings.HasPrefix(target, "docker://") {
		return "", "", "", fmt.Errorf("mirror %q: name the registry verify audits, docker://HOST[:PORT][/PREFIX], as the trips to it did", target)
	}
	root = strings.TrimPrefix(target, "docker://")
	if root == "" || strings.HasPrefix(root, "/") {
		return "", "", "", fmt.Errorf("mirror %q: name the registry, docker://HOST[:PORT][/PREFIX]", target)
	}
	switch {
	case from != "" && ws != "":
		return "", "", "", fmt.Errorf("give either --from (the disk-to-mirror directory) or --workspace (mirror-to-mirror), not both")
	case from != "":
		if dir, err = fileURL("--from", from); err != nil {
			return "", "", "", err
		}
		wd = filepath.Join(dir, workspace.WorkingDir)
	case ws != "":
		if dir, err = fileURL("--workspace", ws); err != nil {
			return "", "", "", err
		}
		wd = filepath.Join(dir, workspace.WorkingDir)
		if filepath.Base(dir) == workspace.WorkingDir {
			wd = dir
		}
	default:
		return "", "", "", fmt.Errorf("verify needs --from file://DIR (the directory disk-to-mirror pushed from) or --workspace file://WS (mirror-to-mirror): their records say what the mirror should hold")
	}
	if fi, err := os.Stat(wd); err != nil || !fi.IsDir() {
		return "", "", "", fmt.Errorf("%s has no %s with the records of the trips (%s): give the directory the trips to %s used", dir, workspace.WorkingDir, wd, target)
	}
	return dir, wd, root, nil
}
