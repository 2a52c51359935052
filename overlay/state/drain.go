package state

import (
	"fmt"
	"sort"
	"strings"
	"time"

	memdb "github.com/hashicorp/go-memdb"
)

// The drain lifecycle of a GPU node (issue 8):
//
//	in service -> cordoned -> draining -> drained -> returned
//
// cordoned: a device turned unhealthy (or an operator started `nomad node
// drain`): the node takes no new work, and every allocation on it is still
// inside its protected window. draining: allocations are leaving, each as
// its window ends (unallocated ones at once). drained: the node is empty,
// ready for repair. returned: eligible again, by policy (healthy for
// drain_return_after) or by an operator. A node that recovers before it is
// empty may return straight from cordoned or draining.
//
// The leader sends one NodeObservation per node in a drain (or entering
// one) after each reconcile pass; the FSM derives the transitions from the
// stored DrainRecord and the observation, so every server computes the same
// ones, and a re-sent observation changes nothing.
const (
	PhaseInService = "in-service"
	PhaseCordoned  = "cordoned"
	PhaseDraining  = "draining"
	PhaseDrained   = "drained"
	PhaseReturned  = "returned"
)

// Causes of a drain.
const (
	CauseUnhealthy  = "unhealthy"   // a GPU reported a fault (allot-nvml)
	CauseNomadDrain = "nomad-drain" // an operator ran `nomad node drain`
)

// How a drain completed, and who returned a node.
const (
	CompletedAutomatic = "automatic" // no operator acted
	CompletedManual    = "manual"    // an operator stopped work or returned the node by hand
	ReturnedByPolicy   = "policy"
	ReturnedByOperator = "operator"
)

// DecisionNodeTransition is the decision-log kind of a lifecycle transition.
const DecisionNodeTransition = "node-transition"

// TableDrains holds one DrainRecord per node that has ever drained;
// TableDrainStats holds the one DrainStats row.
const (
	TableDrains     = "drains"
	TableDrainStats = "drain_stats"
	drainStatsID    = "drains"
)

// DrainAlloc is an allocation on a draining node.
type DrainAlloc struct {
	ID    string
	JobID string // "namespace/name"; "" for a job allot does not manage
	GPUs  int
	// LeavesAt is when allot stops it: its protected window's end, or now
	// for unallocated work, never after a Nomad drain's deadline minus the
	// drain lead. Zero: not known yet (still starting, or not managed).
	LeavesAt time.Time
}

// NodeObservation is what one reconcile pass saw of a GPU node and did to
// it, after the pass's writes were applied.
type NodeObservation struct {
	NodeID string
	Name   string
	// Healthy is false while a GPU reports a fault; Fault says which
	// ("XID 79 (GPU has fallen off the bus) at ... on GPU-...").
	Healthy bool
	Fault   string
	// NomadDrain is true while Nomad drains the node; Deadline is the
	// drain's deadline (zero: none).
	NomadDrain bool
	Deadline   time.Time
	// Eligible is the node's scheduling eligibility after the pass.
	Eligible    bool
	HealthyGPUs int
	// Allocs are the allocations still holding GPUs on the node.
	Allocs []DrainAlloc
	// Requeued are allocations allot stopped off the node in this pass
	// (migrations: Nomad places replacements elsewhere).
	Requeued []string
	// ForeignStops are allocations someone else stopped on the node since
	// the last pass (an operator, or Nomad's drain deadline).
	ForeignStops []string
	// ReturnedBy is set when this pass returned the node to service:
	// ReturnedByPolicy or ReturnedByOperator; ReturnReason says why.
	ReturnedBy   string
	ReturnReason string
}

// DrainObserveRequest records the observations of one pass at At.
type DrainObserveRequest struct {
	At    time.Time
	Nodes []NodeObservation
}

// DrainReturnRequest asks allot to return a drained node to service; the
// next reconcile pass does it if the node is healthy.
type DrainReturnRequest struct {
	NodeID string
	At     time.Time
}

// DrainRecord is a node's current (or last) drain.
type DrainRecord struct {
	NodeID     string
	Name       string
	Phase      string
	Cause      string
	Reason     string    // the fault, or the Nomad drain and its deadline
	Episode    int       // 1 for the node's first drain, then 2, ...
	StartedAt  time.Time // cordoned at
	PhaseSince time.Time
	DrainedAt  time.Time // zero until empty
	ReturnedAt time.Time
	ReturnedBy string
	Deadline   time.Time // a Nomad drain's deadline (zero: none)
	// Manual is set once an operator acted during the drain.
	Manual bool
	// Completed is set once the drain counted as completed (drained, or
	// returned before it emptied).
	Completed bool
	Allocs    []DrainAlloc // what is left, as last observed
	// HealthyGPUs is the node's healthy GPU count, as last observed.
	HealthyGPUs int
	Requeued    []string // allocations allot moved off the node, sorted
	// GPUSecondsLost: healthy GPUs left idle on the node while it was
	// cordoned or draining (out of service but not yet empty).
	GPUSecondsLost int64
	ObservedAt     time.Time
	// ReturnRequested: an operator asked for the node back (allot nodes
	// return) at ReturnRequestedAt; cleared when it returns.
	ReturnRequested   bool
	ReturnRequestedAt time.Time
}

// Active reports whether the node is out of service for this drain.
func (r *DrainRecord) Active() bool {
	return r.Phase == PhaseCordoned || r.Phase == PhaseDraining || r.Phase == PhaseDrained
}

// DrainStats are the cluster's drain counters since the state began.
type DrainStats struct {
	ID          string
	Started     map[string]int64 // by cause
	Completed   map[string]int64 // by cause + "/" + how (CompletedAutomatic, CompletedManual)
	Transitions map[string]int64 // by phase entered
	Returned    map[string]int64 // by who (ReturnedByPolicy, ReturnedByOperator)
	// Requeued counts allocations allot moved off draining nodes.
	Requeued       int64
	GPUSecondsLost int64
}

func drainsTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{Name: TableDrains, Indexes: map[string]*memdb.IndexSchema{"id": idIndex("NodeID")}}
}

func drainStatsTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{Name: TableDrainStats, Indexes: map[string]*memdb.IndexSchema{"id": idIndex("ID")}}
}

// Drain returns a node's drain record, or nil when it never drained.
func (v *View) Drain(nodeID string) *DrainRecord { return first[DrainRecord](v, TableDrains, nodeID) }

// Drains returns every drain record by node ID.
func (v *View) Drains() []*DrainRecord { return all[DrainRecord](v, TableDrains) }

// DrainStats returns the drain counters (zero before the first drain).
func (v *View) DrainStats() DrainStats {
	if s := first[DrainStats](v, TableDrainStats, drainStatsID); s != nil {
		return *s
	}
	return DrainStats{ID: drainStatsID}
}

// applyDrainReturn marks a drained node's return as requested by an
// operator. Only a node in a drain may be returned.
func (f *FSM) applyDrainReturn(body []byte) any {
	var req DrainReturnRequest
	if err := decode(body, &req); err != nil {
		return err
	}
	txn := f.db.Txn(true)
	defer txn.Abort()
	raw, err := txn.First(TableDrains, "id", req.NodeID)
	if err != nil {
		return err
	}
	if raw == nil || !raw.(*DrainRecord).Active() {
		return fmt.Errorf("%w: node %q is not cordoned, draining or drained: only a node in a drain can be returned", ErrNotDraining, req.NodeID)
	}
	r := *raw.(*DrainRecord)
	r.ReturnRequested, r.ReturnRequestedAt = true, req.At.UTC()
	if err := txn.Insert(TableDrains, &r); err != nil {
		return err
	}
	d := Decision{At: r.ReturnRequestedAt, Kind: DecisionNodeTransition, NodeID: r.NodeID,
		Reason: fmt.Sprintf("return requested by an operator while %s: the node returns at the next pass once its GPUs are healthy", r.Phase)}
	if err := f.appendDecisions(txn, []Decision{d}); err != nil {
		return err
	}
	txn.Commit()
	return nil
}

// ErrNotDraining is wrapped by the error of a return request for a node
// that is not in a drain.
var ErrNotDraining = fmt.Errorf("node not in a drain")

// applyDrainObserve folds one pass's observations into the drain records,
// the counters and the decision log.
func (f *FSM) applyDrainObserve(body []byte) any {
	var req DrainObserveRequest
	if err := decode(body, &req); err != nil {
		return err
	}
	at := req.At.UTC()
	txn := f.db.Txn(true)
	defer txn.Abort()
	stats := DrainStats{ID: drainStatsID}
	if raw, err := txn.First(TableDrainStats, "id", drainStatsID); err != nil {
		return err
	} else if raw != nil {
		stats = cloneStats(raw.(*DrainStats))
	} else {
		stats = cloneStats(&stats)
	}
	var decisions []Decision
	for i := range req.Nodes {
		o := &req.Nodes[i]
		if o.NodeID == "" {
			return fmt.Errorf("observation %d has no node ID", i)
		}
		raw, err := txn.First(TableDrains, "id", o.NodeID)
		if err != nil {
			return err
		}
		var rec DrainRecord
		if raw != nil {
			rec = *raw.(*DrainRecord)
		} else {
			rec = DrainRecord{NodeID: o.NodeID, Phase: PhaseInService}
		}
		ts := observe(&rec, o, at, &stats)
		if len(ts) == 0 && raw == nil {
			continue // a node that never drained gets no record
		}
		for _, t := range ts {
			decisions = append(decisions, Decision{At: at, Kind: DecisionNodeTransition, NodeID: o.NodeID, Reason: t})
		}
		if err := txn.Insert(TableDrains, &rec); err != nil {
			return err
		}
	}
	if err := txn.Insert(TableDrainStats, &stats); err != nil {
		return err
	}
	if err := f.appendDecisions(txn, decisions); err != nil {
		return err
	}
	txn.Commit()
	return nil
}

func cloneStats(s *DrainStats) DrainStats {
	c := *s
	cp := func(m map[string]int64) map[string]int64 {
		out := make(map[string]int64, len(m))
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	c.Started, c.Completed, c.Transitions, c.Returned = cp(s.Started), cp(s.Completed), cp(s.Transitions), cp(s.Returned)
	return c
}

// observe moves rec by one observation and returns the transitions made,
// as decision-log reasons. It reads no clock: at is the pass's time.
func observe(rec *DrainRecord, o *NodeObservation, at time.Time, st *DrainStats) []string {
	var out []string
	enter := func(phase, why string) {
		out = append(out, fmt.Sprintf("%s -> %s: %s", rec.Phase, phase, why))
		rec.Phase, rec.PhaseSince = phase, at
		st.Transitions[phase]++
	}
	if o.Name != "" {
		rec.Name = o.Name
	}
	outOfService := (!o.Healthy || o.NomadDrain) && !o.Eligible
	if !rec.Active() {
		if !outOfService {
			return nil
		}
		cause, why := CauseUnhealthy, "unhealthy: "+o.Fault
		if o.Healthy {
			cause, why = CauseNomadDrain, nomadDrainReason(o.Deadline)
		}
		*rec = DrainRecord{NodeID: rec.NodeID, Name: rec.Name, Phase: rec.Phase, Cause: cause, Reason: why,
			Episode: rec.Episode + 1, StartedAt: at, ObservedAt: at, HealthyGPUs: o.HealthyGPUs}
		st.Started[cause]++
		enter(PhaseCordoned, why+"; ineligible at once")
	}
	if o.NomadDrain {
		rec.Deadline = o.Deadline.UTC()
	}
	// Idle healthy GPUs since the last observation count as lost while
	// the node is out of service and not yet empty.
	if rec.Phase == PhaseCordoned || rec.Phase == PhaseDraining {
		held := 0
		for _, a := range rec.Allocs {
			held += a.GPUs
		}
		if idle, dt := rec.HealthyGPUs-held, at.Sub(rec.ObservedAt); idle > 0 && dt > 0 {
			lost := int64(idle) * int64(dt/time.Second)
			rec.GPUSecondsLost += lost
			st.GPUSecondsLost += lost
		}
	}
	rec.ObservedAt, rec.HealthyGPUs = at, o.HealthyGPUs
	if len(o.ForeignStops) > 0 {
		rec.Manual = true
	}
	moved := addRequeued(rec, o.Requeued)
	st.Requeued += int64(len(moved))
	rec.Allocs = append([]DrainAlloc(nil), o.Allocs...)
	if rec.Phase == PhaseCordoned && (len(moved) > 0 || len(o.ForeignStops) > 0) && len(o.Allocs) > 0 {
		enter(PhaseDraining, leavingReason(moved, o))
	}
	if (rec.Phase == PhaseCordoned || rec.Phase == PhaseDraining) && len(o.Allocs) == 0 && outOfService {
		rec.DrainedAt = at
		enter(PhaseDrained, fmt.Sprintf("empty after %s, ready for repair; %d allocation(s) requeued, %.2f GPU-hours idle while draining",
			at.Sub(rec.StartedAt).Round(time.Second), len(rec.Requeued), float64(rec.GPUSecondsLost)/3600))
		complete(rec, st)
	}
	if rec.Active() && o.Eligible && o.Healthy && !o.NomadDrain {
		by := o.ReturnedBy
		if by == "" {
			by = ReturnedByOperator // made eligible outside allot (nomad node eligibility)
		}
		if by == ReturnedByOperator {
			rec.Manual = true
		}
		complete(rec, st)
		why := o.ReturnReason
		if why == "" {
			why = "eligible again"
		}
		rec.ReturnedAt, rec.ReturnedBy, rec.ReturnRequested = at, by, false
		rec.Allocs = nil
		st.Returned[by]++
		enter(PhaseReturned, fmt.Sprintf("returned by %s: %s", by, why))
	}
	return out
}

// complete counts the drain as completed, once.
func complete(rec *DrainRecord, st *DrainStats) {
	if rec.Completed {
		return
	}
	rec.Completed = true
	how := CompletedAutomatic
	if rec.Manual {
		how = CompletedManual
	}
	st.Completed[rec.Cause+"/"+how]++
}

// addRequeued adds the allocations not yet counted and returns them.
func addRequeued(rec *DrainRecord, ids []string) []string {
	var added []string
	for _, id := range ids {
		i := sort.SearchStrings(rec.Requeued, id)
		if i < len(rec.Requeued) && rec.Requeued[i] == id {
			continue
		}
		rec.Requeued = append(rec.Requeued, "")
		copy(rec.Requeued[i+1:], rec.Requeued[i:])
		rec.Requeued[i] = id
		added = append(added, id)
	}
	return added
}

func leavingReason(moved []string, o *NodeObservation) string {
	switch {
	case len(moved) > 0:
		return fmt.Sprintf("allocations leave as their protected windows end (requeued now: %s); %d left",
			strings.Join(moved, ", "), len(o.Allocs))
	default:
		return fmt.Sprintf("allocations stopped outside allot (%s); %d left", strings.Join(o.ForeignStops, ", "), len(o.Allocs))
	}
}

func nomadDrainReason(deadline time.Time) string {
	if deadline.IsZero() {
		return "nomad node drain (no deadline)"
	}
	return "nomad node drain, deadline " + deadline.UTC().Format(time.RFC3339)
}
