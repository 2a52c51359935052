package nomad

import (
	"sort"
	"strings"
	"sync"
	"time"
)

// BlockedEval is a job's blocked evaluation: Nomad could not place all of it.
type BlockedEval struct {
	ID  string
	Job JobKey
	// ClassIneligible is true when Nomad marked a node class ineligible for
	// the job (for example it asks more GPUs than a node has healthy): Nomad
	// does not wake such an eval when a device recovers (docs/nomad-facts.md i).
	ClassIneligible bool
	// Reason is Nomad's placement failure, e.g. `Dimension "devices: no
	// devices match request" exhausted`, for explanations.
	Reason      string
	ModifyIndex uint64
}

// pendingEval is an evaluation of a job that Nomad has not finished:
// queued or being scheduled. While it is, the job's placement is in flight.
type pendingEval struct {
	ID          string
	Job         JobKey
	Created     time.Time
	ModifyIndex uint64
}

// State is a consistent copy of the View at one moment. Its maps are owned by
// the caller; the values' slices and maps are shared and must not be modified.
type State struct {
	Jobs    map[JobKey]Job
	Allocs  map[string]Alloc
	Nodes   map[string]Node
	Blocked map[JobKey]BlockedEval
	// Evaluating holds the jobs Nomad is evaluating (an evaluation pending,
	// not a delayed one) with the creation time of the oldest such evaluation.
	Evaluating map[JobKey]time.Time
	// Index is the Nomad raft index the view reflects.
	Index uint64
	// Synced is true once the view was built from the list endpoints at
	// least once; before that it is incomplete and must not be acted on.
	Synced bool
}

// View is the adapter's picture of Nomad, kept up to date by a Watcher.
// It is safe for concurrent use: the Watcher writes, the reconcile loop reads
// copies with State and waits on Changed. Objects are replaced whole, never
// modified in place, and an older object (lower ModifyIndex) never replaces
// a newer one, so replayed events are harmless.
type View struct {
	mu      sync.RWMutex
	jobs    map[JobKey]*Job
	allocs  map[string]*Alloc
	nodes   map[string]*Node
	blocked map[JobKey]*BlockedEval
	// pending holds the evaluations in flight by ID; done the ModifyIndex at
	// which each other evaluation was seen finished, and pendingAt the index
	// of the last list of evaluations, so that a replayed event of an
	// evaluation since finished does not bring it back.
	pending   map[string]*pendingEval
	done      map[string]uint64
	pendingAt uint64
	// registered holds the jobs whose registration (a user's or allot's
	// own) an event showed and whose evaluation no event has shown yet:
	// Nomad creates it in the same raft entry, but may send it in a frame
	// of its own after the job's (observed with Nomad 2.0.6), and a pass
	// in between must not take the job for one Nomad is done with.
	registered map[JobKey]*pendingEval
	index      uint64
	synced     bool
	changed    chan struct{}
}

// NewView returns an empty, unsynced view.
func NewView() *View {
	return &View{
		jobs:       map[JobKey]*Job{},
		allocs:     map[string]*Alloc{},
		nodes:      map[string]*Node{},
		blocked:    map[JobKey]*BlockedEval{},
		pending:    map[string]*pendingEval{},
		done:       map[string]uint64{},
		changed:    make(chan struct{}, 1),
		registered: map[JobKey]*pendingEval{},
	}
}

// Changed receives after the view changed. Notifications coalesce: one
// receive may stand for many changes, so a reader takes a fresh State after
// each. The channel is never closed.
func (v *View) Changed() <-chan struct{} { return v.changed }

func (v *View) notify() {
	select {
	case v.changed <- struct{}{}:
	default:
	}
}

// State copies the view.
func (v *View) State() State {
	v.mu.RLock()
	defer v.mu.RUnlock()
	s := State{
		Jobs:    make(map[JobKey]Job, len(v.jobs)),
		Allocs:  make(map[string]Alloc, len(v.allocs)),
		Nodes:   make(map[string]Node, len(v.nodes)),
		Blocked: make(map[JobKey]BlockedEval, len(v.blocked)),
		Index:   v.index,
		Synced:  v.synced,
	}
	s.Evaluating = make(map[JobKey]time.Time, len(v.pending)+len(v.registered))
	evaluating := func(e *pendingEval) {
		if t, ok := s.Evaluating[e.Job]; !ok || e.Created.Before(t) {
			s.Evaluating[e.Job] = e.Created
		}
	}
	for _, e := range v.pending {
		evaluating(e)
	}
	for _, e := range v.registered {
		evaluating(e)
	}
	for k, j := range v.jobs {
		s.Jobs[k] = *j
	}
	for k, a := range v.allocs {
		s.Allocs[k] = *a
	}
	for k, n := range v.nodes {
		s.Nodes[k] = *n
	}
	for k, b := range v.blocked {
		s.Blocked[k] = *b
	}
	return s
}

// Job returns one job of the view (the adapter's job cache).
func (v *View) Job(k JobKey) (Job, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	j, ok := v.jobs[k]
	if !ok {
		return Job{}, false
	}
	return *j, true
}

// Index is the raft index the view reflects.
func (v *View) Index() uint64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.index
}

// change is one update to the view, applied under its lock.
type change struct {
	putJobs      []*Job
	delJobs      []JobKey
	putAllocs    []*Alloc
	putNodes     []*Node
	delNodes     []string
	putBlocked   []*BlockedEval
	unblockEvals []evalDone
	putPending   []*pendingEval
	// registered: jobs a JobRegistered event showed, with their new
	// JobModifyIndex (as ModifyIndex) and SubmitTime (as Created).
	registered []*pendingEval
	index      uint64
}

// evalDone says an eval left the blocked state (or a newer eval replaced it).
type evalDone struct {
	Job         JobKey
	ID          string
	ModifyIndex uint64
	InFlight    bool // it is pending (change.putPending has it), not finished
}

// apply merges a change; it notifies readers only when something changed.
func (v *View) apply(c *change) {
	v.mu.Lock()
	moved := false
	for _, j := range c.putJobs {
		if old, ok := v.jobs[j.Key]; !ok || old.ModifyIndex <= j.ModifyIndex {
			v.jobs[j.Key] = j
			moved = true
		}
	}
	for _, k := range c.delJobs {
		if _, ok := v.jobs[k]; ok {
			delete(v.jobs, k)
			delete(v.blocked, k)
			for id, a := range v.allocs {
				if a.Job == k {
					delete(v.allocs, id)
				}
			}
			for id, e := range v.pending {
				if e.Job == k {
					delete(v.pending, id)
				}
			}
			delete(v.registered, k)
			moved = true
		}
	}
	for _, a := range c.putAllocs {
		if old, ok := v.allocs[a.ID]; !ok || old.ModifyIndex <= a.ModifyIndex {
			v.allocs[a.ID] = a
			moved = true
		}
	}
	for _, n := range c.putNodes {
		if old, ok := v.nodes[n.ID]; !ok || old.ModifyIndex <= n.ModifyIndex {
			v.nodes[n.ID] = n
			moved = true
		}
	}
	for _, id := range c.delNodes {
		if _, ok := v.nodes[id]; ok {
			delete(v.nodes, id)
			moved = true
		}
	}
	for _, b := range c.putBlocked {
		if old, ok := v.blocked[b.Job]; !ok || old.ModifyIndex <= b.ModifyIndex {
			v.blocked[b.Job] = b
			moved = true
		}
	}
	for _, d := range c.unblockEvals {
		if old, ok := v.blocked[d.Job]; ok && (old.ID == d.ID || old.ModifyIndex < d.ModifyIndex) {
			delete(v.blocked, d.Job)
			moved = true
		}
	}
	if v.evalsMoved(c) {
		moved = true
	}
	if c.index > v.index {
		v.index = c.index
	}
	v.mu.Unlock()
	if moved {
		v.notify()
	}
}

// evalsMoved applies the change's evaluations to the set in flight: a
// pending one joins it unless it was seen finished at that ModifyIndex or
// later (a replayed event), any other status (blocked included) leaves it.
func (v *View) evalsMoved(c *change) bool {
	moved := false
	for _, r := range c.registered {
		if old, ok := v.registered[r.Job]; (!ok || old.ModifyIndex < r.ModifyIndex) && r.ModifyIndex > v.pendingAt {
			v.registered[r.Job] = r
			moved = true
		}
	}
	// Any event of an evaluation at or after a registration shows its
	// evaluation (pending ones are then tracked by their own ID).
	seen := func(job JobKey, index uint64) {
		if r, ok := v.registered[job]; ok && index >= r.ModifyIndex {
			delete(v.registered, job)
			moved = true
		}
	}
	for _, d := range c.unblockEvals {
		seen(d.Job, d.ModifyIndex)
	}
	for _, b := range c.putBlocked {
		seen(b.Job, b.ModifyIndex)
	}
	for _, d := range c.unblockEvals {
		if d.InFlight {
			continue
		}
		if d.ModifyIndex > v.done[d.ID] {
			v.done[d.ID] = d.ModifyIndex
		}
		if _, ok := v.pending[d.ID]; ok {
			delete(v.pending, d.ID)
			moved = true
		}
	}
	for _, b := range c.putBlocked {
		if b.ModifyIndex > v.done[b.ID] {
			v.done[b.ID] = b.ModifyIndex
		}
		if _, ok := v.pending[b.ID]; ok {
			delete(v.pending, b.ID)
			moved = true
		}
	}
	for _, e := range c.putPending {
		if e.ModifyIndex <= v.done[e.ID] || e.ModifyIndex <= v.pendingAt {
			continue // finished since, or older than the last list (which did not show it pending)
		}
		if old, ok := v.pending[e.ID]; !ok || old.ModifyIndex < e.ModifyIndex {
			v.pending[e.ID] = e
			moved = moved || !ok
		}
	}
	return moved
}

// replace swaps the whole view for one rebuilt from the list endpoints.
// pending are the evaluations in flight as listed at index evalsAt.
func (v *View) replace(jobs []*Job, allocs []*Alloc, nodes []*Node, blocked []*BlockedEval, pending []*pendingEval, evalsAt, index uint64) {
	v.mu.Lock()
	v.jobs = make(map[JobKey]*Job, len(jobs))
	for _, j := range jobs {
		v.jobs[j.Key] = j
	}
	v.allocs = make(map[string]*Alloc, len(allocs))
	for _, a := range allocs {
		v.allocs[a.ID] = a
	}
	v.nodes = make(map[string]*Node, len(nodes))
	for _, n := range nodes {
		v.nodes[n.ID] = n
	}
	v.blocked = make(map[JobKey]*BlockedEval, len(blocked))
	for _, b := range blocked {
		if old, ok := v.blocked[b.Job]; !ok || old.ModifyIndex < b.ModifyIndex {
			v.blocked[b.Job] = b
		}
	}
	v.pending = make(map[string]*pendingEval, len(pending))
	for _, e := range pending {
		v.pending[e.ID] = e
	}
	v.done, v.pendingAt, v.registered = map[string]uint64{}, evalsAt, map[JobKey]*pendingEval{}
	v.index = index
	v.synced = true
	v.mu.Unlock()
	v.notify()
}

// SortedJobs returns the state's jobs sorted by key, for deterministic output.
func (s *State) SortedJobs() []Job {
	out := make([]Job, 0, len(s.Jobs))
	for _, j := range s.Jobs {
		out = append(out, j)
	}
	sort.Slice(out, func(i, k int) bool {
		if out[i].Key.Namespace != out[k].Key.Namespace {
			return out[i].Key.Namespace < out[k].Key.Namespace
		}
		return out[i].Key.ID < out[k].Key.ID
	})
	return out
}

// AllocsOf returns a job's allocations sorted by name then ID.
func (s *State) AllocsOf(k JobKey) []Alloc {
	var out []Alloc
	for _, a := range s.Allocs {
		if a.Job == k {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if c := strings.Compare(out[i].Name, out[j].Name); c != 0 {
			return c < 0
		}
		return out[i].ID < out[j].ID
	})
	return out
}
