package main

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/server"
	"github.com/allot-sched/allot/overlay/state"
)

// TestNodesLifecycleAndReturn lists a cordoned node with the allocation
// left on it and when it leaves, then returns it by hand.
func TestNodesLifecycleAndReturn(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	rec := server.NewInmemReconciler()
	s := devServer(t, server.Config{Reconciler: rec, Clock: func() time.Time { return now }})
	gpus := []state.NodeGPU{{ID: "GPU-4", Model: "H100", Healthy: true},
		{ID: "GPU-5", Model: "H100", Reason: "XID 79 (GPU has fallen off the bus)"}}
	rec.SetNode(state.Node{ID: "9f0c1e2d-node", Name: "gpu-7", Drain: policy.NodeDraining, TotalGPUs: 8, HealthyGPUs: 7, Since: now, GPUs: gpus})
	leaves := now.Add(40 * time.Minute)
	rec.SetDrains([]state.NodeObservation{{NodeID: "9f0c1e2d-node", Name: "gpu-7", HealthyGPUs: 7,
		Fault:  "XID 79 (GPU has fallen off the bus) at " + now.Format(time.RFC3339) + " on GPU-5",
		Allocs: []state.DrainAlloc{{ID: "alloc-1", JobID: "default/train", GPUs: 4, LeavesAt: leaves}, {ID: "alloc-2", GPUs: 1}}}})
	waitUntil(t, "a reconcile pass", func() bool { return s.ReconcileOnce(context.Background()) == nil })
	t.Setenv("ALLOT_ADDR", s.HTTPAddr())

	code, out, errOut := runCLI(t, "nodes")
	if code != exitOK {
		t.Fatalf("nodes: %d %q", code, errOut)
	}
	for _, want := range []string{"cordoned", "unhealthy: XID 79 (GPU has fallen off the bus)", "7/8",
		"gpu-7 (9f0c1e2d-node) cordoned: 2 allocation(s) left, 0 requeued",
		"alloc-1  default/train  4     " + leaves.Format(time.RFC3339) + " (in ", "alloc-2  -", "not managed by allot",
		"Unhealthy GPUs:\n  NODE   GPU    MODEL  REASON\n  gpu-7  GPU-5  H100   XID 79 (GPU has fallen off the bus)\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("nodes output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runCLI(t, "nodes", "-json")
	if code != exitOK || !strings.Contains(out, `"phase": "cordoned"`) || !strings.Contains(out, `"leaves_at": "`+leaves.Format(time.RFC3339)) {
		t.Fatalf("nodes -json: %d\n%s", code, out)
	}
	var ns client.Nodes
	if err := json.Unmarshal([]byte(out), &ns); err != nil || len(ns.Nodes) != 1 ||
		!reflect.DeepEqual(ns.Nodes[0].GPUs, []client.NodeGPU{{ID: "GPU-4", Model: "H100", Healthy: true},
			{ID: "GPU-5", Model: "H100", Reason: "XID 79 (GPU has fallen off the bus)"}}) {
		t.Fatalf("nodes -json GPUs: %v\n%s", err, out)
	}

	code, _, errOut = runCLI(t, "nodes", "return", "gpu-7")
	if code != exitInvalid || !strings.Contains(errOut, "token is required") {
		t.Fatalf("return without token: %d %q", code, errOut)
	}
	code, _, errOut = runCLI(t, "nodes", "return")
	if code != exitUsage {
		t.Fatalf("return without NODE: %d %q", code, errOut)
	}
	code, out, errOut = runCLI(t, "nodes", "return", "-token", cliToken, "9f0c")
	if code != exitOK || !strings.Contains(out, "reports 7 of 8 GPUs healthy: it returns to service as soon as all are healthy") {
		t.Fatalf("return: %d %q %q", code, out, errOut)
	}
	code, out, _ = runCLI(t, "nodes")
	if code != exitOK || !strings.Contains(out, "(return requested)") {
		t.Fatalf("nodes after return request: %d\n%s", code, out)
	}
}

// A reserved node says once whom it is held for and until when; -json gives
// the reservation its own object and keeps drain for drain states.
func TestNodesReservation(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	rec := server.NewInmemReconciler()
	s := devServer(t, server.Config{Reconciler: rec, Clock: func() time.Time { return now }})
	until := now.Add(2 * time.Hour)
	// The reason as the Nomad adapter records it (policy.ReasonReserved).
	rec.SetNode(state.Node{ID: "n1-id", Name: "gpu-1", Drain: policy.NodeReserved, ReservedFor: "default/big", ReservedUntil: until,
		Reason: "reserved for default/big until its GPUs are free (at most until " + until.Format(time.RFC3339) + ")",
		Since:  now, TotalGPUs: 8, HealthyGPUs: 8})
	rec.SetNode(state.Node{ID: "n2-id", Name: "gpu-2", Drain: policy.NodeNormal, Since: now, TotalGPUs: 8, HealthyGPUs: 8})
	waitUntil(t, "a reconcile pass", func() bool { return s.ReconcileOnce(context.Background()) == nil })
	t.Setenv("ALLOT_ADDR", s.HTTPAddr())

	code, out, errOut := runCLI(t, "nodes")
	want := "n1-id  gpu-1  reserved    8/8                   2026-06-01T12:00:00Z  " +
		"held for default/big until its GPUs are free (at most until 2026-06-01T14:00:00Z)\n"
	if code != exitOK || !strings.Contains(out, want) || strings.Count(out, "default/big") != 1 {
		t.Errorf("nodes: %d %q\n%s\nwant the line %q, the job named once", code, errOut, out, want)
	}
	code, out, _ = runCLI(t, "nodes", "-json")
	var ns client.Nodes
	if code != exitOK || json.Unmarshal([]byte(out), &ns) != nil || len(ns.Nodes) != 2 {
		t.Fatalf("nodes -json: %d %s", code, out)
	}
	r := ns.Nodes[0].Reservation
	if ns.Nodes[0].Drain != "active" || r == nil || r.Job != "default/big" || !r.Since.Equal(now) || !r.Until.Equal(until) ||
		ns.Nodes[1].Reservation != nil || strings.Contains(out, `"reserved"`) || strings.Contains(out, "reserved_for") {
		t.Errorf("nodes -json: want drain active and reservation {job, since, until} on gpu-1 only:\n%s", out)
	}
	if !strings.Contains(out, `"reservation": {
        "job": "default/big",
        "since": "2026-06-01T12:00:00Z",
        "until": "2026-06-01T14:00:00Z"
      },`) {
		t.Errorf("nodes -json reservation object:\n%s", out)
	}
}
