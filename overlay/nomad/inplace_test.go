package nomad

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// planNomad is a fake Nomad whose planner answers a priority write of job
// "b" with the update it would make: destructive or in place.
type planNomad struct {
	mu          sync.Mutex
	destructive int
	place       int
	allocs      []map[string]any
	log         []string
}

func (f *planNomad) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	reply := func(v any) { _ = json.NewEncoder(w).Encode(v) }
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/job/b":
		reply(map[string]any{"ID": "b", "Namespace": "default", "Priority": 89, "JobModifyIndex": 7, "Version": 1})
	case strings.HasSuffix(r.URL.Path, "/submission"):
		http.Error(w, "job source not found", http.StatusNotFound)
	case r.URL.Path == "/v1/job/b/allocations":
		reply(f.allocs)
	case r.URL.Path == "/v1/job/b/plan":
		f.log = append(f.log, "plan")
		u := map[string]any{"InPlaceUpdate": 1}
		switch {
		case f.destructive > 0:
			u = map[string]any{"DestructiveUpdate": f.destructive, "Preemptions": 4}
		case f.place > 0:
			u = map[string]any{"Place": f.place, "Preemptions": 5}
		}
		reply(map[string]any{"Annotations": map[string]any{"DesiredTGUpdates": map[string]any{"g": u}}})
	case r.URL.Path == "/v1/jobs" && r.Method != http.MethodGet:
		f.log = append(f.log, "register")
		reply(map[string]any{"EvalID": "ev-1", "JobModifyIndex": 8})
	default:
		http.NotFound(w, r)
	}
}

// A priority write that Nomad's planner says would replace the job's
// allocation (it was placed on GPUs of a stopped task that has not exited)
// is not made: ErrWouldReplace, and nothing registered. The same write when
// the planner updates in place, or for a job with nothing placed (no plan
// asked), is made.
func TestSetPriorityRefusesReplacement(t *testing.T) {
	placed := []map[string]any{{"ID": "a1", "JobID": "b", "DesiredStatus": "run", "ClientStatus": "pending"}}
	for _, tc := range []struct {
		name        string
		allocs      []map[string]any
		destructive int
		want        error
		log         string
	}{
		{"destructive", placed, 1, ErrWouldReplace, "plan"},
		{"in place", placed, 0, nil, "plan register"},
		{"nothing placed", []map[string]any{{"ID": "a0", "JobID": "b", "DesiredStatus": "stop", "ClientStatus": "complete"}}, 1, nil, "register"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &planNomad{destructive: tc.destructive, allocs: tc.allocs}
			a := fakeApplier(t, fake, ApplyConfig{})
			_, err := a.SetPriority(context.Background(), JobKey{Namespace: "default", ID: "b"}, 100, 7)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("SetPriority: %v, want %v", err, tc.want)
			}
			if got := strings.Join(fake.log, " "); got != tc.log {
				t.Errorf("calls %q, want %q", got, tc.log)
			}
			if tc.want != nil && !strings.Contains(err.Error(), `group "g": 1 allocation(s) would be replaced`) {
				t.Errorf("error %q does not say what would be replaced", err)
			}
		})
	}
	// Through Apply: refused, the job's later ops are skipped; a write
	// followed in the batch by a stop of the job is not checked (the stop
	// ends the allocation a destructive update would replace: a victim
	// lowered, a job drained off a node whose GPUs failed).
	fake := &planNomad{destructive: 1, allocs: placed}
	a := fakeApplier(t, fake, ApplyConfig{})
	out := a.Apply(context.Background(), []Op{
		{Kind: OpSetPriority, Job: JobKey{Namespace: "default", ID: "b"}, Priority: 100, ModifyIndex: 7, Placed: true},
		{Kind: OpEvaluate, Job: JobKey{Namespace: "default", ID: "b"}},
	})
	if !errors.Is(out[0].Err, ErrWouldReplace) || !errors.Is(out[1].Err, ErrSkipped) {
		t.Fatalf("outcomes %v / %v, want ErrWouldReplace then ErrSkipped", out[0].Err, out[1].Err)
	}
	fake.log = nil
	out = a.Apply(context.Background(), []Op{
		{Kind: OpSetPriority, Job: JobKey{Namespace: "default", ID: "b"}, Priority: 79, ModifyIndex: 7, Placed: true},
		{Kind: OpStop, Job: JobKey{Namespace: "default", ID: "b"}, Allocs: []string{"a1"}},
	})
	if out[0].Err != nil || strings.Contains(strings.Join(fake.log, " "), "plan") {
		t.Fatalf("write before a stop of the job: %v, calls %q; want it made unchecked", out[0].Err, fake.log)
	}
}

// A write the decision made for a job it saw placed (Op.Placed: lifting it
// out of reach) is not made when the job's allocation is gone since (it was
// preempted): Nomad would place it again at the new priority, preempting
// what it may. Without Placed, the same write (a pending job's) is made.
func TestSetPriorityPlacedRefusesPlacement(t *testing.T) {
	gone := []map[string]any{{"ID": "a1", "JobID": "b", "DesiredStatus": "evict", "ClientStatus": "complete"}}
	for _, placed := range []bool{true, false} {
		fake := &planNomad{place: 1, allocs: gone}
		a := fakeApplier(t, fake, ApplyConfig{})
		out := a.Apply(context.Background(), []Op{{Kind: OpSetPriority, Job: JobKey{Namespace: "default", ID: "b"}, Priority: 100, ModifyIndex: 7, Placed: placed}})
		log := strings.Join(fake.log, " ")
		switch {
		case placed && (!errors.Is(out[0].Err, ErrWouldReplace) || log != "plan" || !strings.Contains(out[0].Err.Error(), "1 allocation(s) would be placed")):
			t.Errorf("placed: %v, calls %q; want ErrWouldReplace saying what would be placed, after a plan only", out[0].Err, log)
		case !placed && (out[0].Err != nil || log != "register"):
			t.Errorf("not placed: %v, calls %q; want the write made without a plan", out[0].Err, log)
		}
	}
}

// Apply returns only once the evaluation of a write that makes Nomad place
// the job (not Op.Placed) has left pending: the next decision's in-place
// check must not plan against allocations that evaluation is about to
// preempt.
func TestApplyWaitsForPlacingEvals(t *testing.T) {
	fake := &evalNomad{evalReads: 2}
	a := fakeApplier(t, fake, ApplyConfig{})
	out := a.Apply(context.Background(), []Op{{Kind: OpSetPriority, Job: JobKey{Namespace: "default", ID: "victim"}, Priority: 89, ModifyIndex: 7}})
	if out[0].Err != nil {
		t.Fatal(out[0].Err)
	}
	if got, want := strings.Join(fake.log, ", "), "register, eval pending, eval pending, eval complete"; got != want {
		t.Fatalf("Nomad saw %q, want %q", got, want)
	}
	// A write of a placed job does not wait.
	fake.log, fake.evalReads = nil, 2
	a.Apply(context.Background(), []Op{{Kind: OpSetPriority, Job: JobKey{Namespace: "default", ID: "victim"}, Priority: 100, ModifyIndex: 7, Placed: true}})
	if got, want := strings.Join(fake.log, ", "), "register"; got != want {
		t.Fatalf("Nomad saw %q, want %q", got, want)
	}
}
