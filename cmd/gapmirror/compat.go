package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.podman.io/image/v5/types"
)

// tlsVerify is a tri-state boolean flag, as skopeo's --src-tls-verify: not
// given leaves registries.conf and certs.d in charge; "--x", "--x=true" and
// "--x=false" override them.
type tlsVerify struct{ v *types.OptionalBool }

func (f tlsVerify) String() string {
	switch *f.v {
	case types.OptionalBoolTrue:
		return "true"
	case types.OptionalBoolFalse:
		return "false"
	}
	return ""
}

func (f tlsVerify) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("use true or false")
	}
	*f.v = types.NewOptionalBool(b)
	return nil
}

func (f tlsVerify) Type() string { return "bool" }

// IsBoolFlag lets "--src-tls-verify" stand alone, as a bool flag.
func (f tlsVerify) IsBoolFlag() bool { return true }

func addTLSVerifyFlag(fs *pflag.FlagSet, v *types.OptionalBool, name, usage string) *pflag.Flag {
	fs.Var(tlsVerify{v}, name, usage)
	fl := fs.Lookup(name)
	fl.NoOptDefVal = "true"
	return fl
}

// refusal is an oc-mirror v2 flag gapmirror does not take, with what to
// use instead; the run stops with the sentence, never silently.
type refusal struct {
	name, short string
	takesValue  bool
	why         string
}

// refusedGlobal are oc-mirror v2 flags refused wherever they appear.
var refusedGlobal = []refusal{
	{name: "v1", why: "gapmirror implements oc-mirror v2 only: use an oc-mirror v1 binary for v1 workspaces, or mirror again with gapmirror (the v2 ImageSetConfiguration is the same)"},
	{name: "port", short: "p", takesValue: true, why: "gapmirror runs no local cache registry, so there is no port: its cache is an OCI layout under --cache-dir"},
	{name: "rootless-storage-path", takesValue: true, why: "gapmirror never reads containers-storage: its cache is an OCI layout under --cache-dir"},
	{name: "cpu-prof", takesValue: true, why: "gapmirror has no profiling flags: `make bench` measures it, and --log-level debug logs each phase's timing"},
	{name: "mem-prof", takesValue: true, why: "gapmirror has no profiling flags: `make bench` measures it, and --log-level debug logs each phase's timing"},
}

// refusedMirror are refused oc-mirror v2 flags of the mirror workflows.
var refusedMirror = []refusal{
	{name: "ignore-release-signature", why: "use --skip-release-signature-verification (it applies to every release payload, not only mirror.platform.release; it is dangerous: nothing then checks a trusted key signed the payload)"},
	{name: "image-timeout", takesValue: true, why: "gapmirror does not give up on an image after a fixed time: a stalled transfer fails and is retried blob by blob (--retry-times, --retry-delay), and --retry-failed copies the images a run could not"},
	{name: "dry-run-manifest-lists", why: "use --dry-run: working-dir/dry-run/set.json lists every image with its digest and, for sparse copies, its platforms; `skopeo inspect --raw docker://IMAGE@DIGEST` shows a manifest list's instances"},
}

// refusedDelete are refused oc-mirror v2 flags of delete.
var refusedDelete = []refusal{
	{name: "force-cache-delete", takesValue: true, why: "gapmirror delete removes only from the mirror registry; the local cache (--cache-dir) holds no images of the mirror side, and the registry reclaims layers when its garbage collection runs (gapmirror serve gc, or the registry's own)"},
	{name: "delete-v1-images", why: "gapmirror never pushed oc-mirror v1's hash tags: delete what oc-mirror v1 pushed with oc-mirror v1"},
}

// addRefusals registers rs as hidden flags of fs.
func addRefusals(fs *pflag.FlagSet, rs []refusal) {
	for _, r := range rs {
		if r.takesValue {
			fs.StringP(r.name, r.short, "", r.why)
		} else {
			fs.BoolP(r.name, r.short, false, r.why)
		}
		_ = fs.MarkHidden(r.name)
	}
}

// checkRefusals returns the refusal of the first refused flag given to cmd.
func checkRefusals(cmd *cobra.Command) error {
	for _, rs := range [][]refusal{refusedGlobal, refusedMirror, refusedDelete} {
		for _, r := range rs {
			if f := cmd.Flags().Lookup(r.name); f != nil && f.Changed {
				return fmt.Errorf("--%s (oc-mirror) is not supported: %s", r.name, r.why)
			}
		}
	}
	return nil
}

// refuseFirst wraps every command's argument check so that a refused flag
// is reported before anything else, even before a miscounted argument
// (oc-mirror documents "--force-cache-delete true").
func refuseFirst(cmd *cobra.Command) {
	args := cmd.Args
	cmd.Args = func(c *cobra.Command, a []string) error {
		if err := checkRefusals(c); err != nil {
			return err
		}
		if args == nil {
			return nil
		}
		return args(c, a)
	}
	for _, sub := range cmd.Commands() {
		refuseFirst(sub)
	}
}
