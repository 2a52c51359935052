package sim

import "testing"

// With Options.ExitHolds a stopped task's GPUs stay held, for every job but
// the victim's own replacement (placed in the stop's plan), until the task
// exits: the job the stop was for cannot preempt the replacement before
// then, and blocks. When the task exits the blocked evals are retried by
// priority, then age, and the first that fits takes the GPUs: here an older
// job at the same priority, not the one the stop was for (drain, run 24 of
// the fidelity harness: j-4 stopped for j-9, whose evaluate failed with
// every node's devices exhausted; j-7, blocked before it, preempted j-4's
// replacement when j-4's task exited). Without the option the job the stop
// was for preempts the replacement at once.
func TestExitHolds_BlockedEvalsTakeTheGPUsWhenTheTaskExits(t *testing.T) {
	for _, holds := range []bool{true, false} {
		h := nomadHarness(t, 4)
		h.s.opts.ExitHolds = holds
		victim := h.submit("victim", 90, 1, 4)
		older := h.submit("older", 80, 1, 4)
		h.s.now = 300
		waiting := h.submit("waiting", 80, 1, 4)
		h.wantPlaced(older, 0)
		h.wantPlaced(waiting, 0)
		h.s.now = 600
		h.s.SetPriority(victim, 40)
		h.s.StopAllocsFor([]int32{h.s.jobs[victim].slots[0]}, StopTimeSlice, waiting)
		h.wantPlaced(victim, 1) // the replacement, on the GPUs its stop freed
		replacement := h.s.jobs[victim].slots[0]
		h.s.Evaluate(waiting)
		h.s.schedule()
		if !holds {
			h.wantPlaced(waiting, 1)
			h.wantPlaced(older, 0)
			continue
		}
		h.wantPlaced(waiting, 0)
		h.wantPlaced(older, 0)
		exit := int64(600 + 5) // Nomad's default kill_timeout, no stop latency
		if a := &h.s.allocs[replacement]; a.exitAt != exit || !h.s.exitHeld(replacement) {
			t.Fatalf("the replacement sits on GPUs held until %d (held now: %v); want %d, held", a.exitAt, h.s.exitHeld(replacement), exit)
		}
		found := false
		for _, e := range h.s.heap {
			found = found || e.kind == evExited && e.t == exit
		}
		if !found {
			t.Fatalf("events %+v: want the blocked evals retried at the victim's exit, %d", h.s.heap, exit)
		}
		h.s.now = exit
		h.s.wakeAll = true // the engine's evExited
		h.s.schedule()
		h.wantPlaced(older, 1)
		h.wantPlaced(waiting, 0)
		if r := &h.s.allocs[replacement]; r.endReason != StopPreempted || r.preemptedBy != older {
			t.Fatalf("replacement ended %s by %d; want preempted by the older blocked job (%d)", r.endReason, r.preemptedBy, older)
		}
	}
}

// The servers hear of a stopped task's exit as of a finished task's end,
// Options.FinishLatency after it (its client's report): the replacement on
// its GPUs starts at the exit, but they stay held in the scheduler's view,
// and the blocked evals are retried, only once the report is in. Fidelity
// run 42, reserve: a-small-4's replacement started at 20.30m, and b-dbg-0,
// which the stop was for, preempted it at 20.41m, 11 trace seconds after
// the victim's exit; the model, retrying at the exit, preempted it before
// its start and held b-dbg-0 for the pending-stop latency (started 22.40m
// against Nomad's 20.66m).
func TestExitHolds_HeardAFinishLatencyAfterTheExit(t *testing.T) {
	h := nomadHarness(t, 4)
	h.s.opts.ExitHolds = true
	h.s.opts.FinishLatency = 20e9
	victim := h.submit("victim", 90, 1, 4)
	h.s.now = 300
	waiting := h.submit("waiting", 80, 1, 4)
	h.wantPlaced(waiting, 0)
	h.s.now = 600
	h.s.SetPriority(victim, 40)
	h.s.StopAllocsFor([]int32{h.s.jobs[victim].slots[0]}, StopTimeSlice, waiting)
	replacement := h.s.jobs[victim].slots[0]
	exit, heard := int64(600+5), int64(600+5+20)
	if a := &h.s.allocs[replacement]; a.exitAt != exit || a.heardAt != heard || a.runsAt != exit {
		t.Fatalf("replacement exitAt %d heardAt %d runsAt %d; want %d, %d, %d", a.exitAt, a.heardAt, a.runsAt, exit, heard, exit)
	}
	found := false
	for _, e := range h.s.heap {
		found = found || e.kind == evExited && e.t == heard
		if e.kind == evExited && e.t == exit {
			t.Fatalf("blocked evals retried at the exit (%d): want them retried when it is heard, %d", exit, heard)
		}
	}
	if !found {
		t.Fatalf("events %+v: want the blocked evals retried at %d", h.s.heap, heard)
	}
	h.s.now = exit
	if !h.s.exitHeld(replacement) {
		t.Fatal("at the exit: the replacement's GPUs no longer held; want held until the report")
	}
	h.s.now = heard
	if h.s.exitHeld(replacement) {
		t.Fatal("once heard: still held")
	}
	h.s.wakeAll = true
	h.s.schedule()
	h.wantPlaced(waiting, 1)
}
