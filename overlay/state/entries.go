package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/allot-sched/allot/budgets"
)

// MessageType is the first byte of every raft log entry; the rest is the
// JSON encoding of the matching request.
type MessageType uint8

// Entry types. Values are part of the on-disk log format: never reuse or
// renumber one.
const (
	BudgetsApplyType   MessageType = 1
	ChargeType         MessageType = 2
	DemandType         MessageType = 3
	JobUpsertType      MessageType = 4
	JobDeleteType      MessageType = 5
	AllocUpsertType    MessageType = 6
	NodeUpsertType     MessageType = 7
	DecisionAppendType MessageType = 8
	PrioritiesType     MessageType = 9
	PlanRecordType     MessageType = 10
	ServerUpsertType   MessageType = 11
	DrainObserveType   MessageType = 12 // drain.go
	DrainReturnType    MessageType = 13 // drain.go
	// PassType is one reconcile pass (pass.go). Leaders before it wrote a
	// pass as entries 4-10 and 12, then 2 and 3; those still apply.
	PassType MessageType = 14
)

var typeNames = map[MessageType]string{
	BudgetsApplyType: "budgets_apply", ChargeType: "charge", DemandType: "demand",
	JobUpsertType: "job_upsert", JobDeleteType: "job_delete", AllocUpsertType: "alloc_upsert",
	NodeUpsertType: "node_upsert", DecisionAppendType: "decision_append", PrioritiesType: "priorities",
	PlanRecordType: "plan_record", ServerUpsertType: "server_upsert",
	DrainObserveType: "drain_observe", DrainReturnType: "drain_return", PassType: "pass",
}

func (t MessageType) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("unknown(%d)", uint8(t))
}

// ErrBadEntry is wrapped by Apply's error for an entry it cannot decode.
var ErrBadEntry = errors.New("malformed log entry")

// BudgetsApplyRequest replaces the budget tree.
type BudgetsApplyRequest struct {
	Revision  string
	Digests   map[string]string
	Specs     []budgets.Spec
	AppliedAt time.Time
}

// Charge charges GPUs × (To - From) GPU-seconds of allocation Alloc to Leaf.
// Only the part after the allocation's ChargedThrough counts, so resending a
// charge (after a leader change, say) never charges twice.
type Charge struct {
	Alloc string
	Leaf  string
	GPUs  int
	From  time.Time
	To    time.Time
}

// ChargeRequest is a batch of charges. Now is the leader's clock when it
// wrote the entry: every charge must lie within the ledger's retention
// before it and MaxSkew after it. Entries written before Now existed have
// it zero and are bounded by the ledger's MaxAdvance alone.
type ChargeRequest struct {
	Charges []Charge
	Now     time.Time `json:",omitzero"`
}

// DemandSample records that Leaf wanted GPUs GPUs over [From, To). Only the
// part after the leaf's previous sample counts.
type DemandSample struct {
	Leaf string
	GPUs int
	From time.Time
	To   time.Time
}

// DemandRequest is a batch of demand samples, with ChargeRequest's Now.
type DemandRequest struct {
	Samples []DemandSample
	Now     time.Time `json:",omitzero"`
}

// JobUpsertRequest inserts or replaces managed jobs.
type JobUpsertRequest struct{ Jobs []Job }

// JobDeleteRequest forgets jobs, their allocations, priorities, queue rows
// and notices.
type JobDeleteRequest struct{ JobIDs []string }

// AllocUpsertRequest inserts or replaces allocation lifecycles. Charging
// state (ChargedThrough, ChargedGPUSeconds) is kept from the stored row:
// only charge entries move it. A charged allocation keeps its Leaf too.
type AllocUpsertRequest struct{ Allocs []Alloc }

// NodeUpsertRequest inserts or replaces node drain states.
type NodeUpsertRequest struct{ Nodes []Node }

// DecisionAppendRequest appends to the decision log; the FSM assigns Seq and
// trims the log to its bound.
type DecisionAppendRequest struct{ Decisions []Decision }

// PrioritiesRequest records priorities written to Nomad.
type PrioritiesRequest struct{ Priorities []Priority }

// PlanRecordRequest replaces the queue with the last plan's entries.
type PlanRecordRequest struct {
	At    time.Time
	Queue []QueueEntry
}

// ServerUpsertRequest registers a server's addresses.
type ServerUpsertRequest struct{ Server Server }

// Encode builds a log entry: the type byte, then the JSON of req.
func Encode(t MessageType, req any) ([]byte, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode %s entry: %w", t, err)
	}
	return append([]byte{byte(t)}, body...), nil
}
