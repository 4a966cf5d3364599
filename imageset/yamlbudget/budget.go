// Package yamlbudget bounds the work of reading parsed YAML whose aliases the
// reader follows. An alias repeats the node its anchor names, so a few KiB of
// aliases nested in aliases stand for billions of nodes (a "billion laughs"):
// parsing into yaml.Node does not expand them, walking the tree does. A walk
// that spends one unit of a Budget per node it visits stops once the nodes
// reached through aliases exceed an allowance, however the aliases nest.
package yamlbudget

import (
	"fmt"

	yaml "go.yaml.in/yaml/v3"
)

// AliasNodes is how many nodes aliases may add to what a document holds:
// 400,000, the bound go.yaml.in/yaml/v3 itself puts on alias expansion when
// it decodes into Go values (its "excessive aliasing" check).
const AliasNodes = 400_000

// Budget counts the nodes a walk visits. The walk may visit every node the
// documents it was given hold (each once, as without aliases), plus an
// allowance for nodes reached again through aliases.
type Budget struct {
	held  int // nodes the documents hold, aliases not followed
	extra int // the allowance for nodes reached through aliases
	spent int
}

// New returns a budget allowing extra nodes beyond those of the documents
// later given to Add.
func New(extra int) *Budget {
	return &Budget{extra: extra}
}

// Add allows the nodes n holds, counted without following aliases.
func (b *Budget) Add(n *yaml.Node) {
	b.held += count(n)
}

// Spend charges the visit of nodes nodes; once the budget is exceeded it
// returns an *Error, and again on every later call.
func (b *Budget) Spend(nodes int) error {
	b.spent += nodes
	if b.spent > b.held+b.extra {
		return &Error{Held: b.held, Extra: b.extra}
	}
	return nil
}

// Error says a document expands past its budget through aliases.
type Error struct {
	Held  int // nodes the document holds
	Extra int // the allowance for aliases
}

func (e *Error) Error() string {
	return fmt.Sprintf("aliases expand this YAML to more than %d nodes (it holds %d; aliases may add at most %d): a YAML alias bomb? write the repeated entries out instead of nesting aliases in aliases",
		e.Held+e.Extra, e.Held, e.Extra)
}

// count returns how many nodes n holds, n included, without following aliases
// (an alias counts as one node).
func count(n *yaml.Node) int {
	if n == nil {
		return 0
	}
	c := 1
	for _, child := range n.Content {
		c += count(child)
	}
	return c
}
