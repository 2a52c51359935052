package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// UsageSeries is the answer of GET /v1/usage/series: GPUs used and wanted
// per step for one budget and its children, with each one's allocation.
// Values are average GPUs over the step (GPU-seconds / step seconds); the
// last step may be shorter and is averaged over its own length.
type UsageSeries struct {
	Budget       string        `json:"budget"`
	From         time.Time     `json:"from"`
	To           time.Time     `json:"to"`
	Step         time.Duration `json:"step_ns"`
	StepSeconds  int64         `json:"step_seconds"`
	CapacityGPUs int           `json:"capacity_gpus"`
	// Lookback is the fair-share window (marked on the charts);
	// Retention is how much ledger history the server keeps.
	LookbackSeconds  int64 `json:"lookback_seconds"`
	RetentionSeconds int64 `json:"retention_seconds"`
	// Times are the steps' starts, in Unix seconds.
	Times  []int64       `json:"times"`
	Series []BudgetSerie `json:"series"`
}

// BudgetSerie is one budget's series. The first of UsageSeries.Series is
// the budget asked for, the others its children in tree order.
type BudgetSerie struct {
	Path      string  `json:"path"`
	Leaf      bool    `json:"leaf"`
	Program   string  `json:"program"` // the child of the root it lies under ("" for the root)
	Effective float64 `json:"effective"`
	// AllocationGPUs is effective share × capacity: the GPUs it is owed
	// when it has the demand.
	AllocationGPUs float64   `json:"allocation_gpus"`
	UsedGPUs       []float64 `json:"used_gpus"`
	DemandGPUs     []float64 `json:"demand_gpus"`
}

// UsageSeries asks for budget's series (root when "") over the last since
// with one point per step ("" takes the server's defaults: 7d, and a step
// giving at most about 500 points).
func (c *Client) UsageSeries(ctx context.Context, budget, since, step string, stale bool) (*UsageSeries, error) {
	q := readQuery(stale)
	for k, v := range map[string]string{"budget": budget, "since": since, "step": step} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var out UsageSeries
	return &out, c.Do(ctx, http.MethodGet, "/v1/usage/series", q, nil, &out)
}

// JobHistory is the answer of GET /v1/jobs/<id>/history: everything allot
// knows of one job, oldest first.
type JobHistory struct {
	JobID             string        `json:"job_id"`
	Budget            string        `json:"budget"`
	MinRuntime        time.Duration `json:"min_runtime_ns"`
	Resumable         bool          `json:"resumable"`
	GPUs              int           `json:"gpus"`
	Unallocated       string        `json:"unallocated_reason,omitempty"`
	SubmittedAt       time.Time     `json:"submitted_at"`
	Queue             *QueueJob     `json:"queue,omitempty"`
	ChargedGPUHours   float64       `json:"charged_gpu_hours"`
	Placements        int           `json:"placements"`
	Requeues          int           `json:"requeues"`
	Events            []JobEvent    `json:"events"`
	BudgetStandingNow *Standing     `json:"budget_standing_now,omitempty"`
}

// Kinds of JobEvent.
const (
	EventSubmitted = "submitted"
	EventPlaced    = "placed"    // an allocation started on a node
	EventProtected = "protected" // the protected window of a placement ends
	EventStopped   = "stopped"   // an allocation stopped; StopKind says why
	EventRequeued  = "requeued"  // placed again after a stop
	EventDecision  = "decision"  // any other decision about the job
)

// Stop kinds of an EventStopped.
const (
	StopTimeSlicing = "time-slicing"     // allot stopped it for a less served budget's job
	StopDrain       = "drain"            // allot moved it off a draining node
	StopReservation = "reservation"      // allot cleared a node reserved for a large job
	StopRelease     = "release"          // allot released a job placed in part (rule 5c), for no job
	StopNomad       = "nomad-preemption" // Nomad preempted it
	StopEnded       = "ended"            // it finished or was stopped outside allot
)

// JobEvent is one entry of a job's history.
type JobEvent struct {
	At       time.Time `json:"at"`
	Kind     string    `json:"kind"`
	StopKind string    `json:"stop_kind,omitempty"`
	AllocID  string    `json:"alloc_id,omitempty"`
	NodeID   string    `json:"node_id,omitempty"`
	GPUs     int       `json:"gpus,omitempty"`
	Until    time.Time `json:"until,omitzero"` // a placement's protected-window end
	// ForJob is the job a time-slicing or reservation stop made room for,
	// with its budget's standing in the queue now (when it is still there).
	ForJob         string    `json:"for_job,omitempty"`
	ForJobBudget   string    `json:"for_job_budget,omitempty"`
	ForJobStanding *Standing `json:"for_job_standing_now,omitempty"`
	// StandingAtStop and ForJobStandingAtStop are the two budgets'
	// standings when the stop was decided: the figures that justified it.
	StandingAtStop       *Standing `json:"standing_at_stop,omitempty"`
	ForJobStandingAtStop *Standing `json:"for_job_standing_at_stop,omitempty"`
	ChargedGPUH          float64   `json:"charged_gpu_hours,omitempty"`
	DecisionKind         string    `json:"decision_kind,omitempty"`
	Reason               string    `json:"reason,omitempty"`
}

// JobHistory returns one job's history.
func (c *Client) JobHistory(ctx context.Context, jobID string, stale bool) (*JobHistory, error) {
	var out JobHistory
	return &out, c.Do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(jobID)+"/history", readQuery(stale), nil, &out)
}
