package sim

import (
	"math"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
)

// freeRun runs jobs on one 8-GPU node under allot, budgets lab/a and lab/b.
func freeRun(t *testing.T, horizon time.Duration, jobs ...JobSpec) *Result {
	t.Helper()
	tree, err := budgets.NewTree([]budgets.Spec{{Path: "lab", Share: 1}, {Path: "lab/a", Share: 1}, {Path: "lab/b", Share: 1}})
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Warmup, opts.Horizon = 0, horizon
	r, err := Run(&Trace{Jobs: jobs}, UniformCluster(1, 8), tree, mustAllot(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func lostBy(r *Result, why StopReason) (allocs int64, gpuHours float64) {
	for _, p := range r.Preemptions {
		if p.Reason == why.String() {
			return p.Allocations, p.LostGPUHours
		}
	}
	return 0, -1
}

// Free work is levelled by the work a stop would throw away, so Nomad's own
// preemption of free work for an allocated job evicts the free job that
// started last: here the one that ran 1h (4 GPU h lost), not the one that
// ran 4h (16 GPU h). With every free job at one priority, Nomad's order
// among equals evicted the older one.
func TestSimNomadEvictsTheYoungestFreeWork(t *testing.T) {
	free := func(id string, at time.Duration) JobSpec {
		return JobSpec{ID: id, Submit: at, Class: ClassOther, Count: 1, GPUs: 4, Work: 20 * time.Hour, Priority: 50}
	}
	r := freeRun(t, 6*time.Hour, free("old", 0), free("young", 3*time.Hour),
		JobSpec{ID: "b", Submit: 4 * time.Hour, Budget: "lab/a", Class: ClassTrain, Count: 1, GPUs: 4,
			Work: 10 * time.Hour, MinRuntime: time.Hour, Priority: 50})
	n, lost := lostBy(r, StopPreempted)
	if n != 1 || lost != 4 {
		t.Errorf("Nomad preempted %d allocations losing %.2f GPU h, want 1 losing 4 (the job that ran 1h on 4 GPUs)", n, lost)
	}
}

// A resumable job resumes from its checkpoint: a stop loses at most what it
// ran since it last started, and at most CheckpointLoss of that. Here a
// resumable free job on 8 GPUs runs 3h (stop: 15m lost, 2 GPU h), resumes
// when the allocated job a ends, runs 5m and is stopped again (5m, 40 GPU
// minutes), not 15m of work it had saved before it resumed.
func TestSimResumableLosesAtMostItsRun(t *testing.T) {
	alloc := func(id string, at time.Duration) JobSpec {
		return JobSpec{ID: id, Submit: at, Budget: "lab/a", Class: ClassTrain, Count: 1, GPUs: 8,
			Work: time.Hour, MinRuntime: time.Hour, Priority: 50}
	}
	r := freeRun(t, 8*time.Hour,
		JobSpec{ID: "f", Class: ClassOther, Count: 1, GPUs: 8, Work: 20 * time.Hour, Resumable: true, Priority: 50},
		alloc("a", 3*time.Hour), alloc("c", 4*time.Hour+5*time.Minute))
	n, lost := lostBy(r, StopPreempted)
	if want := 2 + 8*5.0/60; n != 2 || math.Abs(lost-want) > 1e-9 {
		t.Errorf("Nomad preempted %d allocations losing %.3f GPU h, want 2 losing %.3f (15m, then the 5m it ran since resuming, on 8 GPUs)", n, lost, want)
	}
}
