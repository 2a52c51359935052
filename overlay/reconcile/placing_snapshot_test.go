package reconcile

import (
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/nomad"
)

// The snapshot tells the policy which jobs Nomad is placing: an evaluation
// in flight (Job.EvaluatingSince) and an allocation that waits for the
// victims Nomad preempted for it (Alloc.WaitsForVictims, until they stop).
func TestSnapshotPlacementsInFlight(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	jk, fk := key("default", "j"), key("default", "free")
	job := func(k nomad.JobKey) nomad.Job {
		return nomad.Job{Key: k, Type: "batch", Status: "running", Priority: 50, Groups: []nomad.Group{{Name: "g", Count: 1, GPUs: 1}}}
	}
	s := &nomad.State{
		Jobs: map[nomad.JobKey]nomad.Job{jk: job(jk), fk: job(fk)},
		Allocs: map[string]nomad.Alloc{
			"a1": {ID: "a1", Job: jk, TaskGroup: "g", NodeID: "n1", GPUs: 1, DesiredStatus: "run", ClientStatus: "pending", CreatedAt: t0},
			"v1": {ID: "v1", Job: fk, TaskGroup: "g", NodeID: "n1", GPUs: 1, DesiredStatus: "evict", ClientStatus: "running", PreemptedBy: "a1"},
		},
		Evaluating: map[nomad.JobKey]time.Time{fk: t0.Add(time.Second)},
	}
	snap := BuildSnapshot(s, SnapshotInput{})
	byID := map[string]bool{}
	for _, a := range snap.Allocs {
		byID[a.ID] = a.WaitsForVictims
		if a.ID == "a1" && !a.PlacedAt.Equal(t0) {
			t.Errorf("a1 placed at %s, want its CreateTime %s", a.PlacedAt, t0)
		}
	}
	if !byID["a1"] || byID["v1"] {
		t.Errorf("waits for victims: %v; want a1 only (v1 still runs, preempted by a1)", byID)
	}
	for _, j := range snap.Jobs {
		want := time.Time{}
		if j.ID == "default/free" {
			want = t0.Add(time.Second)
		}
		if !j.EvaluatingSince.Equal(want) {
			t.Errorf("%s evaluating since %s, want %s", j.ID, j.EvaluatingSince, want)
		}
	}
	v1 := s.Allocs["v1"]
	v1.ClientStatus = "complete"
	s.Allocs["v1"] = v1
	for _, a := range BuildSnapshot(s, SnapshotInput{}).Allocs {
		if a.ID == "a1" && a.WaitsForVictims {
			t.Error("a1 still waits for victims after v1 stopped")
		}
	}
}
