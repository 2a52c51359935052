package budgets

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"
)

// refOrder is the slow, obviously-correct Fair Tree: recursively, sort each
// node's children by exact Level Fairshare (big.Rat, +Inf for no usage),
// higher first, then by path, and list leaves depth first.
func refOrder(n *Node, usage func(*Node) int64) []*Node {
	if n.IsLeaf() {
		return []*Node{n}
	}
	kids := append([]*Node(nil), n.Children...)
	lf := map[*Node]*big.Rat{} // nil = +Inf
	for _, c := range kids {
		lf[c] = refLevel(c, usage)
	}
	sort.SliceStable(kids, func(i, j int) bool {
		a, b := lf[kids[i]], lf[kids[j]]
		switch {
		case a == nil && b == nil:
			return kids[i].Path < kids[j].Path
		case a == nil:
			return true
		case b == nil:
			return false
		}
		if c := a.Cmp(b); c != 0 {
			return c > 0
		}
		return kids[i].Path < kids[j].Path
	})
	var out []*Node
	for _, c := range kids {
		out = append(out, refOrder(c, usage)...)
	}
	return out
}

// shareMemo caches refShare across the calls of one test: trees are immutable.
var shareMemo = map[*Node]*big.Rat{}

// refShare is S exactly: the node's share over its siblings' shares.
func refShare(n *Node) *big.Rat {
	if s, ok := shareMemo[n]; ok {
		return s
	}
	sum := new(big.Rat)
	for _, s := range n.Parent.Children {
		sum.Add(sum, new(big.Rat).SetFloat64(s.Share))
	}
	s := new(big.Rat).Quo(new(big.Rat).SetFloat64(n.Share), sum)
	shareMemo[n] = s
	return s
}

// refUsage is U exactly, or nil when the siblings used nothing.
func refUsage(n *Node, usage func(*Node) int64) *big.Rat {
	var sib int64
	for _, s := range n.Parent.Children {
		sib += usage(s)
	}
	if sib == 0 {
		return nil
	}
	return big.NewRat(usage(n), sib)
}

// refLevel is LF = S/U exactly, nil for +Inf.
func refLevel(n *Node, usage func(*Node) int64) *big.Rat {
	u := refUsage(n, usage)
	if u == nil || u.Sign() == 0 {
		return nil
	}
	return new(big.Rat).Quo(refShare(n), u)
}

// subtreeUsage returns a lookup of each node's summed leaf usage.
func subtreeUsage(leafUsage []int64) func(*Node) int64 {
	memo := map[*Node]int64{}
	var f func(*Node) int64
	f = func(n *Node) int64 {
		if v, ok := memo[n]; ok {
			return v
		}
		var s int64
		if n.IsLeaf() {
			s = leafUsage[n.LeafIndex]
		}
		for _, c := range n.Children {
			s += f(c)
		}
		memo[n] = s
		return s
	}
	return f
}

// randomTree builds a tree of depth 1-5 with small integer or random real
// shares, so that exact ties in Level Fairshare happen often.
func randomTree(t testing.TB, rng *rand.Rand) *Tree {
	specs := []Spec{{Path: "r"}}
	maxDepth := 1 + rng.IntN(5)
	var grow func(path string, depth int)
	grow = func(path string, depth int) {
		if depth == maxDepth || depth > 0 && rng.IntN(4) == 0 {
			return
		}
		for i := range 1 + rng.IntN(5) {
			p := fmt.Sprintf("%s/n%d", path, i)
			share := float64(1 + rng.IntN(4))
			if rng.IntN(3) == 0 {
				share = rng.Float64()*100 + 1e-3
			}
			specs = append(specs, Spec{Path: p, Share: share})
			grow(p, depth+1)
		}
	}
	grow("r", 0)
	tr, err := NewTree(specs)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// randomUsage draws usages from a small set (ties, zeros) or a wide range, or
// reads them from a randomly charged ledger.
func randomUsage(rng *rand.Rand, tr *Tree) []int64 {
	n := len(tr.Leaves())
	u := make([]int64, n)
	switch rng.IntN(3) {
	case 0:
		for i := range u {
			u[i] = int64(rng.IntN(4)) * 60
		}
	case 1:
		for i := range u {
			if rng.IntN(3) > 0 {
				u[i] = rng.Int64N(1 << 40)
			}
		}
	default:
		l := NewLedger(LedgerConfig{})
		for range 20 * n {
			leaf := tr.Leaves()[rng.IntN(n)]
			_ = l.charge(leaf.Path, t0.Add(-time.Duration(rng.IntN(8*24*60))*time.Minute), int64(rng.IntN(8))*60)
		}
		u = l.UsageByLeaf(tr, t0.Add(-7*24*time.Hour), t0, u)
	}
	return u
}

func TestFairShareMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 3))
	var f FairShare // reused across trees: Recompute must not leak state
	for iter := range 1000 {
		tr := randomTree(t, rng)
		usage := randomUsage(rng, tr)
		f.Recompute(tr, usage)
		su := subtreeUsage(usage)
		want := refOrder(tr.Root(), su)
		if len(f.Leaves) != len(want) {
			t.Fatalf("iter %d: %d ranks, want %d", iter, len(f.Leaves), len(want))
		}
		for pos, leaf := range want {
			r := f.Leaves[pos]
			if r.Leaf != leaf || r.Position != pos || f.Position(leaf.LeafIndex) != pos || f.Rank(leaf.LeafIndex) != &f.Leaves[pos] {
				t.Fatalf("iter %d: position %d holds %s, want %s\n%s", iter, pos, r.Leaf.Path, leaf.Path, describe(tr, usage))
			}
			checkRank(t, iter, r, len(want), usage, su)
		}
		for a := range min(len(want), 40) {
			for b := range min(len(want), 40) {
				if f.Less(a, b) != (f.Position(a) < f.Position(b)) {
					t.Fatalf("Less(%d, %d) disagrees with positions", a, b)
				}
			}
		}
		checkOverNeverOutranksUnder(t, tr.Root(), &f, su)
		clear(shareMemo)
	}
}

func checkRank(t *testing.T, iter int, r LeafRank, n int, usage []int64, su func(*Node) int64) {
	t.Helper()
	var total int64
	for _, u := range usage {
		total += u
	}
	if r.Metric != float64(n-r.Position)/float64(n) || r.Usage != usage[r.Leaf.LeafIndex] || r.Effective != r.Leaf.Effective {
		t.Fatalf("iter %d: %s metric %v usage %d effective %v", iter, r.Leaf.Path, r.Metric, r.Usage, r.Effective)
	}
	if total > 0 && r.UsageShare != float64(r.Usage)/float64(total) {
		t.Fatalf("iter %d: %s usage share %v", iter, r.Leaf.Path, r.UsageShare)
	}
	if len(r.Parts) != r.Leaf.Depth {
		t.Fatalf("iter %d: %s has %d parts, want %d", iter, r.Leaf.Path, len(r.Parts), r.Leaf.Depth)
	}
	m := r.Leaf
	for k := len(r.Parts) - 1; k >= 0; k, m = k-1, m.Parent {
		p := r.Parts[k]
		s, _ := refShare(m).Float64()
		var u float64
		if ur := refUsage(m, su); ur != nil {
			u, _ = ur.Float64()
		}
		lf := math.Inf(1)
		if l := refLevel(m, su); l != nil {
			lf, _ = l.Float64()
		}
		if p.Path != m.Path || !close(p.Share, s) || p.UsageFraction != u || !close(p.Level, lf) {
			t.Fatalf("iter %d: %s part %d = %+v, want {%s %v %v %v}", iter, r.Leaf.Path, k, p, m.Path, s, u, lf)
		}
	}
}

func close(a, b float64) bool {
	return a == b || math.Abs(a-b) <= 1e-12*math.Max(math.Abs(a), math.Abs(b))
}

// checkOverNeverOutranksUnder: at every level, when sibling A used more than
// its share (U > S) and sibling B less (U < S), every leaf of B comes before
// every leaf of A.
func checkOverNeverOutranksUnder(t *testing.T, n *Node, f *FairShare, su func(*Node) int64) {
	t.Helper()
	first, last := map[*Node]int{}, map[*Node]int{}
	for _, c := range n.Children {
		first[c], last[c] = len(f.Leaves), -1
		for _, r := range f.Leaves {
			if under(r.Leaf, c) {
				first[c] = min(first[c], r.Position)
				last[c] = max(last[c], r.Position)
			}
		}
	}
	for _, a := range n.Children {
		for _, b := range n.Children {
			ua, ub := refUsage(a, su), refUsage(b, su)
			if ua == nil || ub == nil || ua.Cmp(refShare(a)) <= 0 || ub.Cmp(refShare(b)) >= 0 {
				continue
			}
			if last[b] > first[a] {
				t.Fatalf("%s is over its share but its leaf at %d outranks %s's leaf at %d", a.Path, first[a], b.Path, last[b])
			}
		}
		checkOverNeverOutranksUnder(t, a, f, su)
	}
}

func under(leaf, n *Node) bool {
	return leaf.Path == n.Path || strings.HasPrefix(leaf.Path, n.Path+Separator)
}

func describe(tr *Tree, usage []int64) string {
	var b strings.Builder
	for _, n := range tr.Nodes() {
		fmt.Fprintf(&b, "%s share=%v", n.Path, n.Share)
		if n.IsLeaf() {
			fmt.Fprintf(&b, " usage=%d", usage[n.LeafIndex])
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func TestFairSharePublishedExample(t *testing.T) {
	tr := publishedTree(t) // leaves: olmo, vision, robotics
	tests := []struct {
		name      string
		usage     []int64
		wantOrder []string
	}{
		{"nobody used anything: path order", []int64{0, 0, 0}, []string{"olmo", "vision", "robotics"}},
		{"robotics over, prior under", []int64{10, 10, 80}, []string{"olmo", "vision", "robotics"}},
		// prior at U=0.6 is over its 0.5 while robotics (0.4) is under, so even
		// vision, which used nothing, waits behind robotics.
		{"prior over: its unused leaf still waits", []int64{60, 0, 40}, []string{"robotics", "vision", "olmo"}},
		// Within prior: olmo U=0.7 = S, vision U=0.3 = S: a tie, broken by path.
		{"exact tie inside prior", []int64{70, 30, 100}, []string{"olmo", "vision", "robotics"}},
		{"vision over inside prior", []int64{50, 50, 100}, []string{"olmo", "vision", "robotics"}},
		{"olmo over inside prior", []int64{90, 10, 100}, []string{"vision", "olmo", "robotics"}},
		{"short usage slice counts as zero", []int64{5}, []string{"robotics", "vision", "olmo"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := ComputeFairShare(tr, tc.usage)
			var got []string
			for _, r := range f.Leaves {
				got = append(got, r.Leaf.Name)
			}
			if strings.Join(got, ",") != strings.Join(tc.wantOrder, ",") {
				t.Errorf("order = %v, want %v", got, tc.wantOrder)
			}
		})
	}
	f := ComputeFairShare(tr, []int64{60, 0, 40})
	r := f.Rank(0) // olmo
	if r.Position != 2 || r.Metric != 1.0/3 || len(r.Parts) != 2 {
		t.Fatalf("olmo rank = %+v", r)
	}
	if p := r.Parts[0]; p.Path != "ai2/prior" || p.Share != 0.5 || p.UsageFraction != 0.6 || !close(p.Level, 0.5/0.6) {
		t.Errorf("prior part = %+v", p)
	}
	if p := r.Parts[1]; p.Path != "ai2/prior/olmo" || p.Share != 0.7 || p.UsageFraction != 1 || p.Level != 0.7 {
		t.Errorf("olmo part = %+v", p)
	}
	if !close(r.UsageShare, 0.6) || !close(r.ServedRatio(), 0.6/0.35) {
		t.Errorf("olmo usage share %v served %v", r.UsageShare, r.ServedRatio())
	}
	if v := f.Rank(1); !math.IsInf(v.Parts[1].Level, 1) || v.Parts[1].UsageFraction != 0 {
		t.Errorf("vision part = %+v, want LF +Inf", v.Parts[1])
	}
}

func TestCompareProductsExact(t *testing.T) {
	exact := func(x1, y1, x2, y2 float64) int {
		r := func(x float64) *big.Rat { return new(big.Rat).SetFloat64(x) }
		return new(big.Rat).Mul(r(x1), r(y1)).Cmp(new(big.Rat).Mul(r(x2), r(y2)))
	}
	eps := math.Nextafter(1, 2) - 1 // 2^-52
	cases := [][4]float64{
		{0.1, 3, 0.3, 1},
		{3, 7, 7, 3},
		// Equal once rounded, (1+2^-52)² exceeds 1+2^-51 by 2^-104.
		{1 + eps, 1 + eps, 1 + 2*eps, 1},
		{1 + 2*eps, 1, 1 + eps, 1 + eps},
		{0, 5, 5, 0},
	}
	for _, c := range cases {
		if got, want := compareProducts(c[0], c[1], c[2], c[3]), exact(c[0], c[1], c[2], c[3]); got != want {
			t.Errorf("compareProducts%v = %d, want %d", c, got, want)
		}
	}
	if c := cases[2]; c[0]*c[1] != c[2]*c[3] {
		t.Error("case 2 no longer rounds to equal products")
	}
}
