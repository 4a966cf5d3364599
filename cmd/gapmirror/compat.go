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
	// skopeo's transport flags, which oc-mirror v2 inherits (hidden).
	{name: "src-shared-blob-dir", takesValue: true, why: sharedBlobDir},
	{name: "dest-shared-blob-dir", takesValue: true, why: sharedBlobDir},
	{name: "src-daemon-host", takesValue: true, why: daemonHost},
	{name: "dest-daemon-host", takesValue: true, why: daemonHost},
	{name: "dest-compress", why: byteForByte + ": there is no dir: destination to compress into"},
	{name: "dest-decompress", why: byteForByte + ": there is no dir: destination to decompress into"},
	{name: "dest-compress-format", takesValue: true, why: byteForByte + ": nothing is recompressed, so there is no format to choose"},
	{name: "dest-compress-level", takesValue: true, why: byteForByte + ": nothing is recompressed, so there is no level to choose"},
	{name: "dest-oci-accept-uncompressed-layers", why: byteForByte + ", uncompressed ones included; its OCI layouts (the cache, the archive) take every layer as it comes"},
	{name: "dest-precompute-digests", why: "gapmirror always knows the digests before it uploads: it asks the mirror which blobs it holds, mounts those in other repositories and uploads only the rest, so nothing is sent twice"},
}

// The refusals the skopeo transport flags share.
const (
	sharedBlobDir = "gapmirror reads and writes no oci: transport directories; its own OCI layout (the cache) already shares every blob across repositories: use --cache-dir to place it"
	daemonHost    = "gapmirror never talks to a docker daemon: it copies between registries, its cache and archives; push the image to a registry and name it in the ImageSetConfiguration"
	byteForByte   = "gapmirror copies every layer byte for byte as the source has it, so digests and the signatures on them stay valid at the mirror"
)

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
	// oc-mirror takes its copy flags on every command; delete copies nothing.
	{name: "parallel-images", takesValue: true, why: "gapmirror delete copies no images: it sends the plan's deletes one at a time, in the order the plan needs (a tag before the manifest it names); leave the flag to the mirror runs"},
	{name: "parallel-layers", takesValue: true, why: "gapmirror delete moves no layers: it deletes manifests, and the registry frees their layers when its garbage collection runs; leave the flag to the mirror runs"},
	{name: "retry-times", takesValue: true, why: retryDelete},
	{name: "retry-delay", takesValue: true, why: retryDelete},
	{name: "policy", takesValue: true, why: "delete verifies no signatures: --policy goes with `gapmirror mirror --secure-policy`"},
}

const retryDelete = "gapmirror delete sends each delete once and lists those that failed (output and working-dir/delete record); to retry them, run delete --generate again (the workspace then records only what is still there) and execute the new plan"

// refusedAnnotation marks a flag registered only to be refused; its value
// is the sentence saying why and what to use.
const refusedAnnotation = "gapmirror-refused"

// addRefusals registers rs as hidden flags of fs.
func addRefusals(fs *pflag.FlagSet, rs []refusal) {
	for _, r := range rs {
		if r.takesValue {
			fs.StringP(r.name, r.short, "", r.why)
		} else {
			fs.BoolP(r.name, r.short, false, r.why)
		}
		_ = fs.MarkHidden(r.name)
		_ = fs.SetAnnotation(r.name, refusedAnnotation, []string{r.why})
	}
}

// checkRefusals returns the refusal of the first refused flag given to cmd
// (a flag of the same name that cmd takes is not refused).
func checkRefusals(cmd *cobra.Command) error {
	var err error
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if why := f.Annotations[refusedAnnotation]; err == nil && len(why) > 0 {
			err = fmt.Errorf("--%s (oc-mirror) is not supported: %s", f.Name, why[0])
		}
	})
	return err
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
