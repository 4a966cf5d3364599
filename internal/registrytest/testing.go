package registrytest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// Start starts a registry for the test t and closes it when the test ends.
// It fails the test if the registry cannot start.
func Start(t testing.TB, opts Options) *Registry {
	t.Helper()
	reg, err := New(context.Background(), opts)
	if err != nil {
		t.Fatalf("starting the test registry: %v", err)
	}
	t.Cleanup(func() {
		if err := reg.Close(); err != nil {
			t.Errorf("closing the test registry: %v", err)
		}
	})
	return reg
}

// ClientFiles are an empty registries.conf and the path of an auth file
// that does not exist, in temporary directories of t: a client under test
// given them reads neither the machine's registries.conf nor its
// credentials.
func ClientFiles(t testing.TB) (registriesConf, authFile string) {
	t.Helper()
	registriesConf = filepath.Join(t.TempDir(), "registries.conf")
	if err := os.WriteFile(registriesConf, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return registriesConf, filepath.Join(t.TempDir(), "auth.json")
}
