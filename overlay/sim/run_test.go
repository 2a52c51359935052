package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/policy"
)

var testHorizon = 24 * time.Hour

func policyDefault() policy.Config { return policy.DefaultConfig() }

func TestRunBaselineExample(t *testing.T) {
	tree := exampleTree(t)
	tr, err := Generate(tree, DefaultGenConfig())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r, err := Run(tr, UniformCluster(128, 8), tree, NewBaseline(DefaultBaselineConfig()), DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d jobs, %v, events %d reconciles %d", len(tr.Jobs), time.Since(start), r.Events, r.Reconciles)
	for _, w := range r.Waits {
		t.Logf("%s n=%d censored=%d p50=%.0f p90=%.0f p99=%.0f", w.Class, w.Jobs, w.Censored, w.P50, w.P90, w.P99)
	}
	t.Logf("occ %+v lost %.0f stalled %.0f at95 %d worst %s %.2f drains %+v", r.Occupancy, r.LostGPUHours, r.StalledGPUHours, r.BudgetsAt95, r.WorstBudget, r.WorstRatio, r.Drains)
	t.Logf("%+v", r.Preemptions)
}

func TestRunAllotExample(t *testing.T) {
	tree := exampleTree(t)
	tr, err := Generate(tree, DefaultGenConfig())
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewAllot(policyDefault())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	opts := DefaultOptions()
	opts.Horizon = testHorizon
	r, err := Run(tr, UniformCluster(128, 8), tree, p, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d jobs, %v, events %d reconciles %d", len(tr.Jobs), time.Since(start), r.Events, r.Reconciles)
	for _, w := range r.Waits {
		t.Logf("%s n=%d censored=%d p50=%.0f p90=%.0f p99=%.0f", w.Class, w.Jobs, w.Censored, w.P50, w.P90, w.P99)
	}
	t.Logf("occ %+v lost %.0f stalled %.0f at95 %d worst %s %.2f drains %+v", r.Occupancy, r.LostGPUHours, r.StalledGPUHours, r.BudgetsAt95, r.WorstBudget, r.WorstRatio, r.Drains)
	t.Logf("%+v", r.Preemptions)
	for _, b := range r.Budgets {
		t.Logf("%s %.2f", b.Budget, b.Ratio)
	}
}

func TestClusterSpecValidate(t *testing.T) {
	ok := ClusterSpec{Pools: []Pool{{Name: "h100", Nodes: 2, GPUsPerNode: 8}, {Name: "a100_x-2", Nodes: 1, GPUsPerNode: 64}}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid cluster: %v", err)
	}
	for _, c := range []struct {
		spec ClusterSpec
		want string
	}{
		{ClusterSpec{}, "no node pools"},
		{ClusterSpec{Pools: []Pool{{Name: "a", Nodes: 1, GPUsPerNode: 8}, {Name: "a", Nodes: 1, GPUsPerNode: 8}}}, `pool 1: name "a" is also pool 0's`},
		{ClusterSpec{Pools: []Pool{{Name: "gpu pool", Nodes: 1, GPUsPerNode: 8}}}, `pool 0: name "gpu pool" must be 1 to 128`},
		{ClusterSpec{Pools: []Pool{{Name: "", Nodes: 1, GPUsPerNode: 8}}}, `pool 0: name "" must be`},
		{ClusterSpec{Pools: []Pool{{Name: "a", Nodes: 0, GPUsPerNode: 8}}}, "nodes 0 must be between 1 and 100000"},
		{ClusterSpec{Pools: []Pool{{Name: "a", Nodes: 1, GPUsPerNode: 65}}}, "gpus per node 65 must be between 1 and 64"},
		{ClusterSpec{Pools: []Pool{{Name: "a", Nodes: 1, GPUsPerNode: 8, NodePool: "gpu pool"}}}, `pool 0 ("a"): node pool "gpu pool" must be 1 to 128`},
		{ClusterSpec{Pools: []Pool{{Name: "all", Nodes: 1, GPUsPerNode: 8}}}, `pool 0 ("all"): node pool "all" is Nomad's built-in pool of every node`},
	} {
		err := c.spec.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one containing %q", c.spec, err, c.want)
		}
	}
}
