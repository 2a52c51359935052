package budgets

import (
	"math"
	"slices"
)

// LevelPart is one level of a leaf's fair-share standing: how the node at
// Path compares with its siblings over the window.
type LevelPart struct {
	Path string
	// Share is S: the node's share normalized among its siblings.
	Share float64
	// UsageFraction is U: the node's window usage over the siblings' total
	// (0 when the siblings used nothing).
	UsageFraction float64
	// Level is Slurm's Level Fairshare LF = S/U; +Inf when U is 0. Higher
	// sorts first. LF > 1 means under its share, LF < 1 over it.
	Level float64
}

// LeafRank is a leaf's place in the fair-share order and why.
type LeafRank struct {
	Leaf *Node
	// Position is the leaf's place in the order, 0 = first (most owed).
	Position int
	// Metric is the number users see: (N - Position) / N for N leaves, in
	// (0, 1], higher = more owed, like Slurm's fair-share factor.
	Metric float64
	// Parts are the leaf's levels, from the root's child down to the leaf.
	Parts []LevelPart
	// Usage is the leaf's window usage in GPU-seconds.
	Usage int64
	// UsageShare is Usage over the whole tree's window usage (0 if none).
	UsageShare float64
	// Effective is the leaf's effective share of the cluster.
	Effective float64
}

// ServedRatio is UsageShare / Effective: below 1 the leaf used less than
// its claim on the cluster over the window, above 1 more.
func (r *LeafRank) ServedRatio() float64 {
	return r.UsageShare / r.Effective
}

// FairShare is the hierarchical fair-share order of a tree's leaves for one
// window of usage. Recompute reuses its storage, which invalidates the
// LeafRanks and Parts of the previous computation.
type FairShare struct {
	// Leaves are in order, best (most owed) first.
	Leaves []LeafRank
	// Total is the window usage of all leaves, in GPU-seconds.
	Total int64

	pos       []int       // by leaf index
	nodeUsage []int64     // by node index: subtree usage
	nodePart  []LevelPart // by node index
	kids      []int32     // children node indexes, grouped by parent, in order
	kidStart  []int32     // by node index: offset of its children in kids
	parts     []LevelPart // backing store of every LeafRank.Parts
	stack     []int32
	tree      *Tree
}

// ComputeFairShare orders t's leaves by Fair Tree for usage, the window
// GPU-seconds of each leaf indexed by Node.LeafIndex (missing entries and
// negative values count as 0; values must stay below 2^53 to compare exactly).
func ComputeFairShare(t *Tree, usage []int64) *FairShare {
	f := &FairShare{}
	f.Recompute(t, usage)
	return f
}

// Recompute recomputes f for t and usage, reusing f's storage; in steady state
// it does not allocate.
func (f *FairShare) Recompute(t *Tree, usage []int64) {
	nodes, leaves := t.Nodes(), t.Leaves()
	f.tree = t
	f.nodeUsage = resize(f.nodeUsage, len(nodes))
	f.nodePart = resize(f.nodePart, len(nodes))
	f.kidStart = resize(f.kidStart, len(nodes)+1)
	f.pos = resize(f.pos, len(leaves))
	f.Leaves = resize(f.Leaves, len(leaves))

	// Subtree usage: leaves first, then children into parents in reverse pre-order.
	clear(f.nodeUsage)
	for i, leaf := range leaves {
		if i < len(usage) && usage[i] > 0 {
			f.nodeUsage[leaf.Index] = usage[i]
		}
	}
	for i := len(nodes) - 1; i > 0; i-- {
		f.nodeUsage[nodes[i].Parent.Index] += f.nodeUsage[i]
	}
	f.Total = f.nodeUsage[0]

	f.levelParts(nodes)
	f.sortChildren(nodes)
	f.walk(t.Root())
	f.fillRanks(leaves)
}

// levelParts computes S, U and LF of every node against its siblings.
func (f *FairShare) levelParts(nodes []*Node) {
	for i, n := range nodes {
		p := LevelPart{Path: n.Path, Share: n.Normalized, Level: math.Inf(1)}
		if n.Parent != nil {
			if sib := f.nodeUsage[n.Parent.Index]; sib > 0 && f.nodeUsage[i] > 0 {
				p.UsageFraction = float64(f.nodeUsage[i]) / float64(sib)
				p.Level = p.Share / p.UsageFraction
			}
		}
		f.nodePart[i] = p
	}
}

// sortChildren lays out each internal node's children in kids, sorted by
// siblingBefore.
func (f *FairShare) sortChildren(nodes []*Node) {
	f.kids = f.kids[:0]
	for i, n := range nodes {
		f.kidStart[i] = int32(len(f.kids))
		for _, c := range n.Children {
			f.kids = append(f.kids, int32(c.Index))
		}
	}
	f.kidStart[len(nodes)] = int32(len(f.kids))
	for i, n := range nodes {
		if len(n.Children) > 1 {
			slices.SortFunc(f.kids[f.kidStart[i]:f.kidStart[i+1]], f.compareSiblings)
		}
	}
}

// compareSiblings orders siblings a and b by Level Fairshare, higher first,
// then by path. LF_a > LF_b is decided exactly as share_a·u_b > share_b·u_a
// (declared shares and integer usages: the normalizing sums cancel), which
// also puts every unused sibling (LF = +Inf) ahead of used ones.
func (f *FairShare) compareSiblings(a, b int32) int {
	na, nb := f.tree.nodes[a], f.tree.nodes[b]
	if c := compareProducts(nb.Share, float64(f.nodeUsage[a]), na.Share, float64(f.nodeUsage[b])); c != 0 {
		return c
	}
	return int(a - b) // siblings' pre-order indexes follow their paths
}

// compareProducts compares x1·y1 with x2·y2 exactly: each product is rounded
// and its rounding error recovered with a fused multiply-add. Rounding is
// monotonic, so differing rounded products order the exact ones; equal ones
// are ordered by their errors.
func compareProducts(x1, y1, x2, y2 float64) int {
	p1, p2 := x1*y1, x2*y2
	if p1 != p2 {
		if p1 < p2 {
			return -1
		}
		return 1
	}
	e1, e2 := math.FMA(x1, y1, -p1), math.FMA(x2, y2, -p2)
	switch {
	case e1 < e2:
		return -1
	case e1 > e2:
		return 1
	}
	return 0
}

// walk assigns positions by a depth-first walk taking children in order.
func (f *FairShare) walk(root *Node) {
	f.stack = append(f.stack[:0], int32(root.Index))
	next := 0
	for len(f.stack) > 0 {
		i := f.stack[len(f.stack)-1]
		f.stack = f.stack[:len(f.stack)-1]
		n := f.tree.nodes[i]
		if n.IsLeaf() {
			f.pos[n.LeafIndex] = next
			next++
			continue
		}
		kids := f.kids[f.kidStart[i]:f.kidStart[i+1]]
		for k := len(kids) - 1; k >= 0; k-- {
			f.stack = append(f.stack, kids[k])
		}
	}
}

// fillRanks writes the LeafRanks in order, with each leaf's Parts.
func (f *FairShare) fillRanks(leaves []*Node) {
	depths := 0
	for _, leaf := range leaves {
		depths += leaf.Depth
	}
	f.parts = resize(f.parts, depths)
	n := float64(len(leaves))
	off := 0
	for i, leaf := range leaves {
		parts := f.parts[off : off+leaf.Depth : off+leaf.Depth]
		off += leaf.Depth
		for m := leaf; m.Parent != nil; m = m.Parent {
			parts[m.Depth-1] = f.nodePart[m.Index]
		}
		p := f.pos[i]
		r := LeafRank{Leaf: leaf, Position: p, Metric: (n - float64(p)) / n, Parts: parts,
			Usage: f.nodeUsage[leaf.Index], Effective: leaf.Effective}
		if f.Total > 0 {
			r.UsageShare = float64(r.Usage) / float64(f.Total)
		}
		f.Leaves[p] = r
	}
}

// Position returns the place of the leaf with index leafIndex, 0 = first.
func (f *FairShare) Position(leafIndex int) int { return f.pos[leafIndex] }

// Rank returns the LeafRank of the leaf with index leafIndex.
func (f *FairShare) Rank(leafIndex int) *LeafRank { return &f.Leaves[f.pos[leafIndex]] }

// Less reports whether leaf index a sorts before leaf index b.
func (f *FairShare) Less(a, b int) bool { return f.pos[a] < f.pos[b] }

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
