package server

import (
	"context"
	"encoding/json"
	"sort"
	"sync"
	"time"

	"github.com/allot-sched/allot/overlay/state"
)

// InmemReconciler is a Reconciler over an in-memory cluster that tests set
// directly: they say which jobs, allocations and nodes exist and what the
// queue is, and each pass records whatever differs from the replicated
// state. It is safe for concurrent use.
type InmemReconciler struct {
	mu     sync.Mutex
	jobs   map[string]state.Job
	allocs map[string]state.Alloc
	nodes  map[string]state.Node
	queue  []state.QueueEntry
	drains []state.NodeObservation
	decs   []state.Decision
	passes int
}

var _ Reconciler = (*InmemReconciler)(nil)

// NewInmemReconciler returns an empty in-memory cluster.
func NewInmemReconciler() *InmemReconciler {
	return &InmemReconciler{jobs: map[string]state.Job{}, allocs: map[string]state.Alloc{}, nodes: map[string]state.Node{}}
}

// SetJob adds or replaces a job.
func (r *InmemReconciler) SetJob(j state.Job) { r.mu.Lock(); r.jobs[j.ID] = j; r.mu.Unlock() }

// RemoveJob forgets a job and its allocations.
func (r *InmemReconciler) RemoveJob(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.jobs, id)
	for k, a := range r.allocs {
		if a.JobID == id {
			delete(r.allocs, k)
		}
	}
}

// SetAlloc adds or replaces an allocation.
func (r *InmemReconciler) SetAlloc(a state.Alloc) { r.mu.Lock(); r.allocs[a.ID] = a; r.mu.Unlock() }

// SetNode adds or replaces a node.
func (r *InmemReconciler) SetNode(n state.Node) { r.mu.Lock(); r.nodes[n.ID] = n; r.mu.Unlock() }

// SetQueue sets the queue the next pass records.
func (r *InmemReconciler) SetQueue(q []state.QueueEntry) {
	r.mu.Lock()
	r.queue = append([]state.QueueEntry{}, q...)
	r.mu.Unlock()
}

// SetDrains sets the node observations the next pass reports.
func (r *InmemReconciler) SetDrains(obs []state.NodeObservation) {
	r.mu.Lock()
	r.drains = append([]state.NodeObservation{}, obs...)
	r.mu.Unlock()
}

// AddDecisions adds decisions the next pass records (as a reconciler
// records the stops and priority writes it made).
func (r *InmemReconciler) AddDecisions(ds ...state.Decision) {
	r.mu.Lock()
	r.decs = append(r.decs, ds...)
	r.mu.Unlock()
}

// Passes returns how many passes have run.
func (r *InmemReconciler) Passes() int { r.mu.Lock(); defer r.mu.Unlock(); return r.passes }

// Reconcile records what differs between the in-memory cluster and view.
func (r *InmemReconciler) Reconcile(ctx context.Context, view *state.View, now time.Time) (Outcome, error) {
	if err := ctx.Err(); err != nil {
		return Outcome{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.passes++
	var out Outcome
	for _, j := range sortedValues(r.jobs) {
		if old := view.Job(j.ID); old == nil || !sameRow(*old, j) {
			out.Jobs = append(out.Jobs, j)
		}
	}
	for _, j := range view.Jobs() {
		if _, ok := r.jobs[j.ID]; !ok {
			out.DeletedJobs = append(out.DeletedJobs, j.ID)
		}
	}
	for _, a := range sortedValues(r.allocs) {
		old := view.Alloc(a.ID)
		if old != nil {
			// Charging state belongs to the ledger, not to the cluster.
			a.ChargedThrough, a.ChargedGPUSeconds = old.ChargedThrough, old.ChargedGPUSeconds
		}
		if old == nil || !sameRow(*old, a) {
			out.Allocs = append(out.Allocs, a)
		}
	}
	for _, n := range sortedValues(r.nodes) {
		if old := view.Node(n.ID); old == nil || !sameRow(*old, n) {
			out.Nodes = append(out.Nodes, n)
		}
	}
	out.Drains, r.drains = r.drains, nil
	out.Decisions, r.decs = r.decs, nil
	if r.queue != nil {
		out.Queue, r.queue = r.queue, nil
		out.Decisions = append(out.Decisions, state.Decision{At: now, Kind: "plan", Reason: "queue recorded by the in-memory reconciler"})
	}
	return out, nil
}

// sameRow compares rows by their encoding, so that equal instants in
// different time zones compare equal.
func sameRow(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

func sortedValues[T any](m map[string]T) []T {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]T, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}
