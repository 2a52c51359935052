package nomad

import (
	"time"
)

// JobKey names a Nomad job: jobs are unique per namespace.
type JobKey struct {
	Namespace string
	ID        string
}

// String renders the key as "namespace/id", the form allot's state uses.
func (k JobKey) String() string { return k.Namespace + "/" + k.ID }

// Group is one task group of a job with its GPU ask per allocation.
type Group struct {
	Name  string
	Count int // allocations the group asks for
	// GPUs is the number of GPUs one allocation of the group asks for,
	// summed over its tasks' device requests for NVIDIA GPUs.
	GPUs int
	// Model is the GPU model named by the request ("nvidia/gpu/<model>"),
	// "" when any model will do.
	Model string
}

// Job is what the adapter keeps of a Nomad job.
type Job struct {
	Key            JobKey
	Name           string
	Type           string // batch, service, ...
	NodePool       string
	Priority       int
	Status         string // pending, running, dead
	Stop           bool
	Meta           map[string]string
	SubmitTime     time.Time
	Version        uint64
	ModifyIndex    uint64
	JobModifyIndex uint64
	Groups         []Group
}

// GPUs is the number of GPUs the whole job asks for (count × GPUs per group).
func (j *Job) GPUs() int {
	n := 0
	for _, g := range j.Groups {
		n += g.Count * g.GPUs
	}
	return n
}

// Alloc is what the adapter keeps of a Nomad allocation.
type Alloc struct {
	ID            string
	Name          string // "<job>.<group>[<index>]": kept by a migration's replacement
	Job           JobKey
	TaskGroup     string
	NodeID        string
	DesiredStatus string // run, stop, evict
	ClientStatus  string // pending, running, complete, failed, lost
	// GPUs holds the GPUs assigned to the allocation, from its allocated
	// resources; before placement details are known it is the group's ask.
	GPUs      int
	Model     string   // model of the assigned GPUs ("" when unknown)
	DeviceIDs []string // assigned GPU instance IDs, sorted
	// StartedAt is when the allocation started running: the latest StartedAt
	// of its tasks (zero while any task has not started).
	StartedAt time.Time
	// FinishedAt is when a terminal allocation stopped running: the latest
	// FinishedAt of its tasks, or Nomad's last modify time when no task
	// says (a lost allocation). Zero while the allocation is not terminal.
	FinishedAt time.Time
	// CreatedAt is when Nomad placed the allocation (its CreateTime).
	CreatedAt   time.Time
	PreemptedBy string // alloc ID that preempted this one, if any
	CreateIndex uint64
	ModifyIndex uint64
}

// Terminal reports whether the allocation has stopped or will stop.
func (a *Alloc) Terminal() bool {
	switch a.ClientStatus {
	case "complete", "failed", "lost":
		return true
	}
	return a.DesiredStatus == "stop" || a.DesiredStatus == "evict"
}

// Running reports whether the allocation is running and meant to keep running.
func (a *Alloc) Running() bool {
	return a.ClientStatus == "running" && a.DesiredStatus == "run"
}

// GPUModel is one GPU model present on a node.
type GPUModel struct {
	Model   string
	Total   int // instances fingerprinted
	Healthy int // instances Nomad may place on
	// Unhealthy lists the unhealthy instances with Nomad's description.
	Unhealthy []DeviceHealth
	// HealthyIDs lists the healthy instances' IDs, sorted.
	HealthyIDs []string
}

// DeviceHealth is one unhealthy device instance.
type DeviceHealth struct {
	ID     string
	Reason string
}

// Drain is a Nomad drain in progress on a node.
type Drain struct {
	StartedAt time.Time
	// Deadline is when Nomad kills what is left (zero: no deadline).
	Deadline         time.Time
	Force            bool // a negative deadline: allocations stop at once
	IgnoreSystemJobs bool
}

// Node is what the adapter keeps of a Nomad client node.
type Node struct {
	ID          string
	Name        string
	Datacenter  string
	Pool        string
	Status      string // initializing, ready, down, disconnected
	Eligible    bool
	Drain       *Drain // nil when not draining
	GPUs        []GPUModel
	ModifyIndex uint64
}

// HealthyGPUs counts healthy GPU instances of every model.
func (n *Node) HealthyGPUs() int {
	h := 0
	for _, m := range n.GPUs {
		h += m.Healthy
	}
	return h
}

// TotalGPUs counts fingerprinted GPU instances of every model.
func (n *Node) TotalGPUs() int {
	t := 0
	for _, m := range n.GPUs {
		t += m.Total
	}
	return t
}
