package sim

import (
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
)

// noticeRun runs one 8-GPU node: a resumable training job of lab/a runs
// past its 1h window, then lab/b (never served) submits a job time slicing
// stops the first one for. With notice > 0 the first job declares it.
func noticeRun(t *testing.T, notice time.Duration) *Result {
	t.Helper()
	tree, err := budgets.NewTree([]budgets.Spec{{Path: "lab", Share: 1}, {Path: "lab/a", Share: 1}, {Path: "lab/b", Share: 1}})
	if err != nil {
		t.Fatal(err)
	}
	a := JobSpec{ID: "a", Budget: "lab/a", Class: ClassTrain, Count: 1, GPUs: 8, Work: 10 * time.Hour,
		MinRuntime: time.Hour, Resumable: true, Priority: 50}
	if notice > 0 {
		a.Signal, a.Notice = "SIGUSR1", notice
	}
	tr := &Trace{Jobs: []JobSpec{a,
		{ID: "b", Submit: 3 * time.Hour, Budget: "lab/b", Class: ClassTrain, Count: 1, GPUs: 8, Work: time.Hour,
			MinRuntime: time.Hour, Priority: 50}}}
	p, err := NewAllot(policyDefault())
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Warmup, opts.Horizon = 0, 12*time.Hour
	r, err := Run(tr, UniformCluster(1, 8), tree, p, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func sliceLost(r *Result) float64 {
	for _, p := range r.Preemptions {
		if p.Reason == StopTimeSlice.String() {
			return p.LostGPUHours
		}
	}
	return -1
}

// A job with a notice loses nothing at a time-slicing stop, and the job the
// stop makes room for waits the notice; without one it loses its
// checkpoint loss (15m on 8 GPUs) and nobody waits.
func TestSimNoticeSavesWork(t *testing.T) {
	without, with := noticeRun(t, 0), noticeRun(t, 5*time.Minute)
	if got := sliceLost(without); got != 2 {
		t.Errorf("without a notice the stop lost %.2f GPU h, want 2 (15m on 8 GPUs)", got)
	}
	if got := sliceLost(with); got != 0 {
		t.Errorf("with a notice the stop lost %.2f GPU h, want 0", got)
	}
	n := with.Notices
	if n.Signalled != 1 || n.Saved != 1 || n.WaitP50 != 300 || n.WaitHours != 5.0/60 {
		t.Errorf("notices %+v, want 1 signalled, 1 stop saved, a 5m wait", n)
	}
	if without.Notices.Signalled != 0 || without.Notices.Saved != 0 {
		t.Errorf("without a notice: %+v, want none", without.Notices)
	}
}

// A notice shorter than the job declares (the policy's cap) saves nothing:
// the job is stopped before its checkpoint is done.
func TestSimNoticeCappedSavesNothing(t *testing.T) {
	r := noticeRun(t, 20*time.Minute) // the default cap is 10m
	if got := sliceLost(r); got != 2 {
		t.Errorf("a notice capped below what the job needs lost %.2f GPU h, want 2", got)
	}
	if r.Notices.Saved != 0 || r.Notices.WaitP50 != 600 {
		t.Errorf("notices %+v, want none saved and a 10m wait (the cap)", r.Notices)
	}
}

// A restorable session (an interactive job with a notice) stopped for time
// slicing saves its state, is requeued ahead of its own budget's other
// pending work (here a job of a higher meta priority that waited while it
// was away), and finds what it saved: over its runs it works exactly its
// 4h, nothing redone, and no stop loses its state.
func TestSimSessionRequeuedAheadAndRestored(t *testing.T) {
	tree, err := budgets.NewTree([]budgets.Spec{{Path: "lab", Share: 1}, {Path: "lab/a", Share: 1}, {Path: "lab/b", Share: 1}})
	if err != nil {
		t.Fatal(err)
	}
	tr := &Trace{Jobs: []JobSpec{
		{ID: "s", Budget: "lab/a", Class: ClassInteractive, Count: 1, GPUs: 8, Work: 4 * time.Hour, MinRuntime: time.Hour,
			Priority: 50, Signal: "SIGUSR1", Notice: 2 * time.Minute},
		{ID: "b", Submit: 2 * time.Hour, Budget: "lab/b", Class: ClassTrain, Count: 1, GPUs: 8, Work: time.Hour,
			MinRuntime: time.Hour, Priority: 50},
		{ID: "a2", Submit: 2*time.Hour + 10*time.Minute, Budget: "lab/a", Class: ClassTrain, Count: 1, GPUs: 8, Work: time.Hour,
			MinRuntime: time.Hour, Resumable: true, Priority: 90},
	}}
	p, err := NewAllot(policyDefault())
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Warmup, opts.Horizon = 0, 12*time.Hour
	starts := map[string][]float64{}
	var ran, since float64
	done := false
	opts.Events = func(e *Event) {
		switch {
		case e.Kind == EventStart:
			starts[e.Job] = append(starts[e.Job], e.T)
			if e.Job == "s" {
				since = e.T
			}
		case e.Kind == EventStop && e.Job == "s":
			ran += e.T - since
			if len(starts["s"]) == 1 && (e.Reason != StopTimeSlice.String() || e.By != "b") {
				t.Errorf("s stopped at %.0f (%s, by %q), want a time-slice stop for b", e.T, e.Reason, e.By)
			}
		case e.Kind == EventDone && e.Job == "s":
			done = true
		}
	}
	r, err := Run(tr, UniformCluster(1, 8), tree, p, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("starts %v", starts)
	if len(starts["s"]) < 2 || len(starts["b"]) < 1 || len(starts["a2"]) < 1 || !done {
		t.Fatalf("starts %v, s done %v: want s started twice or more and done, b and a2 started", starts, done)
	}
	if s2, a2 := starts["s"][1], starts["a2"][0]; s2 > a2 {
		t.Errorf("the requeued session started again at %.0f, after a2 (its budget's, priority 90) at %.0f", s2, a2)
	}
	if ran != 4*3600 {
		t.Errorf("s ran %.0fs over its runs, want its 4h of work (14400s): it did not find what it saved", ran)
	}
	if n := r.Notices; n.Sessions < 1 || n.SessionsLost != 0 || n.Saved < 1 {
		t.Errorf("notices %+v, want the session stopped, saved, and no state lost", n)
	}
}
