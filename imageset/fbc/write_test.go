package fbc

import "testing"

func TestWriteFilesRefusesPathNames(t *testing.T) {
	bad := &Catalog{pkgs: map[string]*Package{"../escape": {Name: "../escape"}}, names: []string{"../escape"}}
	if err := bad.WriteFiles(func(string, []byte) error { return nil }); err == nil {
		t.Error("a package name with a path separator was written")
	}
}
