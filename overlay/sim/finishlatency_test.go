package sim

import (
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
)

// finishRun runs two jobs of 4 GPUs on one node of 4 under the baseline:
// a runs 1h from 0, b (submitted at 10m) waits for a's GPUs. It returns
// when a stopped and was done, and when b was placed and started.
func finishRun(t *testing.T, latency time.Duration) (aStop, aDone, bPlace, bStart float64) {
	t.Helper()
	tree, err := budgets.NewTree([]budgets.Spec{{Path: "lab", Share: 1}})
	if err != nil {
		t.Fatal(err)
	}
	tr := &Trace{Jobs: []JobSpec{
		{ID: "a", Budget: "lab", Class: ClassTrain, Count: 1, GPUs: 4, Work: time.Hour, Resumable: true, Priority: 50},
		{ID: "b", Submit: 10 * time.Minute, Budget: "lab", Class: ClassTrain, Count: 1, GPUs: 4, Work: time.Hour, Resumable: true, Priority: 50},
	}}
	opts := DefaultOptions()
	opts.Warmup, opts.Horizon = 0, 3*time.Hour
	opts.FinishLatency = latency
	aStop, aDone, bPlace, bStart = -1, -1, -1, -1
	opts.Events = func(e *Event) {
		switch {
		case e.Job == "a" && e.Kind == EventStop:
			aStop = e.T
		case e.Job == "a" && e.Kind == EventDone:
			aDone = e.T
		case e.Job == "b" && e.Kind == EventPlace:
			bPlace = e.T
		case e.Job == "b" && e.Kind == EventStart:
			bStart = e.T
		}
	}
	r, err := Run(tr, UniformCluster(1, 4), tree, NewBaseline(DefaultBaselineConfig()), opts)
	if err != nil {
		t.Fatal(err)
	}
	if r.Finished != 2 {
		t.Fatalf("latency %v: %d jobs finished, want 2", latency, r.Finished)
	}
	return aStop, aDone, bPlace, bStart
}

// A finished task's GPUs are free to Nomad's scheduler FinishLatency after
// the finish (the client reports it done then); the job is done, and its
// allocation stopped, at the finish. Without the latency the waiting job
// is placed at the finish, as before.
func TestFinishLatency_GPUsFreeWhenNomadHears(t *testing.T) {
	for _, tc := range []struct {
		latency time.Duration
		placed  float64
	}{{0, 3600}, {30 * time.Second, 3630}} {
		aStop, aDone, bPlace, bStart := finishRun(t, tc.latency)
		if aStop != 3600 || aDone != 3600 || bPlace != tc.placed || bStart != tc.placed {
			t.Errorf("finish latency %v: a stopped at %v (done %v), b placed at %v and started at %v; want a at 3600, b at %v",
				tc.latency, aStop, aDone, bPlace, bStart, tc.placed)
		}
	}
}
