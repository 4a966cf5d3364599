package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gapmirror/gapmirror/mirror"
)

// globalFlags are shared by every command that talks to registries.
type globalFlags struct {
	stderr         io.Writer
	logLevel       string
	authFile       string
	srcTLSVerify   bool
	destTLSVerify  bool
	srcCertDir     string
	destCertDir    string
	registriesConf string
	cacheDir       string
	noProgress     bool
	// term is stderr shared by log lines and the progress line (bar mode).
	term *mirror.Terminal
}

func newRootCommand(stderr io.Writer) *cobra.Command {
	g := &globalFlags{stderr: stderr}
	root := &cobra.Command{
		Use:   "gapmirror",
		Short: "Mirror operator catalogs, OpenShift releases and images into air-gapped registries",
		Long: `gapmirror reads an ImageSetConfiguration (mirror.openshift.io/v2alpha1, the file oc-mirror v2
reads) and mirrors what it names by digest:

  mirror-to-disk:   gapmirror mirror -c isc.yaml file:///media/mirror
  disk-to-mirror:   gapmirror mirror -c isc.yaml --from file:///media/mirror docker://registry.airgap:5000/mirror
  mirror-to-mirror: gapmirror mirror -c isc.yaml --workspace file:///ws docker://registry:5000/mirror

Add --prune to disk-to-mirror and mirror-to-mirror to delete what earlier runs pushed and the image
set no longer holds; gapmirror delete removes images a DeleteImageSetConfiguration names.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.logLevel, "log-level", "info", "log level: error, warn, info, debug (each image, blob, retry and skip) or trace (also every registry request); the run's log file in working-dir/logs always has debug")
	pf.StringVar(&g.authFile, "authfile", "", "registry credentials (containers auth.json or docker config.json); default $REGISTRY_AUTH_FILE, then the containers and docker defaults")
	pf.BoolVar(&g.srcTLSVerify, "src-tls-verify", true, "verify TLS certificates of source registries (false also allows plain HTTP)")
	pf.BoolVar(&g.destTLSVerify, "dest-tls-verify", true, "verify TLS certificates of the destination registry (false also allows plain HTTP)")
	pf.StringVar(&g.srcCertDir, "src-cert-dir", "", "directory with ca.crt and client certificates for source registries")
	pf.StringVar(&g.destCertDir, "dest-cert-dir", "", "directory with ca.crt and client certificates for the destination registry")
	pf.StringVar(&g.registriesConf, "registries-conf", "", "registries.conf to use (mirrors and blocked registries for sources); default the system's")
	pf.StringVar(&g.cacheDir, "cache-dir", "", "where the local store lives (<dir>/.gapmirror/store); default $GAPMIRROR_CACHE, then $HOME")
	pf.BoolVar(&g.noProgress, "no-progress", false, "print plain progress lines instead of a progress bar")
	root.AddCommand(newMirrorCommand(g), newDescribeCommand(g), newVersionCommand())
	root.AddCommand(newListCommand(g), newDeleteCommand(g))
	root.AddCommand(newServeCommand(g))
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the gapmirror version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "gapmirror", version)
		},
	}
}

// logger is the terminal's logger at --log-level; containers/image's
// lines go through it too.
func (g *globalFlags) logger(_ io.Writer) (*slog.Logger, error) {
	log, _, err := g.runLogger("", "")
	return log, err
}

// runLogger is the terminal's logger and, given a workspace, also the run's
// full log file working-dir/logs/<run id>.log at debug level (trace when
// asked for) whatever the terminal shows.
func (g *globalFlags) runLogger(ws, mode string) (*slog.Logger, *runLog, error) {
	lvl, err := parseLevel(g.logLevel)
	if err != nil {
		return nil, nil, err
	}
	if err := g.checkAuthFile(); err != nil {
		return nil, nil, err
	}
	var w io.Writer = g.stderr
	if g.bar() {
		g.term = mirror.NewTerminal(g.stderr)
		w = g.term
	}
	handlers := teeHandler{newLineHandler(w, lvl)}
	var rl *runLog
	if ws != "" {
		if rl, err = openRunLog(ws, runID(mode)); err != nil {
			return nil, nil, err
		}
		handlers = append(handlers, newLineHandler(rl.f, min(lvl, slog.LevelDebug)))
	}
	log := slog.New(handlers)
	routeLogrus(log)
	return log, rl, nil
}

// checkAuthFile refuses an --authfile (or $REGISTRY_AUTH_FILE) that does
// not exist: containers/image would pull anonymously and fail much later.
func (g *globalFlags) checkAuthFile() error {
	p, from := g.authFile, "--authfile"
	if p == "" {
		p, from = os.Getenv("REGISTRY_AUTH_FILE"), "$REGISTRY_AUTH_FILE"
	}
	if p == "" {
		return nil
	}
	if _, err := os.Stat(p); err != nil {
		if os.IsNotExist(err) {
			return fmt.Errorf("%s %s: the file does not exist: give the auth.json podman login / docker login wrote (e.g. ${XDG_RUNTIME_DIR}/containers/auth.json or ~/.docker/config.json)", from, p)
		}
		return fmt.Errorf("%s %s: %w", from, p, err)
	}
	return nil
}

// bar reports whether progress is a status line on a terminal.
func (g *globalFlags) bar() bool {
	f, ok := g.stderr.(*os.File)
	return ok && !g.noProgress && term.IsTerminal(int(f.Fd()))
}

func (g *globalFlags) upstream() mirror.RegistryOptions {
	return mirror.RegistryOptions{AuthFile: g.authFile, Insecure: !g.srcTLSVerify, CertDir: g.srcCertDir,
		RegistriesConf: g.registriesConf, UserAgent: "gapmirror/" + version}
}

func (g *globalFlags) mirror() mirror.RegistryOptions {
	return mirror.RegistryOptions{AuthFile: g.authFile, Insecure: !g.destTLSVerify, CertDir: g.destCertDir,
		RegistriesConf: g.registriesConf, UserAgent: "gapmirror/" + version}
}

func (g *globalFlags) storeDir() (string, error) {
	dir := g.cacheDir
	if dir == "" {
		dir = os.Getenv("GAPMIRROR_CACHE")
	}
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no --cache-dir given and no home directory: %w", err)
		}
		dir = home
	}
	return filepath.Join(dir, ".gapmirror", "store"), nil
}

// progress is the status line on a terminal, else the same line logged
// every few seconds.
func (g *globalFlags) progress(log *slog.Logger) *mirror.Meter {
	if g.term != nil {
		return mirror.NewBarProgress(g.term, log)
	}
	return mirror.NewLineProgress(log, lineEvery)
}

// lineEvery is how often line mode prints the status (tests shorten it).
var lineEvery = 5 * time.Second

// fileURL returns the directory of a file:// argument.
func fileURL(flag, s string) (string, error) {
	if !strings.HasPrefix(s, "file://") {
		return "", fmt.Errorf("%s %q: must be a file:// path, e.g. file:///media/mirror", flag, s)
	}
	p := strings.TrimPrefix(s, "file://")
	if p == "" {
		return "", fmt.Errorf("%s %q: the path is empty", flag, s)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", flag, s, err)
	}
	return abs, nil
}
