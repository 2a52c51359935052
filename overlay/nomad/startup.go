package nomad

import (
	"context"
	"fmt"
	"sort"

	"github.com/hashicorp/nomad/api"
)

// NewClientWith returns a Nomad client from Nomad's standard environment
// with address and token replaced when they are not empty (the server
// config file's nomad { address, token }).
func NewClientWith(address, token string) (*api.Client, error) {
	return NewClient(func(c *api.Config) {
		if address != "" {
			c.Address = address
		}
		if token != "" {
			c.SecretID = token
		}
	})
}

// NewClientFor returns a Nomad client for addr ("" keeps NOMAD_ADDR), the
// rest from Nomad's standard environment.
func NewClientFor(addr string) (*api.Client, error) { return NewClientWith(addr, "") }

// UnmanagedAlloc is a running allocation of a job allot does not manage,
// on a node with NVIDIA GPUs, at a priority a pending allocated job can
// preempt when CPU or memory is what binds (docs/design.md, "How allot drives
// Nomad").
type UnmanagedAlloc struct {
	Alloc    string
	Job      string // "namespace/id"
	Node     string // node name
	Priority int
}

// UnmanagedOnGPUNodes lists the running allocations of jobs allot does not
// manage (manages is false: the policy's rule 11) on GPU nodes whose job
// priority is below below, sorted by job then allocation. It reads the list
// endpoints once, and each candidate job once.
func UnmanagedOnGPUNodes(ctx context.Context, client *api.Client, manages func(*Job) bool, below int) ([]UnmanagedAlloc, error) {
	q := func() *api.QueryOptions { return (&api.QueryOptions{Namespace: "*"}).WithContext(ctx) }
	nodes, _, err := client.Nodes().List(withParams(q(), "resources", "true"))
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	gpuNodes := map[string]string{}
	for _, s := range nodes {
		if n := nodeFromStub(s); n.TotalGPUs() > 0 {
			gpuNodes[n.ID] = n.Name
		}
	}
	if len(gpuNodes) == 0 {
		return nil, nil
	}
	stubs, _, err := client.Jobs().List(q())
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	prio := map[JobKey]int{}
	for _, s := range stubs {
		if s.Priority < below {
			prio[JobKey{Namespace: orDefault(s.Namespace), ID: s.ID}] = s.Priority
		}
	}
	allocs, _, err := client.Allocations().List(q())
	if err != nil {
		return nil, fmt.Errorf("list allocations: %w", err)
	}
	managed := map[JobKey]bool{}
	var out []UnmanagedAlloc
	for _, a := range allocs {
		k := JobKey{Namespace: orDefault(a.Namespace), ID: a.JobID}
		p, low := prio[k]
		node, onGPU := gpuNodes[a.NodeID]
		if !low || !onGPU || a.DesiredStatus != api.AllocDesiredStatusRun || a.ClientStatus != api.AllocClientStatusRunning {
			continue
		}
		m, known := managed[k]
		if !known {
			j, _, err := client.Jobs().Info(k.ID, (&api.QueryOptions{Namespace: k.Namespace}).WithContext(ctx))
			if err != nil {
				return nil, fmt.Errorf("read job %s: %w", k, err)
			}
			job := jobFromAPI(j)
			m = manages(&job)
			managed[k] = m
		}
		if !m {
			out = append(out, UnmanagedAlloc{Alloc: a.ID, Job: k.String(), Node: node, Priority: p})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Job != out[j].Job {
			return out[i].Job < out[j].Job
		}
		return out[i].Alloc < out[j].Alloc
	})
	return out, nil
}
