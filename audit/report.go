package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/gapmirror/gapmirror/imageset"
)

// Kind is a kind of thing wrong at the mirror.
type Kind string

// The kinds, in the order the report lists them.
const (
	kindUnreachable      Kind = "unreachable"
	kindNotPushed        Kind = "not-pushed"
	kindMissingImage     Kind = "missing-image"
	kindTagMoved         Kind = "tag-moved"
	kindTagMissing       Kind = "tag-missing"
	kindMissingPlatform  Kind = "missing-platform-manifest"
	kindMissingBlob      Kind = "missing-blob"
	kindReferrerMissing  Kind = "referrer-missing"
	kindReferrerUnlisted Kind = "referrer-unlisted"
	kindNamedMissing     Kind = "named-image-missing"
	kindCatalog          Kind = "catalog-image-missing"
	kindReleaseSignature Kind = "release-signature"
)

var kinds = []Kind{kindUnreachable, kindNotPushed, kindMissingImage, kindTagMoved, kindTagMissing, kindMissingPlatform, kindMissingBlob, kindReferrerMissing, kindReferrerUnlisted, kindNamedMissing, kindCatalog, kindReleaseSignature}

// what says in a few words what the images of a kind suffer.
func (k Kind) what() string {
	switch k {
	case kindUnreachable:
		return "the mirror could not be asked about them"
	case kindNotPushed:
		return "the last run could not push them"
	case kindMissingImage:
		return "the mirror lacks them"
	case kindTagMoved:
		return "their tag names another image"
	case kindTagMissing:
		return "their tag is gone"
	case kindMissingPlatform:
		return "platform manifests of their index are gone"
	case kindMissingBlob:
		return "blobs of theirs are gone or damaged"
	case kindReferrerMissing:
		return "referrers (signatures, attestations, SBOMs) the mirror lacks"
	case kindReferrerUnlisted:
		return "referrers their subject's referrers do not list (a client cannot find them)"
	case kindNamedMissing:
		return "cluster resources name them and the mirror lacks them"
	case kindCatalog:
		return "a rebuilt catalog names images the mirror lacks"
	case kindReleaseSignature:
		return "the release signature ConfigMaps do not match the payloads"
	}
	return string(k)
}

// needsForce: the destination tag is right, so a trip takes the image to
// be there unless told to copy it again; a trip takes a referrer its
// records place there to be there while its image is.
func (k Kind) needsForce() bool {
	return k == kindMissingPlatform || k == kindMissingBlob || k == kindReferrerMissing || k == kindReferrerUnlisted
}

// Problem is one thing wrong.
type Problem struct {
	Kind Kind `json:"kind"`
	// Image is where the image is (or should be) at the mirror, or the file
	// at fault.
	Image  string `json:"image"`
	Digest string `json:"digest,omitempty"`
	Detail string `json:"detail"`
	// Group is the content group whose exit code bit the problem sets.
	Group string `json:"group"`
	// destination is the set image's destination, for --retry-failed.
	destination string
}

func (a *Audit) problem(k Kind, img imageset.Image, detail string) Problem {
	group := "additional"
	if g := img.Groups(); len(g) > 0 {
		group = g[0]
	}
	return Problem{Kind: k, Image: a.name(img), Digest: img.Digest, Detail: detail, Group: group, destination: img.Destination}
}

// Report is what an audit found.
type Report struct {
	Mirror string `json:"mirror"`
	// Record is the run record whose plan the mirror was checked against.
	Record string    `json:"record"`
	Mode   string    `json:"mode"`
	Deep   bool      `json:"deep"`
	Time   time.Time `json:"time"`
	Counts Counts    `json:"checked"`
	// Groups are the problems by kind, each with its fix.
	Groups []Group `json:"problems"`
	// RetryFile is the failure file written for --retry-failed.
	RetryFile string `json:"retryFile,omitempty"`
}

// Group is the problems of one kind.
type Group struct {
	Kind     Kind      `json:"kind"`
	What     string    `json:"what"`
	Fix      string    `json:"fix"`
	Problems []Problem `json:"items"`
}

func (a *Audit) report() *Report {
	e := a.Expected
	r := &Report{Mirror: a.Mirror.Root(), Record: e.Workspace + "/" + e.Record, Mode: e.Mode, Deep: a.Deep, Time: time.Now().UTC(), Counts: a.counts}
	var retry []string
	why := map[string]string{}
	for _, p := range a.problems {
		if p.destination != "" && !slices.Contains(retry, p.destination) && p.Kind != kindUnreachable {
			retry = append(retry, p.destination)
			why[p.destination] = string(p.Kind) + ": " + p.Detail
		}
	}
	if f, err := e.retryFile(r.Time.Format("20060102T150405.000Z")+"-verify.json", retry, why); err != nil {
		a.Log.Warn("could not write the failure file for --retry-failed", "err", err)
	} else {
		r.RetryFile = f
	}
	for _, k := range kinds {
		g := Group{Kind: k, What: k.what(), Fix: a.fixOf(k)}
		for _, p := range a.problems {
			if p.Kind == k {
				g.Problems = append(g.Problems, p)
			}
		}
		if len(g.Problems) > 0 {
			slices.SortFunc(g.Problems, func(x, y Problem) int { return strings.Compare(x.Image+x.Detail, y.Image+y.Detail) })
			r.Groups = append(r.Groups, g)
		}
	}
	return r
}

// fixOf is what to do about problems of kind k.
func (a *Audit) fixOf(k Kind) string {
	switch k {
	case kindUnreachable:
		return "check the mirror answers and accepts the credentials (the answer is with each image), then verify again"
	case kindReleaseSignature:
		return fmt.Sprintf("run the trip to this mirror again (%s), which writes the ConfigMaps from its plan, and apply %s/%s", a.fix(kindMissingImage), a.Expected.Workspace, clusterResources)
	case kindNamedMissing:
		return fmt.Sprintf("apply the cluster resources the last trip wrote (%s/%s), or run the trip again: %s", a.Expected.Workspace, clusterResources, a.fix(k))
	}
	return "push them again: " + a.fix(k)
}

// ok reports whether nothing is wrong.
func (r *Report) ok() bool { return len(r.Groups) == 0 }

// Print writes the report for a reader: the figures, then each kind of
// problem once with its fix and the images it hit.
func (r *Report) Print(w io.Writer) {
	c := r.Counts
	how := "HEAD"
	if r.Deep {
		how = "read and hashed"
	}
	fmt.Fprintf(w, "verify docker://%s against %s (%s)\n", r.Mirror, r.Record, r.Mode)
	fmt.Fprintf(w, "checked: %d images and %d signatures and referrers by digest, %d platform manifests, %d blobs (%s); %d images named by the cluster resources; %d rebuilt catalogs naming %d images; %d release signature ConfigMaps; %d requests\n",
		c.Images, c.Signatures, c.Platforms, c.Blobs, how, c.Named, c.Catalogs, c.CatalogImages, c.ReleaseSignatures, c.Requests)
	if r.ok() {
		fmt.Fprintf(w, "verified: the mirror holds every image of the set whole, by digest, under the tags the cluster resources name\n")
		return
	}
	for _, g := range r.Groups {
		fmt.Fprintf(w, "PROBLEM %s (%d): %s\n  fix: %s\n", g.Kind, len(g.Problems), g.What, g.Fix)
		for i, p := range g.Problems {
			if i == 20 {
				fmt.Fprintf(w, "  … and %d more (all of them: -o json)\n", len(g.Problems)-i)
				break
			}
			fmt.Fprintf(w, "  %s: %s\n", p.Image, p.Detail)
		}
	}
	if r.RetryFile != "" {
		fmt.Fprintf(w, "failure file for --retry-failed: %s\n", r.RetryFile)
	}
}

// JSON writes the report as one JSON document.
func (r *Report) JSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Err is nil when nothing is wrong, else an Error whose exit code says
// which content groups are hit.
func (r *Report) Err() error {
	if r.ok() {
		return nil
	}
	e := &Error{Mirror: r.Mirror}
	for _, g := range r.Groups {
		e.Kinds = append(e.Kinds, string(g.Kind))
		for _, p := range g.Problems {
			e.Problems++
			if !slices.Contains(e.Groups, p.Group) {
				e.Groups = append(e.Groups, p.Group)
			}
		}
	}
	return e
}

// Error says the mirror does not hold what it should.
type Error struct {
	Mirror   string
	Problems int
	Kinds    []string
	Groups   []string
}

func (e *Error) Error() string {
	return fmt.Sprintf("the mirror %s does not hold what it should: %d problems (%s), see the report above", e.Mirror, e.Problems, strings.Join(e.Kinds, ", "))
}

// ExitCode is mirror's: a bit per content group hit (2 release, 4
// operator, 8 additional, 16 helm), 1 when none is.
func (e *Error) ExitCode() int { return imageset.ExitCode(e.Groups) }
