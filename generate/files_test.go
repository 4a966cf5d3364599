package generate

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
)

func listDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(data)
	}
	return out
}

func TestFilesWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws", Dir)
	ours := "metadata:\n  annotations:\n    " + annotationCreatedBy + ": gapmirror v0\n"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	earlier := map[string]string{
		fileIDMS:              ours + "# old\n", // replaced
		fileITMS:              ours,             // stale: not produced any more
		"cs-old-v1.yaml":      ours,             // stale catalog
		"cs-user.yaml":        "kind: CatalogSource\n",
		"README.md":           ours,
		"notes.yaml":          ours,
		".gapmirror-123.tmp":  "half written",
		"signature-extra.txt": "x",
	}
	for n, c := range earlier {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	files := Files{fileIDMS: []byte(ours + "# new\n"), "cs-new-v2.yaml": []byte(ours)}
	if err := files.Write(dir); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		fileIDMS:              ours + "# new\n",
		"cs-new-v2.yaml":      ours,
		"cs-user.yaml":        "kind: CatalogSource\n",
		"README.md":           ours,
		"notes.yaml":          ours,
		"signature-extra.txt": "x",
	}
	if got := listDir(t, dir); !reflect.DeepEqual(got, want) {
		t.Errorf("after first write got %v\nwant %v", keys(got), keys(want))
	}
	info, err := os.Stat(filepath.Join(dir, fileIDMS))
	if err != nil || info.Mode().Perm() != 0o644 {
		t.Errorf("manifest mode = %v, %v; want 0644", info.Mode(), err)
	}

	if err := (Files{fileIDMS: []byte(ours)}).Write(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "cs-new-v2.yaml")); !os.IsNotExist(err) {
		t.Errorf("second write must remove the catalog the first one wrote: %v", err)
	}
}

func TestFilesWriteCreatesFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b", Dir)
	if err := (Files{fileUpdateService: []byte("x")}).Write(dir); err != nil {
		t.Fatal(err)
	}
	if got := listDir(t, dir); !reflect.DeepEqual(got, map[string]string{fileUpdateService: "x"}) {
		t.Errorf("got %v", got)
	}
}

func TestFilesWriteRejectsPaths(t *testing.T) {
	for _, name := range []string{"", "../escape.yaml", "sub/x.yaml", "..", `a\b.yaml`} {
		dir := t.TempDir()
		err := (Files{name: []byte("x"), "ok.yaml": []byte("y")}).Write(dir)
		mustFail(t, err, "plain file name")
		if got := listDir(t, dir); len(got) != 0 {
			t.Errorf("%q: nothing may be written, got %v", name, keys(got))
		}
	}
}

func TestFilesMerge(t *testing.T) {
	f := Files{"a.yaml": []byte("1")}
	if err := f.merge(Files{"b.yaml": []byte("2")}); err != nil {
		t.Fatal(err)
	}
	if got := f.names(); !reflect.DeepEqual(got, []string{"a.yaml", "b.yaml"}) {
		t.Errorf("names = %v", got)
	}
	mustFail(t, f.merge(Files{"a.yaml": nil}), "a.yaml")
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
