package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/distribution/reference"
	"sigs.k8s.io/yaml"

	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/internal/imagebuilder"
	"github.com/gapmirror/gapmirror/internal/registrytest"
)

// repoInPath finds the repository name of a distribution API request.
var repoInPath = regexp.MustCompile(`^/v2/(.+?)/(manifests|blobs|tags)/`)

// depthLimit makes a registry refuse repositories deeper than n path
// components, as Quay without nested repositories does (400 NAME_INVALID),
// and counts the refusals.
func depthLimit(n int, refused *[]string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if m := repoInPath.FindStringSubmatch(r.URL.Path); m != nil && strings.Count(m[1], "/")+1 > n {
				*refused = append(*refused, r.Method+" "+r.URL.Path)
				rw.Header().Set("Content-Type", "application/json")
				rw.WriteHeader(http.StatusBadRequest)
				fmt.Fprintf(rw, `{"errors":[{"code":"NAME_INVALID","message":"invalid repository name","detail":"repository %s is deeper than %d path components"}]}`, m[1], n)
				return
			}
			next.ServeHTTP(rw, r)
		})
	}
}

// pushAt pushes a small single-platform image to the upstream as repo:tag.
func (w *world) pushAt(repo, tag string, seed uint64) example {
	w.t.Helper()
	img, err := imagebuilder.Build(imagebuilder.ImageSpec{Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(seed, 4<<10)}})
	must(w.t, err)
	must(w.t, imagebuilder.Push(context.Background(), w.upTarget(), repo, tag, img))
	return example{Ref: w.up.Host() + "/" + repo + ":" + tag, Repo: repo, Tag: tag, Digest: img.Digest}
}

// nestedWorld is a world whose mirror registry takes at most two path
// components, with additional images two to four components deep and an
// operator catalog.
func nestedWorld(t *testing.T) (*world, *[]string, string) {
	w := newWorld(t, registrytest.Options{})
	refused := &[]string{}
	w.dst.SetWrap(depthLimit(2, refused))
	w.pushFleet(6, 16<<10) // apps/app-NN and tools/team-N/tool-NN
	w.images = append(w.images, w.pushAt("deep/a/b/c", "v1", 77))
	oc := w.pushCatalog("catalogs/test-index", "v1", catalogOptions{Spec: opSpec})
	var b strings.Builder
	b.WriteString("  additionalImages:\n")
	for _, ex := range w.images {
		fmt.Fprintf(&b, "  - name: %s\n", ex.Ref)
	}
	// The template is found by the catalog's unflattened name.
	template := w.writeFile("cs-template.yaml", "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: ignored\nspec:\n  displayName: Flattened test operators\n")
	b.WriteString("  operators:\n  - catalog: " + oc.Ref + "\n    targetCatalogSourceTemplate: " + template + "\n    packages:\n    - name: operator-001\n    - name: operator-004\n")
	return w, refused, w.writeISC("isc.yaml", b.String())
}

// lastRunSet is the Set of the newest run record in ws.
func lastRunSet(t *testing.T, ws string) *imageset.Set {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(ws, "runs", "*.json"))
	if len(files) == 0 {
		t.Fatalf("no run record in %s", ws)
	}
	var rec struct{ Set *imageset.Set }
	must(t, json.Unmarshal([]byte(readFile(t, files[len(files)-1])), &rec))
	return rec.Set
}

// checkFlattened checks that every image of the last run's Set is at the
// mirror under at most two path components, and that every IDMS/ITMS entry
// maps one source repository to the flattened repository holding its image.
func (w *world) checkFlattened(ws, root string, minSources int) {
	t := w.t
	t.Helper()
	host := w.dst.Host()
	set := lastRunSet(t, ws)
	bySource := map[string][]imageset.Image{}
	for _, img := range set.Images {
		repo := img.DestinationRepo()
		full := strings.TrimPrefix(root+"/"+repo, host+"/")
		if strings.Count(full, "/")+1 > 2 {
			t.Errorf("%s went to %s, deeper than 2 components", img.Origin, full)
		}
		if got, err := w.dst.ManifestDigest(full, img.DestinationTag()); err != nil || got.String() != img.Digest {
			t.Errorf("%s: not at %s:%s (%v, %s)", img.Origin, full, img.DestinationTag(), err, got)
		}
		if img.Kind == imageset.KindOperatorCatalog || img.Kind == imageset.KindReleaseGraph {
			continue
		}
		named, err := reference.ParseNormalizedNamed(img.Origin)
		must(t, err)
		bySource[named.Name()] = append(bySource[named.Name()], img)
	}
	mapped := map[string]bool{}
	for _, file := range []string{"idms-gapmirror.yaml", "itms-gapmirror.yaml"} {
		data, err := os.ReadFile(filepath.Join(ws, "cluster-resources", file))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		must(t, err)
		for _, doc := range strings.Split(string(data), "---\n") {
			var obj struct {
				Spec struct {
					Digest []struct {
						Source  string
						Mirrors []string
					} `json:"imageDigestMirrors"`
					Tag []struct {
						Source  string
						Mirrors []string
					} `json:"imageTagMirrors"`
				} `json:"spec"`
			}
			must(t, yaml.Unmarshal([]byte(doc), &obj))
			for _, e := range append(obj.Spec.Digest, obj.Spec.Tag...) {
				imgs := bySource[e.Source]
				if len(imgs) == 0 {
					t.Errorf("%s: entry for %s, which is no image's repository (namespace scope with flattened names)", file, e.Source)
					continue
				}
				mapped[e.Source] = true
				for _, m := range e.Mirrors {
					for _, img := range imgs {
						repo := strings.TrimPrefix(m, host+"/")
						if _, _, err := w.dst.Manifest(repo, img.Digest); err != nil {
							t.Errorf("%s: %s → %s does not resolve %s: %v", file, e.Source, m, img.Origin, err)
						}
					}
				}
			}
		}
	}
	for src := range bySource {
		if !mapped[src] {
			t.Errorf("no IDMS/ITMS entry for %s", src)
		}
	}
	if len(bySource) < minSources {
		t.Errorf("only %d source repositories checked", len(bySource))
	}
}

// TestMaxNestedPaths mirrors images two to four components deep and an
// operator catalog, mirror-to-mirror and disk-to-mirror, into a registry
// that refuses repositories deeper than two components: with
// --max-nested-paths 2 everything lands, the cluster resources name the
// flattened repositories, a rerun skips everything and prune deletes by
// the flattened names.
func TestMaxNestedPaths(t *testing.T) {
	t.Parallel()
	w, refused, isc := nestedWorld(t)
	ws := filepath.Join(w.dir, "ws")
	root := w.dst.Host() + "/m2m"

	// Without the flag the registry refuses the deep repositories.
	code, _, _ := w.gapmirror("mirror", "-c", isc, "--workspace", "file://"+filepath.Join(w.dir, "plain"), "docker://"+root)
	if code == 0 || len(*refused) == 0 {
		t.Fatalf("the depth-limited registry accepted nested repositories: exit %d", code)
	}
	*refused = nil

	code, out, _ := w.gapmirror("mirror", "-c", isc, "--max-nested-paths", "2", "--workspace", "file://"+ws, "docker://"+root)
	if code != 0 || !strings.Contains(out, " 0 failed") {
		t.Fatalf("mirror-to-mirror with --max-nested-paths 2: exit %d", code)
	}
	if len(*refused) > 0 {
		t.Errorf("requests refused for depth: %v", (*refused)[:min(3, len(*refused))])
	}
	wd := filepath.Join(ws, "working-dir")
	w.checkFlattened(wd, root, 10)
	deep := w.images[len(w.images)-1]
	if got, err := w.dst.ManifestDigest("m2m/deep-a-b-c", "v1"); err != nil || got != deep.Digest {
		t.Errorf("deep/a/b/c not at m2m/deep-a-b-c:v1: %v", err)
	}
	cs := readFile(t, filepath.Join(wd, "cluster-resources", "cs-catalogs-test-index-v1.yaml"))
	if !strings.Contains(cs, "image: "+root+"/catalogs-test-index:v1") || !strings.Contains(cs, "displayName: Flattened test operators") {
		t.Errorf("CatalogSource does not serve the flattened catalog:\n%s", cs)
	}
	rec := readFile(t, filepath.Join(wd, "mirrors", strings.NewReplacer("/", "_", ":", "_").Replace(root)+".json"))
	if !strings.Contains(rec, `"destination": "deep-a-b-c:v1"`) || !strings.Contains(rec, `"unflattened": "deep/a/b/c:v1"`) || !strings.Contains(rec, `"maxNestedPaths": 2`) {
		t.Errorf("the mirror record lacks the pushed name, the set's name or N:\n%s", rec)
	}

	code, out, _ = w.gapmirror("mirror", "-c", isc, "--max-nested-paths", "2", "--workspace", "file://"+ws, "docker://"+root)
	if code != 0 || !strings.Contains(out, " 0 copied,") || !strings.Contains(out, "prune: nothing to delete") {
		t.Errorf("no-change rerun: exit %d", code)
	}

	// Drop the deep image and a three-component one: prune deletes them by
	// their flattened names and nothing else.
	tool := w.images[2] // tools/team-0/tool-02
	var b strings.Builder
	b.WriteString("  additionalImages:\n")
	for _, ex := range w.images {
		if ex.Repo != deep.Repo && ex.Repo != tool.Repo {
			fmt.Fprintf(&b, "  - name: %s\n", ex.Ref)
		}
	}
	operators := strings.SplitN(readFile(t, isc), "  operators:\n", 2)[1]
	isc2 := w.writeISC("isc2.yaml", b.String()+"  operators:\n"+operators)
	code, out, _ = w.gapmirror("mirror", "-c", isc2, "--max-nested-paths", "2", "--prune", "--workspace", "file://"+ws, "docker://"+root)
	if code != 0 || !strings.Contains(out, "prune: 2 of 2 deletes done") {
		t.Errorf("prune run: exit %d", code)
	}
	w.gone(w.dst, "m2m/deep-a-b-c", "v1", deep.Digest)
	w.gone(w.dst, "m2m/tools-team-0-tool-02", "v1", tool.Digest)
	w.present(w.dst, "m2m/apps-app-00", "v1", w.images[0].Digest)

	// Disk-to-mirror: the archive keeps the set's names; the push flattens.
	archiveDir := filepath.Join(w.dir, "archive")
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "file://"+archiveDir); code != 0 {
		t.Fatalf("mirror-to-disk exit %d", code)
	}
	d2m := w.dst.Host() + "/d2m"
	code, out, _ = w.gapmirror("mirror", "--max-nested-paths", "2", "--from", "file://"+archiveDir, "docker://"+d2m)
	if code != 0 || !strings.Contains(out, " 0 failed") || len(*refused) > 0 {
		t.Fatalf("disk-to-mirror with --max-nested-paths 2: exit %d, refused %v", code, *refused)
	}
	w.checkFlattened(filepath.Join(archiveDir, "working-dir"), d2m, 10)
	cs = readFile(t, filepath.Join(archiveDir, "working-dir", "cluster-resources", "cs-catalogs-test-index-v1.yaml"))
	if !strings.Contains(cs, "image: "+d2m+"/catalogs-test-index:v1") || !strings.Contains(cs, "displayName: Flattened test operators") {
		t.Errorf("disk-to-mirror CatalogSource does not serve the flattened catalog from the archive's template:\n%s", cs)
	}
	code, out, _ = w.gapmirror("mirror", "--max-nested-paths", "2", "--from", "file://"+archiveDir, "docker://"+d2m)
	if code != 0 || !strings.Contains(out, " 0 copied,") {
		t.Errorf("no-change disk-to-mirror rerun: exit %d", code)
	}

	// delete finds what was pushed flattened by the names the set gives.
	disc := w.disc("disc.yaml", "  additionalImages:\n  - name: "+w.images[5].Ref+"\n")
	code, _, stderr := w.gapmirror("delete", "-c", disc, "--generate", "--max-nested-paths", "3", "--workspace", "file://"+ws, "docker://"+root)
	if code == 0 || !strings.Contains(stderr, "--max-nested-paths 3") || !strings.Contains(stderr, "used 2") {
		t.Errorf("delete with another N: exit %d\n%s", code, stderr)
	}
	if code, _, _ := w.gapmirror("delete", "-c", disc, "--generate", "--max-nested-paths", "2", "--workspace", "file://"+ws, "docker://"+root); code != 0 {
		t.Fatal("delete --generate failed")
	}
	plan := filepath.Join(wd, "delete", "delete-images.yaml")
	flat := "m2m/" + strings.ReplaceAll(w.images[5].Repo, "/", "-")
	if p := readFile(t, plan); !strings.Contains(p, "imageReference: docker://"+w.dst.Host()+"/"+flat+":"+w.images[5].Tag) {
		t.Errorf("plan does not name the flattened repository %s:\n%s", flat, p)
	}
	if code, _, _ := w.gapmirror("delete", "--delete-yaml-file", plan, "docker://"+root); code != 0 {
		t.Fatal("delete failed")
	}
	w.gone(w.dst, flat, w.images[5].Tag, w.images[5].Digest)
}

// TestMaxNestedPathsRefusals: collisions, impossible roots and bad values
// are refused before anything is pushed.
func TestMaxNestedPathsRefusals(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	a := w.pushAt("apps/x/y", "v1", 1)
	b := w.pushAt("apps/x-y", "v1", 2)
	isc := w.iscOf("isc.yaml", entry{name: a.Ref}, entry{name: b.Ref})
	ws := "file://" + filepath.Join(w.dir, "ws")
	dst := "docker://" + w.dst.Host() + "/m"

	code, _, stderr := w.gapmirror("mirror", "-c", isc, "--max-nested-paths", "2", "--workspace", ws, dst)
	if code != 1 || !strings.Contains(stderr, "apps/x/y:v1") || !strings.Contains(stderr, "apps/x-y:v1") || !strings.Contains(stderr, "both become apps-x-y:v1") || !strings.Contains(stderr, "--max-nested-paths 2") {
		t.Errorf("collision: exit %d\n%s", code, stderr)
	}
	if repos, _ := w.dst.Catalog(); len(repos) > 0 {
		t.Errorf("a refused run pushed %v", repos)
	}
	// The root's component counts: m/apps/x/y needs 4.
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "--max-nested-paths", "4", "--workspace", ws, dst); code != 0 {
		t.Errorf("--max-nested-paths 4: exit %d", code)
	}
	w.present(w.dst, "m/apps/x/y", "v1", a.Digest)

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"mirror", "-c", isc, "--max-nested-paths", "-1", "--workspace", ws, dst}, "--max-nested-paths -1: use 0"},
		{[]string{"mirror", "-c", isc, "--max-nested-paths", "2", "file://" + filepath.Join(w.dir, "disk")}, "mirror-to-disk has none"},
		{[]string{"mirror", "-c", isc, "--max-nested-paths", "2", "--workspace", ws, "docker://" + w.dst.Host() + "/org/m"}, `"org/m" has 2 components`},
		{[]string{"delete", "--delete-yaml-file", "x.yaml", "--max-nested-paths", "2", dst}, "go with --generate"},
		{[]string{"delete", "-c", isc, "--generate", "--workspace", ws, "--max-nested-paths", "-2", dst}, "--max-nested-paths -2"},
	} {
		code, _, stderr := w.gapmirror(c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, want an error with %q:\n%s", c.args, code, c.want, stderr)
		}
	}
	// 0 is no limit: the nested repositories are kept.
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "--max-nested-paths", "0", "--workspace", "file://"+filepath.Join(w.dir, "ws0"), dst+"0"); code != 0 {
		t.Fatal("--max-nested-paths 0 failed")
	}
	w.present(w.dst, "m0/apps/x/y", "v1", a.Digest)
}

// TestMaxNestedPathsReleases mirrors a signed release with the graph image
// into a registry that takes two path components under the root "mirror":
// openshift/release-images and openshift/release become one component each,
// and IDMS, UpdateService and the signature ConfigMap follow.
func TestMaxNestedPathsReleases(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, []string{"4.18.1"}, 3, false)
	refused := &[]string{}
	w.dst.SetWrap(depthLimit(2, refused))
	isc := w.releaseISC("isc", "    graph: true\n    channels:\n    - name: stable-4.18\n      minVersion: 4.18.1\n      maxVersion: 4.18.1\n")
	ws := filepath.Join(w.dir, "ws")
	root := w.dst.Host() + "/mirror"
	code, _, _ := w.run("mirror", "-c", isc, "--max-nested-paths", "2", "--workspace", "file://"+ws, "docker://"+root)
	if code != 0 || len(*refused) > 0 {
		t.Fatalf("exit %d, refused %v", code, *refused)
	}
	p := w.payloads["4.18.1"]
	if got, err := w.dst.ManifestDigest("mirror/openshift-release-images", p.Tag); err != nil || got != p.Digest {
		t.Errorf("release image not at mirror/openshift-release-images:%s: %v", p.Tag, err)
	}
	for _, c := range p.Components {
		w.present(w.dst, "mirror/openshift-release", p.Tag+"-"+c.Name, c.Digest)
	}
	wd := filepath.Join(ws, "working-dir")
	w.checkFlattened(wd, root, 2)
	res := filepath.Join(wd, "cluster-resources")
	us := readFile(t, filepath.Join(res, "updateService.yaml"))
	for _, want := range []string{"releases: " + root + "/openshift-release-images\n", "graphDataImage: " + root + "/openshift-graph-image:latest"} {
		if !strings.Contains(us, want) {
			t.Errorf("UpdateService lacks %q:\n%s", want, us)
		}
	}
	if _, err := w.dst.ManifestDigest("mirror/openshift-graph-image", "latest"); err != nil {
		t.Errorf("graph image not at mirror/openshift-graph-image:latest: %v", err)
	}
	w.assertSignatureConfigMaps(filepath.Join(res, "signature-configmap.yaml"), []string{"4.18.1"})
}

// TestMaxNestedPathsChange: when N changes between runs, the records hold
// the names images were pushed under, so --prune deletes the old names.
func TestMaxNestedPathsChange(t *testing.T) {
	t.Parallel()
	w := newWorld(t, registrytest.Options{})
	a := w.pushAt("apps/x/y", "v1", 1)
	isc := w.iscOf("isc.yaml", entry{name: a.Ref})
	ws := "file://" + filepath.Join(w.dir, "ws")
	dst := "docker://" + w.dst.Host() + "/m"
	if code, _, _ := w.gapmirror("mirror", "-c", isc, "--max-nested-paths", "2", "--workspace", ws, dst); code != 0 {
		t.Fatal("first run failed")
	}
	w.present(w.dst, "m/apps-x-y", "v1", a.Digest)
	code, out, stderr := w.gapmirror("mirror", "-c", isc, "--max-nested-paths", "3", "--prune", "--workspace", ws, dst)
	if code != 0 || !strings.Contains(stderr, "--max-nested-paths differs from the earlier runs") || !strings.Contains(out, "prune: 1 of 1 deletes done") {
		t.Errorf("run with another N: exit %d", code)
	}
	w.present(w.dst, "m/apps/x-y", "v1", a.Digest)
	w.gone(w.dst, "m/apps-x-y", "v1", a.Digest)
}
