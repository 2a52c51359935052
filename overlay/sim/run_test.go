package sim

import (
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
