package client

import "time"

// BudgetSpec is one budget of a tree sent with PUT /v1/budgets.
type BudgetSpec struct {
	Path        string   `json:"path"`
	Share       float64  `json:"share"`
	Description string   `json:"description,omitempty"`
	Owners      []string `json:"owners,omitempty"`
}

// BudgetsApply is the body of PUT /v1/budgets.
type BudgetsApply struct {
	Revision string            `json:"revision"`
	Digests  map[string]string `json:"digests,omitempty"`
	Budgets  []BudgetSpec      `json:"budgets"`
}

// Budget is one node of the tree in force.
type Budget struct {
	Path        string   `json:"path"`
	Share       float64  `json:"share"`
	Normalized  float64  `json:"normalized"`
	Effective   float64  `json:"effective"`
	Leaf        bool     `json:"leaf"`
	Description string   `json:"description,omitempty"`
	Owners      []string `json:"owners,omitempty"`
}

// Budgets is the answer of GET /v1/budgets. Budgets is empty before the
// first apply.
type Budgets struct {
	Revision  string            `json:"revision"`
	Digests   map[string]string `json:"digests,omitempty"`
	AppliedAt time.Time         `json:"applied_at"`
	Budgets   []Budget          `json:"budgets"`
}

// WriteResult answers a write: the raft index it was committed at.
type WriteResult struct {
	Index uint64 `json:"index"`
}

// QueueJob is one managed job's place in the last plan.
type QueueJob struct {
	JobID       string `json:"job_id"`
	Budget      string `json:"budget"`
	Band        string `json:"band"`
	Priority    int    `json:"priority"`
	SortMetric  Ratio  `json:"sort_metric"` // "inf" when infinite (see Ratio)
	Position    int    `json:"position"`    // 1-based place in the pending queue, 0 for jobs not pending
	Explanation string `json:"explanation"`
	// Standing is the job's budget's fair-share standing: the sort metric
	// and its parts (absent when unallocated or planned by an older server).
	Standing *Standing `json:"standing,omitempty"`
	// ProtectedUntil ends the job's protected window; FreeAt is when the
	// GPUs a pending job waits for free up. Absent when unknown.
	ProtectedUntil time.Time `json:"protected_until,omitzero"`
	FreeAt         time.Time `json:"free_at,omitzero"`
}

// Standing is a budget's fair-share rank among the budgets and why (the
// budget's standing, not its job's place in the pending queue).
type Standing struct {
	Metric       Ratio       `json:"metric"`        // (N - rank) / N over N leaves, higher = more owed
	LeafPosition int         `json:"leaf_position"` // the budget's 1-based fair-share rank among the leaves, 1 = most owed
	ServedRatio  Ratio       `json:"served_ratio"`  // usage_share / effective_share
	UsageShare   Ratio       `json:"usage_share"`   // the budget's share of the window's usage
	Effective    Ratio       `json:"effective_share"`
	Parts        []LevelPart `json:"parts"` // from the root's child down to the budget
}

// LevelPart is one level of a budget's path: Slurm's level fairshare.
type LevelPart struct {
	Path          string `json:"path"`
	Share         Ratio  `json:"share"`           // S: normalized among its siblings
	UsageFraction Ratio  `json:"usage_fraction"`  // U: its usage over its siblings'
	Level         Ratio  `json:"level_fairshare"` // LF = S/U, "inf" when U is 0
}

// Queue is the answer of GET /v1/queue: pending jobs in order, then the rest.
type Queue struct {
	PlannedAt time.Time  `json:"planned_at"`
	Jobs      []QueueJob `json:"jobs"`
}

// Alloc is an allocation lifecycle as recorded by allot.
type Alloc struct {
	ID                string    `json:"id"`
	NodeID            string    `json:"node_id"`
	GPUs              int       `json:"gpus"`
	StartedAt         time.Time `json:"started_at"`
	ProtectedUntil    time.Time `json:"protected_until,omitzero"` // absent for unallocated work: never protected
	StoppedAt         time.Time `json:"stopped_at,omitzero"`      // absent while it runs
	Preemptions       int       `json:"preemptions"`              // times it was preempted or stopped by allot
	ChargedGPUSeconds int64     `json:"charged_gpu_seconds"`
}

// Decision is one entry of the decision log.
type Decision struct {
	Seq     uint64    `json:"seq"`
	At      time.Time `json:"at"`
	Kind    string    `json:"kind"`
	JobID   string    `json:"job_id,omitempty"`
	AllocID string    `json:"alloc_id,omitempty"`
	NodeID  string    `json:"node_id,omitempty"`
	Reason  string    `json:"reason"`
}

// Explain is the answer of GET /v1/explain/job/<id>.
type Explain struct {
	JobID       string        `json:"job_id"`
	Budget      string        `json:"budget"`
	MinRuntime  time.Duration `json:"min_runtime_ns"`
	GPUs        int           `json:"gpus"`
	Unallocated string        `json:"unallocated_reason,omitempty"`
	Queue       *QueueJob     `json:"queue,omitempty"` // nil until a plan has placed the job
	Priority    *int          `json:"priority_written,omitempty"`
	Allocs      []Alloc       `json:"allocs"`
	Decisions   []Decision    `json:"decisions"`
}

// UsageRow is one budget's use over the report window, in GPU-hours
// (budgets.Delivery, the same figures `allot sim` reports).
type UsageRow struct {
	Path string `json:"path"`
	Leaf bool   `json:"leaf"`
	// Charged is the GPU time delivered over the window, uncapped.
	Charged float64 `json:"charged_gpu_hours"`
	Demand  float64 `json:"demand_gpu_hours"`
	Owed    float64 `json:"owed_gpu_hours"`
	// Ratio is Charged / Owed, DESIGN.md's headline figure (1 when nothing
	// was owed; above 1 for a budget served more than it was owed).
	Ratio Ratio `json:"delivered_over_owed"`
	// Credited is Σ over hours of min(charged that hour, owed that hour),
	// and CreditedRatio Credited / Owed (at most 1): the same-hour reading,
	// where an hour's surplus does not pay for another hour's shortfall.
	Credited      float64 `json:"credited_gpu_hours"`
	CreditedRatio Ratio   `json:"credited_over_owed"`
}

// Usage is the answer of GET /v1/usage?since=7d.
type Usage struct {
	From         time.Time  `json:"from"`
	To           time.Time  `json:"to"`
	CapacityGPUs int        `json:"capacity_gpus"`
	Budgets      []UsageRow `json:"budgets"`
}

// Node is a GPU node's drain state and reservation.
type Node struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Drain is the text of the node's policy.NodeState (overlay/policy):
	// active, draining or drained; a reserved node is active (its
	// reservation is Reservation, not a drain state).
	Drain  string    `json:"drain"`
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since"`
	// Reservation is set while the node is held for a large pending job.
	Reservation *NodeReservation `json:"reservation,omitempty"`
	TotalGPUs   int              `json:"total_gpus"`
	HealthyGPUs int              `json:"healthy_gpus"`
	// GPUs are the node's GPU instances by model then ID (at most 64,
	// unhealthy ones first to be kept; total_gpus counts all). Empty until
	// a server that records them has reconciled the node.
	GPUs []NodeGPU `json:"gpus"`
	// Lifecycle is the node's drain lifecycle (drain.go).
	Lifecycle NodeDrain `json:"lifecycle"`
	// Running are the managed allocations running on the node, each with
	// the end of its protected window.
	Running []NodeAlloc `json:"running"`
}

// NodeGPU is one GPU instance of a node.
type NodeGPU struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Healthy bool   `json:"healthy"`
	// Reason is why an unhealthy GPU is unhealthy, as Nomad reports it
	// ("" when healthy, or when Nomad gives no description).
	Reason string `json:"reason,omitempty"`
}

// NodeAlloc is a managed allocation running on a node.
type NodeAlloc struct {
	ID             string    `json:"id"`
	JobID          string    `json:"job_id"`
	Budget         string    `json:"budget,omitempty"` // "" for unallocated work
	GPUs           int       `json:"gpus"`
	StartedAt      time.Time `json:"started_at"`
	ProtectedUntil time.Time `json:"protected_until,omitzero"`
}

// NodeReservation is a node held ineligible for a large pending job until
// enough of its GPUs are free for it, at most until Until.
type NodeReservation struct {
	Job   string    `json:"job"`
	Since time.Time `json:"since"`
	Until time.Time `json:"until,omitzero"` // zero when not known (recorded by an older server)
}

// Decisions is the answer of GET /v1/decisions.
type Decisions struct {
	Decisions []Decision `json:"decisions"`
}

// Nodes is the answer of GET /v1/nodes.
type Nodes struct {
	Nodes []Node `json:"nodes"`
}

// Peer is one raft server.
type Peer struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr,omitempty"`
	Leader   bool   `json:"leader"`
	Voter    bool   `json:"voter"`
}

// Peers is the answer of GET /v1/operator/raft/peers.
type Peers struct {
	Servers []Peer `json:"servers"`
}

// Self is the answer of GET /v1/agent/self: who this server is.
type Self struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	Leader   string `json:"leader_id"`
	// ClusterID names the cluster the server bootstrapped or joined (empty
	// for a -dev server).
	ClusterID string `json:"cluster_id,omitempty"`
}

// JoinRequest is the body of PUT /v1/operator/raft/join.
type JoinRequest struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
}

// Charge charges an allocation's GPUs over [From, To) to a budget. Resent
// intervals are charged once.
type Charge struct {
	Alloc  string    `json:"alloc"`
	Budget string    `json:"budget"`
	GPUs   int       `json:"gpus"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
}

// Demand records that a budget wanted GPUs over [From, To).
type Demand struct {
	Budget string    `json:"budget"`
	GPUs   int       `json:"gpus"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
}

// LedgerAppend is the body of POST /v1/ledger.
type LedgerAppend struct {
	Charges []Charge `json:"charges,omitempty"`
	Demand  []Demand `json:"demand,omitempty"`
}

// LedgerResult answers POST /v1/ledger.
type LedgerResult struct {
	Index             uint64   `json:"index"`
	ChargedGPUSeconds int64    `json:"charged_gpu_seconds"`
	DemandGPUSeconds  int64    `json:"demand_gpu_seconds"`
	Skipped           int      `json:"skipped"`
	Errors            []string `json:"errors,omitempty"`
}

// ErrorBody is the JSON body of every error answer.
type ErrorBody struct {
	Error string `json:"error"`
}
