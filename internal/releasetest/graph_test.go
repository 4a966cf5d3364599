package releasetest

import (
	"encoding/json"
	"fmt"
	"testing"
)

func TestGenerateEdges(t *testing.T) {
	g := NewGraph("amd64", "4.16.0", "4.16.1", "4.16.2", "4.16.3", "4.16.4", "4.16.5", "4.17.0", "4.17.1", "4.17.2", "4.17.3", "4.17.4").GenerateEdges()
	data, err := g.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc graphDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	from := map[string][]string{}
	for _, e := range doc.Edges {
		from[doc.Nodes[e[0]].Version] = append(from[doc.Nodes[e[0]].Version], doc.Nodes[e[1]].Version)
	}
	want := map[string]string{
		"4.16.1": "[4.16.2 4.16.3 4.16.4 4.17.1 4.17.2 4.17.3]",
		"4.16.5": "[4.17.4]", // no 4.17 patch ≥ 5: the newest 4.17
		"4.17.3": "[4.17.4]",
		"4.17.4": "[]",
	}
	for v, w := range want {
		if got := fmt.Sprint(from[v]); got != w {
			t.Errorf("updates from %s = %s, want %s", v, got, w)
		}
	}
	again, _ := NewGraph("amd64", g.Versions()...).GenerateEdges().JSON()
	if string(again) != string(data) {
		t.Error("GenerateEdges is not deterministic")
	}
}

func TestEdgeToUnknownVersion(t *testing.T) {
	if _, err := NewGraph("amd64", "4.16.0").Edge("4.16.0", "4.16.1").JSON(); err == nil {
		t.Error("edge to a missing node accepted")
	}
}
