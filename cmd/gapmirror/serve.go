//go:build !gapmirror_lean

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.podman.io/image/v5/types"

	"github.com/gapmirror/gapmirror/archive"
	"github.com/gapmirror/gapmirror/archivesign"
	"github.com/gapmirror/gapmirror/mirror"
	"github.com/gapmirror/gapmirror/progress"
	"github.com/gapmirror/gapmirror/serve"
	"github.com/gapmirror/gapmirror/transfer"
	"github.com/gapmirror/gapmirror/workspace"
)

type serveFlags struct {
	opts           serve.Options
	from           string
	prefix         string
	prune          bool
	skipPredCheck  bool
	parallelImages int
	shutdownWait   time.Duration
	verifyKey      string
}

func newServeCommand(g *globalFlags) *cobra.Command {
	f := &serveFlags{}
	cmd := &cobra.Command{
		Use:   serveUse,
		Short: serveShort,
		Long: `gapmirror serve runs the CNCF distribution registry with its storage under --root DIR until
SIGINT or SIGTERM. With --from it first pushes the archive in that directory into itself exactly
as disk-to-mirror does (records, predecessor checks and cluster resources in the archive
directory's working-dir), then keeps serving; /v2/ answers while the push runs.

TLS is on by default: a CA and a server certificate are made once under DIR/tls and reused; the
CA is printed with how to trust it. Without --htpasswd (and no DIR/htpasswd, see 'gapmirror serve
htpasswd') anonymous users may pull and only the serving process may push; with it, users of that
file may pull, push and delete.
See docs/serve.md.`,
		Example: `  gapmirror serve --root /srv/mirror --from file:///media/usb --address 0.0.0.0:5000
  gapmirror serve htpasswd --root /srv/mirror admin < password.txt
  gapmirror serve gc --root /srv/mirror`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd, g, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.opts.Root, "root", "", "directory of the registry's storage (DIR/docker/registry/v2) and generated TLS files (DIR/tls) (required)")
	fl.StringVar(&f.from, "from", "", "the file:// directory holding an archive (mirror-to-disk's output) to push into the registry before serving")
	fl.StringVar(&f.prefix, "prefix", "", "with --from: push the images under this path (docker://HOST:PORT/PREFIX) instead of at the registry's root")
	fl.BoolVar(&f.prune, "prune", false, "with --from: delete what earlier pushes from this archive directory put in the registry and the image set no longer holds")
	fl.BoolVar(&f.skipPredCheck, "skip-predecessor-check", false, "with --from: apply an incremental archive even though this directory has no record of applying the archive it builds on")
	fl.IntVar(&f.parallelImages, "parallel-images", 8, "with --from: images pushed at once (1-64)")
	fl.StringVar(&f.verifyKey, "verify-key", "", "with --from: refuse, before pushing anything, an archive this public key (cosign.pub) did not sign (the registry then stops)")
	fl.StringVar(&f.opts.Address, "address", serve.DefaultAddress, "listen address HOST:PORT; this machine only by default, 0.0.0.0:5000 to serve other hosts")
	fl.StringVar(&f.opts.Hostname, "hostname", "", "the name clients use for the registry (in the certificate, the cluster resources and the --from push); default the --address host, or this machine's host name on 0.0.0.0")
	fl.StringVar(&f.opts.TLSCert, "tls-cert", "", "certificate (PEM, with its chain) to serve instead of the generated one; with --tls-key")
	fl.StringVar(&f.opts.TLSKey, "tls-key", "", "key of --tls-cert (PEM)")
	fl.StringSliceVar(&f.opts.TLSSANs, "tls-san", nil, "more host names or IP addresses for the generated certificate (repeatable; not with --tls-cert or --plain-http)")
	fl.BoolVar(&f.opts.PlainHTTP, "plain-http", false, "serve without TLS: for tests on loopback only; clients must be told the registry is insecure")
	fl.StringVar(&f.opts.Htpasswd, "htpasswd", "", "htpasswd file (bcrypt entries, see 'gapmirror serve htpasswd'): require basic auth; its users may pull, push and delete; default DIR/htpasswd when it is there")
	fl.StringVar(&f.opts.RegistryConfig, "registry-config", "", "distribution configuration file (storage on S3, Azure, GCS..., redis, middleware); its http and auth sections are replaced by the flags")
	fl.DurationVar(&f.shutdownWait, "shutdown-timeout", 30*time.Second, "on SIGINT/SIGTERM, how long requests in flight may take to finish")
	cmd.AddCommand(newServeHtpasswdCommand(), newServeGCCommand(g))
	return cmd
}

func runServe(cmd *cobra.Command, g *globalFlags, f *serveFlags) error {
	log, err := g.logger(g.stderr)
	if err != nil {
		return err
	}
	if f.parallelImages < 1 || f.parallelImages > 64 {
		return fmt.Errorf("--parallel-images %d: use 1 to 64", f.parallelImages)
	}
	// Every input is checked before the registry creates anything under
	// --root or prints how to trust it.
	var push *pushInputs
	if f.from != "" {
		if push, err = checkPushInputs(g, f.from); err != nil {
			return err
		}
		if push.trust, err = loadVerifyKey(f.verifyKey); err != nil {
			return err
		}
	} else if f.prefix != "" || f.prune || f.skipPredCheck || f.verifyKey != "" {
		return errors.New("--prefix, --prune, --skip-predecessor-check and --verify-key go with --from file://ARCHIVE_DIR")
	}
	if f.opts.PlainHTTP {
		if host, _, err := net.SplitHostPort(f.opts.Address); err == nil {
			if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
				log.Warn("--plain-http on an address other hosts reach: credentials and content travel unencrypted", "address", f.opts.Address)
			}
		}
	}
	f.opts.Debug = registryDebug(g)
	ctx := cmd.Context()
	out := cmd.OutOrStdout()
	srv, err := serve.New(ctx, f.opts)
	if err != nil {
		return err
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		sctx, cancel := context.WithTimeout(context.Background(), f.shutdownWait)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			return fmt.Errorf("stopping the registry: %w", err)
		}
		return nil
	}
	defer stop()

	fmt.Fprintf(out, "serving docker://%s (%s), storage under %s\n", srv.Name(), srv.URL(), f.opts.Root)
	if h := srv.Htpasswd(); h != "" {
		fmt.Fprintf(out, "basic auth: users of %s (add them with: gapmirror serve htpasswd --file %s USER)\n", h, h)
	}
	printTrust(out, srv)
	if push != nil {
		if err := pushArchive(ctx, cmd, g, log, f, srv, push); err != nil {
			return err
		}
	}
	if ctx.Err() == nil {
		fmt.Fprintf(out, "ready: docker://%s; stop with Ctrl-C or SIGTERM\n", srv.Name())
	}
	select {
	case <-ctx.Done():
	case <-srv.Done():
		if err := srv.Err(); err != nil {
			return fmt.Errorf("serving: %w", err)
		}
	}
	log.Info("stopping the registry", "waiting up to", f.shutdownWait)
	if err := stop(); err != nil {
		return err
	}
	fmt.Fprintln(out, "stopped")
	return nil
}

// pushInputs is what serve --from needs besides the registry.
type pushInputs struct {
	archiveDir, storeDir string
	upstream             transfer.RegistryOptions
	trust                *archivesign.Verifier
}

// checkPushInputs checks --from (a directory holding an archive) and the
// global flags the push uses.
func checkPushInputs(g *globalFlags, from string) (*pushInputs, error) {
	dir, err := fileURL("--from", from)
	if err != nil {
		return nil, err
	}
	if _, err := archive.List(dir); err != nil {
		return nil, fmt.Errorf("--from %s: %w", from, err)
	}
	p := &pushInputs{archiveDir: dir}
	if p.storeDir, err = g.storeDir(); err != nil {
		return nil, err
	}
	// The push reads the archive and writes to the served registry with
	// credentials of its own: no upstream is contacted, so the auth file
	// is not checked.
	if p.upstream, err = g.side(g.srcTLSVerify, g.srcCertDir, &g.src, "src"); err != nil {
		return nil, err
	}
	return p, nil
}

// servePushProgress wraps the progress of serve --from's push (tests hold
// the push at an image with it).
var servePushProgress = func(p transfer.Progress) transfer.Progress { return p }

// pushArchive is disk-to-mirror from the archive directory to the served
// registry, with the push credential of this process.
func pushArchive(ctx context.Context, cmd *cobra.Command, g *globalFlags, log *slog.Logger, f *serveFlags, srv *serve.Server, p *pushInputs) error {
	creds, err := os.MkdirTemp("", "gapmirror-serve-push-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(creds)
	authFile, certDir, err := srv.PushCredentials(creds)
	if err != nil {
		return fmt.Errorf("writing the push credentials: %w", err)
	}
	// The push trusts the served registry's own CA; only --plain-http turns
	// verification off.
	verify := types.OptionalBoolTrue
	if f.opts.PlainHTTP {
		verify = types.OptionalBoolFalse
	}
	dest := transfer.RegistryOptions{AuthFile: authFile, CertDir: certDir, TLSVerify: verify,
		RegistriesConf: g.registriesConf, RegistriesConfDir: g.registriesConfDir, UserAgent: "gapmirror/" + version}
	trip := &mirror.Trip{
		Upstream:    p.upstream,
		Mirror:      dest,
		StoreDir:    p.storeDir,
		Log:         log,
		Out:         cmd.OutOrStdout(),
		ToolVersion: version,
		Copy: transfer.Options{ // layers, retries and their delay: the copy's defaults
			ParallelImages: f.parallelImages,
			Progress:       servePushProgress(g.progress(log)),
		},
		SkipPredecessorCheck: f.skipPredCheck,
		Prune:                f.prune,
		Trust:                p.trust,
	}
	root := srv.Name()
	if p := strings.Trim(f.prefix, "/"); p != "" {
		root += "/" + p
	}
	report, err := trip.DiskToMirror(ctx, p.archiveDir, root)
	if err != nil {
		return err
	}
	report.Summary(cmd.OutOrStdout())
	if err := report.Err(); err != nil {
		// Serving a mirror that lacks images would look done: stop, so that
		// the next serve --from pushes what is missing.
		return fmt.Errorf("%w (the registry stops; run serve --from again to push what is missing)", err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "point clusters at the registry: oc apply -f %s\n", filepath.Join(p.archiveDir, workspace.WorkingDir, "cluster-resources"))
	return nil
}

// registryDebug: --log-level debug (or trace) lets the registry log every
// request, and gc every blob it deletes.
func registryDebug(g *globalFlags) bool {
	lvl, err := parseLevel(g.logLevel)
	return err == nil && lvl <= slog.LevelDebug
}

// printTrust says where the generated CA is and how clients trust it.
func printTrust(w io.Writer, srv *serve.Server) {
	ca := srv.CAFile()
	if ca == "" {
		return
	}
	name := srv.Name()
	fmt.Fprintf(w, `TLS certificate authority: %[1]s
  podman, skopeo, CRI-O: mkdir -p /etc/containers/certs.d/%[2]s && cp %[1]s /etc/containers/certs.d/%[2]s/ca.crt
  gapmirror, oc-mirror:  --dest-cert-dir %[3]s
  OpenShift cluster:     oc create configmap gapmirror-ca -n openshift-config --from-file=%[4]s=%[1]s
                         oc patch image.config.openshift.io/cluster --type=merge -p '{"spec":{"additionalTrustedCA":{"name":"gapmirror-ca"}}}'
  install-config.yaml:   additionalTrustBundle: the content of %[1]s
`, ca, name, strings.TrimSuffix(ca, "/"+serve.CAFile), strings.Replace(name, ":", "..", 1))
}

func newServeHtpasswdCommand() *cobra.Command {
	var file, root string
	cmd := &cobra.Command{
		Use:   "htpasswd --root DIR USER | htpasswd --file FILE USER",
		Short: "Add a user (or change their password) for serve; the password is read from standard input",
		Long: `gapmirror serve htpasswd adds USER to the registry's htpasswd file (bcrypt), or changes their
password, reading the password from the first line of standard input. With --root DIR the file is
DIR/htpasswd, which gapmirror serve --root DIR uses without --htpasswd; --file names another file
(for serve --htpasswd FILE). A running registry sees changes to its file at once.`,
		Example: `  gapmirror serve htpasswd --root /srv/mirror admin < password.txt
  gapmirror serve htpasswd --file /etc/gapmirror/htpasswd admin`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case file != "" && root != "":
				return errors.New("--root and --file both name the htpasswd file: give --root DIR (for DIR/htpasswd) or --file FILE")
			case root != "":
				if err := os.MkdirAll(root, 0o755); err != nil {
					return fmt.Errorf("--root %s: %w", root, err)
				}
				file = serve.RootHtpasswd(root)
			case file == "":
				return errors.New("which htpasswd file? give --root DIR (the serve root: writes DIR/htpasswd, which gapmirror serve --root DIR then uses) or --file FILE (for serve --htpasswd FILE)")
			}
			_, statErr := os.Stat(file)
			line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
			if err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("reading the password from standard input: %w", err)
			}
			if err := serve.SetPassword(file, args[0], strings.TrimRight(line, "\r\n")); err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			if root != "" && statErr != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: user %s set; gapmirror serve --root %s now asks for users of this file (restart a registry running there)\n", file, args[0], root)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: user %s set (a registry running with this file sees it at once)\n", file, args[0])
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&root, "root", "", "the serve root DIR: the file is DIR/htpasswd (made if missing)")
	cmd.Flags().StringVar(&file, "file", "", "the htpasswd file (made if missing), for serve --htpasswd FILE")
	return cmd
}

func newServeGCCommand(g *globalFlags) *cobra.Command {
	var o serve.GCOptions
	cmd := &cobra.Command{
		Use:   "gc --root DIR",
		Short: "Delete the blobs no image references any more (distribution's mark-and-sweep); the registry must be stopped",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Debug = registryDebug(g)
			res, err := serve.CollectGarbage(cmd.Context(), o)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if res.NothingPushed {
				where := o.Root
				if o.RegistryConfig != "" {
					where = "the storage of --registry-config " + o.RegistryConfig
				}
				fmt.Fprintf(out, "garbage collection: nothing was pushed to %s yet: nothing to collect\n", where)
				return nil
			}
			untagged := ""
			if o.RemoveUntagged {
				untagged = fmt.Sprintf("; %d untagged manifests deleted", res.ManifestsBefore-res.ManifestsAfter)
			}
			fmt.Fprintf(out, "garbage collection: %d of %d blobs deleted, %s freed%s; %d blobs (%s) remain\n",
				res.BlobsBefore-res.BlobsAfter, res.BlobsBefore, progress.HumanBytes(res.BytesBefore-res.BytesAfter),
				untagged, res.BlobsAfter, progress.HumanBytes(res.BytesAfter))
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Root, "root", "", "the registry's --root directory (required)")
	cmd.Flags().StringVar(&o.RegistryConfig, "registry-config", "", "the distribution configuration file the registry runs with, for its storage")
	cmd.Flags().BoolVar(&o.RemoveUntagged, "delete-untagged", false, "also delete manifests no tag reaches (gapmirror tags every image it pushes)")
	return cmd
}
