package main

import (
	"io"
	"strings"
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
	rows, err := runSuite("../../examples/sim/suite/regress", suiteModel{}, io.Discard)
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
	// loss bound lapses in time, doubling each minute owed waits (a stop
	// just over twice owed's bound: measured 2.0m; 30s, the reaction
	// delay, when it lapsed at once; target 5 minutes). The baseline
	// never starts owed.
	sq := fig("squatter", "allot")
	check("squatter", sq.LargestP90 <= secs(5*time.Minute), "owed waited %.0fs, want <= 5m", sq.LargestP90)
	check("squatter baseline", fig("squatter", "baseline").LargestP90 >= secs(10*time.Hour), "the baseline starts owed: the case no longer tests squatting")
	// own-debug stops its own budget's lower-priority job (measured 30s;
	// target 1 minute).
	own := fig("own-priority", "allot")
	check("own-priority", own.DebugJobs == 1 && own.DebugP99 <= secs(time.Minute), "own-debug waited %.0fs, want <= 1m", own.DebugP99)

	// The published example, 4 days on 256 GPUs (measured: debug p90 0s,
	// p99 51s, worst leaf 100%, 15 of 15 leaves, occupancy 99.1%, lost
	// 1.44x the baseline's, 1,771 against 1,228 GPU h: the 1.5x target is
	// met; it was 1.88x before free work was levelled by the work a stop
	// would lose and a resumable job's loss was bounded by its run). With
	// rule 5f and the loss bound's floor: p99 20s, lost 1.45x (1,780).
	ex := fig("example-small", "allot")
	check("example-small", ex.DebugP90 <= 60, "debug p90 %.0fs, want <= 60s", ex.DebugP90)
	check("example-small", ex.DebugP99 <= secs(5*time.Minute), "debug p99 %.0fs, want <= 5m", ex.DebugP99)
	check("example-small", ex.WorstRatio >= 0.95, "worst leaf %.2f of owed, want >= 0.95", ex.WorstRatio)
	check("example-small", ex.LeavesAt95 >= ex.Leaves-1, "%d of %d leaves at >= 95%%, want all but one at most", ex.LeavesAt95, ex.Leaves)
	check("example-small", ex.AllLeaves >= 0.98, "all leaves %.3f of owed, want >= 0.98", ex.AllLeaves)
	check("example-small", ex.Occupancy >= 0.97, "occupancy %.3f, want >= 0.97", ex.Occupancy)
	check("example-small", ratio("example-small") <= 1.6, "lost %.2fx the baseline's, want <= 1.6 (measured 1.44; target 1.5)", ratio("example-small"))

	// The heavy-tailed shape, 4 days on 512 GPUs. Measured at the end of
	// this wave (rules 5c's release gap and hold, 5d, the time-bounded
	// margin, free-work levels, a resumable job's loss bounded by its run):
	// debug p90 1.0h against the baseline's 6.4h, 17 of 22 leaves at >= 95%,
	// all leaves 93.5%, occupancy 98.5% with 0.7% stalled against 64.8%
	// with 33.1%, lost 24.2x (14,507 against 600 GPU h). With rule 5c's
	// release of a gang whose rest frees only past the reservation max_age
	// (restFarOff): debug p90 39.2m, 19 of 22 leaves, all leaves 94.6%,
	// occupancy 98.4% with 0.8% stalled, lost 22.7x (13,637). With a held
	// victim kept (protected in its new window) once its replacement
	// outlasts the waiting job's evaluation, instead of left within
	// Nomad's reach for the rest of the 10m hold: debug p90 46.2m, 18 of
	// 22 leaves, all leaves 92.9%, occupancy 98.4% with 0.8% stalled,
	// lost 24.0x (14,395: restarted victims are no longer cheap victims
	// for Nomad's preemption, so time slicing stops others). The worst leaf,
	// lab/vision/robot-vision, gets 0% of what it is owed (46% with rule 5d
	// alone, 26% once the margin was bounded in time, 0% once the
	// simulator charged a resumable job only its last run); no bound is
	// pinned for it, since one at 0 could not fail: issue 12's worst-leaf
	// target is not met here. Before rule 5d: occupancy 91.1% with 8.2%
	// stalled, debug p90 6.1h; before rules 5b and 5c: debug p90 15.2h,
	// 12 of 22 leaves. Rule 5e (restarts held back, on top of all that):
	// lost 24.0x -> 18.6x (11,136 GPU h), debug p90 46.2m -> 23.8m, the
	// worst leaf 0% -> 45%, all leaves 92.9% -> 95.7%, but 18 -> 17 of 22
	// leaves (pinned at >= 16), stalled 0.8% -> 1.1%. Rule 5e (c) (a
	// non-resumable restart held while a job before it waits where its own
	// run would make it the victim again before it ran as long as its last
	// stopped run) and queued restarts held: lost 18.6x -> 14.4x (11,136 ->
	// 8,613 GPU h), debug p90 23.8m -> 26.1m, 17 of 22 leaves, all leaves
	// 95.7% -> 94.6%, the worst leaf 45% -> 37%, stalled 1.1% -> 1.0%.
	// Rule 5f (the job victims are stopped for is written at the pending
	// band's top, so Nomad gives it their GPUs) and the loss bound's
	// ResumeLoss floor: debug p90 26.1m -> 9.1m, p99 18.3h -> 8.5h, lost
	// 14.4x -> 11.8x (8,613 -> 7,078 GPU h), 17 of 22 leaves, all leaves
	// 94.6% -> 93.9%, the worst leaf 37% -> 8%, stalled 1.0% -> 1.2%.
	hv, hb := fig("heavy-small", "allot"), fig("heavy-small", "baseline")
	check("heavy-small", hv.Occupancy >= 0.97, "occupancy %.3f, want >= 0.97", hv.Occupancy)
	check("heavy-small", hv.Stalled <= 0.02, "stalled %.3f of the cluster, want <= 0.02", hv.Stalled)
	check("heavy-small", hv.Occupancy > hb.Occupancy, "occupancy %.3f not above the baseline's %.3f", hv.Occupancy, hb.Occupancy)
	check("heavy-small", hv.LeavesAt95 >= 20, "%d of %d leaves at >= 95%%, want >= 20 (measured 21 with the band's bottom by leaf, 20 with rule 5h; 18 before it, 17 before that, 18 before rule 5e)", hv.LeavesAt95, hv.Leaves)
	check("heavy-small", hv.AllLeaves >= 0.97, "all leaves %.3f of owed, want >= 0.97 (measured 0.982 with rule 5h, 0.946 before it)", hv.AllLeaves)
	check("heavy-small", hv.WorstRatio >= 0.65, "worst leaf %.3f of owed, want >= 0.65 (measured 0.74 with rule 5h, 0.27 before it)", hv.WorstRatio)
	check("heavy-small", hv.DebugP99 <= secs(4*time.Hour), "debug p99 %.0fs, want <= 4h (measured 2.4h with rule 5h, 17.4h before it; target 15m not met)", hv.DebugP99)
	check("heavy-small", hv.DebugP90 <= secs(2*time.Hour), "debug p90 %.0fs, want <= 2h", hv.DebugP90)
	check("heavy-small", hv.DebugP90*5 <= hb.DebugP90, "debug p90 %.0fs not 5x below the baseline's %.0fs", hv.DebugP90, hb.DebugP90)
	// The pending band's bottom levels by leaf (pendingLevel): 20 -> 21 of 22
	// leaves, the worst leaf 74% -> 82%, all leaves 98.2% -> 98.6%, but debug
	// p90 13.2m -> 21.1m and lost 14.1x -> 18.4x (8,477 -> 11,035 GPU h); over
	// the whole suite (examples/sim/suite) the work lost fell 4% and the
	// leaves at >= 95% rose 241 -> 244 of 247.
	check("heavy-small", ratio("heavy-small") <= 20, "lost %.2fx the baseline's, want <= 20 (measured 18.4 with the band's bottom by leaf, 14.1 before it; 12.6 with stall3's release level; 14.4 before it, 18.6 before rule 5e (c), 24.0 before rule 5e; target 1.5 not met)", ratio("heavy-small"))

	// Gangs as wide as the cluster, 3 days on 128 GPUs (16 nodes, gangs up
	// to 16): a gang placed in part whose last nodes fair share keeps from
	// it gives its allocations back (rule 5c) a preemption gap below its
	// standing, and a gang that cannot be placed whole waits at the bottom
	// of the pending band instead of being placed in part (rule 5d).
	// Measured: stalled 1.7% against the baseline's 49.9%, occupancy 97.6%,
	// 15 of 21 leaves at >= 95%, all leaves 85.6%, debug p90 55.5m (the
	// baseline's 4.6h). Before rule 5d: stalled 29.8%, occupancy 69.7%, 17
	// of 21 leaves, debug p90 5.0h; before rule 5c, 1 leaf and debug p90
	// 1.8d. With rule 5c's far-off release (restFarOff): stalled 1.5%,
	// occupancy 97.8%, 15 of 21 leaves, all leaves 86.5%, debug p90 1.1h,
	// lost 22.3x (27.7x before). With held victims kept: 16 of 21 leaves,
	// all leaves 86.8%, occupancy 97.6% with 1.6% stalled, debug p90 56.2m,
	// lost 22.6x (2,269). Rule 5e (restarts held back): 16 -> 12 of 21
	// leaves (pinned at >= 11; issue 12's leaves target not met), all
	// leaves 86.8% -> 84.4%, occupancy 97.6% -> 96.4% with 2.3% stalled,
	// debug p90 56.2m -> 1.1h, lost 22.6x -> 26.5x (2,656). Rule 5e (c) and
	// queued restarts held: lost 26.5x -> 17.3x (1,739), debug p90 1.1h ->
	// 32.4m, p99 17.6h -> 4.5h, 12 of 21 leaves, all leaves 84.4% -> 84.8%,
	// but occupancy 96.4% -> 95.6% with stalled 2.3% -> 3.4% (pinned at
	// >= 0.95; issue 12's occupancy target, 97%, was not met before either).
	// The cause is not isolated: (c) for single-allocation jobs only also
	// gave 95.6%; holding no queued gang gave 96.1% but 11 of 21 leaves,
	// all leaves 80.1% and 2,244 GPU h lost. Rule 5f and the loss bound's
	// ResumeLoss floor: debug p90 32.4m -> 21.1m, p99 4.5h -> 7.7h, lost
	// 17.3x -> 12.0x (1,739 -> 1,199), 12 -> 13 of 21 leaves, all leaves
	// 84.8% -> 85.2%, occupancy 95.6% -> 95.3% with 3.4% -> 3.8% stalled.
	gs := fig("gangs-small", "allot")
	check("gangs-small", gs.Stalled <= 0.05, "stalled %.3f of the cluster, want <= 0.05", gs.Stalled)
	check("gangs-small", gs.Occupancy >= 0.95, "occupancy %.3f, want >= 0.95 (measured 0.953 with stall3's release level; 0.956 before it, 0.964 before rule 5e (c))", gs.Occupancy)
	check("gangs-small", gs.LeavesAt95 >= 16, "%d of %d leaves at >= 95%%, want >= 16 (measured 16 with the band's bottom by leaf, 17 with rule 5h, 14 before it; 16 before rule 5e)", gs.LeavesAt95, gs.Leaves)
	// The band's bottom by leaf: 17 -> 16 of 21 leaves, debug p90 20.9m ->
	// 28.2m, p99 2.5h -> 4.3h, lost 14.7x -> 16.7x (1,475 -> 1,674 GPU h).
	check("gangs-small", gs.DebugP99 <= secs(5*time.Hour), "debug p99 %.0fs, want <= 5h (measured 4.3h with the band's bottom by leaf, 2.5h with rule 5h, 17.6h before it)", gs.DebugP99)
	check("gangs-small", gs.DebugP90 <= secs(2*time.Hour), "debug p90 %.0fs, want <= 2h", gs.DebugP90)
}

// -exit-holds models what happens after a stop until the stopped task
// exits, so without -kill-timeout (which gives that exit its time) it is
// refused with exit code 2, in allot sim and allot sim suite alike.
func TestSimExitHoldsNeedsKillTimeout(t *testing.T) {
	for _, args := range [][]string{
		{"sim", "-exit-holds", "-policies", "allot", "../../examples/sim/scenario.json"},
		{"sim", "suite", "-exit-holds", "../../examples/sim/suite"},
	} {
		code, out, errOut := runCLI(t, args...)
		if want := "Error: -exit-holds needs -kill-timeout (the time a stopped task exits)\n"; code != exitUsage || errOut != want || out != "" {
			t.Errorf("allot %s: code %d stdout %q stderr %q, want code 2 and %q", strings.Join(args, " "), code, out, errOut, want)
		}
	}
}

// -pass-on-report runs the policy when Nomad hears of a task's end, which
// only -finish-latency and -exit-holds model: alone it would do nothing, so
// it is refused with exit code 2; with -finish-latency it runs.
func TestSimPassOnReportNeedsReports(t *testing.T) {
	code, out, errOut := runCLI(t, "sim", "-pass-on-report", "-policies", "allot", "../../examples/sim/scenario.json")
	if want := "Error: -pass-on-report needs -finish-latency or -exit-holds (the reports of a task's end it runs on)\n"; code != exitUsage || errOut != want || out != "" {
		t.Errorf("allot sim -pass-on-report: code %d stdout %q stderr %q, want code 2 and %q", code, out, errOut, want)
	}
	code, _, errOut = runCLI(t, "sim", "-pass-on-report", "-finish-latency", "30s", "-policies", "allot", "-horizon", "2h", "-warmup", "0", "../../examples/sim/scenario.json")
	if code != 0 {
		t.Errorf("allot sim -pass-on-report -finish-latency 30s: code %d, stderr %q", code, errOut)
	}
}
