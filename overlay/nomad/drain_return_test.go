package nomad

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/state"
	"github.com/hashicorp/nomad/api"
	"github.com/hashicorp/raft"
)

func applyEntry(t *testing.T, f *state.FSM, typ state.MessageType, req any) {
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
	view := &State{Nodes: map[string]Node{"n1": {ID: "n1", Name: "gpu-1", Pool: "default", Status: "ready", Eligible: true,
		GPUs: []GPUModel{{Model: "H100", Total: 8, Healthy: 8}}}}}
	v := fsm.Read()
	mem := Memory{NodeStates: map[string]policy.NodeState{"n1": nodeStateOf(v.Node("n1").Drain)},
		HealthySince: map[string]time.Time{"n1": t0.Add(time.Hour)}, LastDecision: now.Add(-time.Minute)}
	snap := BuildSnapshot(view, SnapshotInput{Memory: mem})
	fs := budgets.ComputeFairShare(placeholderTree, nil)
	plan := policy.Decide(snap, placeholderTree, fs, now, policy.DefaultConfig())
	if len(plan.NodeActions) != 1 || plan.NodeActions[0].Kind != policy.NodeEligible || plan.NodeActions[0].State() != policy.NodeNormal {
		t.Fatalf("plan node actions = %+v, want one eligible action recording the return", plan.NodeActions)
	}

	// Applying it writes nothing: Nomad has the node eligible.
	nomad := newFakeNomadNodes(t, map[string]string{"n1": api.NodeSchedulingEligible})
	ops := OpsFromPlan(plan)
	results := nomad.applier(t).Apply(context.Background(), ops)
	for _, o := range results {
		if o.Err != nil {
			t.Fatalf("op %+v: %v", o.Op, o.Err)
		}
	}
	if w := nomad.writes(); len(w) != 0 {
		t.Errorf("writes to Nomad = %v, want none", w)
	}

	in := rowsInput{view: v, state: view, snap: snap, plan: plan, results: results, cfg: &ReconcilerConfig{}, now: now}
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
	if st := nodeStateOf(v.Node("n1").Drain); st != policy.NodeNormal {
		t.Errorf("policy memory of n1 from the node row = %s, want normal", st)
	}
}

func TestSetEligibilityWritesOnlyAChange(t *testing.T) {
	nomad := newFakeNomadNodes(t, map[string]string{"n1": api.NodeSchedulingEligible, "n2": api.NodeSchedulingIneligible})
	a := nomad.applier(t)
	ctx := context.Background()
	for _, c := range []struct {
		node     string
		eligible bool
	}{{"n1", true}, {"n2", false}, {"n1", false}, {"n2", true}} {
		if err := a.SetEligibility(ctx, c.node, c.eligible); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"n1 ineligible", "n2 eligible"}
	if got := nomad.writes(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("writes = %v, want %v", got, want)
	}
	if err := a.SetEligibility(ctx, "n9", true); err == nil {
		t.Error("unknown node n9: no error")
	}
}

// fakeNomadNodes serves GET /v1/node/<id> and PUT /v1/node/<id>/eligibility.
type fakeNomadNodes struct {
	srv *httptest.Server
	mu  sync.Mutex
	elg map[string]string
	wr  []string
}

func newFakeNomadNodes(t *testing.T, elg map[string]string) *fakeNomadNodes {
	f := &fakeNomadNodes{elg: elg}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeNomadNodes) applier(t *testing.T) *Applier {
	c, err := api.NewClient(&api.Config{Address: f.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return NewApplier(c, ApplyConfig{}, nil)
}

func (f *fakeNomadNodes) writes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.wr...)
}

func (f *fakeNomadNodes) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/node/")
	id, verb, _ := strings.Cut(rest, "/")
	e, known := f.elg[id]
	if !ok || !known {
		http.Error(w, "node not found", http.StatusNotFound)
		return
	}
	switch {
	case r.Method == http.MethodGet && verb == "":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ID":"` + id + `","SchedulingEligibility":"` + e + `"}`))
	case r.Method == http.MethodPut && verb == "eligibility":
		var body struct{ Eligibility string }
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.elg[id] = body.Eligibility
		f.wr = append(f.wr, id+" "+body.Eligibility)
		_, _ = w.Write([]byte(`{}`))
	default:
		http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusMethodNotAllowed)
	}
}
