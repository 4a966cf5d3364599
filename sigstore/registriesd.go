package sigstore

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/docker/policyconfiguration"
	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/types"
	"go.podman.io/storage/pkg/configfile"
	"go.podman.io/storage/pkg/unshare"
	"go.yaml.in/yaml/v3"
)

// RegistriesD is the signature configuration of registries.d as
// containers/image reads it (docker/registries_d.go, documented in
// containers-registries.d(5)): a default-docker entry and entries per
// registry, repository or namespace.
type RegistriesD struct {
	DefaultDocker *registriesDEntry           `yaml:"default-docker,omitempty"`
	Docker        map[string]registriesDEntry `yaml:"docker,omitempty"`
	// from names the configuration in messages.
	from string
}

// registriesDEntry is one namespace's entry. Lookaside (and its old name
// sigstore) is where simple-signing signatures are read;
// use-sigstore-attachments turns sigstore (cosign) signatures stored as
// sha256-<hex>.sig tags on or off.
type registriesDEntry struct {
	Lookaside              string `yaml:"lookaside,omitempty"`
	SigStore               string `yaml:"sigstore,omitempty"`
	UseSigstoreAttachments *bool  `yaml:"use-sigstore-attachments,omitempty"`
}

// LoadRegistriesD reads the registries.d containers/image reads for sys:
// --registries.d alone when given, else the user's and the system's
// drop-in directories (~/.config/containers/registries.d,
// /etc/containers/registries.d, ...), a file of one name in an earlier
// directory hiding the later one's. As for containers/image, a namespace
// or default-docker configured in two files is an error.
func LoadRegistriesD(sys *types.SystemContext) (*RegistriesD, error) {
	opts := configfile.File{
		Name:                           "registries",
		Extension:                      "yaml",
		DoNotLoadMainFiles:             true,
		DoNotUseExtensionForConfigName: true,
		UserId:                         unshare.GetRootlessUID(),
	}
	rd := &RegistriesD{Docker: map[string]registriesDEntry{}, from: "registries.d (~/.config/containers/registries.d, /etc/containers/registries.d)"}
	if sys != nil {
		opts.RootForImplicitAbsolutePaths = sys.RootForImplicitAbsolutePaths
		if sys.RegistriesDirPath != "" {
			opts.CustomConfigFileDropInDirectory = sys.RegistriesDirPath
			rd.from = "--registries.d " + sys.RegistriesDirPath
		}
	}
	defaultFrom, nsFrom := "", map[string]string{}
	for item, err := range configfile.Read(&opts) {
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rd.from, err)
		}
		data, err := io.ReadAll(item.Reader)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rd.from, err)
		}
		var f RegistriesD
		if err := yaml.Unmarshal(data, &f); err != nil {
			return nil, fmt.Errorf("%s: %s: %w: fix the file (see containers-registries.d(5))", rd.from, item.Name, err)
		}
		if f.DefaultDocker != nil {
			if rd.DefaultDocker != nil {
				return nil, fmt.Errorf("%s: default-docker is configured in both %s and %s: keep one", rd.from, defaultFrom, item.Name)
			}
			rd.DefaultDocker, defaultFrom = f.DefaultDocker, item.Name
		}
		for ns, e := range f.Docker {
			if prev, ok := nsFrom[ns]; ok {
				return nil, fmt.Errorf("%s: docker namespace %q is configured in both %s and %s: keep one", rd.from, ns, prev, item.Name)
			}
			rd.Docker[ns], nsFrom[ns] = e, item.Name
		}
	}
	return rd, nil
}

// entries are the entries that apply to repo@d, most specific first: the
// image, the repository, its parent namespaces, the host and its wildcard
// domains (containers/image's lookup order), then default-docker.
func (rd *RegistriesD) entries(repo string, d digest.Digest) []registriesDEntry {
	var out []registriesDEntry
	// Most machines configure default-docker at most: then there is no
	// name to parse (this runs for every image).
	if len(rd.Docker) > 0 {
		named, err := reference.ParseNormalizedNamed(repo)
		if err != nil {
			return nil
		}
		if canonical, err := reference.WithDigest(reference.TrimNamed(named), d); err == nil {
			if id, err := policyconfiguration.DockerReferenceIdentity(canonical); err == nil {
				if e, ok := rd.Docker[id]; ok {
					out = append(out, e)
				}
			}
			for _, ns := range policyconfiguration.DockerReferenceNamespaces(canonical) {
				if e, ok := rd.Docker[ns]; ok {
					out = append(out, e)
				}
			}
		}
	}
	if rd.DefaultDocker != nil {
		out = append(out, *rd.DefaultDocker)
	}
	return out
}

// sigstoreAttachments reports whether sigstore signatures of repo@d
// (sha256-<hex>.sig tags) are looked for. As for containers/image, the most
// specific entry that sets use-sigstore-attachments decides (the image, the
// repository, its namespaces, the host, default-docker). Where none sets
// it, gapmirror looks, as oc-mirror does (it adds use-sigstore-attachments:
// true to default-docker): containers/image's own default there is false,
// which `default-docker: {use-sigstore-attachments: false}` restores.
func (rd *RegistriesD) sigstoreAttachments(repo string, d digest.Digest) bool {
	if rd == nil {
		return true
	}
	for _, e := range rd.entries(repo, d) {
		if e.UseSigstoreAttachments != nil {
			return *e.UseSigstoreAttachments
		}
	}
	return true
}

// lookaside is the lookaside (simple-signing signature) location registries.d
// gives repo@d, "" for none.
func (rd *RegistriesD) lookaside(repo string, d digest.Digest) string {
	if rd == nil {
		return ""
	}
	for _, e := range rd.entries(repo, d) {
		if e.Lookaside != "" {
			return e.Lookaside
		}
		if e.SigStore != "" {
			return e.SigStore
		}
	}
	return ""
}

// policyRegistriesD writes into dir the registries.d a policy evaluation
// reads signatures with: rd merged into one file, its lookaside and
// use-sigstore-attachments settings as they are, and default-docker
// looking for sigstore attachments unless rd says otherwise, so that the
// evaluation sees the signatures the lookup mirrors.
func policyRegistriesD(rd *RegistriesD, dir string) error {
	on := true
	merged := RegistriesD{Docker: rd.Docker, DefaultDocker: &registriesDEntry{UseSigstoreAttachments: &on}}
	if rd.DefaultDocker != nil {
		dd := *rd.DefaultDocker
		if dd.UseSigstoreAttachments == nil {
			dd.UseSigstoreAttachments = &on
		}
		merged.DefaultDocker = &dd
	}
	data, err := yaml.Marshal(merged)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "gapmirror.yaml"), data, 0o644)
}
