package releasetest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestGraphDataTarball(t *testing.T) {
	channels := map[string][]string{"stable-4.18": {"4.18.1", "4.18.2"}, "fast-4.18": {"4.18.2"}}
	a, err := GraphDataTarball(channels)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := GraphDataTarball(channels); !bytes.Equal(a, b) {
		t.Error("the same channels give other bytes")
	}
	zr, err := gzip.NewReader(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		files[hdr.Name] = string(body)
	}
	if got := files["channels/stable-4.18.yaml"]; got != "name: stable-4.18\nversions:\n- 4.18.1\n- 4.18.2\n" {
		t.Errorf("channels/stable-4.18.yaml is %q", got)
	}
	if len(files) != 3 || files["version"] == "" {
		t.Errorf("tarball holds %v", files)
	}
}

func TestServicesRoutes(t *testing.T) {
	s := StartServices([]byte("tarball"))
	defer s.Close()
	if err := s.Graphs.Put("stable-4.18", NewGraph("amd64", "4.18.1")); err != nil {
		t.Fatal(err)
	}
	s.Signatures.Put("sha256:abc", []byte("sig"))
	get := func(url string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	if got := get(s.GraphURL() + "?channel=stable-4.18&arch=amd64"); !strings.Contains(got, `"version":"4.18.1"`) {
		t.Errorf("graph: %s", got)
	}
	if got := get(s.SignatureURL() + "/sha256=abc/signature-1"); got != "sig" {
		t.Errorf("signature: %q", got)
	}
	if got := get(s.GraphDataURL()); got != "tarball" {
		t.Errorf("graph data: %q", got)
	}
}
