package sim

import (
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
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

func sliceStops(r *Result) int64 {
	for _, p := range r.Preemptions {
		if p.Reason == StopTimeSlice.String() {
			return p.Allocations
		}
	}
	return 0
}

// A gang released by rule 5c whose replacement takes its GPUs straight back
// (Nomad's eval order; and without it, since no job before it wants them)
// is not released again at every decision: the release is held for
// VictimHold (10m), so over the 2h it waits it is stopped at most once per
// hold (12 times), not once per decision (240 times before the hold).
func TestEvalOrder_ReleasedGangNotReleasedAgainAtOnce(t *testing.T) {
	on := releaseRun(t, true, nil)
	if got := sliceStops(on); got < 1 || got > 13 {
		t.Errorf("eval order: %d releases of g in 2h; want 1 to 13 (one per 10m hold at most)", got)
	}
	off := releaseRun(t, false, nil)
	if got := sliceStops(off); got < 1 || got > 13 {
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
