package yamlbudget

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// expand visits n and everything under it, following aliases, as a reader
// of the document would, charging b one node per visit.
func expand(b *Budget, n *yaml.Node) error {
	if err := b.Spend(1); err != nil {
		return err
	}
	if n.Kind == yaml.AliasNode {
		return expand(b, n.Alias)
	}
	for _, c := range n.Content {
		if err := expand(b, c); err != nil {
			return err
		}
	}
	return nil
}

func parse(t *testing.T, doc string) *yaml.Node {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &n); err != nil {
		t.Fatal(err)
	}
	return &n
}

// TestBudget: a document without aliases is read whole on a budget with no
// allowance; one whose aliases repeat nodes is read within the allowance,
// and nine levels of nine aliases (387 million nodes) stop once the
// allowance is spent, with an error saying so.
func TestBudget(t *testing.T) {
	plain := parse(t, "a: [1, 2, {b: c}]\nd: e\n")
	b := New(0)
	b.Add(plain)
	// document, mapping, a, list, 1, 2, mapping, b, c, d, e
	if got := count(plain); got != 11 {
		t.Errorf("Count = %d, want 11", got)
	}
	if err := expand(b, plain); err != nil {
		t.Errorf("a document without aliases: %v", err)
	}

	reuse := parse(t, "a: &x [1, 2, 3]\nb: *x\nc: *x\n")
	b = New(8) // each *x visits the list and its 3 items again: 4 more each
	b.Add(reuse)
	if err := expand(b, reuse); err != nil {
		t.Errorf("two aliases of a 4-node list with an allowance of 8: %v", err)
	}
	b = New(7)
	b.Add(reuse)
	if err := expand(b, reuse); err == nil {
		t.Error("two aliases of a 4-node list with an allowance of 7: no error")
	}

	var doc strings.Builder
	doc.WriteString("l0: &l0 [x, x, x, x, x, x, x, x, x]\n")
	for l := 1; l <= 9; l++ {
		fmt.Fprintf(&doc, "l%d: &l%d [%s*l%d]\n", l, l, strings.Repeat(fmt.Sprintf("*l%d,", l-1), 8), l-1)
	}
	bomb := parse(t, doc.String())
	b = New(AliasNodes)
	b.Add(bomb)
	err := expand(b, bomb)
	var e *Error
	if !errors.As(err, &e) || e.Extra != AliasNodes || e.Held != count(bomb) || !strings.Contains(err.Error(), "alias bomb") {
		t.Fatalf("nine levels of nine aliases: %v", err)
	}
	if b.spent != e.Held+e.Extra+1 {
		t.Errorf("the walk went on %d visits past the budget", b.spent-(e.Held+e.Extra))
	}
	if again := b.Spend(1); again == nil {
		t.Error("a spent budget allowed another visit")
	}
}
