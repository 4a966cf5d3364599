package releasetest

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/opencontainers/go-digest"
	"sigs.k8s.io/yaml"

	"github.com/gapmirror/gapmirror/internal/imagebuilder"
)

// Repositories generated payloads are pushed to, under PayloadSpec.Host, laid
// out like quay.io's.
const (
	// ReleaseRepo holds release images, tagged <version>-<arch>.
	ReleaseRepo = "openshift-release-dev/ocp-release"
	// ComponentRepo holds component images, by digest only.
	ComponentRepo = "openshift-release-dev/ocp-v4.0-art-dev"
)

// Paths of the files a generated release image carries in its top layer.
const (
	// ReleaseMetadataPath is the release's Cincinnati metadata.
	ReleaseMetadataPath = "release-manifests/release-metadata"
	// ImageReferencesPath is the ImageStream naming every component.
	ImageReferencesPath = "release-manifests/image-references"
	// BootImagesPath is the CoreOS boot images ConfigMap.
	BootImagesPath = "release-manifests/0000_50_installer_coreos-bootimages.yaml"
)

// DefaultComponents is how many components a payload has when
// PayloadSpec.Components is 0.
const DefaultComponents = 32

// PayloadSpec says which release payload to generate. The same spec always
// gives the same digests (Host is part of the content, since payloads name
// their components by pull spec).
type PayloadSpec struct {
	// Version is the release version, e.g. 4.18.1 (required).
	Version string
	// Arch is the graph architecture: amd64 (default), arm64, ppc64le,
	// s390x, or multi for a multi-architecture payload.
	Arch string
	// Host is the registry host pull specs name, e.g. registrytest's Host()
	// (required).
	Host string
	// Components is the number of component images; 0 means DefaultComponents.
	Components int
	// Previous lists the versions release-metadata says update to this one.
	Previous []string
	// KubeVirt adds a KubeVirt container disk for x86_64 and s390x to the
	// boot images ConfigMap (and pushes it).
	KubeVirt bool
	// Platforms are the architectures of a multi payload (graph spelling);
	// nil means amd64 and arm64. Ignored unless Arch is multi.
	Platforms []string
	// Format is the manifest flavour of every image; the zero value is OCI.
	Format imagebuilder.Format
	// Files adds or replaces files of the release image's top layer (path
	// like "release-manifests/image-references"); a nil value leaves a
	// generated file out.
	Files map[string][]byte
	// LowerFiles, when not nil, adds a layer just below the top one holding
	// these files (whiteouts as ".wh.<name>" work), to test layer overrides.
	LowerFiles map[string][]byte
}

// PayloadComponent is one component image of a generated payload.
type PayloadComponent struct {
	// Name is the component's name in image-references.
	Name string
	// Image is its pull spec by digest, Host/ComponentRepo@sha256:….
	Image string
	// Digest is its manifest digest (the index's for a multi payload).
	Digest digest.Digest
}

// Payload is a generated release payload: the release image and the images
// it names, ready to push.
type Payload struct {
	// Spec is the spec with defaults filled in.
	Spec PayloadSpec
	// Tag is the release image's tag, <version>-<arch tag> (4.18.1-x86_64).
	Tag string
	// Digest is the release image's manifest digest (the index's for multi):
	// the digest update graphs and signatures name.
	Digest digest.Digest
	// Components are the images of image-references, sorted by name.
	Components []PayloadComponent
	// KubeVirt are the KubeVirt container disks by graph architecture
	// (amd64, s390x), when Spec.KubeVirt.
	KubeVirt map[string]PayloadComponent
	// Files are the files of the release image's top layer.
	Files map[string][]byte
	// Images are every image to push: components, KubeVirt disks, then the
	// release image.
	Images []imagebuilder.FleetImage
}

// Ref is the release image's reference by tag: Host/ReleaseRepo:Tag.
func (p *Payload) Ref() string {
	return p.Spec.Host + "/" + ReleaseRepo + ":" + p.Tag
}

// PullSpec is the release image's pull spec by digest, as update graph
// nodes name payloads: Host/ReleaseRepo@sha256:….
func (p *Payload) PullSpec() string {
	return p.Spec.Host + "/" + ReleaseRepo + "@" + p.Digest.String()
}

// Push pushes every image of the payload to t (whose host should be
// Spec.Host); blobs shared by components are uploaded once.
func (p *Payload) Push(ctx context.Context, t imagebuilder.Target) error {
	if err := imagebuilder.PushFleet(ctx, t, p.Images); err != nil {
		return fmt.Errorf("pushing release payload %s: %w", p.Ref(), err)
	}
	return nil
}

// tagArch is the release tag suffix of each graph architecture.
var tagArch = map[string]string{
	"amd64":   "x86_64",
	"arm64":   "aarch64",
	"ppc64le": "ppc64le",
	"s390x":   "s390x",
	"multi":   "multi",
}

// kubeVirtArches are the architectures RHCOS ships a KubeVirt disk for.
var kubeVirtArches = map[string]bool{"amd64": true, "s390x": true}

// componentNames are realistic component names; further ones are numbered.
var componentNames = []string{
	"agent-installer-api-server", "aws-cloud-controller-manager", "baremetal-installer", "cli",
	"cli-artifacts", "cluster-authentication-operator", "cluster-autoscaler", "cluster-config-operator",
	"cluster-dns-operator", "cluster-etcd-operator", "cluster-ingress-operator", "cluster-kube-apiserver-operator",
	"cluster-monitoring-operator", "cluster-network-operator", "cluster-version-operator", "console",
	"console-operator", "coredns", "etcd", "haproxy-router", "hyperkube", "installer",
	"keepalived-ipfailover", "machine-config-operator", "multus-cni", "must-gather", "oauth-server",
	"openshift-apiserver", "ovn-kubernetes", "pod", "prometheus", "rhel-coreos", "tools",
}

// componentName is the name of the i-th component of a generated payload.
func componentName(i int) string {
	if i < len(componentNames) {
		return componentNames[i]
	}
	return fmt.Sprintf("component-%03d", i)
}

var tagPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// seedOf derives a layer seed from its parts.
func seedOf(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// platformOf is the image platform of a graph architecture.
func platformOf(arch string) imagebuilder.Platform {
	p := imagebuilder.Platform{OS: "linux", Architecture: arch}
	if arch == "arm64" {
		p.Variant = "v8"
	}
	return p
}

// withDefaults validates the spec, fills in defaults and returns the
// architectures of its images.
func (s PayloadSpec) withDefaults() (PayloadSpec, []string, error) {
	if s.Version == "" || !tagPattern.MatchString(s.Version) {
		return s, nil, fmt.Errorf("PayloadSpec.Version %q: want a version like 4.18.1", s.Version)
	}
	if s.Host == "" || strings.ContainsAny(s.Host, "/@ ") {
		return s, nil, fmt.Errorf("PayloadSpec.Host %q: want a registry host like 127.0.0.1:5000", s.Host)
	}
	if s.Arch == "" {
		s.Arch = "amd64"
	}
	if _, ok := tagArch[s.Arch]; !ok {
		return s, nil, fmt.Errorf("PayloadSpec.Arch %q: want amd64, arm64, ppc64le, s390x or multi", s.Arch)
	}
	if s.Components < 0 {
		return s, nil, fmt.Errorf("PayloadSpec.Components is %d: must not be negative", s.Components)
	}
	if s.Components == 0 {
		s.Components = DefaultComponents
	}
	arches := []string{s.Arch}
	if s.Arch == "multi" {
		if s.Platforms == nil {
			s.Platforms = []string{"amd64", "arm64"}
		}
		if len(s.Platforms) == 0 {
			return s, nil, fmt.Errorf("PayloadSpec.Platforms is empty: a multi payload needs architectures")
		}
		seen := map[string]bool{}
		for _, a := range s.Platforms {
			if _, ok := tagArch[a]; !ok || a == "multi" || seen[a] {
				return s, nil, fmt.Errorf("PayloadSpec.Platforms %v: want distinct architectures among amd64, arm64, ppc64le, s390x", s.Platforms)
			}
			seen[a] = true
		}
		arches = s.Platforms
	}
	return s, arches, nil
}

// NewPayload generates the release payload spec describes: Components
// component images sharing base layers (tiny; a third of them change with
// every version, the rest are the same in every version, like real
// z-streams), the KubeVirt disks when asked, and a release image whose top
// layer holds release-manifests/{release-metadata, image-references,
// 0000_50_installer_coreos-bootimages.yaml} naming them by digest under
// Host/ComponentRepo.
func NewPayload(spec PayloadSpec) (*Payload, error) {
	spec, arches, err := spec.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &Payload{Spec: spec, Tag: spec.Version + "-" + tagArch[spec.Arch], KubeVirt: map[string]PayloadComponent{}}
	componentPrefix := spec.Host + "/" + ComponentRepo + "@"

	// Components: a shared base layer per architecture, a second shared
	// layer on every other component, and a small layer of its own.
	for i := 0; i < spec.Components; i++ {
		name := componentName(i)
		own := name
		if i%3 == 0 {
			own = name + "@" + spec.Version
		}
		build := func(arch string) imagebuilder.ImageSpec {
			layers := []imagebuilder.LayerSpec{imagebuilder.RandomLayer(seedOf("base", arch), 2<<10)}
			if i%2 == 0 {
				layers = append(layers, imagebuilder.RandomLayer(seedOf("runtime", arch), 1<<10))
			}
			layers = append(layers, imagebuilder.RandomLayer(seedOf("component", own, arch), 512))
			return imagebuilder.ImageSpec{
				Format: spec.Format, Platform: platformOf(arch), Layers: layers,
				Labels: map[string]string{"io.openshift.build.component": name},
			}
		}
		key := fmt.Sprintf("%s|%s|%d|%v|%s|%v", name, own, i%2, spec.Arch, strings.Join(arches, ","), spec.Format)
		fi, err := cachedComponent(key, func() (imagebuilder.FleetImage, error) {
			return buildImage(spec, arches, ComponentRepo, "", build)
		})
		if err != nil {
			return nil, fmt.Errorf("component %s: %w", name, err)
		}
		p.Images = append(p.Images, fi)
		p.Components = append(p.Components, PayloadComponent{Name: name, Image: componentPrefix + fi.Digest().String(), Digest: fi.Digest()})
	}
	sort.Slice(p.Components, func(a, b int) bool { return p.Components[a].Name < p.Components[b].Name })

	// KubeVirt container disks, single-architecture images.
	if spec.KubeVirt {
		for _, arch := range arches {
			if !kubeVirtArches[arch] {
				continue
			}
			img, err := imagebuilder.Build(imagebuilder.ImageSpec{
				Format: spec.Format, Platform: platformOf(arch),
				Layers: []imagebuilder.LayerSpec{imagebuilder.RandomLayer(seedOf("kubevirt", spec.Version, arch), 1<<10)},
			})
			if err != nil {
				return nil, fmt.Errorf("KubeVirt disk for %s: %w", arch, err)
			}
			p.Images = append(p.Images, imagebuilder.FleetImage{Repo: ComponentRepo, Image: img})
			p.KubeVirt[arch] = PayloadComponent{Name: "kube-virt-container", Image: componentPrefix + img.Digest.String(), Digest: img.Digest}
		}
	}

	// The release image's files.
	p.Files = map[string][]byte{
		ReleaseMetadataPath: ReleaseMetadata(spec.Version, spec.Arch, spec.Previous),
		ImageReferencesPath: ImageReferences(spec.Version, p.Components),
		BootImagesPath:      bootImages(spec.Version, arches, p.KubeVirt),
		"release-manifests/0000_00_cluster-version-operator_00_namespace.yaml": []byte(
			"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: openshift-cluster-version\n"),
	}
	for path, data := range spec.Files {
		if data == nil {
			delete(p.Files, path)
		} else {
			p.Files[path] = data
		}
	}
	build := func(arch string) imagebuilder.ImageSpec {
		layers := []imagebuilder.LayerSpec{
			imagebuilder.RandomLayer(seedOf("base", arch), 2<<10),
			imagebuilder.RandomLayer(seedOf("cluster-version-operator", spec.Version, arch), 1<<10),
		}
		if spec.LowerFiles != nil {
			layers = append(layers, imagebuilder.FileLayer(spec.LowerFiles))
		}
		layers = append(layers, imagebuilder.FileLayer(p.Files))
		return imagebuilder.ImageSpec{
			Format: spec.Format, Platform: platformOf(arch), Layers: layers,
			Labels:     map[string]string{"io.openshift.release": spec.Version},
			Entrypoint: []string{"/usr/bin/cluster-version-operator"},
		}
	}
	fi, err := buildImage(spec, arches, ReleaseRepo, p.Tag, build)
	if err != nil {
		return nil, fmt.Errorf("release image %s: %w", p.Tag, err)
	}
	p.Images = append(p.Images, fi)
	p.Digest = fi.Digest()
	return p, nil
}

// componentCache holds component images already built in this process:
// payloads of neighbouring versions share most components, and tests build
// many payloads. Built images are never modified.
var componentCache sync.Map // key → imagebuilder.FleetImage

// cachedComponent returns the component image for key, building it once.
func cachedComponent(key string, build func() (imagebuilder.FleetImage, error)) (imagebuilder.FleetImage, error) {
	if fi, ok := componentCache.Load(key); ok {
		return fi.(imagebuilder.FleetImage), nil
	}
	fi, err := build()
	if err != nil {
		return fi, err
	}
	componentCache.Store(key, fi)
	return fi, nil
}

// buildImage builds a single-architecture image, or an index of one image
// per architecture for a multi payload.
func buildImage(spec PayloadSpec, arches []string, repo, tag string, build func(arch string) imagebuilder.ImageSpec) (imagebuilder.FleetImage, error) {
	fi := imagebuilder.FleetImage{Repo: repo, Tag: tag}
	if spec.Arch != "multi" {
		img, err := imagebuilder.Build(build(arches[0]))
		if err != nil {
			return fi, err
		}
		fi.Image = img
		return fi, nil
	}
	is := imagebuilder.IndexSpec{Format: spec.Format}
	for _, a := range arches {
		is.Images = append(is.Images, build(a))
	}
	idx, err := imagebuilder.BuildIndex(is)
	if err != nil {
		return fi, err
	}
	fi.Index = idx
	return fi, nil
}

// ReleaseMetadata renders release-manifests/release-metadata.
func ReleaseMetadata(version, arch string, previous []string) []byte {
	if previous == nil {
		previous = []string{}
	}
	doc := map[string]any{
		"kind":     "cincinnati-metadata-v0",
		"version":  version,
		"previous": previous,
		"metadata": map[string]string{
			"url":                               "https://access.redhat.com/errata/RHSA-test-" + version,
			"release.openshift.io/architecture": arch,
		},
	}
	data, _ := json.MarshalIndent(doc, "", "  ") // maps of strings always marshal
	return data
}

// imageStream is the image.openshift.io/v1 ImageStream of image-references.
type imageStream struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Metadata   struct {
		Name              string            `json:"name"`
		CreationTimestamp *string           `json:"creationTimestamp"`
		Annotations       map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		LookupPolicy struct {
			Local bool `json:"local"`
		} `json:"lookupPolicy"`
		Tags []imageStreamTag `json:"tags"`
	} `json:"spec"`
}

type imageStreamTag struct {
	Name        string            `json:"name"`
	Annotations map[string]string `json:"annotations"`
	From        struct {
		Kind string `json:"kind"`
		Name string `json:"name"`
	} `json:"from"`
}

// ImageReferences renders release-manifests/image-references naming
// components in the given order (an image may be any pull spec, so tests
// can write broken ones).
func ImageReferences(version string, components []PayloadComponent) []byte {
	var is imageStream
	is.Kind, is.APIVersion = "ImageStream", "image.openshift.io/v1"
	is.Metadata.Name = version
	is.Metadata.Annotations = map[string]string{"release.openshift.io/from-image-stream": "ocp/release-test"}
	is.Spec.Tags = []imageStreamTag{}
	for _, c := range components {
		t := imageStreamTag{Name: c.Name, Annotations: map[string]string{
			"io.openshift.build.source-location": "https://github.com/openshift/" + c.Name,
		}}
		t.From.Kind, t.From.Name = "DockerImage", c.Image
		is.Spec.Tags = append(is.Spec.Tags, t)
	}
	data, _ := json.MarshalIndent(is, "", "  ") // plain structs always marshal
	return data
}

// bootImages renders release-manifests/0000_50_installer_coreos-bootimages.yaml:
// a ConfigMap whose data.stream JSON lists the given architectures (graph
// spelling), with a KubeVirt disk for those in kubeVirt.
func bootImages(version string, arches []string, kubeVirt map[string]PayloadComponent) []byte {
	archDocs := map[string]any{}
	for _, a := range arches {
		images := map[string]any{
			"aws": map[string]any{"regions": map[string]any{}},
		}
		if kv, ok := kubeVirt[a]; ok {
			repo := kv.Image
			if at := strings.LastIndex(repo, "@"); at >= 0 {
				repo = repo[:at]
			}
			images["kubevirt"] = map[string]string{
				"release":    "418.94.202401010000-0",
				"image":      repo,
				"digest-ref": kv.Image,
			}
		}
		archDocs[tagArch[a]] = map[string]any{"artifacts": map[string]any{}, "images": images}
	}
	stream, _ := json.Marshal(map[string]any{
		"stream":        "rhcos-" + version,
		"metadata":      map[string]string{"last-modified": "2024-01-01T00:00:00Z", "generator": "releasetest"},
		"architectures": archDocs,
	})
	cm := map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":        "coreos-bootimages",
			"namespace":   "openshift-machine-config-operator",
			"annotations": map[string]string{"include.release.openshift.io/self-managed-high-availability": "true"},
		},
		"data": map[string]string{"releaseVersion": version, "stream": string(stream)},
	}
	data, _ := yaml.Marshal(cm) // maps of strings always marshal
	return data
}
