package state

import (
	"math"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/policy"
)

// Rows are never modified after they are inserted into memdb: applyX copies
// a row, changes the copy and inserts the copy.

// BudgetSet is the budget tree in force, with where it came from. There is
// one row, with ID CurrentBudgets.
type BudgetSet struct {
	ID        string
	Revision  string            // git revision of the budget files
	Digests   map[string]string // file name -> content digest
	Specs     []budgets.Spec    // sorted by Path
	AppliedAt time.Time

	tree *budgets.Tree // built from Specs when the row is applied or restored
}

// Tree returns the budget tree built from Specs.
func (b *BudgetSet) Tree() *budgets.Tree { return b.tree }

// CurrentBudgets is the ID of the one BudgetSet row.
const CurrentBudgets = "current"

// Contract is a job's scheduling contract as read from its meta.
type Contract struct {
	Budget     string        // leaf named by the job ("" when none)
	MinRuntime time.Duration // 0: unallocated
	Resumable  bool
	Priority   int    // within-budget priority
	Reason     string // why the job runs unallocated, when it does
}

// Job is a job allot manages.
type Job struct {
	ID          string // "namespace/name"
	Namespace   string
	Name        string
	GPUs        int // GPUs the whole job asks for
	Contract    Contract
	SubmittedAt time.Time
	UpdatedAt   time.Time
}

// Alloc is the lifecycle of one allocation of a managed job.
type Alloc struct {
	ID             string
	JobID          string
	NodeID         string
	Leaf           string // budget charged ("" for unallocated work)
	GPUs           int
	StartedAt      time.Time
	ProtectedUntil time.Time
	StoppedAt      time.Time // zero while running
	Preemptions    int
	// ChargedThrough is the end of the last interval charged to the ledger;
	// charges before it are ignored, so a re-sent charge never counts twice.
	ChargedThrough    time.Time
	ChargedGPUSeconds int64
}

// Running reports whether the allocation has not stopped.
func (a *Alloc) Running() bool { return a.StoppedAt.IsZero() }

// Node is a GPU node's drain state.
type Node struct {
	ID          string
	Name        string
	Drain       policy.NodeState // NodeNormal, NodeReserved, NodeDraining or NodeDrained
	Reason      string
	Since       time.Time
	ReservedFor string // job ID while Drain == policy.NodeReserved
	// ReservedUntil is when the reservation expires if the job has not
	// started by then (zero when unknown or not reserved).
	ReservedUntil time.Time
	TotalGPUs     int
	HealthyGPUs   int
	// GPUs are the node's GPU instances, by model then ID, at most
	// MaxNodeGPUs of them (unhealthy ones kept first when a node has more;
	// TotalGPUs still counts all). Empty in rows written before the field.
	GPUs []NodeGPU `json:",omitempty"`
}

// NodeGPU is one GPU instance of a node as Nomad reports it.
type NodeGPU struct {
	ID      string // the device instance ID ("GPU-<uuid>"), at most MaxIDBytes
	Model   string // the device group's name ("H100"), at most MaxIDBytes
	Healthy bool
	// Reason is Nomad's health description of an unhealthy instance, at
	// most MaxGPUReasonBytes ("" when healthy or when Nomad gives none).
	Reason string `json:",omitempty"`
}

// Decision is one entry of the bounded decision log.
type Decision struct {
	Seq     uint64 // assigned by the FSM, increasing
	At      time.Time
	Kind    string // "priority", "preempt", "drain", "reserve", "budgets", ...
	JobID   string
	AllocID string
	NodeID  string
	Reason  string
	// Standings are, for a stop, the fair-share standings when it was
	// recorded of the stopped job and of the job it made room for: the
	// figures that justified it (nil for other decisions, and in entries
	// written before the field).
	Standings []DecisionStanding `json:",omitempty"`
}

// DecisionStanding is one job's queue row figures at a decision.
type DecisionStanding struct {
	JobID    string
	Leaf     string
	Standing *Standing
}

// Priority is the priority allot last wrote to a Nomad job.
type Priority struct {
	JobID       string
	Priority    int
	WrittenAt   time.Time
	ModifyIndex uint64 // the JobModifyIndex the write was checked against
}

// QueueEntry is one job's place in the last plan, with its explanation.
type QueueEntry struct {
	JobID       string
	Leaf        string
	Band        string
	Priority    int
	SortMetric  budgets.Ratio // JSON "inf" when infinite: raft entries must always encode
	Position    int           // 1-based place among pending jobs; 0 for running ones
	Explanation string
	PlannedAt   time.Time
	// Standing is the leaf's fair-share standing behind SortMetric (nil
	// when the job is unallocated, and in entries written before it).
	Standing *Standing `json:",omitempty"`
	// ProtectedUntil ends the job's protected window, FreeAt is when the
	// GPUs a pending job needs free up; zero when unknown.
	ProtectedUntil time.Time `json:",omitzero"`
	FreeAt         time.Time `json:",omitzero"`
}

// Standing is a leaf's place in the fair-share order when the plan was
// made, with the parts of its sort metric. Fractions are rounded to 1e-3,
// the 0.1% that `allot explain` prints: the whole queue is one raft entry,
// rewritten whenever a row changes, so a finer rounding would let usage
// creeping on minute by minute rewrite it on nearly every pass.
type Standing struct {
	Metric       budgets.Ratio
	LeafPosition int           // 1-based place of the leaf in the fair-share order
	ServedRatio  budgets.Ratio // UsageShare / Effective; "inf" when Effective is 0
	UsageShare   budgets.Ratio // the leaf's share of the window's usage
	Effective    budgets.Ratio // the leaf's effective share of the cluster
	Parts        []StandingPart
}

// StandingPart is one level of a leaf's path, from the root's child down.
type StandingPart struct {
	Path          string
	Share         budgets.Ratio // S: the node's share normalized among its siblings
	UsageFraction budgets.Ratio // U: its window usage over its siblings' total
	Level         budgets.Ratio // LF = S/U; "inf" when U is 0
}

// NewStanding copies a leaf's fair-share standing for a queue row, its
// fractions rounded (see Standing).
func NewStanding(r *budgets.LeafRank) *Standing {
	st := &Standing{Metric: budgets.Ratio(r.Metric), LeafPosition: r.Position + 1,
		ServedRatio: roundRatio(r.ServedRatio()), UsageShare: roundRatio(r.UsageShare),
		Effective: roundRatio(r.Effective), Parts: make([]StandingPart, len(r.Parts))}
	for i, p := range r.Parts {
		st.Parts[i] = StandingPart{Path: p.Path, Share: roundRatio(p.Share),
			UsageFraction: roundRatio(p.UsageFraction), Level: roundRatio(p.Level)}
	}
	return st
}

// roundRatio rounds x to 1e-3, keeping infinities and NaN as they are.
func roundRatio(x float64) budgets.Ratio {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return budgets.Ratio(x)
	}
	return budgets.Ratio(math.Round(x*1e3) / 1e3)
}

// Server is one allot server, as registered by itself when it led.
type Server struct {
	ID       string
	RaftAddr string
	HTTPAddr string
}

// DemandMark records how far a leaf's demand has been recorded, so a
// re-sent demand sample never counts twice.
type DemandMark struct {
	Leaf    string
	Through time.Time
}
