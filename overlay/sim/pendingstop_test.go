package sim

import (
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
)

// A victim Nomad preempts before its task started holds the preemptor until
// its client reports it done, PendingStopLatency after the preemption, and
// allot reads the preemptor as waiting for its victims until then. A victim
// that had started exits StopLatency plus its kill_timeout after the stop,
// as before; so does one its client would start before it hears of the
// stop (StopLatency), and an unstarted one without the option.
func TestPendingStop_PreemptorWaitsForUnstartedVictim(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pending   time.Duration
		preemptAt int64 // low is placed at 0 and runs at 60
		exit      int64
	}{
		{"unstarted victim", 5 * time.Minute, 30, 30 + 300},
		{"victim its client starts before it hears", 5 * time.Minute, 45, 45 + 20 + 5},
		{"started victim", 5 * time.Minute, 100, 100 + 20 + 5},
		{"unstarted victim, option off", 0, 30, 30 + 20 + 5},
	} {
		h := nomadHarness(t, 4)
		h.s.opts.StartLatency, h.s.opts.StopLatency = time.Minute, 20*time.Second
		h.s.opts.PendingStopLatency = tc.pending
		low := h.submit("low", 20, 1, 4)
		h.s.now = tc.preemptAt
		high := h.submit("high", 60, 1, 4)
		h.wantPlaced(high, 1)
		h.wantPlaced(low, 0)
		a := h.s.jobs[high].slots[0]
		al := &h.s.allocs[a]
		if al.exitAt != tc.exit || al.runsAt != tc.exit+60 {
			t.Errorf("%s: the victim exits at %d and high runs at %d; want %d and %d", tc.name, al.exitAt, al.runsAt, tc.exit, tc.exit+60)
		}
		if !h.s.waitsForVictims(a) {
			t.Errorf("%s: at the preemption high does not wait for its victim", tc.name)
		}
		h.s.now = tc.exit - 1
		if !h.s.waitsForVictims(a) {
			t.Errorf("%s: at %d, before the victim exits, high no longer waits", tc.name, h.s.now)
		}
		h.s.now = tc.exit
		if h.s.waitsForVictims(a) {
			t.Errorf("%s: at %d high still waits; its victim has exited", tc.name, h.s.now)
		}
	}
}

// A victim placed in the instant of its preemption waits as one placed
// before it (the model makes in one instant what Nomad's scheduler spreads
// over tens of trace seconds), and an allocation placed on free GPUs never
// waits for victims.
func TestPendingStop_SameInstantVictimAndFreeGPUs(t *testing.T) {
	h := nomadHarness(t, 4, 4)
	h.s.opts.StartLatency, h.s.opts.StopLatency = time.Minute, 20*time.Second
	h.s.opts.PendingStopLatency = 5 * time.Minute
	h.s.now = 30
	low := h.submit("low", 20, 1, 4)
	free := h.submit("free", 60, 1, 4) // the other node
	high := h.submit("high", 60, 1, 4) // preempts low, placed this instant
	h.wantPlaced(high, 1)
	h.wantPlaced(low, 0)
	if al := &h.s.allocs[h.s.jobs[high].slots[0]]; al.exitAt != 30+300 || !h.s.waitsForVictims(h.s.jobs[high].slots[0]) {
		t.Errorf("the victim placed this instant exits at %d (high waits: %v); want %d, waiting", al.exitAt,
			h.s.waitsForVictims(h.s.jobs[high].slots[0]), 30+300)
	}
	if h.s.waitsForVictims(h.s.jobs[free].slots[0]) {
		t.Errorf("an allocation placed on free GPUs waits for victims")
	}
}

// pendingRun runs allot on one node of 4 GPUs: free work placed at 0 (its
// task runs a minute later) and lab's job, submitted at 10s, which Nomad
// places at once by preempting the free work before it ran. The free work
// is reported done PendingStopLatency (8m) after the preemption. It
// returns the run's refused priority writes and when lab's job started.
func pendingRun(t *testing.T, settle time.Duration) (int64, float64) {
	t.Helper()
	tree, err := budgets.NewTree([]budgets.Spec{{Path: "lab", Share: 1}})
	if err != nil {
		t.Fatal(err)
	}
	tr := &Trace{Jobs: []JobSpec{
		{ID: "free", Class: ClassOther, Count: 1, GPUs: 4, Work: 10 * time.Hour, Resumable: true, Priority: 50},
		{ID: "lab", Submit: 10 * time.Second, Budget: "lab", Class: ClassTrain, Count: 1, GPUs: 4, Work: time.Hour,
			MinRuntime: 30 * time.Minute, Resumable: true, Priority: 50},
	}}
	pc := policyDefault()
	pc.Settle = settle
	p, err := NewAllot(pc)
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Warmup, opts.Horizon = 0, 3*time.Hour
	opts.ReactionDelay = 5 * time.Second
	opts.EvalOrder, opts.KillTimeout = true, true
	opts.StartLatency, opts.StopLatency = time.Minute, 20*time.Second
	opts.PendingStopLatency = 8 * time.Minute
	started := -1.0
	opts.Events = func(e *Event) {
		if e.Kind == EventStart && e.Job == "lab" && started < 0 {
			started = e.T
		}
	}
	r, err := Run(tr, UniformCluster(1, 4), tree, p, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := stopsOf(r, StopJobUpdate); got != 0 {
		t.Errorf("Settle %v: %d job-update stops: a write replaced an allocation", settle, got)
	}
	return r.RefusedWrites, started
}

// allot holds the priority write to lab's job while its placement waits for
// the free work it preempted, at most Settle from the placement. With a
// Settle longer than the wait the write waits and lab starts a minute
// (StartLatency) after the free work is reported, at 10s + 8m + 1m; with a
// shorter one the write is made while the free work still holds the GPUs,
// which Nomad would carry out by replacing the placement (a job update, as
// reserve's b-large-0 on Nomad): it is refused (nomad.ErrWouldReplace) and
// lab starts as with the longer Settle.
func TestPendingStop_WriteHeldForVictims(t *testing.T) {
	want := float64(10 + 8*60 + 60)
	refused, started := pendingRun(t, 10*time.Minute)
	if refused != 0 || started != want {
		t.Errorf("Settle 10m: %d writes refused, lab started at %vs; want none, at %vs", refused, started, want)
	}
	refused, started = pendingRun(t, 2*time.Minute)
	if refused == 0 || started != want {
		t.Errorf("Settle 2m: %d writes refused, lab started at %vs; want some, at %vs", refused, started, want)
	}
}
