package generate

import (
	"fmt"

	"github.com/gapmirror/gapmirror/imageset"
)

// Input is everything the cluster manifests of one run are made from.
type Input struct {
	// Set holds the images that were mirrored successfully.
	Set *imageset.Set
	// MirrorRoot is the destination registry and path, e.g.
	// registry.airgap:5000/mirror (a docker:// prefix is accepted).
	MirrorRoot string
	// NotMirrored lists source references that were blocked or failed.
	NotMirrored []string
	// Catalogs are the mirrored operator catalogs (see CatalogsFromSet).
	Catalogs []Catalog
	// ReleaseSignatures maps a release digest to its signatures, in order.
	ReleaseSignatures map[string][][]byte
	// Meta goes into every object's annotations.
	Meta Meta
	// RepositoryScope maps every source repository on its own in IDMS/ITMS:
	// with --max-nested-paths, a namespace entry would send images of the
	// namespace that were not mirrored to paths the registry cannot hold.
	RepositoryScope bool
}

// Manifests returns every manifest for in: mirror sets, a CatalogSource and
// a ClusterCatalog per catalog, the UpdateService and the release signature
// ConfigMaps. Write the result with Files.Write.
func Manifests(in Input) (Files, error) {
	files, err := mirrorSets(in.Set, in.MirrorRoot, in.NotMirrored, in.RepositoryScope, in.Meta)
	if err != nil {
		return nil, fmt.Errorf("generating mirror sets: %w", err)
	}
	for _, c := range in.Catalogs {
		cs, err := CatalogSource(c, in.Meta)
		if err != nil {
			return nil, err
		}
		cc, err := ClusterCatalog(c, in.Meta)
		if err != nil {
			return nil, err
		}
		if err := files.merge(cs); err != nil {
			return nil, fmt.Errorf("catalog %s: %w", c.label(), err)
		}
		if err := files.merge(cc); err != nil {
			return nil, fmt.Errorf("catalog %s: %w", c.label(), err)
		}
	}
	us, err := UpdateService(in.Set, in.MirrorRoot, in.Meta)
	if err != nil {
		return nil, err
	}
	sigs, err := signatureConfigMaps(in.ReleaseSignatures, in.Meta)
	if err != nil {
		return nil, err
	}
	for _, more := range []Files{us, sigs} {
		if err := files.merge(more); err != nil {
			return nil, err
		}
	}
	return files, nil
}
