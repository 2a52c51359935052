package reconcile

import (
	"slices"
	"testing"

	"github.com/allot-sched/allot/overlay/nomad"
	"github.com/allot-sched/allot/overlay/policy"
)

// Signals become ops after the stops, and the decision log names them
// "notice", one row per allocation, in step with the ops.
func TestSignalOpsAndDecisions(t *testing.T) {
	p := &policy.Plan{
		Stops:       []policy.StopJob{{Job: "default/old", Namespace: "default", Allocs: []string{"a0"}, Reason: policy.Reason{Code: policy.ReasonVictim}}},
		Signals:     []policy.SignalJob{{Job: "default/train", Namespace: "default", Allocs: []string{"a1", "a2"}, Signal: "SIGUSR1", Reason: policy.Reason{Code: policy.ReasonNoticeSent, Job: "default/b", N: 300}}},
		NodeActions: []policy.NodeAction{{Node: "n1", Kind: policy.NodeReserve}},
	}
	ops := OpsFromPlan(p)
	kinds := opKinds(p)
	if len(ops) != len(kinds) {
		t.Fatalf("%d ops, %d kinds", len(ops), len(kinds))
	}
	if ops[1].Kind != nomad.OpSignal || ops[1].Signal != "SIGUSR1" || !slices.Equal(ops[1].Allocs, []string{"a1", "a2"}) || kinds[1] != "notice" {
		t.Fatalf("op 1 = %+v (%s), want the signal op, kind notice", ops[1], kinds[1])
	}
	var results []nomad.Outcome
	for _, o := range ops {
		results = append(results, nomad.Outcome{Op: o})
	}
	_, decs := writeRows(rowsInput{plan: p, results: results})
	var notices []string
	for _, d := range decs {
		if d.Kind == "notice" {
			notices = append(notices, d.AllocID+" "+d.Reason)
		}
	}
	if len(notices) != 2 || notices[0] != "a1 "+p.Signals[0].Reason.String() {
		t.Fatalf("notice decisions %q, want one per allocation with the reason", notices)
	}
}

// failedOf counts the signal ops OpsFromPlan puts between the stops and the
// node actions: an evaluation that failed is the plan's evaluation, not the
// op after it.
func TestFailedOfWithSignals(t *testing.T) {
	p := &policy.Plan{
		Stops:       []policy.StopJob{{Job: "default/old", Namespace: "default", Allocs: []string{"a0"}}},
		Signals:     []policy.SignalJob{{Job: "default/train", Namespace: "default", Allocs: []string{"a1", "a2"}, Signal: "SIGUSR1"}},
		NodeActions: []policy.NodeAction{{Node: "n1", Kind: policy.NodeReserve}},
		Evaluations: []policy.Evaluate{{Job: "default/b", Namespace: "default"}, {Job: "default/c", Namespace: "default"}},
	}
	ops := OpsFromPlan(p)
	results := make([]nomad.Outcome, len(ops))
	for i, o := range ops {
		results[i] = nomad.Outcome{Op: o}
	}
	results[len(ops)-1].Err = nomad.ErrSkipped // the last evaluation (default/c)
	f := failedOf(p, results)
	if len(f.Stops) != 0 || !slices.Equal(f.Evaluations, []int{1}) {
		t.Fatalf("failedOf = %+v, want no stop and evaluation 1 failed", f)
	}
}
