package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"

	"github.com/gapmirror/gapmirror/failure"
	"github.com/gapmirror/gapmirror/generate"
	"github.com/gapmirror/gapmirror/imageset"
	"github.com/gapmirror/gapmirror/imageset/catalogimage"
	"github.com/gapmirror/gapmirror/imageset/fbc"
	"github.com/gapmirror/gapmirror/registryapi"
)

// clusterResources is the folder of the cluster resources the trips write.
const clusterResources = generate.Dir

// checkClusterResources checks that every image the cluster resources
// (CatalogSource, ClusterCatalog, UpdateService, helm chart references)
// name at the mirror by tag or digest is one of the set, so that the image
// check vouched for it; one the set does not hold is asked for (one HEAD).
// IDMS and ITMS name repositories: the image check covers every tag of them.
func (a *Audit) checkClusterResources(ctx context.Context) error {
	dir := filepath.Join(a.Expected.Workspace, clusterResources)
	files, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	byDest := map[string]imageset.Image{}
	byDigest := map[string]bool{}
	for _, img := range a.Expected.Plan.Set.Images {
		byDest[img.Destination] = img
		byDigest[img.DestinationRepo()+"@"+img.Digest] = true
	}
	root := a.Mirror.Root()
	refRE := regexp.MustCompile(regexp.QuoteMeta(root) + `/[A-Za-z0-9._/-]+(?::[A-Za-z0-9._-]+)?(?:@[a-z0-9]+:[a-f0-9]+)?`)
	named := map[string]bool{}
	for _, f := range files {
		if f.IsDir() || !(strings.HasSuffix(f.Name(), ".yaml") || strings.HasSuffix(f.Name(), ".json")) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, f.Name()))
		if err != nil {
			return err
		}
		for _, m := range refRE.FindAll(data, -1) {
			ref := string(m)
			n, err := reference.ParseNormalizedNamed(ref)
			if err != nil || named[ref] {
				continue
			}
			rel := strings.TrimPrefix(n.Name(), root+"/")
			var img imageset.Image
			ask := false
			switch n := n.(type) {
			case reference.Canonical:
				img = imageset.Image{Destination: rel, Digest: n.Digest().String(), Kind: imageset.KindAdditional}
				ask = !byDigest[rel+"@"+img.Digest] // else the image check asked for it
			case reference.Tagged:
				img = imageset.Image{Destination: rel + ":" + n.Tag(), Kind: imageset.KindAdditional}
				_, inSet := byDest[img.Destination]
				ask = !inSet // else the image check asked for its tag and digest
			default:
				continue // a repository (IDMS, ITMS, UpdateService releases)
			}
			named[ref] = true
			if ask {
				a.askNamed(ctx, f.Name(), ref, img)
			}
		}
	}
	a.counts.Named = len(named)
	return nil
}

// askNamed asks whether an image a cluster resource names, outside the
// set, is at the mirror.
func (a *Audit) askNamed(ctx context.Context, file, ref string, img imageset.Image) {
	c, repo, err := a.client(img)
	if err != nil {
		a.Report(Problem{Kind: kindUnreachable, Image: ref, Group: "additional", Detail: failure.Message(err)})
		return
	}
	r := img.DestinationTag()
	if img.Digest != "" {
		r = img.Digest
	}
	a.asked(1)
	if _, _, err := c.Head(ctx, repo, r); err != nil {
		k, detail := kindNamedMissing, fmt.Sprintf("%s/%s names it, and it is not at the mirror (nor in the image set)", clusterResources, file)
		if !registryapi.IsNotFound(err) {
			k, detail = kindUnreachable, failure.Message(failure.Explain(err, ref))
		}
		a.Report(Problem{Kind: k, Image: ref, Group: "additional", Detail: detail})
	}
}

// signatureList is the JSON v1 List of the release signature ConfigMaps.
type signatureList struct {
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		BinaryData map[string][]byte `json:"binaryData"`
	} `json:"items"`
}

// checkReleaseSignatures checks the release signature ConfigMaps the
// trip wrote (cluster-resources/signature-configmap.json) against the
// payloads of the set: one per release the plan has signatures for, named
// by its digest and holding those signatures, and none for a digest the
// set has no release of. It asks the mirror nothing.
func (a *Audit) checkReleaseSignatures() error {
	sigs, err := a.Expected.Plan.Signatures()
	if err != nil {
		return err
	}
	releases := map[string]imageset.Image{}
	for _, img := range a.Expected.Plan.Set.Images {
		if img.Kind == imageset.KindRelease {
			if _, failed := a.Expected.Failed[img.Destination]; !failed {
				releases[img.Digest] = img
			}
		}
	}
	if len(releases) == 0 {
		return nil
	}
	file := filepath.Join(clusterResources, generate.FileSignaturesJSON)
	var list signatureList
	data, err := os.ReadFile(filepath.Join(a.Expected.Workspace, file))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		if err := json.Unmarshal(data, &list); err != nil {
			a.Report(Problem{Kind: kindReleaseSignature, Group: "release", Image: file, Detail: fmt.Sprintf("cannot be read (%v): the cluster cannot verify the releases", err)})
			return nil
		}
	}
	have := map[string]bool{}
	for _, cm := range list.Items {
		a.counts.ReleaseSignatures++
		d, err := digest.Parse(strings.Replace(cm.Metadata.Name, "-", ":", 1))
		if err != nil {
			a.Report(Problem{Kind: kindReleaseSignature, Group: "release", Image: file, Detail: fmt.Sprintf("ConfigMap %s is not named after a release digest (sha256-<hex>)", cm.Metadata.Name)})
			continue
		}
		img, ok := releases[d.String()]
		if !ok {
			a.Report(Problem{Kind: kindReleaseSignature, Group: "release", Image: file, Digest: d.String(),
				Detail: fmt.Sprintf("ConfigMap %s holds signatures for %s, which is no release payload of the set", cm.Metadata.Name, d)})
			continue
		}
		have[d.String()] = true
		want := sigs[d.String()]
		prefix := d.Algorithm().String() + "-" + d.Encoded()
		for i, s := range want {
			key := fmt.Sprintf("%s-%d", prefix, i+1)
			if got, ok := cm.BinaryData[key]; !ok || !bytes.Equal(got, s) {
				a.Report(Problem{Kind: kindReleaseSignature, Group: "release", Image: a.name(img), Digest: d.String(),
					Detail: fmt.Sprintf("ConfigMap %s: %s is missing or is not the signature the plan carries", cm.Metadata.Name, key)})
				break
			}
		}
		for key := range cm.BinaryData {
			if !strings.HasPrefix(key, prefix+"-") {
				a.Report(Problem{Kind: kindReleaseSignature, Group: "release", Image: a.name(img), Digest: d.String(),
					Detail: fmt.Sprintf("ConfigMap %s holds %s, a signature of another digest", cm.Metadata.Name, key)})
				break
			}
		}
	}
	for d, img := range releases {
		if len(sigs[d]) > 0 && !have[d] {
			a.Report(Problem{Kind: kindReleaseSignature, Group: "release", Image: a.name(img), Digest: d,
				Detail: fmt.Sprintf("%s has no ConfigMap for this payload: clusters that verify releases refuse it", file)})
		}
	}
	return nil
}

// checkCatalogs reads the file-based catalog of every catalog gapmirror
// rebuilt, from the mirror, and checks that each image its bundles name
// is an image of the set found whole at the mirror.
func (a *Audit) checkCatalogs(ctx context.Context) {
	type source struct{ name, digest string }
	inSet := map[source]imageset.Image{}
	byOrigin := map[string]imageset.Image{}
	for _, img := range a.Expected.Plan.Set.Images {
		if named, err := reference.ParseNormalizedNamed(img.Source); err == nil {
			if c, ok := named.(reference.Canonical); ok {
				inSet[source{c.Name(), c.Digest().String()}] = img
			}
		}
		byOrigin[img.Origin] = img
	}
	for _, img := range a.Expected.Plan.Set.Images {
		if img.Kind != imageset.KindOperatorCatalog || !img.Built || !a.found[img.Destination] {
			continue
		}
		a.counts.Catalogs++
		cat, err := a.readCatalog(ctx, img)
		if err != nil {
			a.Report(a.problem(kindCatalog, img, "its file-based catalog cannot be read from the mirror: "+failure.Message(err)))
			continue
		}
		for _, ref := range cat.RelatedImages() {
			a.counts.CatalogImages++
			var have imageset.Image
			var ok bool
			if named, err := reference.ParseNormalizedNamed(ref.Image); err == nil {
				if c, isDigest := named.(reference.Canonical); isDigest {
					have, ok = inSet[source{c.Name(), c.Digest().String()}]
				}
			}
			if !ok {
				have, ok = byOrigin[ref.Image]
			}
			what := "related image"
			if ref.Bundle {
				what = "bundle image"
			}
			switch {
			case !ok:
				a.Report(a.problem(kindCatalog, img, fmt.Sprintf("names %s %s (%s), which the image set does not hold, so the mirror lacks it", what, ref.Image, fbc.BundlesOf(ref.Users))))
			case !a.found[have.Destination]:
				a.Report(a.problem(kindCatalog, img, fmt.Sprintf("names %s %s (%s), which the mirror lacks or holds incomplete at %s", what, ref.Image, fbc.BundlesOf(ref.Users), a.name(have))))
			}
		}
	}
}

// readCatalog extracts the FBC of the catalog image img from the mirror.
func (a *Audit) readCatalog(ctx context.Context, img imageset.Image) (*fbc.Catalog, error) {
	c, repo, err := a.client(img)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "gapmirror-verify-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	blobs := &mirrorBlobs{ctx: ctx, a: a, c: c, repo: repo}
	if err := catalogimage.ExtractFBC(blobs, digest.Digest(img.Digest), dir); err != nil {
		return nil, err
	}
	return fbc.LoadFS(os.DirFS(dir), ".")
}

// mirrorBlobs reads a catalog image's manifests (kept by the image check)
// and blobs from its repository at the mirror.
type mirrorBlobs struct {
	ctx  context.Context
	a    *Audit
	c    *registryapi.Client
	repo string
}

func (m *mirrorBlobs) Has(d digest.Digest) bool {
	m.a.mu.Lock()
	defer m.a.mu.Unlock()
	_, ok := m.a.manifests[m.repo+"@"+d.String()]
	return ok
}

func (m *mirrorBlobs) Open(d digest.Digest) (io.ReadCloser, error) {
	m.a.mu.Lock()
	data, ok := m.a.manifests[m.repo+"@"+d.String()]
	m.a.mu.Unlock()
	if ok {
		return io.NopCloser(bytes.NewReader(data)), nil
	}
	m.a.asked(1)
	return m.c.Blob(m.ctx, m.repo, d, -1)
}

func (m *mirrorBlobs) Put(digest.Digest, int64, io.Reader) error {
	return errors.New("internal: the audit writes nothing")
}
