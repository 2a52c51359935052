package sim

import (
	"math"
	"slices"
	"testing"
	"time"
)

// With a start latency a placed job holds its GPUs at once but runs (and
// waits, and finishes) that much later. The held time before it runs is
// stalled; work a stop throws away was progress while it ran, and is not.
func TestStartLatency(t *testing.T) {
	tr := &Trace{Jobs: []JobSpec{
		{ID: "free", Count: 1, GPUs: 8, Work: time.Hour},
		{ID: "paid", Submit: 2 * time.Minute, Budget: "ai2/vision/video", Count: 1, GPUs: 8, Work: 30 * time.Minute, MinRuntime: 10 * time.Minute},
	}}
	var evs []Event
	opts := DefaultOptions()
	opts.StartLatency = time.Minute
	opts.ReactionDelay = 0
	opts.Horizon = 3 * time.Hour
	opts.Events = func(e *Event) { evs = append(evs, *e) }
	r, err := Run(tr, UniformCluster(1, 8), exampleTree(t), mustAllot(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	starts := map[string][]float64{}
	done := map[string]float64{}
	for _, e := range evs {
		switch e.Kind {
		case EventStart:
			starts[e.Job] = append(starts[e.Job], e.T)
		case EventDone:
			done[e.Job] = e.T
		}
	}
	// free is placed at 0, runs at 60 and is preempted by paid at 120 (free
	// is not resumable: its 60 s are lost); paid runs at 180 and is done at
	// 1980; free is placed again then and runs at 2040.
	if got := starts["paid"]; len(got) != 1 || got[0] != 180 || done["paid"] != 180+1800 {
		t.Errorf("paid starts %v, done at %v; want [180], 1980", got, done["paid"])
	}
	if got := starts["free"]; len(got) != 2 || got[0] != 60 || got[1] != 2040 {
		t.Errorf("free starts %v; want [60 2040]", got)
	}
	// Stalled: three latencies of 60 s on 8 GPUs; lost: free's 60 s on 8.
	if want := 3 * 60 * 8 / 3600.0; math.Abs(r.StalledGPUHours-want) > 1e-9 || math.Abs(r.LostGPUHours-480/3600.0) > 1e-9 {
		t.Errorf("stalled %.4f GPU h, lost %.4f; want %.4f and %.4f", r.StalledGPUHours, r.LostGPUHours, want, 480/3600.0)
	}
	// allot writes each job's priority while its allocation is placed and
	// not running yet (free to the unallocated band at 0, paid to the
	// protected band at 120): Nomad would replace the allocation, so the
	// write is refused (as the adapter refuses it) and made once it runs.
	// Placed again at 1980, free keeps its priority.
	for _, e := range evs {
		if e.Kind == EventStop && e.Reason == StopJobUpdate.String() {
			t.Errorf("job-update stop of %s at %v: a write replaced an allocation", e.Job, e.T)
		}
	}
	if r.RefusedWrites != 2 {
		t.Errorf("%d writes refused, want 2 (free at 0, paid at 120)", r.RefusedWrites)
	}
	o := r.Occupancy
	if math.Abs(o.Allocated+o.Unallocated+o.Stalled+o.Idle-1) > 1e-9 || math.Abs(o.Stalled*8*3*3600-3*60*8) > 1e-6 {
		t.Errorf("occupancy %+v: the parts must add up to 1, stalled 1440 GPU-s of 3h × 8", o)
	}
}

// With a start spacing, tasks placed together queue for the clients: each
// begins its start latency that long after the one before it began.
func TestStartSpacing(t *testing.T) {
	h := newHarness(t, 8)
	h.s.opts.StartLatency = time.Minute
	h.s.opts.StartSpacing = 20 * time.Second
	var at []int64
	for _, id := range []string{"a", "b", "c"} {
		j := h.submit(id, 50, 1, 2)
		at = append(at, h.s.allocs[h.s.jobs[j].slots[0]].runsAt)
	}
	h.s.now = 500 // long after: no queue
	j := h.submit("d", 50, 1, 2)
	at = append(at, h.s.allocs[h.s.jobs[j].slots[0]].runsAt)
	if want := []int64{60, 80, 100, 560}; !slices.Equal(at, want) {
		t.Errorf("tasks run at %v, want %v", at, want)
	}
}

// A task placed on GPUs a stopped task still holds starts after that
// task's exit, neither queueing behind the starts before it nor holding
// the queue for the starts after it (drain, run 10 replayed with
// -pending-stop-latency: a preemptor whose victim was reported minutes
// later kept every later start behind it).
func TestStartSpacing_ExitWaitHoldsNoQueue(t *testing.T) {
	h := nomadHarness(t, 4, 2)
	h.s.opts.StartLatency = time.Minute
	h.s.opts.StartSpacing = 20 * time.Second
	h.s.opts.StopLatency = 10 * time.Minute
	h.submit("low", 20, 1, 4)
	h.s.now = 600
	high := h.submit("high", 60, 1, 4) // preempts low: its task exits at 600 + 605
	free := h.submit("free", 50, 1, 1) // the other node's free GPUs
	again := h.submit("again", 50, 1, 1)
	got := []int64{h.s.allocs[h.s.jobs[high].slots[0]].runsAt, h.s.allocs[h.s.jobs[free].slots[0]].runsAt,
		h.s.allocs[h.s.jobs[again].slots[0]].runsAt}
	if want := []int64{600 + 605 + 60, 660, 680}; !slices.Equal(got, want) {
		t.Errorf("high, free and again run at %v, want %v", got, want)
	}
}
