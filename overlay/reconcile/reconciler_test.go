package reconcile

import (
	"errors"
	"slices"
	"testing"

	"github.com/allot-sched/allot/overlay/nomad"
	"github.com/allot-sched/allot/overlay/policy"
)

// The applier's outcomes, in OpsFromPlan order, name the plan's stops and
// evaluations Nomad did not accept, by their index in the plan; ops the
// applier never reached count as failed.
func TestFailedOf(t *testing.T) {
	plan := &policy.Plan{
		SetPriorities: []policy.SetPriority{{Job: "default/v1", Namespace: "default", To: 45}},
		Stops: []policy.StopJob{
			{Job: "default/v1", Namespace: "default", Allocs: []string{"a1"}},
			{Job: "default/v2", Namespace: "default", Allocs: []string{"a2"}},
		},
		NodeActions: []policy.NodeAction{{Node: "n1", Kind: policy.NodeReserve}},
		Evaluations: []policy.Evaluate{{Job: "default/b1"}, {Job: "default/b2"}, {Job: "default/b3"}},
	}
	ops := OpsFromPlan(plan)
	results := make([]nomad.Outcome, len(ops))
	for i, op := range ops {
		results[i] = nomad.Outcome{Op: op}
	}
	results[2].Err = nomad.ErrSkipped  // the second stop
	results[3].Err = errors.New("500") // the node action: not the policy's memory
	results[5].Err = nomad.ErrConflict // the second evaluation
	got := failedOf(plan, results[:6]) // the third evaluation never tried
	if !slices.Equal(got.Stops, []int{1}) || !slices.Equal(got.Evaluations, []int{1, 2}) {
		t.Errorf("failedOf = %+v, want stops [1], evaluations [1 2]", got)
	}
	if got := failedOf(plan, results[:0]); len(got.Stops) != 2 || len(got.Evaluations) != 3 {
		t.Errorf("nothing applied: failedOf = %+v, want every stop and evaluation", got)
	}
	for i := range results {
		results[i].Err = nil
	}
	if got := failedOf(plan, results); got.Stops != nil || got.Evaluations != nil {
		t.Errorf("everything applied: failedOf = %+v, want nothing", got)
	}
}
