package sim

import (
	"strconv"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/policy"
)

// releaseRun runs two 8-GPU nodes under allot: t (lab/b) runs on one past
// its window, h (lab/a) on the other until 2h, and gang g (lab/a, 2 x 8
// GPUs) gets h's node when h ends, its second allocation waiting for fair
// share, which keeps t: rule 5c releases g. With evalOrder, g's
// replacement eval is processed first and takes the node back at once.
// extra jobs join the trace; events, if not nil, sees every event.
func releaseRun(t *testing.T, evalOrder bool, events func(*Event), extra ...JobSpec) *Result {
	t.Helper()
	tree, err := budgets.NewTree([]budgets.Spec{{Path: "lab", Share: 1}, {Path: "lab/a", Share: 1}, {Path: "lab/b", Share: 1}})
	if err != nil {
		t.Fatal(err)
	}
	tr := &Trace{Jobs: append([]JobSpec{
		{ID: "t", Budget: "lab/b", Class: ClassTrain, Count: 1, GPUs: 8, Work: 20 * time.Hour, MinRuntime: time.Hour, Resumable: true, Priority: 50},
		{ID: "h", Budget: "lab/a", Class: ClassTrain, Count: 1, GPUs: 8, Work: 2 * time.Hour, MinRuntime: time.Hour, Resumable: true, Priority: 50},
		{ID: "g", Submit: 90 * time.Minute, Budget: "lab/a", Class: ClassTrain, Count: 2, GPUs: 8, Work: time.Hour,
			MinRuntime: time.Hour, Resumable: true, Priority: 50},
	}, extra...)}
	p, err := NewAllot(policyDefault())
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Warmup, opts.Horizon = 0, 4*time.Hour
	opts.EvalOrder, opts.KillTimeout = evalOrder, evalOrder
	opts.Events = events
	r, err := Run(tr, UniformCluster(2, 8), tree, p, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func releases(r *Result) int64 { return stopsOf(r, StopRelease) }

// stopsOf is how many allocations the run stopped for reason why.
func stopsOf(r *Result, why StopReason) int64 {
	for _, p := range r.Preemptions {
		if p.Reason == why.String() {
			return p.Allocations
		}
	}
	return 0
}

// A release (rule 5c) is reported as its own reason, "release", in the
// summary and the event log, with no job it was stopped for: it makes room
// for no job, though the policy's reason names the job the gang's rest
// waits for (here t, running). It was counted as a time-slice stop "by" t.
func TestReleaseIsNotATimeSlice(t *testing.T) {
	h := newHarness(t, 4, 4)
	var events []Event
	h.s.opts.Events = func(e *Event) { events = append(events, *e) }
	run := h.submit("t", 90, 1, 4)
	gang := h.submit("g", 70, 2, 4)
	h.wantPlaced(gang, 1)
	a, err := NewAllot(policyDefault())
	if err != nil {
		t.Fatal(err)
	}
	a.jobIndex = map[string]int32{"t": run, "g": gang}
	h.s.now = 600
	a.apply(h.s, &policy.Plan{Stops: []policy.StopJob{{Job: "g", Allocs: []string{"a" + strconv.Itoa(int(h.s.jobs[gang].slots[0]))},
		Reason: policy.Reason{Code: policy.ReasonPartialRelease, N: 1, Detail: policy.WaitFairShare.String(), Job: "t"}}}})
	if h.s.m.stops[StopRelease] != 1 || h.s.m.stops[StopTimeSlice] != 0 {
		t.Errorf("stops %v: want one release and no time-slice stop", h.s.m.stops)
	}
	var stops int
	for _, e := range events {
		if e.Kind == EventStop {
			stops++
			if e.Job != "g" || e.Reason != StopRelease.String() || e.By != "" {
				t.Errorf("stop event %+v: want g's, reason release, for no job", e)
			}
		}
	}
	if stops != 1 {
		t.Errorf("%d stop events; want 1", stops)
	}
}

// A gang released by rule 5c whose replacement takes its GPUs straight back
// (Nomad's eval order; and without it, since no job before it wants them)
// is not released again at every decision: the release is held for
// VictimHold (10m), so over the 2h it waits it is stopped at most once per
// hold (12 times), not once per decision (240 times before the hold).
func TestEvalOrder_ReleasedGangNotReleasedAgainAtOnce(t *testing.T) {
	on := releaseRun(t, true, nil)
	if got := releases(on); got < 1 || got > 13 {
		t.Errorf("eval order: %d releases of g in 2h; want 1 to 13 (one per 10m hold at most)", got)
	}
	off := releaseRun(t, false, nil)
	if got := releases(off); got < 1 || got > 13 {
		t.Errorf("no eval order: %d releases of g in 2h; want 1 to 13", got)
	}
}

// yieldRun is releaseRun with s (lab/b, 8 GPUs, before g in the order)
// submitted at 2h10m: rule 5c releases g, so that s runs. It returns when
// s started (-1: never).
func yieldRun(t *testing.T, evalOrder bool) time.Duration {
	t.Helper()
	started := time.Duration(-1)
	releaseRun(t, evalOrder, func(e *Event) {
		if e.Kind == EventStart && e.Job == "s" && started < 0 {
			started = time.Duration(e.T) * time.Second
		}
	}, JobSpec{ID: "s", Submit: 130 * time.Minute, Budget: "lab/b", Class: ClassTrain, Count: 1, GPUs: 8, Work: time.Hour,
		MinRuntime: time.Hour, Resumable: true, Priority: 50})
	return started
}

// The gang released by rule 5c waits a preemption gap below its standing:
// on a Nomad that places its replacement first (eval order) s, the job
// before it, still preempts the replacement and starts within minutes, as
// without the eval order. At its standing's level (one below s's) s could
// not preempt it: each release only put the replacement back on the same
// GPUs, and s started at 3h30m.
func TestEvalOrder_ReleasedGangYieldsToTheJobBeforeIt(t *testing.T) {
	for _, eo := range []bool{false, true} {
		if got := yieldRun(t, eo); got < 130*time.Minute || got > 135*time.Minute {
			t.Errorf("eval order %v: s started at %v; want within 5m of its submit at 2h10m", eo, got)
		}
	}
}

// runningPreempted runs a generated example-shaped trace (gc) under allot
// with Nomad's eval order and the tasks' kill_timeout, and returns how many
// allocations of allocated jobs that had run at least two minutes Nomad
// preempted (by then allot has written every job it leaves running to
// Running or Protected, out of any pending job's reach), and how many
// Nomad preempted in all. Jobs time slicing stopped in the VictimHold
// before are left out: a held victim whose replacement started elsewhere
// waits at its pending level (memory.go keepVictims), a path of its own.
func runningPreempted(t *testing.T, gc GenConfig) (running, all int) {
	t.Helper()
	tree := exampleTree(t)
	tr, err := Generate(tree, gc)
	if err != nil {
		t.Fatal(err)
	}
	allocated := make(map[string]bool, len(tr.Jobs))
	for _, sp := range tr.Jobs {
		allocated[sp.ID] = sp.Budget != "" && sp.MinRuntime > 0
	}
	p, err := NewAllot(policyDefault())
	if err != nil {
		t.Fatal(err)
	}
	// stopping: job: when a plan last stopped it. Nomad may preempt a job
	// the plan lowered as a victim for one job in the instant of the plan,
	// for another job the same plan made Nomad place, before the plan's
	// own stop of it lands: allot stopped it, Nomad only came first.
	stopping := map[string]float64{}
	p.verify = func(plan *policy.Plan, now time.Time) {
		for _, s := range plan.Stops {
			stopping[s.Job] = now.Sub(Epoch).Seconds()
		}
	}
	opts := DefaultOptions()
	opts.Warmup = 0
	opts.EvalOrder, opts.KillTimeout = true, true
	started := map[string]float64{} // job: when it last started running, while it runs
	sliced := map[string]float64{}  // job: when time slicing last stopped it
	hold := policyDefault().VictimHold.Seconds()
	opts.Events = func(e *Event) {
		switch e.Kind {
		case EventStart:
			started[e.Job] = e.T
		case EventStop:
			at, ok := started[e.Job]
			delete(started, e.Job)
			if e.Reason == StopTimeSlice.String() {
				sliced[e.Job] = e.T
			}
			if e.Reason != StopPreempted.String() {
				return
			}
			all++
			if st, was := sliced[e.Job]; was && e.T-st <= hold {
				return // a held victim
			}
			if st, was := stopping[e.Job]; was && st == e.T {
				return // stopped by the plan of this instant (Nomad came first)
			}
			if ok && allocated[e.Job] && e.T-at >= 120 {
				running++
				if running <= 3 {
					t.Logf("t=%v: %s, running since t=%v, preempted by Nomad for %s", e.T, e.Job, at, e.By)
				}
			}
		}
	}
	if _, err := Run(tr, UniformCluster(gc.Nodes, 8), tree, p, opts); err != nil {
		t.Fatal(err)
	}
	return running, all
}

// Under Nomad's eval order a priority write is placed before allot's next
// call: a pending job written before a job placed since the last decision
// (still at its pending level) preempted it, and that job's write to
// Protected then placed its replacement at Protected, a preemption gap
// above Running, which preempted jobs running past their window (on the
// published example 187 allocations that had run 2 minutes or more, one
// of a job 35h into its run). The writes that lift placed jobs out of
// reach now go first (policy.WriteStep), and Nomad preempts only free work
// and allocations still starting or being stopped.
func TestEvalOrder_RunningAllocatedWorkOutOfNomadsReach(t *testing.T) {
	gc := DefaultGenConfig()
	gc.Days, gc.GPUs, gc.Nodes, gc.Failures = 5, 256, 32, 2
	running, all := runningPreempted(t, gc)
	if all == 0 {
		t.Fatal("Nomad preempted nothing: the trace does not exercise preemption")
	}
	if running > 0 {
		t.Errorf("Nomad preempted %d allocations of allocated jobs running 2m or more (of %d preemptions); want 0", running, all)
	}
}
