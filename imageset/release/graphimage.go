package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Graph-data image defaults: where the update graph data comes from, the
// image it is layered on, and where the OpenShift Update Service expects it.
const (
	// DefaultGraphDataURL serves the cincinnati-graph-data repository as a tar.gz.
	DefaultGraphDataURL = "https://api.openshift.com/api/upgrades_info/graph-data"
	// DefaultGraphBaseImage is the image the graph data is layered on; it
	// needs bash and cp for the command that hands the data to the service.
	DefaultGraphBaseImage = "registry.access.redhat.com/ubi9/ubi:latest"
	// graphDataDir is where the graph-data image holds the graph data.
	graphDataDir = "/var/lib/cincinnati-graph-data"
	// graphServiceDir is where the update service's init container copies it to.
	graphServiceDir = "/var/lib/cincinnati/graph-data"
)

// maxGraphDataBytes bounds the graph data tarball (the real one is a few MiB).
const maxGraphDataBytes = 256 << 20

// GraphBlobs is a content-addressed blob store (the local store satisfies it).
type GraphBlobs interface {
	Has(d digest.Digest) bool
	Open(d digest.Digest) (io.ReadCloser, error)
	Put(d digest.Digest, size int64, r io.Reader) error
}

// FetchGraphData downloads the update graph data tarball (tar.gz of
// openshift/cincinnati-graph-data) from url and checks that it is one.
func FetchGraphData(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("graph data URL %q: %w", url, err)
	}
	resp, err := httpClient(client).Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching update graph data from %s: %w; check the network and proxy settings, or point --graph-data-url at a reachable copy", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching update graph data from %s: HTTP %s: %s; retry later or point --graph-data-url at a reachable copy", url, resp.Status, snippet(resp.Body))
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxGraphDataBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading update graph data from %s: %w", url, err)
	}
	if len(data) > maxGraphDataBytes {
		return nil, fmt.Errorf("update graph data from %s is larger than %d MiB: the URL does not look like the graph-data endpoint", url, maxGraphDataBytes>>20)
	}
	if _, _, err := graphDataLayer(data); err != nil {
		return nil, fmt.Errorf("update graph data from %s: %w", url, err)
	}
	return data, nil
}

// graphLayerTime stamps the directories the layer adds, so that the same
// graph data always gives the same layer.
var graphLayerTime = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// graphDataLayer turns a graph data tarball (tar.gz) into a gzip layer that
// holds its files under graphDataDir, owned by root; it returns the layer and
// its diff ID. A tarball without a channels/ directory is refused: it is not
// cincinnati-graph-data (an HTML error page, a wrong URL).
func graphDataLayer(tgz []byte) ([]byte, digest.Digest, error) {
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return nil, "", fmt.Errorf("not a gzip tarball: %w", err)
	}
	tr := tar.NewReader(zr)
	var plain, out bytes.Buffer
	zw := gzip.NewWriter(&out)
	tw := tar.NewWriter(io.MultiWriter(zw, &plain))
	root := strings.TrimPrefix(graphDataDir, "/")
	dirs := []string{}
	for p := root; p != "." && p != ""; p = path.Dir(p) {
		dirs = append([]string{p}, dirs...)
	}
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: graphLayerTime, Format: tar.FormatPAX}); err != nil {
			return nil, "", err
		}
	}
	channels := false
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, "", fmt.Errorf("not a valid tarball: %w", err)
		}
		// Cleaned under "/", a name cannot climb out of graphDataDir.
		name := path.Clean("/" + hdr.Name)
		if name == "/" {
			continue
		}
		parts := strings.Split(strings.TrimPrefix(name, "/"), "/")
		// The tarball may wrap everything in one top directory.
		if parts[0] == "channels" || len(parts) > 1 && parts[1] == "channels" {
			channels = true
		}
		switch hdr.Typeflag {
		case tar.TypeReg, tar.TypeDir, tar.TypeSymlink:
		default:
			continue // devices, hard links, … have no place in graph data
		}
		if hdr.Typeflag == tar.TypeSymlink && (path.IsAbs(hdr.Linkname) || strings.Contains(hdr.Linkname, "..")) {
			return nil, "", fmt.Errorf("entry %q links outside the graph data (%q)", hdr.Name, hdr.Linkname)
		}
		nh := &tar.Header{
			Typeflag: hdr.Typeflag, Name: root + name, Linkname: hdr.Linkname,
			Mode: hdr.Mode & 0o777, Size: hdr.Size, ModTime: hdr.ModTime, Format: tar.FormatPAX,
		}
		if hdr.Typeflag == tar.TypeDir {
			nh.Name += "/"
			nh.Size = 0
		}
		if hdr.Typeflag != tar.TypeReg {
			nh.Size = 0
		}
		if err := tw.WriteHeader(nh); err != nil {
			return nil, "", fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := io.CopyN(tw, tr, hdr.Size); err != nil {
				return nil, "", fmt.Errorf("entry %q: %w", hdr.Name, err)
			}
		}
	}
	if !channels {
		return nil, "", errors.New("the tarball has no channels/ directory: it is not cincinnati-graph-data")
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return out.Bytes(), digest.FromBytes(plain.Bytes()), nil
}

// graphCommand copies the graph data where the update service reads it
// (what oc-mirror's graph image does, so UpdateService works the same).
var graphCommand = []string{"/bin/bash", "-c", "exec cp -rp " + graphDataDir + "/* " + graphServiceDir}

// BuildGraphImage layers the graph data tarball tgz on the base image whose
// manifest (or index) base is in blobs, stores the new image in blobs and
// returns its manifest digest. Every platform image of an index base gets the
// same layer; attestation and other non-platform entries are dropped. The
// result depends only on the base and the graph data.
func BuildGraphImage(blobs GraphBlobs, base digest.Digest, tgz []byte) (digest.Digest, error) {
	layer, diffID, err := graphDataLayer(tgz)
	if err != nil {
		return "", fmt.Errorf("graph data: %w", err)
	}
	ld := digest.FromBytes(layer)
	if !blobs.Has(ld) {
		if err := blobs.Put(ld, int64(len(layer)), bytes.NewReader(layer)); err != nil {
			return "", fmt.Errorf("storing the graph data layer: %w", err)
		}
	}
	b := graphBuild{blobs: blobs, layer: ocispec.Descriptor{Digest: ld, Size: int64(len(layer))}, diffID: diffID}
	data, err := b.read(base)
	if err != nil {
		return "", fmt.Errorf("graph image base %s: %w", base, err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return "", fmt.Errorf("graph image base %s: manifest is not JSON: %w", base, err)
	}
	if _, ok := doc["manifests"]; !ok {
		d, _, err := b.image(doc)
		if err != nil {
			return "", fmt.Errorf("graph image base %s: %w", base, err)
		}
		return d, nil
	}
	var kids []ocispec.Descriptor
	if err := json.Unmarshal(doc["manifests"], &kids); err != nil {
		return "", fmt.Errorf("graph image base %s: index manifests: %w", base, err)
	}
	var out []ocispec.Descriptor
	for _, k := range kids {
		if k.Platform == nil || k.Platform.OS == "unknown" || k.Platform.Architecture == "unknown" {
			continue
		}
		kd, err := b.read(k.Digest)
		if err != nil {
			return "", fmt.Errorf("graph image base %s, platform %s/%s: %w", base, k.Platform.OS, k.Platform.Architecture, err)
		}
		var kdoc map[string]json.RawMessage
		if err := json.Unmarshal(kd, &kdoc); err != nil {
			return "", fmt.Errorf("graph image base %s: manifest %s is not JSON: %w", base, k.Digest, err)
		}
		d, size, err := b.image(kdoc)
		if err != nil {
			return "", fmt.Errorf("graph image base %s, platform %s/%s: %w", base, k.Platform.OS, k.Platform.Architecture, err)
		}
		out = append(out, ocispec.Descriptor{MediaType: k.MediaType, Digest: d, Size: size, Platform: k.Platform})
	}
	if len(out) == 0 {
		return "", fmt.Errorf("graph image base %s is an index without platform images: pick another --graph-base-image", base)
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return "", err
	}
	doc["manifests"] = raw
	d, _, err := b.put(doc)
	return d, err
}

type graphBuild struct {
	blobs  GraphBlobs
	layer  ocispec.Descriptor
	diffID digest.Digest
}

func (b graphBuild) read(d digest.Digest) ([]byte, error) {
	rc, err := b.blobs.Open(d)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, 4<<20))
	if err != nil {
		return nil, err
	}
	if digest.FromBytes(data) != d {
		return nil, fmt.Errorf("blob %s does not match its digest", d)
	}
	return data, nil
}

func (b graphBuild) put(doc any) (digest.Digest, int64, error) {
	data, err := json.Marshal(doc)
	if err != nil {
		return "", 0, err
	}
	d := digest.FromBytes(data)
	if !b.blobs.Has(d) {
		if err := b.blobs.Put(d, int64(len(data)), bytes.NewReader(data)); err != nil {
			return "", 0, err
		}
	}
	return d, int64(len(data)), nil
}

// image adds the graph layer to one image manifest and its config.
func (b graphBuild) image(doc map[string]json.RawMessage) (digest.Digest, int64, error) {
	var cfgDesc ocispec.Descriptor
	if err := json.Unmarshal(doc["config"], &cfgDesc); err != nil || cfgDesc.Digest == "" {
		return "", 0, fmt.Errorf("manifest has no config: it is not an image manifest")
	}
	var layers []ocispec.Descriptor
	if err := json.Unmarshal(doc["layers"], &layers); err != nil {
		return "", 0, fmt.Errorf("manifest layers: %w", err)
	}
	cfgData, err := b.read(cfgDesc.Digest)
	if err != nil {
		return "", 0, fmt.Errorf("config: %w", err)
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(cfgData, &cfg); err != nil {
		return "", 0, fmt.Errorf("config %s is not JSON: %w", cfgDesc.Digest, err)
	}
	var rootfs struct {
		Type    string          `json:"type"`
		DiffIDs []digest.Digest `json:"diff_ids"`
	}
	if err := json.Unmarshal(cfg["rootfs"], &rootfs); err != nil {
		return "", 0, fmt.Errorf("config %s rootfs: %w", cfgDesc.Digest, err)
	}
	rootfs.DiffIDs = append(rootfs.DiffIDs, b.diffID)
	if cfg["rootfs"], err = json.Marshal(rootfs); err != nil {
		return "", 0, err
	}
	container := map[string]json.RawMessage{}
	if raw, ok := cfg["config"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &container); err != nil {
			return "", 0, fmt.Errorf("config %s config: %w", cfgDesc.Digest, err)
		}
	}
	container["Entrypoint"] = json.RawMessage("null")
	if container["Cmd"], err = json.Marshal(graphCommand); err != nil {
		return "", 0, err
	}
	if cfg["config"], err = json.Marshal(container); err != nil {
		return "", 0, err
	}
	if raw, ok := cfg["history"]; ok {
		var history []json.RawMessage
		if err := json.Unmarshal(raw, &history); err == nil {
			entry, _ := json.Marshal(map[string]string{"created_by": "gapmirror: add update graph data at " + graphDataDir})
			if cfg["history"], err = json.Marshal(append(history, entry)); err != nil {
				return "", 0, err
			}
		}
	}
	newCfg, cfgSize, err := b.put(cfg)
	if err != nil {
		return "", 0, fmt.Errorf("storing the graph image config: %w", err)
	}
	cfgDesc.Digest, cfgDesc.Size = newCfg, cfgSize

	layer := b.layer
	layer.MediaType = ocispec.MediaTypeImageLayerGzip
	var mt string
	_ = json.Unmarshal(doc["mediaType"], &mt)
	if mt == mediaTypeDockerManifest {
		layer.MediaType = "application/vnd.docker.image.rootfs.diff.tar.gzip"
	}
	layers = append(layers, layer)
	if doc["config"], err = json.Marshal(cfgDesc); err != nil {
		return "", 0, err
	}
	if doc["layers"], err = json.Marshal(layers); err != nil {
		return "", 0, err
	}
	return b.put(doc)
}
