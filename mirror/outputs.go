package mirror

import (
	"fmt"
	"io"
	"strings"

	"github.com/gapmirror/gapmirror/generate"
	"github.com/gapmirror/gapmirror/imageset"
)

// holdMirrorSets keeps the IDMS/ITMS of an earlier run when images this run
// failed to copy would change them (generate.HoldMirrorSets) and returns
// the files to leave in place.
func (t *Trip) holdMirrorSets(files generate.Files, dir string, in generate.Input, rep *Report) ([]string, error) {
	var failed []imageset.Image
	for _, f := range rep.Result.Failed {
		failed = append(failed, f.Image)
	}
	keep, heldBy, err := generate.HoldMirrorSets(files, dir, in, failed)
	if err != nil {
		return nil, fmt.Errorf("generating cluster resources: %w", err)
	}
	rep.MirrorSetsHeldBy = heldBy
	if len(keep) > 0 {
		t.Log.Warn("IDMS/ITMS not rewritten: images they map failed", "kept", strings.Join(keep, ","), "failed", len(heldBy))
	}
	return keep, nil
}

// printHeldMirrorSets says why the IDMS/ITMS were not rewritten; the
// failed images are listed in full under FAILED, so a few names suffice.
func (r *Report) printHeldMirrorSets(w io.Writer) {
	if len(r.MirrorSetsHeldBy) == 0 {
		return
	}
	list, more := r.MirrorSetsHeldBy, ""
	if len(list) > 5 {
		list, more = list[:5], fmt.Sprintf(" and %d more", len(list)-5)
	}
	fmt.Fprintf(w, "IDMS/ITMS left as the earlier run wrote them: applying new ones would drop the mirror of %s: %s%s; once they are mirrored, the next run rewrites them\n",
		plural(len(r.MirrorSetsHeldBy), "failed image"), strings.Join(list, ", "), more)
}
