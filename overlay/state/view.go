package state

import (
	"slices"
	"sort"

	memdb "github.com/hashicorp/go-memdb"
)

// View is a consistent, read-only view of the tables at one moment. Rows it
// returns are shared with the state and must not be modified.
type View struct{ txn *memdb.Txn }

func first[T any](v *View, table, id string) *T {
	raw, err := v.txn.First(table, "id", id)
	if err != nil || raw == nil {
		return nil
	}
	return raw.(*T)
}

func all[T any](v *View, table string) []*T {
	var out []*T
	collect(v.txn, table, &out)
	return out
}

// Budgets returns the budget set in force, or nil before the first apply.
func (v *View) Budgets() *BudgetSet { return first[BudgetSet](v, TableBudgets, CurrentBudgets) }

// Job returns a managed job, or nil.
func (v *View) Job(id string) *Job { return first[Job](v, TableJobs, id) }

// Jobs returns all managed jobs in ID order.
func (v *View) Jobs() []*Job { return all[Job](v, TableJobs) }

// Alloc returns an allocation lifecycle, or nil.
func (v *View) Alloc(id string) *Alloc { return first[Alloc](v, TableAllocs, id) }

// Allocs returns all allocation lifecycles in ID order.
func (v *View) Allocs() []*Alloc { return all[Alloc](v, TableAllocs) }

// JobAllocs returns a job's allocations in ID order.
func (v *View) JobAllocs(jobID string) []*Alloc {
	it, err := v.txn.Get(TableAllocs, "job", jobID)
	if err != nil {
		return nil
	}
	var out []*Alloc
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*Alloc))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Nodes returns node drain states in ID order.
func (v *View) Nodes() []*Node { return all[Node](v, TableNodes) }

// Decisions returns up to limit of the newest decisions, oldest first
// (all of them when limit <= 0).
func (v *View) Decisions(limit int) []*Decision {
	if limit <= 0 {
		return all[Decision](v, TableDecisions)
	}
	// Read only the newest limit rows: a page costs its own size, not the log's.
	it, err := v.txn.GetReverse(TableDecisions, "id")
	if err != nil {
		return nil
	}
	var ds []*Decision
	for raw := it.Next(); raw != nil && len(ds) < limit; raw = it.Next() {
		ds = append(ds, raw.(*Decision))
	}
	slices.Reverse(ds)
	return ds
}

// Priority returns the priority last written to a job, or nil.
func (v *View) Priority(jobID string) *Priority { return first[Priority](v, TablePriorities, jobID) }

// Priorities returns the priorities last written, by job ID.
func (v *View) Priorities() []*Priority { return all[Priority](v, TablePriorities) }

// QueueEntry returns a job's row of the last plan, or nil.
func (v *View) QueueEntry(jobID string) *QueueEntry { return first[QueueEntry](v, TableQueue, jobID) }

// Queue returns the last plan's rows: pending jobs by position first, then
// the rest by job ID.
func (v *View) Queue() []*QueueEntry {
	q := all[QueueEntry](v, TableQueue)
	sort.SliceStable(q, func(i, j int) bool {
		pi, pj := q[i].Position, q[j].Position
		if (pi == 0) != (pj == 0) {
			return pi != 0
		}
		return pi < pj
	})
	return q
}

// Server returns a registered server, or nil.
func (v *View) Server(id string) *Server { return first[Server](v, TableServers, id) }

// Servers returns registered servers by ID.
func (v *View) Servers() []*Server { return all[Server](v, TableServers) }

// DemandMarks returns how far each leaf's demand is recorded.
func (v *View) DemandMarks() []*DemandMark { return all[DemandMark](v, TableDemandMarks) }

// Node returns a node's drain state, or nil.
func (v *View) Node(id string) *Node { return first[Node](v, TableNodes, id) }
