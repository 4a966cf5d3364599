package mirror

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/release"
	"github.com/gapmirror/gapmirror/prune"
	"github.com/gapmirror/gapmirror/sections"
	"github.com/gapmirror/gapmirror/transfer"
	"github.com/gapmirror/gapmirror/workspace"
)

// A run record and failure file as gapmirror wrote them before the record
// carried the plan (format 1).
const (
	v1Record = `{
  "formatVersion": 1,
  "mode": "mirror-to-mirror",
  "time": "2026-11-01T10:00:00Z",
  "toolVersion": "v0.9.0",
  "config": "/tmp/isc.yaml",
  "pinnedConfig": "/tmp/ws/working-dir/isc_pinned_2026-11-01T10:00:00Z.yaml",
  "mirror": "registry.example:5000/m",
  "set": {"formatVersion": 2, "images": [
    {"source": "quay.io/a/app@sha256:1111111111111111111111111111111111111111111111111111111111111111", "origin": "quay.io/a/app:v1", "digest": "sha256:1111111111111111111111111111111111111111111111111111111111111111", "destination": "a/app:v1", "kind": "additional"},
    {"source": "quay.io/a/db@sha256:2222222222222222222222222222222222222222222222222222222222222222", "origin": "quay.io/a/db:v2", "digest": "sha256:2222222222222222222222222222222222222222222222222222222222222222", "destination": "a/db:v2", "kind": "additional"}
  ]},
  "copied": ["a/app:v1"],
  "skipped": null,
  "failed": [{"image": "a/db:v2", "error": "boom"}],
  "bytes": 10,
  "blobs": 1
}`
	v1Failed = `{
  "formatVersion": 1,
  "mode": "mirror-to-mirror",
  "set": {"formatVersion": 2, "images": [
    {"source": "quay.io/a/app@sha256:1111111111111111111111111111111111111111111111111111111111111111", "origin": "quay.io/a/app:v1", "digest": "sha256:1111111111111111111111111111111111111111111111111111111111111111", "destination": "a/app:v1", "kind": "additional"},
    {"source": "quay.io/a/db@sha256:2222222222222222222222222222222222222222222222222222222222222222", "origin": "quay.io/a/db:v2", "digest": "sha256:2222222222222222222222222222222222222222222222222222222222222222", "destination": "a/db:v2", "kind": "additional"}
  ]},
  "failed": [{"image": "a/db:v2", "error": "boom"}]
}`
)

// stampedTrip is a quiet Trip with a fixed clock.
func stampedTrip() *Trip {
	t := quietTrip()
	t.Out, t.Now = io.Discard, func() time.Time { return time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC) }
	return t
}

// TestRunRecordFormat1 reads a record and a failure file older gapmirror
// versions wrote: the record's Set is the plan's, --retry-failed retries the
// failed image, and delete still finds the latest Set.
func TestRunRecordFormat1(t *testing.T) {
	ws := workspace.Workspace{Dir: t.TempDir()}
	name := "20261101T100000.000Z-mirror-to-mirror.json"
	for dir, data := range map[string]string{"runs": v1Record, "failed": v1Failed} {
		if err := os.MkdirAll(ws.Path(dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(ws.Path(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := ws.RunRecord("runs/" + name)
	if err != nil {
		t.Fatalf("a format-1 run record does not load: %v", err)
	}
	if rec.FormatVersion != 1 || rec.Plan == nil || len(rec.Set.Images) != 2 || rec.Mirror != "registry.example:5000/m" || rec.Pinned == "" || len(rec.Failed) != 1 {
		t.Errorf("format-1 record read as %+v", rec)
	}
	set, err := prune.LatestSet(ws, "registry.example:5000/m", nil)
	if err != nil || set == nil || len(set.Images) != 2 {
		t.Errorf("latestSet of a format-1 record: %v, %v", set, err)
	}

	tr := stampedTrip()
	tr.RetryFailed = ws.Path("failed", name)
	plan, todo, _, _, err := tr.plan(context.Background(), nil, nil, "")
	if err != nil {
		t.Fatalf("--retry-failed with a format-1 failure file: %v", err)
	}
	if len(plan.Set.Images) != 2 || len(todo.Images) != 1 || todo.Images[0].Destination != "a/db:v2" || len(plan.Files) != 0 {
		t.Errorf("retry of a format-1 failure file: plan %d images, %d files; todo %v", len(plan.Set.Images), len(plan.Files), todo.Images)
	}
}

// TestRunRecordKeepsPlan: a run record (format 2) holds the plan, its
// files kept by digest, and --retry-failed gets it all back; a damaged file
// or a newer format is refused with what to do.
func TestRunRecordKeepsPlan(t *testing.T) {
	dir := t.TempDir()
	ws := workspace.Workspace{Dir: dir}
	set := &imageset.Set{FormatVersion: imageset.SetFormatVersion, Images: []imageset.Image{
		{Source: "quay.io/a/app@sha256:1111111111111111111111111111111111111111111111111111111111111111", Origin: "quay.io/a/app:v1", Digest: "sha256:1111111111111111111111111111111111111111111111111111111111111111", Destination: "a/app:v1", Kind: imageset.KindAdditional},
		{Source: "quay.io/a/db@sha256:2222222222222222222222222222222222222222222222222222222222222222", Origin: "quay.io/a/db:v2", Digest: "sha256:2222222222222222222222222222222222222222222222222222222222222222", Destination: "a/db:v2", Kind: imageset.KindAdditional},
	}}
	plan := &workspace.Plan{Set: set, Config: "kind: ImageSetConfiguration\n", Pinned: "pinned\n", PinnedDelete: "delete\n",
		Blocked: []string{"quay.io/a/blocked:v1"}, Unresolved: []workspace.Unresolved{{Origin: "quay.io/a/gone:v1", Kind: imageset.KindAdditional, Why: "mirror.additionalImages[3]", Error: "manifest unknown"}}, MaxNestedPaths: 2}
	plan.AddFile(sections.SignatureExtra("sha256:3333333333333333333333333333333333333333333333333333333333333333", 1), []byte("signature one"))
	plan.AddFile(sections.TemplateExtra("a/catalog:v1"), []byte("kind: CatalogSource\n"))
	rep := &Report{Mode: "mirror-to-mirror", Set: set, Mirror: "registry.example:5000/m",
		Result: &transfer.Result{Copied: set.Images[:1], Failed: []transfer.Failure{{Image: set.Images[1], Err: io.ErrUnexpectedEOF}}}}
	tr := stampedTrip()
	r := &run{t: tr, ws: ws, plan: plan, rep: rep}
	if err := r.record(); err != nil {
		t.Fatal(err)
	}
	if rep.FailedFile == "" {
		t.Fatal("no failure file written")
	}

	retry := stampedTrip()
	retry.RetryFailed = rep.FailedFile
	got, todo, _, _, err := retry.plan(context.Background(), nil, nil, "")
	if err != nil {
		t.Fatalf("--retry-failed: %v", err)
	}
	if len(todo.Images) != 1 || todo.Images[0].Destination != "a/db:v2" {
		t.Errorf("retry copies %v, want a/db:v2", todo.Images)
	}
	if got.Config != plan.Config || got.Pinned != plan.Pinned || got.PinnedDelete != plan.PinnedDelete || got.MaxNestedPaths != 2 ||
		len(got.Blocked) != 1 || len(got.Unresolved) != 1 || got.Unresolved[0].Error != "manifest unknown" {
		t.Errorf("plan read back as %+v", got)
	}
	sigs, err := got.Signatures()
	if err != nil || string(sigs["sha256:3333333333333333333333333333333333333333333333333333333333333333"][0]) != "signature one" {
		t.Errorf("signatures read back: %v, %v", sigs, err)
	}
	if data, ok := got.File(sections.TemplateExtra("a/catalog:v1")); !ok || string(data) != "kind: CatalogSource\n" {
		t.Errorf("template read back: %q %v", data, ok)
	}

	// A failure file moved out of its workspace still retries its images.
	moved := filepath.Join(t.TempDir(), "failed.json")
	data, err := os.ReadFile(rep.FailedFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(moved, data, 0o644); err != nil {
		t.Fatal(err)
	}
	away := stampedTrip()
	away.RetryFailed = moved
	if p, todo, _, _, err := away.plan(context.Background(), nil, nil, ""); err != nil || len(todo.Images) != 1 || len(p.Files) != 0 {
		t.Errorf("a moved failure file: %v, todo %v", err, todo)
	}

	// A damaged plan file is caught by its digest.
	f := got.Files[0]
	p := ws.Path("plan-files", f.Digest.Algorithm().String(), f.Digest.Encoded())
	if err := os.WriteFile(p, []byte("tampered"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, _, _, err := retry.plan(context.Background(), nil, nil, ""); err == nil || !strings.Contains(err.Error(), "does not match its digest") {
		t.Errorf("a damaged plan file: %v", err)
	}

	// A newer format is refused, not misread.
	runs, _ := filepath.Glob(ws.Path("runs", "*.json"))
	data, _ = os.ReadFile(runs[0])
	if err := os.WriteFile(runs[0], []byte(strings.Replace(string(data), `"formatVersion": 2`, `"formatVersion": 99`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.RunRecord("runs/" + filepath.Base(runs[0])); err == nil || !strings.Contains(err.Error(), "newer gapmirror") {
		t.Errorf("a newer record: %v", err)
	}
}

// TestGenerateReadsThePlanOnly: the cluster resources come from the plan
// and the copy's result, never from the workspace: a CatalogSource
// template and release signatures the workspace holds (a later run may
// have replaced them) are not read, the plan's are used; a plan made from
// a format-1 failure file, which carries no files, is given the
// signatures the workspace kept when it is made.
func TestGenerateReadsThePlanOnly(t *testing.T) {
	const (
		catalogDigest = "sha256:4444444444444444444444444444444444444444444444444444444444444444"
		relA          = "sha256:5555555555555555555555555555555555555555555555555555555555555555"
		relB          = "sha256:6666666666666666666666666666666666666666666666666666666666666666"
	)
	ws := workspace.Workspace{Dir: t.TempDir()}
	set := &imageset.Set{FormatVersion: imageset.SetFormatVersion, Images: []imageset.Image{
		{Source: "quay.io/ops/index@" + catalogDigest, Origin: "quay.io/ops/index:v1", Digest: catalogDigest, Destination: "ops/index:v1", Kind: imageset.KindOperatorCatalog},
		{Source: "quay.io/ocp/release@" + relA, Origin: "quay.io/ocp/release:4.18.1-x86_64", Digest: relA, Destination: "ocp/release:4.18.1-x86_64", Kind: imageset.KindRelease},
		{Source: "quay.io/ocp/release@" + relB, Origin: "quay.io/ocp/release:4.18.2-x86_64", Digest: relB, Destination: "ocp/release:4.18.2-x86_64", Kind: imageset.KindRelease},
	}}
	template := "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nspec:\n  displayName: %s\n"
	// What the workspace holds: another template, signatures of both releases.
	if err := workspace.WriteFile(ws.Dir, sections.TemplateExtra("ops/index:v1"), []byte(fmt.Sprintf(template, "From the workspace"))); err != nil {
		t.Fatal(err)
	}
	for _, rd := range []string{relA, relB} {
		if err := release.SaveSignatures(ws.Path(workspace.ReleaseSignaturesDir), rd, [][]byte{[]byte("workspace signature of " + rd)}); err != nil {
			t.Fatal(err)
		}
	}
	plan := &workspace.Plan{Set: set}
	plan.AddFile(sections.TemplateExtra("ops/index:v1"), []byte(fmt.Sprintf(template, "From the plan")))
	plan.AddFile(sections.SignatureExtra(relA, 1), []byte("plan signature of "+relA))

	generated := func(plan *workspace.Plan) map[string]string {
		t.Helper()
		rep := &Report{Mode: "mirror-to-mirror", Set: set, Resolution: &imageset.Resolution{}, Result: &transfer.Result{Copied: set.Images}}
		dir := filepath.Join(t.TempDir(), "cluster-resources")
		r := &run{t: stampedTrip(), ws: ws, plan: plan, rep: rep}
		if err := r.generateInto(dir, "registry.example:5000/m"); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, p := range rep.ClusterResources {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			out[filepath.Base(p)] = string(data)
		}
		return out
	}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

	files := generated(plan)
	cs := files["cs-index-v1.yaml"]
	if !strings.Contains(cs, "displayName: From the plan") || strings.Contains(cs, "From the workspace") {
		t.Errorf("the CatalogSource is not built on the plan's template:\n%s", cs)
	}
	sigs := files["signature-configmap.yaml"]
	if !strings.Contains(sigs, b64("plan signature of "+relA)) || strings.Contains(sigs, b64("workspace signature of "+relA)) || strings.Contains(sigs, b64("workspace signature of "+relB)) {
		t.Errorf("the signature ConfigMaps hold other than the plan's signatures:\n%s", sigs)
	}
	if _, err := os.Stat(ws.Path("cluster-resources")); err == nil {
		t.Error("generateInto wrote into the workspace's cluster-resources")
	}

	// A format-1 failure file: the plan is its Set, given the kept signatures.
	setJSON, err := set.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	failed := `{"formatVersion": 1, "mode": "mirror-to-mirror", "set": ` + string(setJSON) + `, "failed": [{"image": "ocp/release:4.18.2-x86_64", "error": "boom"}]}`
	if err := workspace.WriteFile(ws.Dir, "failed/old.json", []byte(failed)); err != nil {
		t.Fatal(err)
	}
	tr := stampedTrip()
	tr.RetryFailed = ws.Path("failed", "old.json")
	old, todo, _, _, err := tr.plan(context.Background(), nil, nil, ws.Dir)
	if err != nil || len(todo.Images) != 1 {
		t.Fatalf("--retry-failed with a format-1 failure file: %v, %v", err, todo)
	}
	if kept, err := old.Signatures(); err != nil || len(kept) != 2 || string(kept[relB][0]) != "workspace signature of "+relB {
		t.Errorf("the format-1 plan's signatures: %q, %v; want the two the workspace kept", kept, err)
	}
	sigs = generated(old)["signature-configmap.yaml"]
	if !strings.Contains(sigs, b64("workspace signature of "+relA)) || !strings.Contains(sigs, b64("workspace signature of "+relB)) {
		t.Errorf("the format-1 retry's signature ConfigMaps:\n%s", sigs)
	}
}

func quietTrip() *Trip {
	return &Trip{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Copy: transfer.Options{Retries: -1}}
}
