package generate

import (
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestSignatureConfigMapsGolden(t *testing.T) {
	sigs := map[string][][]byte{
		dg("b"): {[]byte("signature one of b\x00\x01\xff"), []byte("signature two of b")},
		dg("a"): {[]byte("only signature of a")},
	}
	files, err := signatureConfigMaps(sigs, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	assertGolden(t, "signatures", files)

	// Parse back: the bytes survive the base64 round trip under the keys the CVO looks for.
	docs := splitDocuments(files[fileSignatures])
	if len(docs) != 2 {
		t.Fatalf("want one ConfigMap per release, got %d", len(docs))
	}
	var cm configMap
	if err := yaml.Unmarshal(docs[1], &cm); err != nil {
		t.Fatal(err)
	}
	prefix := "sha256-" + dg("b")[len("sha256:"):]
	want := map[string][]byte{prefix + "-1": sigs[dg("b")][0], prefix + "-2": sigs[dg("b")][1]}
	if cm.Metadata.Name != prefix || cm.Metadata.Namespace != "openshift-config-managed" || !reflect.DeepEqual(cm.BinaryData, want) {
		t.Errorf("got %+v", cm)
	}
	if v, ok := cm.Metadata.Labels["release.openshift.io/verification-signatures"]; !ok || v != "" {
		t.Errorf("label missing: %v", cm.Metadata.Labels)
	}
}

func TestSignatureConfigMapsErrors(t *testing.T) {
	files, err := signatureConfigMaps(nil, testMeta)
	if err != nil || len(files) != 0 {
		t.Fatalf("no signatures: want no file, got %v, %v", files.names(), err)
	}
	tests := []struct {
		name string
		sigs map[string][][]byte
		want string
	}{
		{name: "bad digest", sigs: map[string][][]byte{"sha256:nothex": {[]byte("x")}}, want: `"sha256:nothex"`},
		{name: "no signature", sigs: map[string][][]byte{dg("a"): nil}, want: "has no signature"},
		{name: "empty signature", sigs: map[string][][]byte{dg("a"): {[]byte("x"), nil}}, want: "signature 2 of release " + dg("a")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := signatureConfigMaps(tt.sigs, testMeta)
			mustFail(t, err, tt.want)
		})
	}
}
