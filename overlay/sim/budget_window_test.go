package sim

import (
	"math"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
)

// TestBudgetsCountTheLedgersHours: a leaf's delivered GPU time is what the
// allot policy's usage ledger charges over the run, the warm-up's hours
// included, and its owed time counts the same hours. Fair share orders
// budgets by the lookback window's usage, which reaches into the warm-up:
// here lab/a runs alone in the warm-up (its first job on the empty node),
// so lab/b, owed as much, is served after it. Measured from the warm-up's
// end, lab/a was owed nothing and lab/b got twice what it was owed, while
// the ledger fair share ordered them by said the opposite.
func TestBudgetsCountTheLedgersHours(t *testing.T) {
	tree, err := budgets.NewTree([]budgets.Spec{{Path: "lab", Share: 1}, {Path: "lab/a", Share: 1}, {Path: "lab/b", Share: 1}})
	if err != nil {
		t.Fatal(err)
	}
	tr := &Trace{Jobs: []JobSpec{
		{ID: "a", Budget: "lab/a", Class: ClassTrain, Count: 1, GPUs: 8, Work: 2 * time.Hour, MinRuntime: 2 * time.Hour, Resumable: true, Priority: 50},
		{ID: "b", Submit: time.Second, Budget: "lab/b", Class: ClassTrain, Count: 1, GPUs: 8, Work: 2 * time.Hour, MinRuntime: time.Hour, Resumable: true, Priority: 50},
	}}
	p, err := NewAllot(policyDefault())
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Warmup, opts.Horizon = 2*time.Hour, 6*time.Hour
	r, err := Run(tr, UniformCluster(1, 8), tree, p, opts)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]BudgetResult{}
	for _, b := range r.Budgets {
		got[b.Budget] = b
	}
	near := func(x, want float64) bool { return math.Abs(x-want) < 0.1 }
	// Each leaf is owed half the node (4 GPUs) in each hour it has demand:
	// lab/a in hours 0-1 (8 GPU hours), lab/b in hours 0-3 (16).
	a, b := got["lab/a"], got["lab/b"]
	if !near(a.Delivered, 16) || !near(a.Owed, 8) || !near(b.Delivered, 16) || !near(b.Owed, 16) {
		t.Fatalf("lab/a delivered %.2f of %.2f owed (want 16 of 8), lab/b %.2f of %.2f (want 16 of 16)", a.Delivered, a.Owed, b.Delivered, b.Owed)
	}
	if r.BudgetsAt95 != 2 {
		t.Fatalf("%d leaves at >= 95%% of owed, want 2: %+v", r.BudgetsAt95, r.Budgets)
	}
}
