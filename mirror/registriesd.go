package mirror

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.podman.io/image/v5/types"
)

// userRegistriesD is where containers/image looks for registries.d when
// SystemContext.RegistriesDirPath is empty: the user's directory if it
// exists, else the system's.
func userRegistriesD(sys *types.SystemContext) string {
	if sys != nil && sys.RegistriesDirPath != "" {
		return sys.RegistriesDirPath
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".config", "containers", "registries.d")
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return p
		}
	}
	return "/etc/containers/registries.d"
}

// policyRegistriesD writes into dir the registries.d a policy evaluation
// reads signatures with: the user's files (--registries.d, else the
// containers default; their lookaside and use-sigstore-attachments settings
// per registry) and, unless one of them configures default-docker, a
// default-docker that reads cosign's sha256-<hex>.sig tags everywhere.
func policyRegistriesD(sys *types.SystemContext, dir string) error {
	from := userRegistriesD(sys)
	entries, err := os.ReadDir(from)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("--registries.d %s: %w", from, err)
	}
	hasDefault := false
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") {
			continue // containers/image reads only *.yaml
		}
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			return fmt.Errorf("--registries.d: %w", err)
		}
		for _, line := range bytes.Split(data, []byte("\n")) {
			if bytes.HasPrefix(line, []byte("default-docker:")) {
				hasDefault = true
			}
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			return err
		}
	}
	if hasDefault {
		return nil
	}
	return os.WriteFile(filepath.Join(dir, "zz-gapmirror-sigstore.yaml"), []byte(sigstoreRegistriesD), 0o644)
}
