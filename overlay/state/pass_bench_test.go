package state

import (
	"fmt"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
)

// passBench is a 10,000-GPU cluster (1,250 nodes of 8, a job of 8 GPUs
// running on each, 50 budget leaves) and the pass that follows a minute
// later: 1% of the allocations changed, the whole queue rewritten, every
// allocation charged, every leaf's demand.
func passBench(b *testing.B) (*FSM, func(now time.Time) PassRequest) {
	const nodes, leaves = 1250, 50
	specs := []budgets.Spec{{Path: "org", Share: 1}}
	for l := range leaves {
		specs = append(specs, budgets.Spec{Path: fmt.Sprintf("org/l%02d", l), Share: 1})
	}
	f := newFSM(b, FSMConfig{})
	mustApply(b, f, BudgetsApplyType, BudgetsApplyRequest{Revision: "r", Specs: specs, AppliedAt: t0})
	jobs, allocs, rows, queue := make([]Job, nodes), make([]Alloc, nodes), make([]Node, nodes), make([]QueueEntry, nodes)
	for i := range nodes {
		leaf := fmt.Sprintf("org/l%02d", i%leaves)
		jobs[i] = Job{ID: fmt.Sprintf("default/j%04d", i), GPUs: 8, Contract: Contract{Budget: leaf, MinRuntime: time.Hour}, SubmittedAt: t0}
		allocs[i] = Alloc{ID: fmt.Sprintf("a%04d", i), JobID: jobs[i].ID, NodeID: fmt.Sprintf("n%04d", i), Leaf: leaf, GPUs: 8, StartedAt: t0}
		rows[i] = Node{ID: allocs[i].NodeID, Drain: 0, Since: t0, TotalGPUs: 8, HealthyGPUs: 8}
		queue[i] = QueueEntry{JobID: jobs[i].ID, Leaf: leaf, Band: "protected", Priority: 100, Explanation: "running inside its protected window"}
	}
	mustApply(b, f, PassType, PassRequest{At: t0, Jobs: jobs, Allocs: allocs, Nodes: rows, ReplaceQueue: true, Queue: queue})
	return f, func(now time.Time) PassRequest {
		changed := make([]Alloc, 0, nodes/100)
		for i := 0; i < nodes; i += 100 {
			a := allocs[i]
			a.ProtectedUntil = now.Add(time.Hour)
			changed = append(changed, a)
		}
		req := PassRequest{At: now, Allocs: changed, ReplaceQueue: true, Queue: queue,
			Decisions: []Decision{{At: now, Kind: "priority", Reason: "bench"}}}
		if err := f.Preview(&req, func(v *View) {
			req.Charges = ChargesDue(v, now, time.Time{})
			req.Demand = DemandDue(v, now, time.Hour)
		}); err != nil {
			b.Fatal(err)
		}
		return req
	}
}

// BenchmarkPass10kGPUs is one pass on a 10,000-GPU cluster: building its
// entry (Preview, ChargesDue, DemandDue, Encode) and applying it.
func BenchmarkPass10kGPUs(b *testing.B) {
	f, build := passBench(b)
	b.ReportAllocs()
	b.ResetTimer()
	var size int
	for i := range b.N {
		now := t0.Add(time.Duration(i+1) * time.Minute)
		data, err := Encode(PassType, build(now))
		if err != nil {
			b.Fatal(err)
		}
		size = len(data)
		if res, ok := f.ApplyEntry(data).(PassResult); !ok || res.GPUSeconds != 1250*8*60 {
			b.Fatalf("pass %d: %+v", i, f.ApplyEntry(data))
		}
	}
	b.ReportMetric(float64(size)/1024, "entry-KiB")
}
