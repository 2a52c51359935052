package nomad

import (
	"sort"
	"strings"
	"sync"
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

// State is a consistent copy of the View at one moment. Its maps are owned by
// the caller; the values' slices and maps are shared and must not be modified.
type State struct {
	Jobs    map[JobKey]Job
	Allocs  map[string]Alloc
	Nodes   map[string]Node
	Blocked map[JobKey]BlockedEval
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
	index   uint64
	synced  bool
	changed chan struct{}
}

// NewView returns an empty, unsynced view.
func NewView() *View {
	return &View{
		jobs:    map[JobKey]*Job{},
		allocs:  map[string]*Alloc{},
		nodes:   map[string]*Node{},
		blocked: map[JobKey]*BlockedEval{},
		changed: make(chan struct{}, 1),
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
	index        uint64
}

// evalDone says an eval left the blocked state (or a newer eval replaced it).
type evalDone struct {
	Job         JobKey
	ID          string
	ModifyIndex uint64
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
	if c.index > v.index {
		v.index = c.index
	}
	v.mu.Unlock()
	if moved {
		v.notify()
	}
}

// replace swaps the whole view for one rebuilt from the list endpoints.
func (v *View) replace(jobs []*Job, allocs []*Alloc, nodes []*Node, blocked []*BlockedEval, index uint64) {
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
