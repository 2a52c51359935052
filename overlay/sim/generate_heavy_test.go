package sim

import (
	"testing"
	"time"
)

// The heavy-tailed generator keeps the published shape it is written from:
// runtimes with Philly's percentiles, allocated demand near its target, and
// gang jobs no larger than MaxNodes nodes.
func TestGenerateHeavyShape(t *testing.T) {
	tree := exampleTree(t)
	for _, seed := range []uint64{1, 2, 3} {
		h := DefaultHeavyConfig()
		h.Seed, h.Days, h.GPUs = seed, 3, 512
		tr, err := GenerateHeavy(tree, h)
		if err != nil {
			t.Fatal(err)
		}
		p50, p90, p99 := heavyQuantiles(tr)
		if p50 < 6*time.Minute || p50 > 16*time.Minute || p90 < 5*time.Hour || p90 > 14*time.Hour || p99 < 40*time.Hour || p99 > 5*24*time.Hour {
			t.Errorf("seed %d: runtime p50/p90/p99 %v/%v/%v, want about 10m/9h/3d", seed, p50, p90, p99)
		}
		var alloc float64
		for i := range tr.Jobs {
			j := &tr.Jobs[i]
			if j.Count > h.MaxNodes {
				t.Errorf("seed %d: job %s spans %d nodes, more than %d", seed, j.ID, j.Count, h.MaxNodes)
			}
			if j.MinRuntime > 0 {
				alloc += float64(j.TotalGPUs()) * min(j.Work.Hours(), (h.Days*24)-j.Submit.Hours())
			}
		}
		if d := alloc / (float64(h.GPUs) * h.Days * 24); d < 2.5 || d > 3.5 {
			t.Errorf("seed %d: allocated demand %.2fx capacity, want about %.1fx", seed, d, h.Allocated)
		}
	}
}
