package reconcile

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/nomad"
	"github.com/allot-sched/allot/overlay/nomad/nomadtest"
	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/state"
)

// applyEntry applies one raft entry of type typ to f, failing t if the FSM
// refuses it.
func applyEntry(t testing.TB, f *state.FSM, typ state.MessageType, req any) {
	t.Helper()
	b, err := state.Encode(typ, req)
	if err != nil {
		t.Fatal(err)
	}
	if res := f.Apply(&raft.Log{Type: raft.LogCommand, Data: b}); res != nil {
		if err, ok := res.(error); ok {
			t.Fatalf("apply %s: %v", typ, err)
		}
	}
}

// An operator runs `nomad node eligibility -enable` on a node allot drained
// for a GPU fault that has since cleared. The drain lifecycle, the node row
// and the policy's memory of the node must all say it is back in service,
// returned by an operator, and nothing is written to Nomad.
func TestEligibleInNomadReturnsDrainedNode(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	fsm, err := state.NewFSM(state.FSMConfig{})
	if err != nil {
		t.Fatal(err)
	}
	applyEntry(t, fsm, state.NodeUpsertType, state.NodeUpsertRequest{Nodes: []state.Node{{ID: "n1", Name: "gpu-1",
		Drain: policy.NodeDrained, Reason: "unhealthy and empty: ready for repair", Since: t0, TotalGPUs: 8, HealthyGPUs: 7}}})
	applyEntry(t, fsm, state.DrainObserveType, state.DrainObserveRequest{At: t0, Nodes: []state.NodeObservation{{
		NodeID: "n1", Name: "gpu-1", Fault: "XID 79 on GPU-3", HealthyGPUs: 7}}})
	if r := fsm.Read().Drain("n1"); r == nil || r.Phase != policy.NodeDrained {
		t.Fatalf("setup: drain record %+v, want drained", r)
	}

	// The view: healthy again, and eligible, which allot did not do.
	now := t0.Add(2 * time.Hour)
	view := &nomad.State{Nodes: map[string]nomad.Node{"n1": {ID: "n1", Name: "gpu-1", Pool: "default", Status: "ready", Eligible: true,
		GPUs: []nomad.GPUModel{{Model: "H100", Total: 8, Healthy: 8}}}}}
	v := fsm.Read()
	mem := Memory{NodeStates: map[string]policy.NodeState{"n1": v.Node("n1").Drain},
		HealthySince: map[string]time.Time{"n1": t0.Add(time.Hour)}, Carry: &policy.Carry{LastDecision: now.Add(-time.Minute)}}
	snap := BuildSnapshot(view, SnapshotInput{Memory: mem})
	fs := budgets.ComputeFairShare(placeholderTree, nil)
	plan := policy.Decide(snap, placeholderTree, fs, now, policy.DefaultConfig())
	if len(plan.NodeActions) != 1 || plan.NodeActions[0].Kind != policy.NodeEligible || plan.NodeActions[0].State() != policy.NodeNormal {
		t.Fatalf("plan node actions = %+v, want one eligible action recording the return", plan.NodeActions)
	}

	// Applying it writes nothing: Nomad has the node eligible.
	fake := nomadtest.NewNodes(t, map[string]string{"n1": "eligible"})
	client, err := nomad.NewClientFor(fake.URL)
	if err != nil {
		t.Fatal(err)
	}
	ops := OpsFromPlan(plan)
	results := nomad.NewApplier(client, nomad.ApplyConfig{}, nil).Apply(context.Background(), ops)
	for _, o := range results {
		if o.Err != nil {
			t.Fatalf("op %+v: %v", o.Op, o.Err)
		}
	}
	if w := fake.Writes(); len(w) != 0 {
		t.Errorf("writes to Nomad = %v, want none", w)
	}

	in := rowsInput{view: v, state: view, snap: snap, plan: plan, results: results, cfg: &Config{}, now: now}
	rows := nodeRows(in)
	if len(rows) != 1 || rows[0].Drain != policy.NodeNormal || !strings.Contains(rows[0].Reason, "nomad node eligibility") {
		t.Errorf("node rows = %+v, want n1 active, returned in Nomad", rows)
	}
	obs := drainRows(in)
	if len(obs) != 1 || obs[0].ReturnedBy != state.ReturnedByOperator {
		t.Fatalf("drain observations = %+v, want n1 returned by an operator", obs)
	}
	applyEntry(t, fsm, state.NodeUpsertType, state.NodeUpsertRequest{Nodes: rows})
	applyEntry(t, fsm, state.DrainObserveType, state.DrainObserveRequest{At: now, Nodes: obs})
	v = fsm.Read()
	r := v.Drain("n1")
	if r.Phase != policy.NodeReturned || r.ReturnedBy != state.ReturnedByOperator {
		t.Errorf("drain record phase %s returned by %q, want returned by operator", r.Phase, r.ReturnedBy)
	}
	if got := v.DrainStats().Returned[state.ReturnedByOperator]; got != 1 {
		t.Errorf("returns by operator counted %d, want 1", got)
	}
	if st := v.Node("n1").Drain; st != policy.NodeNormal {
		t.Errorf("policy memory of n1 from the node row = %s, want normal", st)
	}
}
