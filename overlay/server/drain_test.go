package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/state"
)

// TestDrainLifecycleThroughAPI drives a node through a drain with the
// in-memory reconciler and reads it back as an operator would: /v1/nodes,
// the node-transition decisions, the metrics, and a manual return.
func TestDrainLifecycleThroughAPI(t *testing.T) {
	clock := &fakeClock{now: tBase}
	rec := NewInmemReconciler()
	s := devServer(t, Config{Token: testToken, Reconciler: rec, Clock: clock.Now})
	ctx := context.Background()
	cl, _ := client.New(s.HTTPAddr(), testToken, nil)
	pass := func() {
		t.Helper()
		if err := s.ReconcileOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rec.SetNode(state.Node{ID: "node-1111", Name: "gpu-1", Drain: policy.NodeDraining, TotalGPUs: 8, HealthyGPUs: 7, Since: tBase})
	rec.SetNode(state.Node{ID: "node-2222", Name: "gpu-2", Drain: policy.NodeNormal, TotalGPUs: 8, HealthyGPUs: 8, Since: tBase})
	leaves := tBase.Add(2 * time.Hour)
	sick := state.NodeObservation{NodeID: "node-1111", Name: "gpu-1", Fault: "XID 79 (GPU has fallen off the bus) at 2026-03-02T09:00:00Z on GPU-3",
		HealthyGPUs: 7, Allocs: []state.DrainAlloc{{ID: "a1", JobID: "default/train", GPUs: 4, LeavesAt: leaves}}}
	rec.SetDrains([]state.NodeObservation{sick})
	pass()

	ns, err := cl.Nodes(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(ns.Nodes) != 2 {
		t.Fatalf("nodes: %+v", ns.Nodes)
	}
	lc := ns.Nodes[0].Lifecycle
	if lc.Phase != policy.NodeCordoned.Phase() || lc.Cause != state.CauseUnhealthy || !strings.Contains(lc.Reason, "XID 79") ||
		len(lc.Allocs) != 1 || !lc.Allocs[0].LeavesAt.Equal(leaves) {
		t.Fatalf("node-1111 lifecycle: %+v", lc)
	}
	if p := ns.Nodes[1].Lifecycle.Phase; p != policy.NodeNormal.Phase() {
		t.Fatalf("node-2222 phase %q, want in-service", p)
	}

	// A return needs the token, a known node, and a node in a drain.
	anon, _ := client.New(s.HTTPAddr(), "", nil)
	if _, err := anon.ReturnNode(ctx, "gpu-1"); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("return without a token: %v", err)
	}
	if _, err := cl.ReturnNode(ctx, "gpu-9"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("return of an unknown node: %v", err)
	}
	var apiErr *client.APIError
	if _, err := cl.ReturnNode(ctx, "gpu-2"); !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict ||
		!strings.Contains(apiErr.Message, "in-service") {
		t.Fatalf("return of a node in service: %v", err)
	}
	ret, err := cl.ReturnNode(ctx, "node-11")
	if err != nil {
		t.Fatal(err)
	}
	if ret.NodeID != "node-1111" || !strings.Contains(ret.Message, "7 of 8 GPUs healthy") {
		t.Fatalf("return answer: %+v", ret)
	}

	// The window ends, the allocation is requeued, the node empties, then
	// it is healthy and the reconciler returns it (as the operator asked).
	clock.Advance(2 * time.Hour)
	rec.SetDrains([]state.NodeObservation{with(sick, func(o *state.NodeObservation) { o.Requeued = []string{"a1"} })})
	pass()
	clock.Advance(time.Minute)
	rec.SetDrains([]state.NodeObservation{with(sick, func(o *state.NodeObservation) { o.Allocs = nil })})
	pass()
	clock.Advance(time.Minute)
	rec.SetDrains([]state.NodeObservation{{NodeID: "node-1111", Healthy: true, Eligible: true, HealthyGPUs: 8,
		ReturnedBy: state.ReturnedByOperator, ReturnReason: "returned to service by an operator (allot nodes return)"}})
	pass()

	ds, err := cl.Decisions(ctx, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range ds.Decisions {
		if d.Kind == state.DecisionNodeTransition {
			got = append(got, d.Reason[:strings.IndexAny(d.Reason, ":")])
		}
	}
	want := []string{"in-service -> cordoned", "return requested by an operator while cordoned", "cordoned -> draining",
		"draining -> drained", "drained -> returned"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("node transitions %q, want %q", got, want)
	}
	ns, _ = cl.Nodes(ctx, false)
	if lc := ns.Nodes[0].Lifecycle; lc.Phase != policy.NodeReturned.Phase() || lc.ReturnedBy != state.ReturnedByOperator ||
		lc.Requeued != 1 || lc.ReturnRequested || len(lc.Allocs) != 0 {
		t.Fatalf("after return: %+v", lc)
	}

	code, body := rawRequest(t, s, "GET", "/v1/metrics", "", nil)
	if code != 200 {
		t.Fatalf("metrics: %d", code)
	}
	// 7 healthy - 4 held = 3 idle GPUs for 2h, and for 1m more: the
	// requeued allocation is held until the pass that sees it gone.
	// The drain itself needed no operator (automatic); the return did.
	for _, line := range []string{
		`allot_drains_started_total{cause="unhealthy"} 1`,
		`allot_drains_completed_total{cause="unhealthy",how="automatic"} 1`,
		`allot_node_transitions_total{phase="drained"} 1`,
		`allot_nodes_returned_total{by="operator"} 1`,
		`allot_drain_allocations_requeued_total 1`,
		`allot_drain_gpu_hours_lost_total 6.05`,
		`allot_nodes_drain_phase{phase="returned"} 1`,
		`allot_nodes_drain_phase{phase="in-service"} 1`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("metrics lack %q", line)
		}
	}
}

func with(o state.NodeObservation, f func(*state.NodeObservation)) state.NodeObservation {
	f(&o)
	return o
}

// GET /v1/nodes lists each node's GPUs with its model and, when unhealthy,
// the reason; a node recorded without them answers an empty list.
func TestNodesAPIListsGPUs(t *testing.T) {
	rec := NewInmemReconciler()
	s := devServer(t, Config{Reconciler: rec, Clock: func() time.Time { return tBase }})
	gpus := []state.NodeGPU{{ID: "GPU-0a1b", Model: "H100", Healthy: true},
		{ID: "GPU-3c4d", Model: "H100", Reason: "XID 79 (GPU has fallen off the bus)"}}
	rec.SetNode(state.Node{ID: "node-1111", Name: "gpu-1", Drain: policy.NodeDraining, TotalGPUs: 2, HealthyGPUs: 1, Since: tBase, GPUs: gpus})
	rec.SetNode(state.Node{ID: "node-2222", Name: "gpu-2", Drain: policy.NodeNormal, TotalGPUs: 8, HealthyGPUs: 8, Since: tBase})
	if err := s.ReconcileOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, pretty := rawRequest(t, s, "GET", "/v1/nodes", "", nil)
	var compact bytes.Buffer
	_ = json.Compact(&compact, []byte(pretty))
	body := compact.String()
	if code != http.StatusOK ||
		!strings.Contains(body, `"gpus":[{"id":"GPU-0a1b","model":"H100","healthy":true},{"id":"GPU-3c4d","model":"H100","healthy":false,"reason":"XID 79 (GPU has fallen off the bus)"}]`) ||
		!strings.Contains(body, `"gpus":[]`) {
		t.Fatalf("GET /v1/nodes: %d %s\nwant gpu-1's two GPUs and gpu-2's empty list", code, body)
	}
	cl, _ := client.New(s.HTTPAddr(), "", nil)
	ns, err := cl.Nodes(context.Background(), false)
	if err != nil || len(ns.Nodes) != 2 || len(ns.Nodes[0].GPUs) != 2 || ns.Nodes[0].GPUs[1] != (client.NodeGPU{ID: "GPU-3c4d", Model: "H100", Reason: "XID 79 (GPU has fallen off the bus)"}) {
		t.Fatalf("client nodes: %+v %v", ns, err)
	}
}
