package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/mirror"
	"github.com/gapmirror/gapmirror/sections"
	"github.com/gapmirror/gapmirror/transfer"
	"github.com/gapmirror/gapmirror/workspace"
)

type mirrorFlags struct {
	config         string
	from           string
	workspace      string
	dryRun         bool
	parallelImages int
	parallelLayers int
	retryTimes     int
	retryDelay     time.Duration
	archiveSize    string
	strictArchive  bool
	force          bool
	since          string
	skipPredCheck  bool
	retryFailed    string
	releases       sections.ReleaseOptions
	prune          bool
	maxNestedPaths int
	removeSigs     bool
	referrers      string
	referrersGiven bool // --referrers on the command line
	securePolicy   bool
	policy         string
	signKey        string
	verifyKey      string
}

func newMirrorCommand(g *globalFlags) *cobra.Command {
	f := &mirrorFlags{}
	cmd := &cobra.Command{
		Use:   "mirror -c isc.yaml (file://DIR | --from file://DIR docker://HOST[/PREFIX] | --workspace file://WS docker://HOST[/PREFIX])",
		Short: "Mirror an image set to disk, from disk to a registry, or registry to registry",
		Example: `  gapmirror mirror -c isc.yaml file:///media/mirror
  gapmirror mirror -c isc.yaml --from file:///media/mirror docker://registry.airgap:5000/mirror
  gapmirror mirror -c isc.yaml --workspace file:///ws docker://registry:5000/mirror`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMirror(cmd, g, f, args[0])
		},
	}
	addMirrorFlags(cmd.Flags(), f)
	return cmd
}

// addMirrorFlags registers the flags of the mirror workflows on fl: the
// mirror command's, and the root command's for oc-mirror's command line.
func addMirrorFlags(fl *pflag.FlagSet, f *mirrorFlags) {
	fl.StringVarP(&f.config, "config", "c", "", "the ImageSetConfiguration file (required, except for disk-to-mirror, which uses the archive's or pushes the subset of it this file names)")
	fl.StringVar(&f.from, "from", "", "disk-to-mirror: the file:// directory holding the archive chunks")
	fl.StringVar(&f.workspace, "workspace", "", "mirror-to-mirror: the file:// directory for records and cluster resources")
	fl.BoolVar(&f.dryRun, "dry-run", false, "copy nothing: resolve the image set, save the plan in working-dir/dry-run and say what the run would meet (disk-to-mirror, mirror-to-mirror: reach the mirror, check push access, count what is there, write the cluster resources into working-dir/dry-run)")
	fl.IntVar(&f.parallelImages, "parallel-images", 8, "images copied at once (1-64); blobs transfer twice as many at once per source registry")
	fl.IntVar(&f.parallelLayers, "parallel-layers", 6, "blobs of one image copied at once (1-64); at most parallel-images × this per source registry")
	fl.IntVar(&f.retryTimes, "retry-times", 5, "retries of a failed blob or manifest transfer (0-100)")
	fl.DurationVar(&f.retryDelay, "retry-delay", 500*time.Millisecond, "first retry delay; doubles each retry")
	fl.StringVar(&f.archiveSize, "archive-size", "", "maximum size of an archive chunk: a number of GiB (as archiveSize) or e.g. 500MiB; default the config's archiveSize, else 500GiB")
	fl.BoolVar(&f.strictArchive, "strict-archive", false, "fail instead of writing an oversized chunk when a single blob exceeds --archive-size")
	fl.BoolVarP(&f.force, "force", "f", false, "copy every image even if the destination already has it; mirror-to-disk: replace chunk files an earlier archive left in the directory under the same names")
	fl.StringVar(&f.retryFailed, "retry-failed", "", "copy exactly the images a failed run listed in this file (its path is printed at the end of that run), with the digests that run pinned")
	fl.StringVar(&f.since, "since", "", "mirror-to-disk: leave out only blobs carried by archives made before this date (yyyy-mm-dd), e.g. when a later archive was lost")
	fl.BoolVar(&f.prune, "prune", false, "disk-to-mirror, mirror-to-mirror: once every image is mirrored, delete from the mirror what earlier runs of this workspace pushed there and the image set no longer holds (without it, the run only lists them)")
	fl.BoolVar(&f.skipPredCheck, "skip-predecessor-check", false, "disk-to-mirror: apply an incremental archive even though this directory has no record of applying the archive it builds on")
	fl.IntVar(&f.maxNestedPaths, "max-nested-paths", 0, "disk-to-mirror, mirror-to-mirror: for registries that limit repository depth (e.g. Quay: 2), at most this many path components below the host, the mirror root's included; deeper paths keep N-1 components and join the rest with '-' (0: no limit)")
	fl.BoolVar(&f.removeSigs, "remove-signatures", false, "do not look for or mirror the images' signatures: the sigstore (cosign) sha256-<digest>.sig tags next to them (mirrored by default, as oc-mirror 4.21 does) and the signatures among their referrers (cosign v3 bundles, Notation)")
	fl.StringVar(&f.referrers, "referrers", "signatures,attestations", "the kinds of OCI 1.1 referrers (artifacts attached to an image: cosign v3 bundles, attestations, SBOMs, Notation signatures) mirrored with each image, a comma-separated list of signatures, attestations, sbom, notation, other; or all, or none; disk-to-mirror pushes every kind the archive carries unless given (see docs/sigstore.md)")
	fl.BoolVar(&f.securePolicy, "secure-policy", false, "mirror-to-disk, mirror-to-mirror: mirror only images the signature policy accepts (--policy, else /etc/containers/policy.json); cosign signatures are read from the sha256-<digest>.sig tags")
	fl.StringVar(&f.policy, "policy", "", "with --secure-policy: the containers policy.json to verify images with")
	fl.StringVar(&f.signKey, "sign-key", "", "mirror-to-disk: sign the archive's index with this private key (cosign's format, see generate-key-pair; its password from COSIGN_PASSWORD or the terminal)")
	fl.StringVar(&f.verifyKey, "verify-key", "", "disk-to-mirror: refuse, before reading or pushing anything of it, an archive this public key (cosign.pub) did not sign")
	addReleaseFlags(fl, &f.releases)
	addRefusals(fl, refusedMirror)
}

func runMirror(cmd *cobra.Command, g *globalFlags, f *mirrorFlags, target string) (err error) {
	// Every input is checked before anything is written: a wrong -c,
	// --from or destination must not leave a working-dir/logs behind (at
	// a path the user never meant to create).
	f.referrersGiven = cmd.Flags().Changed("referrers")
	trip, line, err := prepareMirror(g, f, target)
	if err != nil {
		return err
	}
	mode, ws := runWorkspace(target, f)
	logDir := ws
	if f.dryRun && ws != "" {
		// A dry run writes nothing outside working-dir/dry-run.
		logDir = filepath.Join(ws, "dry-run")
	}
	log, rl, err := g.runLogger(logDir, mode)
	if err != nil {
		return err
	}
	defer func() { rl.Finish(log, err) }()
	trip.Log, trip.Out = log, cmd.OutOrStdout()
	trip.Copy.Progress = g.progress(log)

	ctx := cmd.Context()
	var report *mirror.Report
	switch line.mode {
	case "mirror-to-disk":
		report, err = trip.MirrorToDisk(ctx, line.dir)
	case "disk-to-mirror":
		report, err = trip.DiskToMirror(ctx, line.dir, line.root)
	default:
		report, err = trip.MirrorToMirror(ctx, line.dir, line.root)
	}
	if err != nil {
		return err
	}
	report.Summary(cmd.OutOrStdout())
	return report.Err()
}

// mirrorLine is a checked mirror command line: the workflow, its
// directory (the destination, --from or --workspace) and the mirror root.
type mirrorLine struct {
	mode, dir, root string
}

// prepareMirror checks the flags, the configuration file, the destination
// and --from, and builds the trip (without its logger), creating nothing.
func prepareMirror(g *globalFlags, f *mirrorFlags, target string) (*mirror.Trip, mirrorLine, error) {
	var line mirrorLine
	if _, err := parseLevel(g.logLevel); err != nil {
		return nil, line, err
	}
	if err := g.checkAuthFile(); err != nil {
		return nil, line, err
	}
	if f.parallelImages < 1 || f.parallelImages > 64 {
		return nil, line, fmt.Errorf("--parallel-images %d: use 1 to 64", f.parallelImages)
	}
	if f.parallelLayers < 1 || f.parallelLayers > 64 {
		return nil, line, fmt.Errorf("--parallel-layers %d: use 1 to 64", f.parallelLayers)
	}
	if f.retryTimes < 0 || f.retryTimes > 100 {
		return nil, line, fmt.Errorf("--retry-times %d: use 0 to 100", f.retryTimes)
	}
	if err := checkMaxNestedPaths(f.maxNestedPaths); err != nil {
		return nil, line, err
	}
	storeDir, err := g.storeDir()
	if err != nil {
		return nil, line, err
	}
	upstream, err := g.upstream()
	if err != nil {
		return nil, line, err
	}
	dest, err := g.mirror()
	if err != nil {
		return nil, line, err
	}
	trip := &mirror.Trip{
		Upstream:    upstream,
		Mirror:      dest,
		StoreDir:    storeDir,
		DryRun:      f.dryRun,
		ToolVersion: version,
		Copy: transfer.Options{
			ParallelImages: f.parallelImages,
			ParallelLayers: f.parallelLayers,
			Retries:        f.retryTimes,
			RetryDelay:     f.retryDelay,
			Force:          f.force,
		},
		StrictArchive: f.strictArchive,
		Releases:      f.releases,
	}
	if f.since != "" {
		since, err := time.Parse("2006-01-02", f.since)
		if err != nil {
			return nil, line, fmt.Errorf("--since %q: use a date like 2026-11-01", f.since)
		}
		trip.Since = since
	}
	trip.SkipPredecessorCheck = f.skipPredCheck
	trip.RetryFailed = f.retryFailed
	trip.Prune = f.prune
	trip.MaxNestedPaths = f.maxNestedPaths
	trip.RemoveSignatures = f.removeSigs
	if trip.Referrers, err = imageset.ParseReferrers(f.referrers); err != nil {
		return nil, line, err
	}
	trip.ReferrersGiven = f.referrersGiven
	if f.policy != "" && !f.securePolicy {
		return nil, line, fmt.Errorf("--policy %s is used only with --secure-policy: add --secure-policy to verify images, or leave out --policy", f.policy)
	}
	trip.SecurePolicy, trip.PolicyPath = f.securePolicy, f.policy
	if f.retryTimes == 0 {
		trip.Copy.Retries = -1
	}
	if f.archiveSize != "" {
		n, err := archive.ParseSize(f.archiveSize)
		if err != nil {
			return nil, line, fmt.Errorf("--archive-size: %w", err)
		}
		trip.ArchiveSize = n
	}
	if line, err = checkMirrorLine(f, target); err != nil {
		return nil, line, err
	}
	if f.signKey != "" && line.mode != "mirror-to-disk" {
		return nil, line, fmt.Errorf("--sign-key signs the archive mirror-to-disk writes (a file:// destination), not %s: give --verify-key with the public key to disk-to-mirror", line.mode)
	}
	if f.verifyKey != "" && line.mode != "disk-to-mirror" {
		return nil, line, fmt.Errorf("--verify-key checks the archive disk-to-mirror pushes (--from file://DIR), not %s: give --sign-key with the private key to mirror-to-disk", line.mode)
	}
	// Read now: a wrong key or password fails before anything is downloaded.
	if trip.Signer, err = loadSignKey(f.signKey, g.stderr); err != nil {
		return nil, line, err
	}
	if trip.Trust, err = loadVerifyKey(f.verifyKey); err != nil {
		return nil, line, err
	}
	if f.config != "" {
		cfg, err := loadConfig(f.config)
		if err != nil {
			return nil, line, err
		}
		trip.Config, trip.ConfigPath = cfg, f.config
		if f.archiveSize == "" {
			trip.ArchiveSize = cfg.ArchiveSizeBytes()
		}
	}
	if line.mode != "disk-to-mirror" && trip.Config == nil && f.retryFailed == "" {
		return nil, line, fmt.Errorf("%s needs -c/--config, the ImageSetConfiguration to mirror", line.mode)
	}
	return trip, line, nil
}

// checkMirrorLine checks the destination and --from/--workspace of a
// mirror command line: the workflow they make, and for disk-to-mirror that
// --from holds an archive.
func checkMirrorLine(f *mirrorFlags, target string) (mirrorLine, error) {
	switch {
	case strings.HasPrefix(target, "file://"):
		if f.from != "" || f.workspace != "" {
			return mirrorLine{}, fmt.Errorf("mirror-to-disk (%s) takes no --from or --workspace: the workspace is <dir>/working-dir", target)
		}
		if f.prune {
			return mirrorLine{}, fmt.Errorf("--prune deletes from a mirror registry: use it with disk-to-mirror or mirror-to-mirror (a docker:// destination), not with mirror-to-disk")
		}
		if f.maxNestedPaths != 0 {
			return mirrorLine{}, fmt.Errorf("--max-nested-paths shortens repository paths in a mirror registry: mirror-to-disk has none; give it to the disk-to-mirror run that pushes the archive")
		}
		dir, err := fileURL("destination", target)
		return mirrorLine{mode: "mirror-to-disk", dir: dir}, err
	case strings.HasPrefix(target, "docker://"):
		root := strings.TrimPrefix(target, "docker://")
		if root == "" || strings.HasPrefix(root, "/") {
			return mirrorLine{}, fmt.Errorf("destination %q: name the registry, docker://HOST[:PORT][/PREFIX]", target)
		}
		switch {
		case f.from != "" && f.workspace != "":
			return mirrorLine{}, fmt.Errorf("give either --from (disk-to-mirror) or --workspace (mirror-to-mirror), not both")
		case f.from != "":
			dir, err := fileURL("--from", f.from)
			if err != nil {
				return mirrorLine{}, err
			}
			if err := checkArchiveDir(f.from, dir); err != nil {
				return mirrorLine{}, err
			}
			return mirrorLine{mode: "disk-to-mirror", dir: dir, root: root}, nil
		case f.workspace != "":
			dir, err := fileURL("--workspace", f.workspace)
			return mirrorLine{mode: "mirror-to-mirror", dir: dir, root: root}, err
		}
		return mirrorLine{}, fmt.Errorf("a docker:// destination needs --from file://DIR (disk-to-mirror) or --workspace file://DIR (mirror-to-mirror)")
	}
	return mirrorLine{}, fmt.Errorf("destination %q: use file://DIR (mirror-to-disk) or docker://HOST[:PORT][/PREFIX]", target)
}

// checkArchiveDir refuses a --from that is not a directory holding an
// archive, before disk-to-mirror writes its working-dir there.
func checkArchiveDir(from, dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case os.IsNotExist(err):
		return fmt.Errorf("--from %s: %s does not exist: give the directory mirror-to-disk wrote the archive into (it holds mirror_000001.tar), as copied to this host", from, dir)
	case err != nil:
		return fmt.Errorf("--from %s: %w", from, err)
	case !fi.IsDir():
		return fmt.Errorf("--from %s: %s is not a directory: give the directory holding the archive chunks (mirror_000001.tar, …), not a chunk", from, dir)
	}
	if _, err := archive.List(dir); err != nil {
		return fmt.Errorf("--from %s: %w", from, err)
	}
	// The records of what was applied, and the run's log, go into
	// DIR/working-dir: read-only media (a mounted DVD, a write-protected
	// USB stick) cannot hold them.
	wd := filepath.Join(dir, workspace.WorkingDir)
	if _, err := os.Stat(wd); err != nil {
		wd = dir
	}
	if err := unix.Access(wd, unix.W_OK); err != nil {
		return fmt.Errorf("--from %s: %s cannot be written (%v): disk-to-mirror keeps its records of the archives applied and its log in %s; copy the archive (mirror_*: the chunks and any signature) to a writable directory and give that to --from",
			from, wd, err, filepath.Join(dir, workspace.WorkingDir))
	}
	return nil
}

// loadConfig reads -c, saying which flag names a file that is not there.
func loadConfig(path string) (*imageset.ImageSetConfiguration, error) {
	if _, err := os.Stat(path); os.IsNotExist(err) {
		return nil, fmt.Errorf("-c/--config %s: the file does not exist: give the ImageSetConfiguration to mirror (kind: ImageSetConfiguration, apiVersion: mirror.openshift.io/v2alpha1)", path)
	}
	return imageset.LoadImageSetConfiguration(path)
}

// runWorkspace is the mode and the workspace of a mirror command line, or
// empty when the line is wrong (the run then stops with its error).
func runWorkspace(target string, f *mirrorFlags) (mode, ws string) {
	dir := func(u string) string {
		d, err := fileURL("", u)
		if err != nil {
			return ""
		}
		return d
	}
	switch {
	case strings.HasPrefix(target, "file://"):
		if d := dir(target); d != "" {
			return "mirror-to-disk", filepath.Join(d, workspace.WorkingDir)
		}
	case f.from != "" && f.workspace == "":
		if d := dir(f.from); d != "" {
			return "disk-to-mirror", filepath.Join(d, workspace.WorkingDir)
		}
	case f.workspace != "" && f.from == "":
		if d := dir(f.workspace); d != "" {
			if filepath.Base(d) == workspace.WorkingDir {
				return "mirror-to-mirror", d
			}
			return "mirror-to-mirror", filepath.Join(d, workspace.WorkingDir)
		}
	}
	return "", ""
}

// checkMaxNestedPaths refuses a depth limit that cannot be meant.
func checkMaxNestedPaths(n int) error {
	if n < 0 {
		return fmt.Errorf("--max-nested-paths %d: use 0 (no limit) or the number of path components the mirror registry allows, e.g. 2 for Quay without nested repositories", n)
	}
	return nil
}
