package main

import (
	"io"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/sim"
)

// TestSimSuiteFigures runs the small regression suite
// (examples/sim/suite/regress: the two contract cases and short, small
// variants of the published example and of the heavy-tailed generator) and
// pins allot's figures with tolerances, so that a worse policy fails. The
// bounds are the figures measured when they were pinned, loosened by the
// tolerance written next to each; where a bound is short of an issue-12
// target the comment says so.
func TestSimSuiteFigures(t *testing.T) {
	rows, err := runSuite("../../examples/sim/suite/regress", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	fig := func(scenario, policy string) sim.Figures {
		t.Helper()
		for _, r := range rows {
			if r.Scenario != scenario {
				continue
			}
			for _, f := range r.Figures {
				if f.Policy == policy {
					return f
				}
			}
		}
		t.Fatalf("no figures for %s under %s", scenario, policy)
		return sim.Figures{}
	}
	secs := func(d time.Duration) float64 { return d.Seconds() }
	ratio := func(scenario string) float64 {
		a, b := fig(scenario, "allot"), fig(scenario, "baseline")
		if b.LostHours <= 0 {
			return 0
		}
		return a.LostHours / b.LostHours
	}
	check := func(name string, ok bool, format string, args ...any) {
		t.Helper()
		if !ok {
			t.Errorf(name+": "+format, args...)
		}
	}

	// The contract past the window. squatter (non-resumable, past its
	// window) is stopped for owed: nothing cheaper is in sight, so the
	// loss bound does not wait (measured: 30s, the reaction delay; target
	// 5 minutes). The baseline never starts owed.
	sq := fig("squatter", "allot")
	check("squatter", sq.LargestP90 <= secs(5*time.Minute), "owed waited %.0fs, want <= 5m", sq.LargestP90)
	check("squatter baseline", fig("squatter", "baseline").LargestP90 >= secs(10*time.Hour), "the baseline starts owed: the case no longer tests squatting")
	// own-debug stops its own budget's lower-priority job (measured 30s;
	// target 1 minute).
	own := fig("own-priority", "allot")
	check("own-priority", own.DebugJobs == 1 && own.DebugP99 <= secs(time.Minute), "own-debug waited %.0fs, want <= 1m", own.DebugP99)

	// The published example, 4 days on 256 GPUs: debug p90 0s, worst leaf
	// 100%, 15 of 15 leaves, occupancy 99.2%, lost 1.89x the baseline's.
	ex := fig("example-small", "allot")
	check("example-small", ex.DebugP90 <= 60, "debug p90 %.0fs, want <= 60s", ex.DebugP90)
	check("example-small", ex.WorstRatio >= 0.90, "worst leaf %.2f of owed, want >= 0.90", ex.WorstRatio)
	check("example-small", ex.LeavesAt95*100 >= 90*ex.Leaves, "%d of %d leaves at >= 95%%, want >= 90%%", ex.LeavesAt95, ex.Leaves)
	check("example-small", ex.AllLeaves >= 0.98, "all leaves %.3f of owed, want >= 0.98", ex.AllLeaves)
	check("example-small", ex.Occupancy >= 0.97, "occupancy %.3f, want >= 0.97", ex.Occupancy)
	check("example-small", ratio("example-small") <= 2.3, "lost %.2fx the baseline's, want <= 2.3 (measured 1.89; target 1.5 not met)", ratio("example-small"))

	// The heavy-tailed shape, 4 days on 512 GPUs (measured: debug p90
	// 15.2h against the baseline's 2.6h, worst leaf 64%, 12 of 22 leaves,
	// all leaves 91.8%, occupancy 87.2% with 12.2% stalled against 66.3%
	// with 31.2%, lost 10.8x). Most issue-12 targets are not met here; the
	// bounds keep it from getting worse. (Occupancy was pinned at 99.4%
	// with 0.0% stalled while stalled time subtracted the work lost twice:
	// 8,559 lost GPU hours hid allot's stalled gangs.)
	hv, hb := fig("heavy-small", "allot"), fig("heavy-small", "baseline")
	check("heavy-small", hv.Occupancy >= 0.85, "occupancy %.3f, want >= 0.85", hv.Occupancy)
	check("heavy-small", hv.Occupancy > hb.Occupancy, "occupancy %.3f not above the baseline's %.3f", hv.Occupancy, hb.Occupancy)
	check("heavy-small", hv.LeavesAt95 >= 10, "%d of %d leaves at >= 95%%, want >= 10", hv.LeavesAt95, hv.Leaves)
	check("heavy-small", hv.AllLeaves >= 0.85, "all leaves %.3f of owed, want >= 0.85", hv.AllLeaves)
	check("heavy-small", hv.WorstRatio >= 0.35, "worst leaf %.2f of owed, want >= 0.35", hv.WorstRatio)
	check("heavy-small", hv.DebugP90 <= secs(18*time.Hour), "debug p90 %.0fs, want <= 18h", hv.DebugP90)
	check("heavy-small", ratio("heavy-small") <= 13, "lost %.2fx the baseline's, want <= 13", ratio("heavy-small"))
}
