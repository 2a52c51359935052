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
