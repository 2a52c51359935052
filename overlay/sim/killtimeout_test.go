package sim

import (
	"slices"
	"testing"
	"time"
)

// The tests of this file pin what the model does with the eval a lever
// creates (Options.EvalOrder: runNew) and with a stopped task's exit
// (Options.KillTimeout: killtimeout.go), each measured on a real Nomad by
// the fidelity harness.

// nomadHarness is newHarness with the fidelity harness's options on.
func nomadHarness(t *testing.T, nodes ...int) *harness {
	h := newHarness(t, nodes...)
	h.s.opts.EvalOrder, h.s.opts.KillTimeout = true, true
	return h
}

// allot stops a running victim for a pending job (its priority held a
// preemption gap below it), then evaluates the pending job. Nomad processes
// the victim's replacement eval first: the replacement takes the GPUs its
// stop freed back, and the pending job's evaluate then preempts it.
func TestEvalOrder_VictimReplacementPlacedFirst(t *testing.T) {
	h := nomadHarness(t, 4)
	victim := h.submit("victim", 90, 1, 4)
	waiting := h.submit("waiting", 70, 1, 4)
	h.wantPlaced(waiting, 0)
	h.s.now = 600
	h.s.SetPriority(victim, 55)
	first := h.s.jobs[victim].slots[0]
	h.s.StopAllocs([]int32{first}, StopTimeSlice)
	// Before the evaluate: the replacement holds the GPUs again.
	h.wantPlaced(victim, 1)
	replacement := h.s.jobs[victim].slots[0]
	if replacement == first || h.s.allocs[replacement].start != 600 {
		t.Fatalf("victim's allocation %d (first %d): want a replacement placed at 600", replacement, first)
	}
	h.s.Evaluate(waiting)
	h.s.schedule()
	h.wantPlaced(waiting, 1)
	h.wantPlaced(victim, 0)
	if r := &h.s.allocs[replacement]; r.endReason != StopPreempted || r.preemptedBy != waiting {
		t.Fatalf("replacement ended %s by %d; want preempted by the waiting job (%d)", r.endReason, r.preemptedBy, waiting)
	}
	if h.s.m.stops[StopTimeSlice] != 1 || h.s.m.stops[StopPreempted] != 1 {
		t.Fatalf("stops %v: want one time-slice stop and one preemption", h.s.m.stops)
	}
}

// The eval a lever creates is processed at once, before the blocked evals
// the freed capacity wakes: a blocked job of a higher priority than the
// stopped one's replacement does not take the GPUs in that instant.
func TestEvalOrder_BlockedEvalsWaitForTheInstantsEnd(t *testing.T) {
	h := nomadHarness(t, 4)
	victim := h.submit("victim", 90, 1, 4)
	blocked := h.submit("blocked", 80, 1, 4)
	h.wantPlaced(blocked, 0)
	h.s.SetPriority(victim, 40)
	h.s.StopAllocs([]int32{h.s.jobs[victim].slots[0]}, StopTimeSlice)
	h.wantPlaced(victim, 1)
	h.wantPlaced(blocked, 0)
	h.s.schedule() // the instant's end: blocked evals retried, 80 over 40 preempts
	h.wantPlaced(blocked, 1)
	h.wantPlaced(victim, 0)
}

// The preempting allocation starts only after its victim's task has
// exited: kill_timeout after the preemption (facts i).
func TestKillTimeout_PreemptorRunsAfterVictimExits(t *testing.T) {
	for _, tc := range []struct {
		kill time.Duration
		want int64
	}{{0, 100 + 5}, {90 * time.Second, 100 + 90}} {
		h := nomadHarness(t, 4)
		low := h.submit("low", 20, 1, 4)
		h.s.jobs[low].spec.KillTimeout = tc.kill
		h.s.now = 100
		high := h.submit("high", 60, 1, 4)
		h.wantPlaced(high, 1)
		a := &h.s.allocs[h.s.jobs[high].slots[0]]
		if h.s.jobs[high].runStart >= 0 || a.exitAt != tc.want || a.runsAt != tc.want {
			t.Errorf("kill_timeout %v: high runs from %d (runs at %d, the victim exits at %d); want not yet, at %d",
				tc.kill, h.s.jobs[high].runStart, a.runsAt, a.exitAt, tc.want)
		}
		if e := h.s.heap[0]; e.kind != evRunning || e.job != high || e.t != tc.want {
			t.Errorf("kill_timeout %v: events %+v; want high's run at %d", tc.kill, h.s.heap, tc.want)
		}
	}
}

// A job that declares a kill_timeout checkpoints on the kill signal: a stop
// costs it kill_timeout less work; one that declares none loses
// CheckpointLoss (the harness's 15m) as before.
func TestKillTimeout_DeclaredSavesWork(t *testing.T) {
	for _, tc := range []struct {
		kill time.Duration
		lost int64
	}{{0, 900}, {10 * time.Minute, 300}, {20 * time.Minute, 0}} {
		h := nomadHarness(t, 4)
		low := h.submit("low", 20, 1, 4)
		h.s.jobs[low].spec.KillTimeout = tc.kill
		h.s.now = 3600
		h.submit("high", 60, 1, 4)
		if got := h.s.jobs[low].lostWorkSec; got != tc.lost {
			t.Errorf("kill_timeout %v: lost %d s, want %d", tc.kill, got, tc.lost)
		}
	}
}

// A priority write that a real Nomad would carry out by replacing an
// allocation (placed and not running yet, on GPUs a stopped task has not
// left) is refused, as allot's adapter refuses it (nomad.ErrWouldReplace):
// nothing changes, and the policy is woken when the task exits. One placed
// on free GPUs, or written after the exit, is updated in place.
func TestJobUpdate_RefusedWhileAStoppedTaskHolds(t *testing.T) {
	for _, tc := range []struct {
		at     int64
		refuse bool
	}{{203, true}, {210, false}} { // the victim's task exits at 205
		h := nomadHarness(t, 4)
		h.s.opts.StartLatency = time.Minute
		low := h.submit("low", 20, 1, 4)
		first := h.s.jobs[low].slots[0]
		h.s.now = 10
		if !h.s.SetPriority(low, 25) || h.s.jobs[low].slots[0] != first || h.s.jobs[low].prio != 25 {
			t.Fatalf("a pending allocation on free GPUs was not updated in place")
		}
		h.s.now = 200
		high := h.submit("high", 60, 1, 4) // preempts low
		placed := h.s.jobs[high].slots[0]
		h.s.now = tc.at
		made := h.s.SetPriority(high, 100)
		h.s.schedule()
		if made == tc.refuse {
			t.Errorf("priority written at %d: made %v, want %v", tc.at, made, !tc.refuse)
		}
		if want := 60; tc.refuse && h.s.jobs[high].prio != want || !tc.refuse && h.s.jobs[high].prio != 100 {
			t.Errorf("priority written at %d: job at %d", tc.at, h.s.jobs[high].prio)
		}
		if h.s.jobs[high].slots[0] != placed || h.s.m.stops[StopJobUpdate] != 0 {
			t.Errorf("priority written at %d: allocation %d replaced by %d", tc.at, placed, h.s.jobs[high].slots[0])
		}
		if tc.refuse && (len(h.s.heap) == 0 || !slices.ContainsFunc(h.s.heap, func(e event) bool { return e.kind == evChanged && e.t == 205 })) {
			t.Errorf("refused at %d: no change event at the exit (205) to run the policy again", tc.at)
		}
		h.wantPlaced(high, 1)
	}
}
