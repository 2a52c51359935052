package reconcile

import (
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/nomad"
)

// A job whose allocations were stopped waits again from its last stop
// (Job.QueuedSince), and the run that stop ended began when the last of
// its stopped allocations started (Job.LastRun, rule 5e (c)), if all of
// them had started (a job placed in part made no progress): read from
// Nomad's stopped allocations, so a new leader reads the same.
func TestSnapshotRequeuedLastRun(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	gk, nk, fk, pk := key("default", "gang"), key("default", "new"), key("default", "fresh"), key("default", "part")
	job := func(k nomad.JobKey) nomad.Job {
		return nomad.Job{Key: k, Type: "batch", Status: "pending", Priority: 50, Groups: []nomad.Group{{Name: "g", Count: 2, GPUs: 8}}}
	}
	stopped := func(id string, k nomad.JobKey, started, finished time.Time) nomad.Alloc {
		return nomad.Alloc{ID: id, Job: k, TaskGroup: "g", NodeID: "n1", GPUs: 8, DesiredStatus: "stop", ClientStatus: "complete",
			StartedAt: started, FinishedAt: finished}
	}
	s := &nomad.State{
		Jobs: map[nomad.JobKey]nomad.Job{gk: job(gk), nk: job(nk), fk: job(fk), pk: job(pk)},
		Allocs: map[string]nomad.Alloc{
			// gang: a first run stopped at +2h, a second (its allocations
			// started at +3h and +3h10m) stopped at +8h10m.
			"g1": stopped("g1", gk, t0, t0.Add(2*time.Hour)),
			"g2": stopped("g2", gk, t0, t0.Add(2*time.Hour)),
			"g3": stopped("g3", gk, t0.Add(3*time.Hour), t0.Add(8*time.Hour+10*time.Minute)),
			"g4": stopped("g4", gk, t0.Add(3*time.Hour+10*time.Minute), t0.Add(8*time.Hour+10*time.Minute+time.Second)),
			// part: placed in part (one of its two allocations started),
			// released at +4h: no run.
			"p1": stopped("p1", pk, t0.Add(time.Hour), t0.Add(4*time.Hour)),
			// new: stopped while still pending, it never ran.
			"n1": {ID: "n1", Job: nk, TaskGroup: "g", NodeID: "n1", GPUs: 8, DesiredStatus: "stop", ClientStatus: "complete",
				FinishedAt: t0.Add(time.Hour)},
		},
	}
	want := map[string]struct {
		queued time.Time
		run    time.Duration
	}{
		"default/gang":  {t0.Add(8*time.Hour + 10*time.Minute + time.Second), 5*time.Hour + time.Second},
		"default/new":   {t0.Add(time.Hour), 0},
		"default/fresh": {},
		"default/part":  {t0.Add(4 * time.Hour), 0},
	}
	snap := BuildSnapshot(s, SnapshotInput{})
	if len(snap.Jobs) != len(want) {
		t.Fatalf("%d jobs in the snapshot, want %d", len(snap.Jobs), len(want))
	}
	for _, j := range snap.Jobs {
		w := want[j.ID]
		if !j.QueuedSince.Equal(w.queued) || j.LastRun != w.run {
			t.Errorf("%s queued since %s after a run of %s, want %s and %s", j.ID, j.QueuedSince, j.LastRun, w.queued, w.run)
		}
	}
}
