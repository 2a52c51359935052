package sim

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
)

// Pool is a group of identical GPU nodes, named <Name>-0, <Name>-1, ...
type Pool struct {
	Name        string
	Nodes       int
	GPUsPerNode int
	Model       string
	// NodePool is the Nomad node pool the nodes register in (their client
	// node_pool); "" is Name. Several groups may share one, as H100 and
	// B200 nodes of one pool "gpu" do.
	NodePool string
}

// Nomad is the Nomad node pool of p's nodes: NodePool, or Name.
func (p Pool) Nomad() string {
	if p.NodePool == "" {
		return p.Name
	}
	return p.NodePool
}

// ClusterSpec is the shape of the simulated cluster.
type ClusterSpec struct {
	Pools []Pool
}

// UniformCluster is nodes × gpus of one model in one pool.
func UniformCluster(nodes, gpus int) ClusterSpec {
	return ClusterSpec{Pools: []Pool{{Name: "default", Nodes: nodes, GPUsPerNode: gpus, Model: "h100"}}}
}

// GPUs is the cluster's total GPU count.
func (c ClusterSpec) GPUs() int {
	n := 0
	for _, p := range c.Pools {
		n += p.Nodes * p.GPUsPerNode
	}
	return n
}

// Validate says what is wrong with the cluster shape.
func (c ClusterSpec) Validate() error {
	if len(c.Pools) == 0 {
		return fmt.Errorf("cluster has no node pools; give at least one pool with nodes and GPUs per node")
	}
	if len(c.Pools) > 64 {
		return fmt.Errorf("cluster has %d node pools; the model takes at most 64", len(c.Pools))
	}
	seen := map[string]int{}
	for i, p := range c.Pools {
		first, dup := seen[p.Name]
		seen[p.Name] = i
		switch {
		case !validPoolName(p.Name):
			return fmt.Errorf("pool %d: name %q must be 1 to 128 of a-z, A-Z, 0-9, '_' and '-' (its nodes are named <pool>-0, <pool>-1, ...)", i, p.Name)
		case dup:
			return fmt.Errorf("pool %d: name %q is also pool %d's; give each pool its own name (node names would collide)", i, p.Name, first)
		case p.Nodes < 1 || p.Nodes > 100000:
			return fmt.Errorf("pool %d (%q): nodes %d must be between 1 and 100000", i, p.Name, p.Nodes)
		case p.GPUsPerNode < 1 || p.GPUsPerNode > 64:
			return fmt.Errorf("pool %d (%q): gpus per node %d must be between 1 and 64", i, p.Name, p.GPUsPerNode)
		case p.NodePool != "" && !validPoolName(p.NodePool):
			return fmt.Errorf("pool %d (%q): node pool %q must be 1 to 128 of a-z, A-Z, 0-9, '_' and '-'", i, p.Name, p.NodePool)
		case p.Nomad() == "all":
			return fmt.Errorf("pool %d (%q): node pool \"all\" is Nomad's built-in pool of every node; no node registers in it", i, p.Name)
		}
	}
	return nil
}

// validPoolName is Nomad's rule for node pool names.
func validPoolName(s string) bool {
	if len(s) < 1 || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// node is one Nomad client of the model. GPU instances are bits of masks.
type node struct {
	id       string
	pool     string
	model    string
	total    int    // GPU instances
	held     uint64 // instances held by a running allocation
	sick     uint64 // unhealthy instances
	eligible bool
	allocs   []int32 // running allocations on the node
	reason   string  // last health reason
	// sickSince is when the node last turned unhealthy (-1 when healthy);
	// drainedAt records the first time it was then empty and ineligible.
	sickSince int64
	drained   bool
	// exit holds the GPUs whose stopped tasks have not exited yet, until
	// the last of them exits (killtimeout.go); pend those of preempted
	// allocations whose task had not started, until their client reports
	// them done (Options.PendingStopLatency, pendingstop.go).
	exit, pend heldGPUs
	// heard holds the GPUs of stopped tasks until their client's report of
	// the exit reaches the servers (Options.FinishLatency after exit),
	// pend's until theirs; Nomad's scheduler counts them until then.
	heard heldGPUs
}

// heldGPUs are GPUs of a node that no task placed on them may use until
// by (for a task placed there, onExiting).
type heldGPUs struct {
	mask uint64
	by   int64
}

// hold adds GPUs mask, held until until at the least; what was held no
// later than now was let go.
func (h *heldGPUs) hold(now int64, mask uint64, until int64) {
	if h.by <= now {
		h.mask = 0
	}
	h.mask |= mask
	h.by = max(h.by, until)
}

// until is when the held GPUs among mask are let go; 0 when none is held
// past now.
func (h *heldGPUs) until(now int64, mask uint64) int64 {
	if h.by > now && h.mask&mask != 0 {
		return h.by
	}
	return 0
}

// noAllocPrio is State.lowOn of a node without allocations: above every
// priority.
const noAllocPrio = 1 << 30

func (n *node) all() uint64 {
	if n.total == 64 {
		return ^uint64(0)
	}
	return 1<<uint(n.total) - 1
}

// freeMask is the healthy instances nobody holds.
func (n *node) freeMask() uint64 { return n.all() &^ n.held &^ n.sick }

func (n *node) free() int { return bits.OnesCount64(n.freeMask()) }

func (n *node) healthyTotal() int { return n.total - bits.OnesCount64(n.sick) }

func (n *node) healthy() bool { return n.sick == 0 }

// SpreadOverPools gives every job of a generated trace one pool of cluster
// c, drawn with weights by the pools' GPUs among those that can hold it
// (an allocation within a node, the whole job within the pool), and the
// pool's node pool and GPU model: a generated trace on a cluster of
// several pools or models, as its users would submit it. A job no pool can
// hold is left as it is. One pool: nothing changes.
func SpreadOverPools(tr *Trace, c ClusterSpec, seed uint64) {
	if len(c.Pools) < 2 {
		return
	}
	rng := rand.New(rand.NewPCG(seed, 0x9001))
	w := make([]float64, len(c.Pools))
	for i := range tr.Jobs {
		j := &tr.Jobs[i]
		var total float64
		for k, p := range c.Pools {
			w[k] = 0
			if j.GPUs <= p.GPUsPerNode && j.Count <= p.Nodes {
				w[k] = float64(p.Nodes * p.GPUsPerNode)
			}
			total += w[k]
		}
		if total == 0 {
			continue
		}
		u := rng.Float64() * total
		for k, p := range c.Pools {
			if u -= w[k]; u < 0 || k == len(c.Pools)-1 && w[k] > 0 {
				j.Pool, j.Model = p.Nomad(), p.Model
				break
			}
		}
	}
}
