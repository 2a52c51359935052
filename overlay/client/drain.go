package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// NodeDrain is a node's drain lifecycle in GET /v1/nodes. Phase is the
// phase name of its policy.NodeState (overlay/policy, NodeState.Phase):
// in-service, cordoned, draining, drained or returned.
type NodeDrain struct {
	Phase      string    `json:"phase"`
	Cause      string    `json:"cause,omitempty"`  // unhealthy, nomad-drain
	Reason     string    `json:"reason,omitempty"` // the fault, or the Nomad drain
	Episode    int       `json:"episode,omitempty"`
	PhaseSince time.Time `json:"phase_since,omitzero"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	DrainedAt  time.Time `json:"drained_at,omitzero"`
	ReturnedAt time.Time `json:"returned_at,omitzero"`
	ReturnedBy string    `json:"returned_by,omitempty"` // policy, operator
	Deadline   time.Time `json:"nomad_deadline,omitzero"`
	Manual     bool      `json:"manual,omitempty"` // an operator acted during the drain
	// Allocs are the allocations left on a cordoned or draining node, each
	// with the time allot will move it (zero: not known yet).
	Allocs          []DrainAlloc `json:"allocs,omitempty"`
	Requeued        int          `json:"requeued"`
	GPUHoursLost    float64      `json:"gpu_hours_lost"`
	ReturnRequested bool         `json:"return_requested,omitempty"`
}

// DrainAlloc is an allocation left on a draining node.
type DrainAlloc struct {
	ID       string    `json:"id"`
	JobID    string    `json:"job_id,omitempty"`
	GPUs     int       `json:"gpus"`
	LeavesAt time.Time `json:"leaves_at,omitzero"`
}

// NodeReturn answers PUT /v1/nodes/<id>/return.
type NodeReturn struct {
	Index   uint64 `json:"index"`
	NodeID  string `json:"node_id"`
	Message string `json:"message"`
}

// ReturnNode asks allot to put a drained node back in service (token
// required). node is a node ID, a unique ID prefix, or a node name.
func (c *Client) ReturnNode(ctx context.Context, node string) (*NodeReturn, error) {
	var out NodeReturn
	return &out, c.Do(ctx, http.MethodPut, "/v1/nodes/"+url.PathEscape(node)+"/return", nil, struct{}{}, &out)
}
