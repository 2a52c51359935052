package policy

import "testing"

// The pending band's levels (pendingLevel): one level to a position from
// the top, then the bottom K = min(leaves, levels/2) levels by the job's
// leaf's place in the fair-share order; never rising down the order
// (positions in order, leaf by leaf, as orderPending sorts them).
func TestPendingLevels(t *testing.T) {
	cases := []struct {
		band   Range
		leaves int
		p      int32
		pos    int // the job's leaf's place, 0 = most owed
		want   int
	}{
		{Range{40, 89}, 22, 1, 0, 89},
		{Range{40, 89}, 22, 28, 5, 62},  // the last position with a level of its own (50 - 22)
		{Range{40, 89}, 22, 29, 0, 61},  // deeper: the first leaf's level
		{Range{40, 89}, 22, 500, 1, 60}, // one level to a leaf
		{Range{40, 89}, 22, 29, 21, 40}, // the last leaf at the band's bottom
		{Range{40, 89}, 15, 35, 0, 55},
		{Range{40, 89}, 15, 36, 0, 54},
		{Range{40, 89}, 15, 36, 14, 40},
		{Range{40, 89}, 1, 49, 0, 41}, // one leaf: the band as before
		{Range{40, 89}, 1, 50, 0, 40},
		{Range{40, 89}, 1, 900, 0, 40},
		{Range{40, 89}, 200, 26, 0, 64}, // 25 tiers of 8 leaves
		{Range{40, 89}, 200, 26, 7, 64},
		{Range{40, 89}, 200, 26, 8, 63},
		{Range{40, 89}, 200, 26, 199, 40},
		{Range{40, 41}, 3, 1, 2, 41}, // two levels: one of them by leaf
		{Range{40, 41}, 3, 2, 0, 40},
	}
	for _, c := range cases {
		d := &Decider{cfg: DefaultConfig()}
		d.cfg.Pending = c.band
		d.leafPos = make([]int32, c.leaves)
		for i := range d.leafPos {
			d.leafPos[i] = int32(i)
		}
		if got := d.pendingLevel(c.p, int32(c.pos)); got != c.want {
			t.Errorf("band %v, %d leaves: position %d of leaf %d at %d, want %d", c.band, c.leaves, c.p, c.pos, got, c.want)
		}
	}
	for _, band := range []Range{{40, 89}, {40, 49}, {40, 41}, {40, 40}} {
		for _, leaves := range []int{1, 2, 3, 15, 22, 24, 25, 26, 50, 200, 1000} {
			d := &Decider{cfg: DefaultConfig()}
			d.cfg.Pending = band
			d.leafPos = make([]int32, leaves)
			for i := range d.leafPos {
				d.leafPos[i] = int32(i)
			}
			prev := band.High + 1
			p := int32(1)
			for leaf := 0; leaf < leaves; leaf++ {
				for k := 0; k < 3; k++ { // three jobs a leaf
					l := d.pendingLevel(p, int32(leaf))
					if l > prev || !band.contains(l) {
						t.Fatalf("band %v, %d leaves: position %d (leaf %d) at %d after %d: rises or leaves the band", band, leaves, p, leaf, l, prev)
					}
					prev = l
					p++
				}
			}
			if leaves > 1 && band.Levels() > 1 && d.pendingLevel(10000, int32(leaves-1)) != band.Low {
				t.Errorf("band %v, %d leaves: the last leaf's deep jobs not at the band's bottom", band, leaves)
			}
		}
	}
}
