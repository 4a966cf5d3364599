package prune

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/transfer"
	"github.com/gapmirror/gapmirror/workspace"
)

// DeletionRecord is what the workspace keeps of a prune or delete: the
// plan worked out against the registry and, when executed, the outcome.
type DeletionRecord struct {
	FormatVersion int       `json:"formatVersion"`
	Kind          string    `json:"kind"` // prune-preview, prune, delete
	Mirror        string    `json:"mirror"`
	Time          time.Time `json:"time"`
	ToolVersion   string    `json:"toolVersion"`
	Plan          *Plan     `json:"plan"`
	Outcome       *Outcome  `json:"outcome,omitempty"`
}

// DryRunPreview is where a dry run writes its prune preview (a real run
// without --prune writes prune/<time>-preview.json).
var DryRunPreview = []string{"dry-run", "prune-preview.json"}

// AfterCopy is what the copy of set into root, which a dry run skips,
// does to the registry's tags; the manifests come from src, where the copy
// would read them.
func AfterCopy(root string, set *imageset.Set, src transfer.Source) *After {
	a := &After{Tags: map[string]digest.Digest{}}
	byTag := map[string]imageset.Image{}
	for _, img := range set.Images {
		repo, tag := repoOf(root, img.Destination)
		a.Tags[repo+":"+tag] = digest.Digest(img.Digest)
		byTag[repo+":"+tag] = img
	}
	a.Manifest = func(ctx context.Context, repoTag string, d digest.Digest) ([]byte, string, error) {
		img := byTag[repoTag]
		data, mt, err := transfer.PlanReader(src, img)(ctx, d)
		if err != nil {
			return nil, "", err
		}
		if guessed := transfer.MediaTypeOf(data); guessed != "" {
			mt = guessed
		}
		return data, mt, nil
	}
	return a
}

// Candidates are the images gapmirror pushed to the root that the
// set no longer holds under the same tag and digest.
func Candidates(images []workspace.MirroredImage, set *imageset.Set) []Candidate {
	inSet := map[string]string{}
	for _, img := range set.Images {
		inSet[img.Destination] = img.Digest
	}
	// The set may lack the signature of an image it keeps (the lookup
	// failed this time, or --remove-signatures): the signature stays.
	kept := map[string]bool{}
	for _, img := range set.Images {
		kept[img.DestinationRepo()+"@"+img.Digest] = true
	}
	var out []Candidate
	for _, m := range images {
		if !m.Pushed {
			continue
		}
		d, ok := inSet[m.Destination]
		if ok && d == m.Digest {
			continue
		}
		if m.Kind.Attached() && !ok {
			repo, _ := splitDest(m.Destination)
			if kept[repo+"@"+m.SignatureOf] {
				continue
			}
		}
		why := fmt.Sprintf("%s is no longer in the image set (last in it %s)", m.Destination, m.LastSeen.Format(time.RFC3339))
		if ok {
			why = fmt.Sprintf("%s now names %s; this is the image it named until %s", m.Destination, d, m.LastSeen.Format(time.RFC3339))
		}
		out = append(out, Candidate{Destination: m.Destination, Digest: m.Digest, Origin: m.Origin, Kind: string(m.Kind), Why: why})
	}
	return out
}

// KeepNames are the "repo:tag" names (registry host relative) that must
// stay: the set's, and those of every other mirror root of the workspace
// on the same host (nested prefixes share repositories).
func KeepNames(w workspace.Workspace, root string, set *imageset.Set) (map[string]bool, error) {
	keep := map[string]bool{}
	add := func(r, dest string) {
		repo, tag := repoOf(r, dest)
		keep[repo+":"+tag] = true
	}
	if set != nil {
		for _, img := range set.Images {
			add(root, img.Destination)
		}
	}
	host, _ := splitRoot(root)
	var errs []error
	err := w.ReadAll("mirrors", func(name string) error {
		if name == workspace.LocationFile(root) {
			return nil // the root's own: its names are the set's
		}
		var r workspace.LocationRecord
		if _, err := w.Read(&r, "mirrors", name); err != nil {
			errs = append(errs, err)
			return nil
		}
		if h, _ := splitRoot(r.Mirror); h != host || r.Mirror == root {
			return nil
		}
		for _, m := range r.Images {
			add(r.Mirror, m.Destination)
		}
		return nil
	})
	return keep, errors.Join(append(errs, err)...)
}

// Forget drops deleted images (keys destination@digest) from the root's
// record: r when the caller has read it already, else read here.
func Forget(w workspace.Workspace, root string, r *workspace.LocationRecord, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	if r == nil {
		var err error
		if r, err = w.Location(root); err != nil {
			return err
		}
	}
	gone := map[string]bool{}
	for _, k := range keys {
		gone[k] = true
	}
	kept := r.Images[:0]
	for _, m := range r.Images {
		if !gone[m.Key()] {
			kept = append(kept, m)
		}
	}
	r.Images = kept
	return w.SaveLocation(r)
}

// PrintPlan prints a plan's deletes, what it keeps and why.
func PrintPlan(w io.Writer, p *Plan) {
	for _, a := range p.Actions {
		fmt.Fprintf(w, "  %s\n", a)
	}
	PrintKept(w, p)
}

// PrintKept prints what p keeps that a plain prune would delete (and why)
// and what was gone already.
func PrintKept(w io.Writer, p *Plan) {
	for _, k := range p.Kept {
		fmt.Fprintf(w, "  keep            %s@%s: %s\n", k.Image, k.Digest, k.Why)
	}
	for _, g := range p.Gone {
		fmt.Fprintf(w, "  already gone    %s\n", g)
	}
}

// Hint adds what to do about a registry error met while planning deletes
// (failure.Explain does the same for transfers).
func Hint(err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such host") || strings.Contains(msg, "i/o timeout"):
		return fmt.Errorf("%w (the registry is unreachable: check the host name, port and network)", err)
	case strings.Contains(msg, "x509:") || strings.Contains(msg, "certificate"):
		return fmt.Errorf("%w (the registry's TLS certificate is not trusted: add its CA with --dest-cert-dir or /etc/containers/certs.d, or pass --dest-tls-verify=false)", err)
	case strings.Contains(msg, "server gave HTTP response to HTTPS client"):
		return fmt.Errorf("%w (the registry speaks plain HTTP: pass --dest-tls-verify=false)", err)
	case strings.Contains(msg, " 401") || strings.Contains(msg, " 403") || strings.Contains(msg, "DENIED") || strings.Contains(msg, "UNAUTHORIZED"):
		return fmt.Errorf("%w (check the credentials for this registry in --authfile and that they may list tags and delete)", err)
	}
	return err
}
