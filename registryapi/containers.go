package registryapi

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"go.podman.io/image/v5/pkg/sysregistriesv2"
	"go.podman.io/image/v5/pkg/tlsclientconfig"
	"go.podman.io/image/v5/types"
)

// The containers conventions (skopeo, podman) for reaching a registry:
// TLS verification from the flag when given, else registries.conf; the
// certificates of the host's certs.d directory.

// Transport is the HTTP transport for host under the rules containers/image
// (skopeo, podman) applies: sys.DockerInsecureSkipTLSVerify when set, else
// the registry's `insecure` in registries.conf; certificates from
// sys.DockerCertPath, else the host's certs.d directories. insecure says
// whether verification is off (plain HTTP may then be tried).
func Transport(host string, sys *types.SystemContext) (tr *http.Transport, insecure bool, err error) {
	return RepositoryTransport(host, host+"/x", sys)
}

// RepositoryTransport is Transport for one repository of host (HOST/PATH):
// its registries.conf entry is the longest prefix matching the repository,
// so a namespace may be insecure where its host is not, as containers/image
// decides for images. An entry with blocked = true is refused with a
// *BlockedError, as containers/image refuses to contact it.
func RepositoryTransport(host, repo string, sys *types.SystemContext) (tr *http.Transport, insecure bool, err error) {
	reg, err := sysregistriesv2.FindRegistry(sys, repo)
	if err != nil {
		return nil, false, fmt.Errorf("registries configuration: %w", err)
	}
	if reg != nil && reg.Blocked {
		return nil, false, &BlockedError{Ref: repo, Prefix: reg.Prefix, Config: sysregistriesv2.ConfigurationSourceDescription(sys)}
	}
	switch {
	case sys != nil && sys.DockerInsecureSkipTLSVerify != types.OptionalBoolUndefined:
		insecure = sys.DockerInsecureSkipTLSVerify == types.OptionalBoolTrue
	default:
		insecure = reg != nil && reg.Insecure
	}
	tlsc := &tls.Config{InsecureSkipVerify: insecure, MinVersion: tls.VersionTLS12} //nolint:gosec // verification is off only where the user said so
	if pool, err := x509.SystemCertPool(); err == nil {
		tlsc.RootCAs = pool
	}
	for _, dir := range certDirs(host, sys) {
		if err := tlsclientconfig.SetupCertificates(dir, tlsc); err != nil {
			return nil, false, fmt.Errorf("certificates for %s in %s: %w", host, dir, err)
		}
	}
	tr = http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsc
	// Existence checks run many at once against one host: keep their
	// connections instead of the default two.
	tr.MaxIdleConnsPerHost = 64
	return tr, insecure, nil
}

// BlockedError is a repository registries.conf forbids contacting: the
// entry matching it (its longest prefix) says blocked = true. It words the
// refusal as containers/image (skopeo, podman) does.
type BlockedError struct {
	Ref    string // the repository or image asked for
	Prefix string // the prefix of the registries.conf entry that blocks it
	Config string // where registries.conf was read from (the files and drop-in directories)
}

func (e *BlockedError) Error() string {
	return fmt.Sprintf("registry %s is blocked in one of %s", e.Prefix, e.Config)
}

// Blocked returns a *BlockedError when the registries.conf entry matching
// ref (a repository or image reference) is blocked, nil otherwise (and when
// registries.conf cannot be read: the caller's next step reports that).
func Blocked(sys *types.SystemContext, ref string) error {
	reg, err := sysregistriesv2.FindRegistry(sys, ref)
	if err != nil || reg == nil || !reg.Blocked {
		return nil
	}
	return &BlockedError{Ref: ref, Prefix: reg.Prefix, Config: sysregistriesv2.ConfigurationSourceDescription(sys)}
}

// certDirs is the directory containers/image reads host's certificates
// from: sys.DockerCertPath when set; else the first <dir>/<host> that exists
// under sys.DockerPerHostCertDirPath, or under ~/.config/containers/certs.d,
// /etc/containers/certs.d and /etc/docker/certs.d.
func certDirs(host string, sys *types.SystemContext) []string {
	if sys != nil && sys.DockerCertPath != "" {
		return []string{sys.DockerCertPath}
	}
	roots := []string{"/etc/containers/certs.d", "/etc/docker/certs.d"}
	if sys != nil && sys.DockerPerHostCertDirPath != "" {
		roots = []string{sys.DockerPerHostCertDirPath}
	} else if home, err := os.UserHomeDir(); err == nil {
		roots = append([]string{filepath.Join(home, ".config", "containers", "certs.d")}, roots...)
	}
	for _, d := range roots {
		p := filepath.Join(d, host)
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return []string{p}
		}
	}
	return nil
}
