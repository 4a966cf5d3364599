package generate

import (
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gapmirror/gapmirror/imageset"
)

// fileUpdateService is the file name of the UpdateService manifest.
const fileUpdateService = "updateService.yaml"

// Names of the UpdateService gapmirror writes.
const (
	updateServiceName      = "update-service-gapmirror"
	updateServiceNamespace = "openshift-update-service"
	// defaultReleaseRepo is where release images go under the mirror root
	// when the Set has none to tell.
	defaultReleaseRepo = "openshift/release-images"
)

// updateService is an updateservice.operator.openshift.io/v1 UpdateService.
type updateService struct {
	typeMeta
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		Replicas       int    `json:"replicas"`
		Releases       string `json:"releases"`
		GraphDataImage string `json:"graphDataImage"`
	} `json:"spec"`
}

// UpdateService returns fileUpdateService for the OpenShift Update Service
// that serves the mirrored graph image of set, or no file when set has no
// graph image. Its releases repository is the one the Set's release images
// were mirrored to (root/openshift/release-images when it has none).
func UpdateService(set *imageset.Set, root string, meta Meta) (Files, error) {
	r, err := normaliseRoot(root)
	if err != nil {
		return nil, err
	}
	graphs := map[string]bool{}
	releases := map[string]bool{}
	if set != nil {
		for _, img := range set.Images {
			switch img.Kind {
			case imageset.KindReleaseGraph:
				graphs[r+"/"+img.Destination] = true
			case imageset.KindRelease:
				releases[r+"/"+img.DestinationRepo()] = true
			}
		}
	}
	if len(graphs) == 0 {
		return Files{}, nil
	}
	if len(graphs) > 1 {
		return nil, fmt.Errorf("UpdateService: the image set holds several graph images (%s); it must hold one", strings.Join(sortedKeys(graphs), ", "))
	}
	if len(releases) > 1 {
		return nil, fmt.Errorf("UpdateService: release images were mirrored to several repositories (%s); the update service reads one, so mirror all releases to the same repository", strings.Join(sortedKeys(releases), ", "))
	}
	releaseRepo := r + "/" + defaultReleaseRepo
	for repo := range releases {
		releaseRepo = repo
	}

	var us updateService
	us.typeMeta = typeMeta{APIVersion: "updateservice.operator.openshift.io/v1", Kind: "UpdateService"}
	us.Metadata = objectMeta{Name: updateServiceName, Namespace: updateServiceNamespace, Annotations: meta.annotations()}
	us.Spec.Replicas = 2
	us.Spec.Releases = releaseRepo
	us.Spec.GraphDataImage = sortedKeys(graphs)[0]
	data, err := yaml.Marshal(us)
	if err != nil {
		return nil, fmt.Errorf("rendering UpdateService: %w", err)
	}
	return Files{fileUpdateService: data}, nil
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
