package state

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/allot-sched/allot/overlay/policy"
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
// A reconcile pass observes every node in a drain (or entering one); the
// leader works out each node's transitions from its stored DrainRecord and
// the observation (DrainChanges) and sends them in the pass's entry, where
// the FSM checks them against the stored record and stores them.
//
// The phases are policy.NodeState values: NodeNormal (in service; Phase
// names it "in-service"), NodeCordoned, NodeDraining, NodeDrained and
// NodeReturned.

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
	Phase      policy.NodeState
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
	return r.Phase == policy.NodeCordoned || r.Phase == policy.NodeDraining || r.Phase == policy.NodeDrained
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

// DrainChange is one node's drain after a pass, as the leader worked it out
// (DrainChanges) before the pass's entry: the record to store, the
// transitions made (decision-log reasons) and what they add to the
// counters. The FSM checks it against the stored record and stores it; it
// derives nothing itself.
type DrainChange struct {
	NodeID string
	// FromPhase and FromEpisode are the stored record's phase and episode
	// the change was worked out from (policy.NodeNormal and 0: none).
	FromPhase   policy.NodeState
	FromEpisode int
	Record      DrainRecord
	Transitions []string
	// Stats is what the change adds to the counters (ID empty).
	Stats DrainStats
}

// DrainChanges works out, from the drain records in v and one pass's
// observations at at, the change of every node that is in a drain or
// enters one. It is pure: the leader calls it before the pass's entry, and
// the FSM calls it for entries written before the leader did (DrainObserve).
// A node observed twice is moved twice, the second time from the first's
// record.
func DrainChanges(v *View, obs []NodeObservation, at time.Time) ([]DrainChange, error) {
	at = at.UTC()
	seen := map[string]*DrainRecord{}
	var out []DrainChange
	for i := range obs {
		o := &obs[i]
		if o.NodeID == "" {
			return nil, fmt.Errorf("observation %d has no node ID", i)
		}
		old, ok := seen[o.NodeID]
		if !ok {
			old = v.Drain(o.NodeID)
		}
		c, keep := planDrain(old, o, at)
		if !keep {
			continue
		}
		out = append(out, c)
		seen[o.NodeID] = &out[len(out)-1].Record
	}
	return out, nil
}

// planDrain moves a node's record (nil: it never drained) by one
// observation; false when there is nothing to store (a node in service
// that never drained).
func planDrain(old *DrainRecord, o *NodeObservation, at time.Time) (DrainChange, bool) {
	c := DrainChange{NodeID: o.NodeID, FromPhase: policy.NodeNormal, Stats: newDrainStats("")}
	rec := DrainRecord{NodeID: o.NodeID, Phase: policy.NodeNormal}
	if old != nil {
		rec = *old
		rec.Allocs, rec.Requeued = slices.Clone(old.Allocs), slices.Clone(old.Requeued)
		c.FromPhase, c.FromEpisode = old.Phase, old.Episode
	}
	c.Transitions = observe(&rec, o, at, &c.Stats)
	if len(c.Transitions) == 0 && old == nil {
		return DrainChange{}, false
	}
	c.Record = rec
	return c, true
}

// applyDrainObserve folds one pass's observations, as leaders before the
// one-entry pass wrote them, into the drain records, the counters and the
// decision log: it works out the changes as a leader now does, then
// stores them.
func (f *FSM) applyDrainObserve(body []byte) any {
	var req DrainObserveRequest
	if err := decode(body, &req); err != nil {
		return err
	}
	txn := f.db.Txn(true)
	defer txn.Abort()
	changes, err := DrainChanges(&View{txn: txn}, req.Nodes, req.At)
	if err != nil {
		return err
	}
	if err := f.storeDrains(txn, req.At, changes); err != nil {
		return err
	}
	txn.Commit()
	return nil
}

// storeDrains stores a pass's drain changes, after checking each against
// the stored record, adds their counts to the counters (writing the
// counters' row even when there are none, as the FSM always did for an
// observation entry) and logs their transitions.
func (f *FSM) storeDrains(txn *memdb.Txn, at time.Time, changes []DrainChange) error {
	at = at.UTC()
	stats := newDrainStats(drainStatsID)
	if raw, err := txn.First(TableDrainStats, "id", drainStatsID); err != nil {
		return err
	} else if raw != nil {
		stats = cloneStats(raw.(*DrainStats))
	}
	var decisions []Decision
	for i := range changes {
		c := &changes[i]
		raw, err := txn.First(TableDrains, "id", c.NodeID)
		if err != nil {
			return err
		}
		var stored *DrainRecord
		if raw != nil {
			stored = raw.(*DrainRecord)
		}
		if err := checkDrainChange(stored, c); err != nil {
			return fmt.Errorf("drain change %d (node %s): %w", i, QuotePrefix(c.NodeID), err)
		}
		rec := c.Record
		if stored != nil && rec.Phase != policy.NodeReturned {
			// An operator's return request that landed after the leader
			// read the record stands until the node returns.
			rec.ReturnRequested, rec.ReturnRequestedAt = stored.ReturnRequested, stored.ReturnRequestedAt
		}
		if err := txn.Insert(TableDrains, &rec); err != nil {
			return err
		}
		addStats(&stats, &c.Stats)
		for _, t := range c.Transitions {
			decisions = append(decisions, Decision{At: at, Kind: DecisionNodeTransition, NodeID: c.NodeID, Reason: t})
		}
	}
	if err := txn.Insert(TableDrainStats, &stats); err != nil {
		return err
	}
	return f.appendDecisions(txn, decisions)
}

// drainPhases are the phases a drain record may be in.
var drainPhases = []policy.NodeState{policy.NodeCordoned, policy.NodeDraining, policy.NodeDrained, policy.NodeReturned}

// checkDrainChange checks that a change was worked out from the stored
// record and is one the lifecycle can make.
func checkDrainChange(stored *DrainRecord, c *DrainChange) error {
	fromPhase, fromEpisode := policy.NodeNormal, 0
	if stored != nil {
		fromPhase, fromEpisode = stored.Phase, stored.Episode
	}
	r := &c.Record
	switch {
	case c.NodeID == "" || r.NodeID != c.NodeID:
		return fmt.Errorf("the record is of node %s", QuotePrefix(r.NodeID))
	case c.FromPhase != fromPhase || c.FromEpisode != fromEpisode:
		return fmt.Errorf("worked out from phase %s of episode %d, but the node is %s in episode %d: the next pass works it out again",
			c.FromPhase.Phase(), c.FromEpisode, fromPhase.Phase(), fromEpisode)
	case !slices.Contains(drainPhases, r.Phase):
		return fmt.Errorf("phase %s, want one of %v", r.Phase.Phase(), drainPhases)
	case len(c.Transitions) == 0 && r.Phase != fromPhase:
		return fmt.Errorf("phase %s -> %s without a transition", fromPhase.Phase(), r.Phase.Phase())
	case r.Episode != fromEpisode && r.Episode != fromEpisode+1:
		return fmt.Errorf("episode %d after episode %d", r.Episode, fromEpisode)
	case stored != nil && r.ObservedAt.Before(stored.ObservedAt):
		return fmt.Errorf("observed at %s, before the stored %s", r.ObservedAt.Format(time.RFC3339), stored.ObservedAt.Format(time.RFC3339))
	}
	return checkStatsDelta(&c.Stats, len(c.Transitions))
}

// checkStatsDelta checks that a change's counts are whole and that it
// counts one phase entered per transition.
func checkStatsDelta(s *DrainStats, transitions int) error {
	entered := int64(0)
	for _, m := range []map[string]int64{s.Started, s.Completed, s.Transitions, s.Returned} {
		for k, n := range m {
			if n < 0 {
				return fmt.Errorf("counter %q moves by %d: counters only grow", k, n)
			}
		}
	}
	for _, n := range s.Transitions {
		entered += n
	}
	if entered != int64(transitions) || s.Requeued < 0 || s.GPUSecondsLost < 0 {
		return fmt.Errorf("counts %d phase(s) entered for %d transition(s), %d requeued, %d GPU-seconds lost",
			entered, transitions, s.Requeued, s.GPUSecondsLost)
	}
	return nil
}

func newDrainStats(id string) DrainStats {
	return DrainStats{ID: id, Started: map[string]int64{}, Completed: map[string]int64{}, Transitions: map[string]int64{},
		Returned: map[string]int64{}}
}

func addStats(st, d *DrainStats) {
	for _, p := range [][2]map[string]int64{{st.Started, d.Started}, {st.Completed, d.Completed},
		{st.Transitions, d.Transitions}, {st.Returned, d.Returned}} {
		for k, n := range p[1] {
			p[0][k] += n
		}
	}
	st.Requeued += d.Requeued
	st.GPUSecondsLost += d.GPUSecondsLost
}

func cloneStats(s *DrainStats) DrainStats {
	c := *s
	c.Started, c.Completed, c.Transitions, c.Returned = maps.Clone(s.Started), maps.Clone(s.Completed), maps.Clone(s.Transitions), maps.Clone(s.Returned)
	for _, m := range []*map[string]int64{&c.Started, &c.Completed, &c.Transitions, &c.Returned} {
		if *m == nil {
			*m = map[string]int64{}
		}
	}
	return c
}

// observe moves rec by one observation and returns the transitions made,
// as decision-log reasons, counting them in st. It reads no clock: at is
// the pass's time.
func observe(rec *DrainRecord, o *NodeObservation, at time.Time, st *DrainStats) []string {
	m := &mover{rec: rec, st: st, at: at}
	if o.Name != "" {
		rec.Name = o.Name
	}
	// A Nomad drain ends in Nomad (its drain strategy is cleared) as soon as
	// the node's last allocation has left, and the node stays ineligible
	// until an operator marks it eligible: an episode a Nomad drain began
	// is still out of service then, or a pass that first sees the node
	// empty after Nomad's drain ended would never record it drained.
	outOfService := (!o.Healthy || o.NomadDrain || rec.Active() && rec.Cause == CauseNomadDrain) && !o.Eligible
	if !rec.Active() {
		if !outOfService {
			return nil
		}
		m.start(o)
	}
	moved := m.note(o)
	if m.startsLeaving(o, moved) {
		m.enter(policy.NodeDraining, leavingReason(moved, o))
	}
	if m.leaving() && len(o.Allocs) == 0 && outOfService {
		m.drained()
	}
	if rec.Active() && backInService(o) {
		m.returned(o)
	}
	return m.out
}

// startsLeaving: a cordoned node's allocations begin to leave (allot moved
// some, or someone stopped some) and some are left.
func (m *mover) startsLeaving(o *NodeObservation, moved []string) bool {
	return m.rec.Phase == policy.NodeCordoned && (len(moved) > 0 || len(o.ForeignStops) > 0) && len(o.Allocs) > 0
}

// backInService: the node is eligible, healthy and not drained by Nomad.
func backInService(o *NodeObservation) bool { return o.Eligible && o.Healthy && !o.NomadDrain }

// mover makes one observation's transitions of a record.
type mover struct {
	rec *DrainRecord
	st  *DrainStats
	at  time.Time
	out []string
}

func (m *mover) enter(phase policy.NodeState, why string) {
	m.out = append(m.out, fmt.Sprintf("%s -> %s: %s", m.rec.Phase.Phase(), phase.Phase(), why))
	m.rec.Phase, m.rec.PhaseSince = phase, m.at
	m.st.Transitions[phase.Phase()]++
}

// leaving: out of service, not yet empty.
func (m *mover) leaving() bool {
	return m.rec.Phase == policy.NodeCordoned || m.rec.Phase == policy.NodeDraining
}

// start begins a new drain episode: the node is cordoned.
func (m *mover) start(o *NodeObservation) {
	rec := m.rec
	cause, why := CauseUnhealthy, "unhealthy: "+o.Fault
	if o.Healthy {
		cause, why = CauseNomadDrain, nomadDrainReason(o.Deadline)
	}
	*rec = DrainRecord{NodeID: rec.NodeID, Name: rec.Name, Phase: rec.Phase, Cause: cause, Reason: why,
		Episode: rec.Episode + 1, StartedAt: m.at, ObservedAt: m.at, HealthyGPUs: o.HealthyGPUs}
	m.st.Started[cause]++
	m.enter(policy.NodeCordoned, why+"; ineligible at once")
}

// countIdle counts the healthy GPUs left idle since the last observation
// as lost while the node is out of service and not yet empty.
func (m *mover) countIdle() {
	if !m.leaving() {
		return
	}
	held := 0
	for _, a := range m.rec.Allocs {
		held += a.GPUs
	}
	if idle, dt := m.rec.HealthyGPUs-held, m.at.Sub(m.rec.ObservedAt); idle > 0 && dt > 0 {
		lost := int64(idle) * int64(dt/time.Second)
		m.rec.GPUSecondsLost += lost
		m.st.GPUSecondsLost += lost
	}
}

// note records what the observation says of a node in a drain, and
// returns the allocations requeued off it that were not counted yet.
func (m *mover) note(o *NodeObservation) []string {
	rec := m.rec
	if o.NomadDrain {
		rec.Deadline = o.Deadline.UTC()
	}
	m.countIdle()
	rec.ObservedAt, rec.HealthyGPUs = m.at, o.HealthyGPUs
	if len(o.ForeignStops) > 0 {
		rec.Manual = true
	}
	moved := addRequeued(rec, o.Requeued)
	m.st.Requeued += int64(len(moved))
	rec.Allocs = append([]DrainAlloc(nil), o.Allocs...)
	return moved
}

func (m *mover) drained() {
	rec := m.rec
	rec.DrainedAt = m.at
	m.enter(policy.NodeDrained, fmt.Sprintf("empty after %s, ready for repair; %d allocation(s) requeued, %.2f GPU-hours idle while draining",
		m.at.Sub(rec.StartedAt).Round(time.Second), len(rec.Requeued), float64(rec.GPUSecondsLost)/3600))
	complete(rec, m.st)
}

// returned puts the node back in service: by the policy, or by an operator
// (through allot, or by making it eligible outside allot).
func (m *mover) returned(o *NodeObservation) {
	rec := m.rec
	by := o.ReturnedBy
	if by == "" {
		by = ReturnedByOperator // made eligible outside allot (nomad node eligibility)
	}
	if by == ReturnedByOperator {
		rec.Manual = true
	}
	complete(rec, m.st)
	why := o.ReturnReason
	if why == "" {
		why = "eligible again"
	}
	rec.ReturnedAt, rec.ReturnedBy, rec.ReturnRequested = m.at, by, false
	rec.Allocs = nil
	m.st.Returned[by]++
	m.enter(policy.NodeReturned, fmt.Sprintf("returned by %s: %s", by, why))
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
