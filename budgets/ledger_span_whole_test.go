package budgets

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestSpanAmountWhole checks amount's whole-second path (integer seconds)
// against the time arithmetic it stands for, on random whole-second spans
// and bucket sizes, times before the epoch included, and every bucket the
// span touches plus one either side.
func TestSpanAmountWhole(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 3))
	for k := 0; k < 20000; k++ {
		bs := []int64{1, 7, 60, 3600}[r.IntN(4)]
		start := r.Int64N(1_000_000) - 500_000
		end := start + 1 + r.Int64N(10*bs)
		l := NewLedger(LedgerConfig{Bucket: time.Duration(bs) * time.Second, Retention: 24 * time.Hour})
		sp := Span{Leaf: "a", Start: time.Unix(start, 0), End: time.Unix(end, 0), GPUs: 1 + r.Int64N(64)}
		var w spanWrite
		if err := l.planSpan(&sp, &w, nil); err != nil {
			t.Fatal(err)
		}
		if !w.split.whole {
			t.Fatalf("span %+v not whole", sp)
		}
		slow := w
		slow.split.whole = false // the time path: upTo divides, amount clips times
		for j := w.first - 1; j <= w.last+1; j++ {
			if got, want := w.amount(j), slow.amount(j); got != want {
				t.Fatalf("bucket %d of [%d, %d) at %ds buckets, %d GPUs: amount %d, want %d", j, start, end, bs, sp.GPUs, got, want)
			}
		}
	}
}
