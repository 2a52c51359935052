package budgets

import (
	"math/rand"
	"testing"
	"time"
)

// AddWindowSums over any periods equals Usage and Demand period by period,
// including periods before the horizon, empty ones and unknown leaves.
func TestAddWindowSumsMatchesUsage(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	l := NewLedger(LedgerConfig{Bucket: time.Minute, Retention: 6 * time.Hour})
	t0 := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	leaves := []string{"a", "b", "c"}
	for range 3000 {
		at := t0.Add(time.Duration(rng.Int63n(int64(9 * time.Hour))))
		leaf := leaves[rng.Intn(2)] // "c" never written
		if rng.Intn(2) == 0 {
			mustWrite(t, l.charge(leaf, at, rng.Int63n(500)))
		} else {
			mustWrite(t, l.addDemand(leaf, at, rng.Int63n(500)))
		}
	}
	for trial := range 50 {
		var periods [][2]time.Time
		for range 1 + rng.Intn(40) {
			from := t0.Add(time.Duration(rng.Int63n(int64(10 * time.Hour))))
			periods = append(periods, [2]time.Time{from, from.Add(time.Duration(rng.Int63n(int64(3 * time.Hour))))})
		}
		w := l.Windows(periods)
		for _, leaf := range leaves {
			for _, demand := range []bool{false, true} {
				got := make([]int64, w.Len())
				l.AddWindowSums(leaf, w, demand, got)
				for i, p := range periods {
					want := l.Usage(leaf, p[0], p[1])
					if demand {
						want = l.Demand(leaf, p[0], p[1])
					}
					if got[i] != want {
						t.Fatalf("trial %d leaf %s demand %t period %v: AddWindowSums %d, want %d", trial, leaf, demand, p, got[i], want)
					}
				}
			}
		}
	}
}
