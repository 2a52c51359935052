package policy

import (
	"math/rand"
	"slices"
	"testing"
)

// TestCSRSetItems checks, on random rows and subsets, that buildKeys lists
// each row's items in order, and that setItems, given a subset of an
// index's items in its order, gives the index buildKeys builds from the
// kept items' rows alone (indexVictims and indexProtected rely on it).
func TestCSRSetItems(t *testing.T) {
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
		kept := make([]int32, n)
		for i := range kept {
			kept[i] = -1
		}
		src.buildKeys(rows, keys)
		for row := int32(0); int(row) < rows; row++ {
			var items []int32
			for i, k := range keys {
				if k == row {
					items = append(items, int32(i))
				}
			}
			if !slices.Equal(src.row(row), items) {
				t.Fatalf("trial %d: buildKeys row %d %v, want %v", trial, row, src.row(row), items)
			}
		}
		if len(src.start) != rows+1 || int(src.start[rows]) != len(src.items) {
			t.Fatalf("trial %d: buildKeys start %v for %d items", trial, src.start, len(src.items))
		}
		var items []int32
		for _, i := range src.items {
			if r.Intn(2) == 0 {
				items = append(items, i)
				kept[i] = keys[i]
			}
		}
		got.setItems(rows, items, keys)
		want.buildKeys(rows, kept)
		if !slices.Equal(got.start, want.start) || !slices.Equal(got.items, want.items) {
			t.Fatalf("trial %d: setItems %v %v, buildKeys %v %v", trial, got.start, got.items, want.start, want.items)
		}
	}
}
