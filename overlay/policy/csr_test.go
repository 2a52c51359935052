package policy

import (
	"math/rand"
	"slices"
	"testing"
)

// TestCSRSubset checks that subset of an index gives, on random rows and
// predicates, the index buildKeys builds from the kept items' rows alone
// (indexVictims and indexProtected rely on it), and that row sees every row
// once, in order, before its items.
func TestCSRSubset(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	var src, got, want csr
	for trial := 0; trial < 500; trial++ {
		rows, n := r.Intn(12), r.Intn(60)
		keys := make([]int32, n)
		for i := range keys {
			keys[i] = -1
			if rows > 0 && r.Intn(5) > 0 {
				keys[i] = int32(r.Intn(rows))
			}
		}
		keep := make([]bool, n)
		kept := make([]int32, n)
		for i := range keep {
			keep[i] = r.Intn(2) == 0
			kept[i] = -1
			if keep[i] {
				kept[i] = keys[i]
			}
		}
		src.buildKeys(rows, keys)
		var seen []int32
		got.subset(&src, func(row, i int32) bool {
			if keys[i] != row {
				t.Fatalf("trial %d: item %d of row %d offered for row %d", trial, i, keys[i], row)
			}
			if len(seen) == 0 || seen[len(seen)-1] != row {
				t.Fatalf("trial %d: item %d of row %d before its row was announced (%v)", trial, i, row, seen)
			}
			return keep[i]
		}, func(row int32) { seen = append(seen, row) })
		want.buildKeys(rows, kept)
		if !slices.Equal(got.start, want.start) || !slices.Equal(got.items, want.items) {
			t.Fatalf("trial %d: subset %v %v, buildKeys %v %v", trial, got.start, got.items, want.start, want.items)
		}
		if len(seen) != rows {
			t.Fatalf("trial %d: row called for %v of %d rows", trial, seen, rows)
		}
	}
}
