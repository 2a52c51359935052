package sim

import (
	"testing"
	"time"

	"github.com/allot-sched/allot/hcl"
	"github.com/allot-sched/allot/overlay/policy"
)

// TestAllotIncrementalMatchesDecideDeepQueues is TestAllotIncrementalMatchesDecide
// on deep queues: a heavy-tailed trace with three bursty teams (idle 7
// days, then at 5x their share) on 256 GPUs for 14 days, whose leaves
// queue hundreds of jobs each, at levels by leaf in the band's bottom
// (policy.pendingLevel). Every fifth plan must equal Decide on the full
// snapshot. (A build that also left out the deep jobs sitting at their
// leaf's level passed this and failed the same check at 1,024 GPUs: its
// reservations differed.)
func TestAllotIncrementalMatchesDecideDeepQueues(t *testing.T) {
	tree, err := hcl.LoadDir("../../examples/sim/suite/heavy-budgets")
	if err != nil {
		t.Fatal(err)
	}
	h := DefaultHeavyConfig()
	h.Days, h.Seed, h.GPUs = 14, 1, 32*8
	h.Bursty, h.BurstIdleDays, h.BurstFactor = 3, 7, 5
	tr, err := GenerateHeavy(tree, h)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewAllot(policyDefault())
	if err != nil {
		t.Fatal(err)
	}
	checked, deep := 0, 0
	decisions := matchDecide(t, p, func(n int, _ time.Time) bool { return n%5 == 0 }, func(want *policy.Plan, _ time.Time) {
		checked++
		for _, e := range want.Explanations {
			if e.Band == policy.BandPending && e.Position > p.cfg.Pending.Levels() {
				deep++
				break
			}
		}
	})
	opts := DefaultOptions()
	opts.Horizon = 14 * 24 * time.Hour
	if _, err := Run(tr, UniformCluster(32, 8), tree, p, opts); err != nil {
		t.Fatal(err)
	}
	if checked < 1000 || deep < checked/2 {
		t.Fatalf("%d decisions checked, %d with jobs past the band's distinct levels: the test does not exercise deep queues", checked, deep)
	}
	t.Logf("%d of %d decisions checked, %d with jobs past the band's distinct levels", checked, *decisions, deep)
}
