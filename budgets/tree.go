package budgets

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Separator joins budget names into a path: "ai2/prior/olmo".
const Separator = "/"

// Spec declares one node of a budget tree, as decoded from a budget file.
// Path is the full slash-separated path from the root; Pos is where the node
// was declared ("file:line:col"), carried only into error messages.
type Spec struct {
	Path        string
	Share       float64
	Description string
	Owners      []string
	Pos         string
}

// Node is one budget in a Tree. Nodes are shared by the Tree and must not be
// modified by callers.
type Node struct {
	Path        string
	Name        string
	Share       float64 // relative weight among siblings, as declared
	Normalized  float64 // Share / sum of siblings' shares (1 for the root)
	Effective   float64 // product of Normalized along the path: claim on the cluster
	Description string
	Owners      []string
	Pos         string
	Depth       int // 0 for the root
	Parent      *Node
	Children    []*Node // sorted by Name
	// LeafIndex is the node's dense index among the tree's leaves (in path
	// order), -1 for internal nodes. Ledgers and orders index by it.
	LeafIndex int
	// Index is the node's dense index in the tree's pre-order walk.
	Index int
}

// IsLeaf reports whether jobs may name this budget.
func (n *Node) IsLeaf() bool { return len(n.Children) == 0 }

// Tree is an immutable budget tree with a single root.
type Tree struct {
	root   *Node
	nodes  []*Node // pre-order, children by name
	leaves []*Node // in path order (== pre-order restricted to leaves)
	byPath map[string]*Node
}

// ErrInvalidTree is wrapped by every error NewTree returns.
var ErrInvalidTree = errors.New("invalid budget tree")

// ValidName reports whether s is a valid budget name: one or more of [a-z0-9_-].
func ValidName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// NewTree builds a Tree from specs in any order. The root is the one spec
// whose path has a single element; its share may be zero (it has no
// siblings). Every other spec needs a positive, finite share and a parent
// among the specs. All problems are reported, joined, each prefixed with the
// spec's Pos when it has one.
func NewTree(specs []Spec) (*Tree, error) {
	var errs []error
	fail := func(s Spec, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if s.Pos != "" {
			msg = s.Pos + ": " + msg
		}
		errs = append(errs, fmt.Errorf("%w: %s", ErrInvalidTree, msg))
	}
	t := &Tree{byPath: make(map[string]*Node, len(specs))}
	var roots []*Node
	for _, s := range specs {
		parts := strings.Split(s.Path, Separator)
		bad := false
		for _, p := range parts {
			if !ValidName(p) {
				fail(s, "budget path %q: name %q must be one or more of a-z, 0-9, '_' and '-'", s.Path, p)
				bad = true
				break
			}
		}
		if bad {
			continue
		}
		if prev, dup := t.byPath[s.Path]; dup {
			where := ""
			if prev.Pos != "" {
				where = " (first declared at " + prev.Pos + ")"
			}
			fail(s, "budget %q is declared twice%s; each path must be declared once", s.Path, where)
			continue
		}
		if len(parts) > 1 && (math.IsNaN(s.Share) || math.IsInf(s.Share, 0) || s.Share <= 0) {
			fail(s, "budget %q: share must be a positive finite number, got %v", s.Path, s.Share)
			continue
		}
		n := &Node{Path: s.Path, Name: parts[len(parts)-1], Share: s.Share, Description: s.Description,
			Owners: append([]string(nil), s.Owners...), Pos: s.Pos, Depth: len(parts) - 1, LeafIndex: -1}
		t.byPath[s.Path] = n
		if len(parts) == 1 {
			roots = append(roots, n)
		}
	}
	switch {
	case len(roots) == 0 && len(errs) == 0:
		errs = append(errs, fmt.Errorf("%w: no root budget: declare exactly one top-level budget, e.g. budget \"institute\" { ... }", ErrInvalidTree))
	case len(roots) > 1:
		names := make([]string, len(roots))
		for i, r := range roots {
			names[i] = r.Path
		}
		sort.Strings(names)
		for _, r := range roots[1:] {
			fail(Spec{Pos: r.Pos}, "budget %q is a second root (roots: %s); a tree has exactly one root, attach it under another budget",
				r.Path, strings.Join(names, ", "))
		}
	}
	// Link parents; report paths attached to nothing.
	paths := make([]string, 0, len(t.byPath))
	for p := range t.byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		n := t.byPath[p]
		if n.Depth == 0 {
			continue
		}
		pp := p[:strings.LastIndex(p, Separator)]
		parent, ok := t.byPath[pp]
		if !ok {
			fail(Spec{Pos: n.Pos}, "budget %q is attached to %q, which is not declared; declare %q first or fix the path",
				p, pp, pp)
			continue
		}
		n.Parent = parent
		parent.Children = append(parent.Children, n)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	t.root = roots[0]
	t.root.Normalized, t.root.Effective = 1, 1
	t.walk(t.root)
	return t, nil
}

// walk fills pre-order indexes, leaf indexes and shares. Children were
// appended in path order, which is name order among siblings.
func (t *Tree) walk(n *Node) {
	n.Index = len(t.nodes)
	t.nodes = append(t.nodes, n)
	if n.IsLeaf() {
		n.LeafIndex = len(t.leaves)
		t.leaves = append(t.leaves, n)
		return
	}
	var sum float64
	for _, c := range n.Children {
		sum += c.Share
	}
	for _, c := range n.Children {
		c.Normalized = c.Share / sum
		c.Effective = n.Effective * c.Normalized
		t.walk(c)
	}
}

// Root returns the root budget.
func (t *Tree) Root() *Node { return t.root }

// Lookup returns the node at path.
func (t *Tree) Lookup(path string) (*Node, bool) {
	n, ok := t.byPath[path]
	return n, ok
}

// IsLeaf reports whether path names a leaf of the tree (a budget jobs may use).
func (t *Tree) IsLeaf(path string) bool {
	n, ok := t.byPath[path]
	return ok && n.IsLeaf()
}

// Nodes returns every node in pre-order (children by name). Do not modify.
func (t *Tree) Nodes() []*Node { return t.nodes }

// Leaves returns the leaves in path order; Leaves()[i].LeafIndex == i. Do not modify.
func (t *Tree) Leaves() []*Node { return t.leaves }

// Len returns the number of nodes.
func (t *Tree) Len() int { return len(t.nodes) }
