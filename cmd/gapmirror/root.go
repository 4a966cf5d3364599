package main

import (
	"context"
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
	pf.StringVar(&g.logLevel, "log-level", "info", "log level: error, warn, info, debug")
	pf.StringVar(&g.authFile, "authfile", "", "registry credentials (containers auth.json or docker config.json); default $REGISTRY_AUTH_FILE, then the containers and docker defaults")
	pf.BoolVar(&g.srcTLSVerify, "src-tls-verify", true, "verify TLS certificates of source registries (false also allows plain HTTP)")
	pf.BoolVar(&g.destTLSVerify, "dest-tls-verify", true, "verify TLS certificates of the destination registry (false also allows plain HTTP)")
	pf.StringVar(&g.srcCertDir, "src-cert-dir", "", "directory with ca.crt and client certificates for source registries")
	pf.StringVar(&g.destCertDir, "dest-cert-dir", "", "directory with ca.crt and client certificates for the destination registry")
	pf.StringVar(&g.registriesConf, "registries-conf", "", "registries.conf to use (mirrors and blocked registries for sources); default the system's")
	pf.StringVar(&g.cacheDir, "cache-dir", "", "where the local store lives (<dir>/.gapmirror/store); default $GAPMIRROR_CACHE, then $HOME")
	pf.BoolVar(&g.noProgress, "no-progress", false, "print plain progress lines instead of a progress bar")
	root.AddCommand(newMirrorCommand(g), newDescribeCommand(), newVersionCommand())
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

func (g *globalFlags) logger(w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use error, warn, info or debug", g.logLevel)
	}
	return slog.New(newLineHandler(w, lvl)), nil
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

func (g *globalFlags) progress(what string) mirror.Progress {
	if f, ok := g.stderr.(*os.File); ok && !g.noProgress && term.IsTerminal(int(f.Fd())) {
		return mirror.NewBarProgress(f, what)
	}
	return mirror.NewLineProgress(g.stderr, what, 10*time.Second)
}

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

// lineHandler prints "LEVEL message key=value …" lines, readable on a
// terminal and in CI logs.
type lineHandler struct {
	w     io.Writer
	level slog.Level
	attrs []slog.Attr
}

func newLineHandler(w io.Writer, level slog.Level) *lineHandler {
	return &lineHandler{w: w, level: level}
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	if r.Level != slog.LevelInfo {
		b.WriteString(r.Level.String())
		b.WriteString(" ")
	}
	b.WriteString(r.Message)
	write := func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	}
	for _, a := range h.attrs {
		write(a)
	}
	r.Attrs(write)
	b.WriteString("\n")
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *lineHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &lineHandler{w: h.w, level: h.level, attrs: append(append([]slog.Attr{}, h.attrs...), as...)}
}

func (h *lineHandler) WithGroup(string) slog.Handler { return h }
