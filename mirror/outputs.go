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

func (r *Report) printHeldMirrorSets(w io.Writer) {
	if len(r.MirrorSetsHeldBy) == 0 {
		return
	}
	fmt.Fprintf(w, "IDMS/ITMS left as the earlier run wrote them: applying new ones would drop the mirror of %d failed images: %s; once they are mirrored (--retry-failed), the next run rewrites them\n",
		len(r.MirrorSetsHeldBy), strings.Join(r.MirrorSetsHeldBy, ", "))
}
