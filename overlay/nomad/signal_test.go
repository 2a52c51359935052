package nomad

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/allot-sched/allot/overlay/policy"
	"github.com/hashicorp/nomad/api"
)

// signalNomad records the allocation signal requests it gets.
type signalNomad struct {
	mu   sync.Mutex
	got  []string // alloc: signal, task
	gone map[string]bool
}

func (f *signalNomad) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var req api.AllocSignalRequest
	_ = json.NewDecoder(r.Body).Decode(&req)
	const prefix = "/v1/client/allocation/"
	if r.Method != http.MethodPut && r.Method != http.MethodPost || len(r.URL.Path) <= len(prefix) || r.URL.Path[:len(prefix)] != prefix {
		http.NotFound(w, r)
		return
	}
	id := r.URL.Path[len(prefix) : len(r.URL.Path)-len("/signal")]
	if f.gone[id] {
		http.Error(w, "unknown allocation", http.StatusNotFound)
		return
	}
	f.got = append(f.got, id+": "+req.Signal+", task "+req.Task)
	_ = json.NewEncoder(w).Encode(map[string]any{})
}

// The signal op sends the job's signal to every task (no task named) of
// each allocation; one already gone is no error.
func TestApplySignal(t *testing.T) {
	fake := &signalNomad{gone: map[string]bool{"a2": true}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	cl, err := api.NewClient(&api.Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	a := NewApplier(cl, ApplyConfig{}, nil)
	key := JobKey{Namespace: "default", ID: "train"}
	out := a.Apply(context.Background(), []Op{{Kind: OpSignal, Job: key, Allocs: []string{"a1", "a2", "a3"}, Signal: "SIGUSR1"}})
	if len(out) != 1 || out[0].Err != nil {
		t.Fatalf("outcomes %+v, want one without error", out)
	}
	want := []string{"a1: SIGUSR1, task ", "a3: SIGUSR1, task "}
	if !slices.Equal(fake.got, want) {
		t.Fatalf("Nomad got %q, want %q", fake.got, want)
	}
}

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
	if ops[1].Kind != OpSignal || ops[1].Signal != "SIGUSR1" || !slices.Equal(ops[1].Allocs, []string{"a1", "a2"}) || kinds[1] != "notice" {
		t.Fatalf("op 1 = %+v (%s), want the signal op, kind notice", ops[1], kinds[1])
	}
	var results []Outcome
	for _, o := range ops {
		results = append(results, Outcome{Op: o})
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
