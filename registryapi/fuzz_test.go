package registryapi

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gapmirror/gapmirror/internal/fuzzguard"

	"go.podman.io/image/v5/pkg/sysregistriesv2"
	"go.podman.io/image/v5/types"
)

// FuzzAuthFiles: whatever the auth file and registries.conf hold, a client
// is made or refused with an error, never a panic or a hang, and never
// with a network request (TLS verification is on, so nothing is probed).
func FuzzAuthFiles(f *testing.F) {
	f.Add([]byte(`{"auths":{"registry.example:5000":{"auth":"dXNlcjpwYXNz"}}}`), []byte("unqualified-search-registries = []\n"))
	f.Add([]byte(`{"auths":{"registry.example:5000":{"auth":"!!!"}}}`), []byte("[[registry]]\nlocation = \"registry.example:5000\"\ninsecure = true\n"))
	f.Add([]byte(`{"auths":{"registry.example:5000":{"identitytoken":"tok"}},"credHelpers":{"other.example":"missing"}}`), []byte("[[registry]]\nprefix = \"registry.example:5000/a\"\nlocation = \"mirror.example/a\"\n[[registry.mirror]]\nlocation = \"m.example\"\n"))
	f.Add([]byte("{"), []byte("[[registry"))
	f.Fuzz(func(t *testing.T, auth, conf []byte) {
		dir := t.TempDir()
		authFile, confFile := filepath.Join(dir, "auth.json"), filepath.Join(dir, "registries.conf")
		if os.WriteFile(authFile, auth, 0o600) != nil || os.WriteFile(confFile, conf, 0o600) != nil {
			t.Skip("cannot write the files")
		}
		sys := &types.SystemContext{AuthFilePath: authFile, SystemRegistriesConfPath: confFile, SystemRegistriesConfDirPath: filepath.Join(dir, "none")}
		fuzzguard.Within(t, func() {
			defer sysregistriesv2.InvalidateCache()
			_, _ = sysregistriesv2.FindRegistry(sys, "registry.example:5000/a/b")
			_, _ = NewClient("registry.example:5000", sys)
		})
	})
}
