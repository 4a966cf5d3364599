package mirror

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	"golang.org/x/sync/errgroup"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/ocistore"
	"github.com/gapmirror/gapmirror/progress"
	"github.com/gapmirror/gapmirror/registryapi"
	"github.com/gapmirror/gapmirror/transfer"
	"github.com/gapmirror/gapmirror/workspace"
)

// DryRunFigures are what a dry run found out, for a go/no-go decision.
type DryRunFigures struct {
	// Mirror is the destination that answered (credentials and TLS
	// accepted, push allowed); empty for mirror-to-disk.
	Mirror string
	// Present and Missing count the images (signatures included) the
	// destination has, or the store has for mirror-to-disk, and has not.
	Present, Missing int
	// Blobs and Bytes are what the run would move: the distinct blobs (and
	// manifests) of the missing images. For a mirror, at most this much:
	// the registry may hold some of those blobs in other repositories.
	Blobs int
	Bytes int64
	// ArchiveBytes is the size of the archive mirror-to-disk would write:
	// every blob of the set that no earlier archive carried.
	ArchiveBytes int64
	// Unreadable counts images whose manifests could not be read, so they
	// are not in the sizes.
	Unreadable int
}

// print writes the figures of a dry run.
func (f *DryRunFigures) print(w io.Writer) {
	if f == nil {
		return
	}
	if f.Mirror != "" {
		fmt.Fprintf(w, "mirror %s: reachable, credentials and push accepted; %d images already there, %d to copy: at most %d blobs, %s to move\n",
			f.Mirror, f.Present, f.Missing, f.Blobs, progress.HumanBytes(f.Bytes))
	} else {
		fmt.Fprintf(w, "local store: %d images already there, %d to download (%d blobs, %s); the archive would be %s\n",
			f.Present, f.Missing, f.Blobs, progress.HumanBytes(f.Bytes), progress.HumanBytes(f.ArchiveBytes))
	}
	if f.Unreadable > 0 {
		fmt.Fprintf(w, "%d images could not be read and are not counted (the run would report them)\n", f.Unreadable)
	}
}

// dryRunToMirror answers what a disk-to-mirror or mirror-to-mirror run
// would meet at dst: it reaches the mirror with the run's credentials and
// TLS settings, checks push permission, counts the images already there and
// the bytes to move (read through src), and writes the cluster resources
// the run would write into dry-run/cluster-resources. An unreachable
// mirror, refused credentials or push fail the dry run.
func (r *run) dryRunToMirror(ctx context.Context, dst *transfer.Registry, src transfer.Source) error {
	t, set := r.t, r.rep.Set
	fig := &DryRunFigures{Mirror: dst.Root()}
	if len(set.Images) > 0 {
		if err := dst.Check(ctx, set.Images[0]); err != nil {
			return fmt.Errorf("dry run: no-go: %w", err)
		}
		if err := checkPush(ctx, dst, set.Images[0]); err != nil {
			return fmt.Errorf("dry run: no-go: %w", err)
		}
	}
	var missing []imageset.Image
	// As the copy's planning: referrers after their images (see
	// transfer.TrustReferrers).
	for _, phase := range transfer.AttachedLast(set.Images) {
		present := make([]bool, len(phase))
		errs := make([]error, len(phase))
		var g errgroup.Group
		g.SetLimit(max(t.Copy.WithDefaults().ParallelImages, 1))
		for i, img := range phase {
			g.Go(func() error {
				errs[i] = transfer.Retry(ctx, dst.Retries, dst.RetryDelay, func() (err error) {
					present[i], err = dst.HasManifest(ctx, img, digest.Digest(img.Digest))
					return err
				})
				return nil
			})
		}
		_ = g.Wait() // errors are in errs, by image
		for i, img := range phase {
			if errs[i] != nil {
				return fmt.Errorf("dry run: %w", errs[i])
			}
			if present[i] {
				fig.Present++
			} else {
				missing = append(missing, img)
			}
		}
	}
	fig.Missing = len(missing)
	fig.Blobs, fig.Bytes, fig.Unreadable = transfer.Size(ctx, src, missing, nil, t.Copy.WithDefaults().ParallelImages, t.Log)
	r.rep.DryRun = fig

	// The cluster resources of a run in which every image arrives, made
	// in dry-run/ so the workspace a real run trusts stays as it was. They
	// come from the plan alone, catalog templates included.
	dry := &run{t: t, ws: workspace.Workspace{Dir: r.ws.Path("dry-run")}, plan: r.plan,
		rep: &Report{Mode: r.rep.Mode, Set: set, Resolution: r.rep.Resolution, Result: &transfer.Result{Skipped: set.Images}}}
	if err := dry.generate(dst.Root()); err != nil {
		return err
	}
	r.rep.ClusterResources = dry.rep.ClusterResources
	return nil
}

// dryRunToDisk counts what mirror-to-disk would download and the size of
// the archive it would write. An image needs no download when its manifests
// are stored and each blob is stored, linked in an archive still in place,
// or carried by an earlier archive of the workspace (see diskDestination).
func (t *Trip) dryRunToDisk(ctx context.Context, src transfer.Source, store *ocistore.Store, set *imageset.Set, carried map[digest.Digest]bool, rep *Report) {
	fig := &DryRunFigures{}
	var missing []imageset.Image
	present := func(d digest.Digest) bool { return carried[d] || store.Has(d) }
	for _, img := range set.Images {
		if _, err := transfer.StoreBlobsWalk(store, img, digest.Digest(img.Digest), present); err == nil {
			fig.Present++
		} else {
			missing = append(missing, img)
		}
	}
	fig.Missing = len(missing)
	fig.Blobs, fig.Bytes, fig.Unreadable = transfer.Size(ctx, src, missing, nil, t.Copy.WithDefaults().ParallelImages, t.Log)
	_, fig.ArchiveBytes, _ = transfer.Size(ctx, src, set.Images, carried, t.Copy.WithDefaults().ParallelImages, t.Log)
	rep.DryRun = fig
}

// checkPush asks the mirror whether the run's credentials may push into
// img's repository, by starting an upload and cancelling it.
func checkPush(ctx context.Context, dst *transfer.Registry, img imageset.Image) error {
	named, err := reference.ParseNormalizedNamed(dst.Name(img))
	if err != nil {
		return err
	}
	c, err := registryapi.NewClient(reference.Domain(named), dst.SystemContext())
	if err != nil {
		return fmt.Errorf("mirror registry %s: %w", dst.Root(), err)
	}
	if err := c.CheckPush(ctx, reference.Path(named)); err != nil {
		return fmt.Errorf("the mirror registry %s does not let these credentials push to %s: %w; give an account that may push there: --dest-authfile or --authfile (podman login %s), or --dest-creds USER:PASSWORD", dst.Root(), reference.Path(named), err, reference.Domain(named))
	}
	return nil
}

// mappingLine is one line of dry-run/mapping.txt: source=destination, the
// destination absolute (docker://root/…) when the mirror is known.
func mappingLine(img imageset.Image, root string) string {
	if root == "" {
		return img.Source + "=" + img.Destination
	}
	return "docker://" + img.Source + "=docker://" + strings.TrimSuffix(root, "/") + "/" + img.Destination
}

// carriedBlobs are the blobs earlier archives of ws carried (those made
// before --since, when given): a new archive leaves them out.
func (t *Trip) carriedBlobs(ws workspace.Workspace) (map[digest.Digest]bool, error) {
	history, err := ws.Archives()
	if err != nil {
		return nil, err
	}
	carried := map[digest.Digest]bool{}
	for _, r := range history {
		if !t.Since.IsZero() && !r.Created.Before(t.Since) {
			continue
		}
		for _, b := range r.Blobs {
			carried[b] = true
		}
	}
	return carried, nil
}
