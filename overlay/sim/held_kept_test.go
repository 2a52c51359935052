package sim

import (
	"testing"
	"time"
)

// No allocated job that has started is preempted by Nomad inside its
// protected window later than one reaction and one Settle after its start
// (60 s with the defaults). A victim held below the job it made room for
// sits a preemption gap below it so that the job's evaluation makes Nomad
// preempt its replacement if that took the job's GPUs back; the hold once
// outlived that evaluation, and a replacement started elsewhere stayed at
// a pending level, where Nomad preempted it for any pending job a gap above
// (on this 3-day, 64-GPU run of the example's generator, one debug job 120 s
// into its new window; on the 30-day example nine, a session among them).
// Before that it may: the first reaction has not written it yet (a job
// enters at Nomad's default 50) or the evaluation is under way.
func TestSimNoNomadPreemptionInsideANewWindow(t *testing.T) {
	g := DefaultGenConfig()
	g.Seed, g.Days, g.Nodes, g.GPUs, g.GPUsPerNode = 3, 3, 8, 64, 8
	g.DebugPerDay, g.InteractivePerDay, g.Failures = 128, 4, 0
	tr, err := Generate(exampleTree(t), g)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewAllot(policyDefault())
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Warmup = 0
	window := map[string]time.Duration{}
	for _, j := range tr.Jobs {
		if j.Budget != "" && j.MinRuntime > 0 {
			window[j.ID] = min(j.MinRuntime, policyDefault().RuntimeCap)
		}
	}
	grace := (opts.ReactionDelay + policyDefault().Settle).Seconds()
	started := map[string]float64{}
	var slices, inside int
	opts.Events = func(e *Event) {
		switch e.Kind {
		case EventStart:
			started[e.Job] = e.T
		case EventStop:
			at, ok := started[e.Job]
			delete(started, e.Job)
			if e.Reason == StopTimeSlice.String() {
				slices++
			}
			w, allocated := window[e.Job]
			if !ok || !allocated || e.Reason != StopPreempted.String() || time.Duration((e.T-at)*float64(time.Second)) >= w {
				return
			}
			inside++
			if e.T-at > grace {
				t.Errorf("t=%.0f: %s preempted by Nomad (for %s) %.0fs into its %v window", e.T, e.Job, e.By, e.T-at, w)
			}
		}
	}
	if _, err := Run(tr, UniformCluster(g.Nodes, g.GPUsPerNode), exampleTree(t), p, opts); err != nil {
		t.Fatal(err)
	}
	if slices == 0 {
		t.Fatalf("no time-slice stops: the run tests nothing")
	}
	t.Logf("%d time-slice stops; %d Nomad preemptions inside a window (allowed within %.0fs of the start)", slices, inside, grace)
}
