package generate

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/opencontainers/go-digest"
)

// fileSignatures is the file name of the release signature ConfigMaps;
// FileSignaturesJSON holds the same objects as a JSON v1 List (oc-mirror
// writes both; `oc apply -f` takes either).
const (
	fileSignatures     = "signature-configmap.yaml"
	FileSignaturesJSON = "signature-configmap.json"
)

// Where the cluster-version operator looks for release signatures: every
// ConfigMap in this namespace with this label; it tries each binaryData value
// whose key starts with "<algorithm>-<hex>" of the release digest (see
// openshift/library-go pkg/verify/store/configmap).
const (
	signatureNamespace = "openshift-config-managed"
	signatureLabel     = "release.openshift.io/verification-signatures"
)

// configMap is a v1 ConfigMap carrying binary data.
type configMap struct {
	typeMeta
	Metadata   objectMeta        `json:"metadata"`
	BinaryData map[string][]byte `json:"binaryData"`
}

// signatureConfigMaps returns fileSignatures with one ConfigMap per release
// digest (sha256:…) in signatures, or no file when there are none. The value
// list holds that release's signatures in store order (signature-1, -2, …).
//
// One ConfigMap per release, named "<algorithm>-<hex>" like the ones
// "oc adm release mirror" writes, rather than one shared ConfigMap: the CVO
// reads every labelled ConfigMap so the split costs nothing, a release's
// object never changes when other releases come and go (so "oc apply" and
// later pruning touch only that release), many releases never push one
// object towards the 1 MiB ConfigMap limit, and the name cannot collide with
// the CVO's own "signatures-managed" cache.
func signatureConfigMaps(signatures map[string][][]byte, meta Meta) (Files, error) {
	digests := make([]string, 0, len(signatures))
	for d := range signatures {
		digests = append(digests, d)
	}
	sort.Strings(digests)
	var cms []configMap
	for _, ds := range digests {
		d, err := digest.Parse(ds)
		if err != nil {
			return nil, fmt.Errorf("release signatures: digest %q: %w", ds, err)
		}
		sigs := signatures[ds]
		if len(sigs) == 0 {
			return nil, fmt.Errorf("release signatures: release %s has no signature: leave it out or fetch its signatures first", ds)
		}
		prefix := d.Algorithm().String() + "-" + d.Encoded()
		cm := configMap{
			typeMeta: typeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			Metadata: objectMeta{
				Name:        prefix,
				Namespace:   signatureNamespace,
				Labels:      map[string]string{signatureLabel: ""},
				Annotations: meta.annotations(),
			},
			BinaryData: map[string][]byte{},
		}
		for i, sig := range sigs {
			if len(sig) == 0 {
				return nil, fmt.Errorf("release signatures: signature %d of release %s is empty", i+1, ds)
			}
			cm.BinaryData[fmt.Sprintf("%s-%d", prefix, i+1)] = sig
		}
		cms = append(cms, cm)
	}
	if len(cms) == 0 {
		return Files{}, nil
	}
	data, err := marshalDocuments(cms)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fileSignatures, err)
	}
	list := struct {
		typeMeta
		Items []configMap `json:"items"`
	}{typeMeta{APIVersion: "v1", Kind: "List"}, cms}
	js, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", FileSignaturesJSON, err)
	}
	return Files{fileSignatures: data, FileSignaturesJSON: append(js, '\n')}, nil
}
