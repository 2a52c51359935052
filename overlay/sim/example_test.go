package sim

import (
	"testing"

	"github.com/allot-sched/allot/budgets"
)

// exampleTree mirrors examples/budgets: an institute with 15 team leaves
// under six programs (the package may not read HCL; cmd/allot does).
func exampleTree(tb testing.TB) *budgets.Tree {
	tb.Helper()
	specs := []budgets.Spec{{Path: "ai2"},
		{Path: "ai2/infra", Share: 10},
		{Path: "ai2/nlp", Share: 20}, {Path: "ai2/nlp/reasoning", Share: 40}, {Path: "ai2/nlp/safety", Share: 25},
		{Path: "ai2/nlp/semantic-scholar", Share: 35},
		{Path: "ai2/prior", Share: 40}, {Path: "ai2/prior/olmo", Share: 60}, {Path: "ai2/prior/olmo/pretrain", Share: 55},
		{Path: "ai2/prior/olmo/posttrain", Share: 30}, {Path: "ai2/prior/olmo/evals", Share: 15},
		{Path: "ai2/prior/molmo", Share: 25}, {Path: "ai2/prior/data", Share: 15},
		{Path: "ai2/robotics", Share: 15}, {Path: "ai2/robotics/manipulation", Share: 50},
		{Path: "ai2/robotics/navigation", Share: 30}, {Path: "ai2/robotics/simulation", Share: 20},
		{Path: "ai2/vision", Share: 15}, {Path: "ai2/vision/perception", Share: 30}, {Path: "ai2/vision/video", Share: 40},
		{Path: "ai2/vision/geometry_3d", Share: 30},
	}
	t, err := budgets.NewTree(specs)
	if err != nil {
		tb.Fatal(err)
	}
	if n := len(t.Leaves()); n != 15 {
		tb.Fatalf("%d leaves, want 15", n)
	}
	return t
}
