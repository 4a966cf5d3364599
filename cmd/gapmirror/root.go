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
	"github.com/spf13/pflag"
	"go.podman.io/image/v5/pkg/sysregistriesv2"
	"go.podman.io/image/v5/types"
	"golang.org/x/term"

	"github.com/gapmirror/gapmirror/progress"
	"github.com/gapmirror/gapmirror/transfer"
)

// globalFlags are shared by every command that talks to registries.
type globalFlags struct {
	stderr            io.Writer
	logLevel          string
	quiet             bool
	authFile          string
	srcTLSVerify      types.OptionalBool
	destTLSVerify     types.OptionalBool
	tlsVerify         types.OptionalBool // oc-mirror's deprecated --tls-verify: both sides
	srcCertDir        string
	destCertDir       string
	registriesConf    string
	registriesConfDir string
	registriesD       string
	cacheDir          string
	noProgress        bool
	// term is stderr shared by log lines and the progress line (bar mode).
	term      *progress.Terminal
	src, dest credentialFlags
}

// credentialFlags are skopeo's per-side credential flags (oc-mirror v2
// takes them too), applied to every registry of that side instead of the
// auth file.
type credentialFlags struct {
	authFile                         string
	creds, username, password, token string
	noCreds                          bool
}

// add registers the flags of one side ("src", "dest"); alias is skopeo's
// old name of --<side>-creds ("screds", "dcreds"), which oc-mirror takes too.
func (c *credentialFlags) add(fs *pflag.FlagSet, side, alias, what string) {
	fs.StringVar(&c.authFile, side+"-authfile", "", "auth file (containers auth.json or docker config.json) for "+what+" instead of --authfile, as skopeo's")
	fs.StringVar(&c.creds, side+"-creds", "", "USERNAME[:PASSWORD] for "+what+" instead of the auth file")
	fs.StringVar(&c.creds, alias, "", "the old name of --"+side+"-creds")
	_ = fs.MarkHidden(alias)
	fs.StringVar(&c.username, side+"-username", "", "user name for "+what+" instead of the auth file (with --"+side+"-password)")
	fs.StringVar(&c.password, side+"-password", "", "password for "+what+" (with --"+side+"-username)")
	fs.StringVar(&c.token, side+"-registry-token", "", "bearer token for "+what)
	fs.BoolVar(&c.noCreds, side+"-no-creds", false, "access "+what+" anonymously, ignoring the auth file")
}

// options returns the credentials the flags give for a side (nil: the auth file).
func (c *credentialFlags) options(side string) (*types.DockerAuthConfig, string, error) {
	n := 0
	for _, set := range []bool{c.creds != "", c.username != "" || c.password != "", c.noCreds} {
		if set {
			n++
		}
	}
	if n > 1 {
		return nil, "", fmt.Errorf("--%[1]s-creds, --%[1]s-username/--%[1]s-password and --%[1]s-no-creds exclude each other: give one", side)
	}
	switch {
	case c.creds != "":
		user, pass, _ := strings.Cut(c.creds, ":")
		if user == "" {
			return nil, "", fmt.Errorf("--%s-creds: the user name is empty; write USERNAME:PASSWORD", side)
		}
		return &types.DockerAuthConfig{Username: user, Password: pass}, c.token, nil
	case c.username != "" || c.password != "":
		if c.username == "" || c.password == "" {
			return nil, "", fmt.Errorf("--%[1]s-username and --%[1]s-password go together", side)
		}
		return &types.DockerAuthConfig{Username: c.username, Password: c.password}, c.token, nil
	case c.noCreds:
		return &types.DockerAuthConfig{}, c.token, nil
	}
	return nil, c.token, nil
}

func newRootCommand(stderr io.Writer) *cobra.Command {
	g := &globalFlags{stderr: stderr}
	f := &mirrorFlags{}
	root := &cobra.Command{
		Use:   "gapmirror",
		Short: "Mirror operator catalogs, OpenShift releases and images into air-gapped registries",
		Long: `gapmirror reads an ImageSetConfiguration (mirror.openshift.io/v2alpha1, the file oc-mirror v2
reads) and mirrors what it names by digest:

  mirror-to-disk:   gapmirror mirror -c isc.yaml file:///media/mirror
  disk-to-mirror:   gapmirror mirror -c isc.yaml --from file:///media/mirror docker://registry.airgap:5000/mirror
  mirror-to-mirror: gapmirror mirror -c isc.yaml --workspace file:///ws docker://registry:5000/mirror

oc-mirror v2's command lines work unchanged ("gapmirror --v2 -c isc.yaml file:///media/mirror"
is "gapmirror mirror -c isc.yaml file:///media/mirror"; --v2 is accepted and ignored).

Add --prune to disk-to-mirror and mirror-to-mirror to delete what earlier runs pushed and the image
set no longer holds; gapmirror delete removes images a DeleteImageSetConfiguration names.`,
		SilenceUsage:               true,
		SilenceErrors:              true,
		SuggestionsMinimumDistance: 2,
		// oc-mirror's form: the root command is the mirror command, whose
		// one argument is a destination URL; anything else is a mistyped
		// command, said as such (not "accepts at most 1 arg").
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && !strings.Contains(args[0], "://") {
				return unknownCommand(cmd, args[0])
			}
			return cobra.MaximumNArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				if onlyV2(cmd) {
					return cmd.Help()
				}
				return fmt.Errorf("name the destination: file://DIR (mirror-to-disk), or docker://HOST[/PREFIX] with --from file://DIR (disk-to-mirror) or --workspace file://DIR (mirror-to-mirror)")
			}
			return runMirror(cmd, g, f, args[0])
		},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.logLevel, "log-level", "info", "log level: error, warn, info, debug (each image, blob, retry and skip) or trace (also every registry request); the run's log file in working-dir/logs always has debug")
	pf.BoolVarP(&g.quiet, "quiet", "q", false, "log errors only (--log-level error); the run's log file still has debug")
	pf.StringVar(&g.authFile, "authfile", "", "registry credentials (containers auth.json or docker config.json); default $REGISTRY_AUTH_FILE, then the containers and docker defaults")
	addTLSVerifyFlag(pf, &g.srcTLSVerify, "src-tls-verify", "verify TLS certificates of source registries (false also allows plain HTTP); not given: registries.conf insecure = true and certs.d decide, as for skopeo and podman")
	addTLSVerifyFlag(pf, &g.destTLSVerify, "dest-tls-verify", "verify TLS certificates of the destination registry (false also allows plain HTTP); not given: registries.conf insecure = true and certs.d decide")
	addTLSVerifyFlag(pf, &g.tlsVerify, "tls-verify", "deprecated (oc-mirror): sets both --src-tls-verify and --dest-tls-verify")
	_ = pf.MarkHidden("tls-verify")
	pf.StringVar(&g.srcCertDir, "src-cert-dir", "", "directory with ca.crt and client certificates for source registries; default the host's directory under certs.d")
	pf.StringVar(&g.destCertDir, "dest-cert-dir", "", "directory with ca.crt and client certificates for the destination registry; default the host's directory under certs.d")
	pf.StringVar(&g.registriesConf, "registries-conf", "", "registries.conf to use (mirrors, blocked and insecure registries); default $CONTAINERS_REGISTRIES_CONF, then the system's")
	pf.StringVar(&g.registriesConfDir, "registries-conf-dir", "", "registries.conf.d directory whose *.conf drop-ins are read after registries.conf, as containers/image reads them; default the system's (/etc/containers/registries.conf.d, ~/.config/containers/registries.conf.d), none with $CONTAINERS_REGISTRIES_CONF alone")
	pf.StringVar(&g.registriesD, "registries.d", "", "registries.d directory: use-sigstore-attachments per registry or repository (false: no .sig lookup there) and the lookaside stores --secure-policy reads; default containers/image's (~/.config/containers/registries.d, /etc/containers/registries.d)")
	pf.StringVar(&g.cacheDir, "cache-dir", "", "where the local store lives (<dir>/.gapmirror/store); default $GAPMIRROR_CACHE, then $OC_MIRROR_CACHE, then $HOME")
	pf.BoolVar(&g.noProgress, "no-progress", false, "print plain progress lines instead of a progress bar")
	g.src.add(pf, "src", "screds", "source registries")
	g.dest.add(pf, "dest", "dcreds", "the destination registry")
	pf.Bool("v2", false, "accepted for oc-mirror v2 command lines, and ignored")
	_ = pf.MarkHidden("v2")
	addRefusals(pf, refusedGlobal)
	addMirrorFlags(root.Flags(), f)
	root.AddCommand(newMirrorCommand(g), newDescribeCommand(g), newVerifyCommand(g), newVersionCommand())
	root.AddCommand(newListCommand(g), newDeleteCommand(g))
	root.AddCommand(newGenerateKeyPairCommand())
	root.AddCommand(newBuildCommands(g)...)
	refuseFirst(root)
	return root
}

// serveUse and serveShort are the serve command's in both builds: the
// whole program's (serve.go) and the lean one's, which runs it (build_lean.go).
const (
	serveUse   = "serve --root DIR [--from file://ARCHIVE_DIR] [--address HOST:PORT]"
	serveShort = "Run a registry for the air gap (the CNCF distribution registry), optionally filled from an archive first"
)

// onlyV2 reports whether no flag but --v2 was given ("gapmirror --v2").
func onlyV2(cmd *cobra.Command) bool {
	n := 0
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Name != "v2" {
			n++
		}
	})
	return n == 0
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
	if g.quiet {
		lvl = slog.LevelError
	}
	var w io.Writer = g.stderr
	if g.bar() {
		g.term = progress.NewTerminal(g.stderr)
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
// Only commands that contact registries ask (upstream, mirror): describe
// reads a directory and needs none.
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

// side returns one side's registry options; verify is its --*-tls-verify.
// The files the options name are checked here, so that a wrong path stops
// the command up front rather than failing every image later.
func (g *globalFlags) side(verify types.OptionalBool, certDir string, creds *credentialFlags, name string) (transfer.RegistryOptions, error) {
	if verify == types.OptionalBoolUndefined {
		verify = g.tlsVerify
	}
	o := transfer.RegistryOptions{AuthFile: g.authFile, TLSVerify: verify, CertDir: certDir,
		RegistriesConf: g.registriesConf, RegistriesConfDir: g.registriesConfDir, RegistriesDir: g.registriesD, UserAgent: "gapmirror/" + version}
	if creds.authFile != "" {
		if err := existingFile("--"+name+"-authfile", creds.authFile, "the auth.json podman login / docker login wrote"); err != nil {
			return o, err
		}
		o.AuthFile = creds.authFile
	}
	if err := g.checkRegistriesConfig(); err != nil {
		return o, err
	}
	var err error
	o.Credentials, o.RegistryToken, err = creds.options(name)
	return o, err
}

// existingFile refuses a path given by flag that is not a readable file.
func existingFile(flag, p, what string) error {
	fi, err := os.Stat(p)
	switch {
	case os.IsNotExist(err):
		return fmt.Errorf("%s %s: the file does not exist: give %s", flag, p, what)
	case err != nil:
		return fmt.Errorf("%s %s: %w", flag, p, err)
	case fi.IsDir():
		return fmt.Errorf("%s %s is a directory: give %s", flag, p, what)
	}
	return nil
}

// existingDir refuses a path given by flag that is not a directory: one
// that is not there (give what), or a file (give instead).
func existingDir(flag, p, what, instead string) error {
	fi, err := os.Stat(p)
	switch {
	case os.IsNotExist(err):
		return fmt.Errorf("%s %s: the directory does not exist: give %s", flag, p, what)
	case err != nil:
		return fmt.Errorf("%s %s: %w", flag, p, err)
	case !fi.IsDir():
		return fmt.Errorf("%s %s is a file: give %s", flag, p, instead)
	}
	return nil
}

// checkRegistriesConfig refuses a registries.conf (--registries-conf, else
// $CONTAINERS_REGISTRIES_CONF) that is not there or does not parse, and a
// --registries.d that is not a directory: containers/image would fail every
// image with the same error, each one reported as a failed image.
func (g *globalFlags) checkRegistriesConfig() error {
	conf, from := g.registriesConf, "--registries-conf"
	if conf == "" {
		conf, from = os.Getenv("CONTAINERS_REGISTRIES_CONF"), "$CONTAINERS_REGISTRIES_CONF"
	}
	if conf != "" {
		if err := existingFile(from, conf, "a registries.conf (the system's is /etc/containers/registries.conf), or leave "+from+" out to use the system's"); err != nil {
			return err
		}
	}
	if g.registriesConfDir != "" {
		if err := existingDir("--registries-conf-dir", g.registriesConfDir, "the registries.conf.d directory (*.conf drop-ins), or leave the flag out to use the system's", "the directory holding the drop-ins (or the file with --registries-conf)"); err != nil {
			return err
		}
	}
	sys := &types.SystemContext{SystemRegistriesConfPath: g.registriesConf, SystemRegistriesConfDirPath: g.registriesConfDir}
	if _, err := sysregistriesv2.FindRegistry(sys, "registry.invalid/gapmirror-check"); err != nil {
		where := "the system's registries.conf"
		if conf != "" {
			where = from + " " + conf
		}
		return fmt.Errorf("%s: %w: fix the file, or give another with --registries-conf", where, err)
	}
	if g.registriesD != "" {
		return existingDir("--registries.d", g.registriesD, "the registries.d directory (*.yaml files with the signature settings per registry), or leave the flag out to use ~/.config/containers/registries.d and /etc/containers/registries.d", "the directory holding it")
	}
	return nil
}

// upstream and mirror are the options of registries a command contacts,
// with the auth file checked.
func (g *globalFlags) upstream() (transfer.RegistryOptions, error) {
	if err := g.checkAuthFile(); err != nil {
		return transfer.RegistryOptions{}, err
	}
	return g.side(g.srcTLSVerify, g.srcCertDir, &g.src, "src")
}

func (g *globalFlags) mirror() (transfer.RegistryOptions, error) {
	if err := g.checkAuthFile(); err != nil {
		return transfer.RegistryOptions{}, err
	}
	return g.side(g.destTLSVerify, g.destCertDir, &g.dest, "dest")
}

func (g *globalFlags) storeDir() (string, error) {
	dir := g.cacheDir
	if dir == "" {
		dir = os.Getenv("GAPMIRROR_CACHE")
	}
	if dir == "" {
		dir = os.Getenv("OC_MIRROR_CACHE") // oc-mirror's; gapmirror's store sits beside its cache
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
func (g *globalFlags) progress(log *slog.Logger) *progress.Meter {
	if g.term != nil {
		return progress.NewBarProgress(g.term, log)
	}
	return progress.NewLineProgress(log, lineEvery)
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

// unknownCommand is the error for a word that names no subcommand of cmd,
// with the closest one.
func unknownCommand(cmd *cobra.Command, word string) error {
	msg := fmt.Sprintf("unknown command %q for %q", word, cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(word); len(s) > 0 {
		msg += fmt.Sprintf(": did you mean %q?", s[0])
	}
	if cmd.Parent() == nil {
		return fmt.Errorf("%s (run 'gapmirror --help' for the commands; oc-mirror's form takes a destination: gapmirror -c isc.yaml file://DIR)", msg)
	}
	return fmt.Errorf("%s (run '%s --help' for its commands)", msg, cmd.CommandPath())
}

// mistypedCommand follows the words a command line starts with down the
// command tree and returns the error for the first that names no
// subcommand where one is expected. cobra parses flags first, so
// "gapmirror list operatros --catalog X" would otherwise say "unknown flag:
// --catalog" about the right flag of the mistyped command.
func mistypedCommand(root *cobra.Command, args []string) error {
	cmd := root
	for _, a := range args {
		if strings.HasPrefix(a, "-") || !cmd.HasSubCommands() || strings.Contains(a, "://") {
			return nil
		}
		next := findSub(cmd, a)
		if next == nil {
			if cmd == root && (a == "help" || a == "completion") {
				return nil // cobra's own, added when it runs
			}
			return unknownCommand(cmd, a)
		}
		cmd = next
	}
	return nil
}

func findSub(cmd *cobra.Command, name string) *cobra.Command {
	for _, c := range cmd.Commands() {
		if c.Name() == name || c.HasAlias(name) {
			return c
		}
	}
	return nil
}
