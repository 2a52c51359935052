package reconcile

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/allot-sched/allot/overlay/nomad"
	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/state"
)

// A node's GPUs, as the Nomad adapter keeps them (nomad's TestNodeFromAPI
// converts them from Nomad's node), become one row per GPU instance: model,
// instance ID, healthy or Nomad's reason.
func TestGPURowsFromNode(t *testing.T) {
	n := nomad.Node{ID: "5d0b9c1e-node", Name: "gpu-3", Status: "ready", Eligible: true, GPUs: []nomad.GPUModel{
		{Model: "A100-SXM4-80GB", Total: 1, Unhealthy: []nomad.DeviceHealth{{ID: "GPU-77e0"}}},
		{Model: "H100", Total: 3, Healthy: 2, HealthyIDs: []string{"GPU-a9d4", "GPU-b2c7"},
			Unhealthy: []nomad.DeviceHealth{{ID: "GPU-0f31", Reason: "XID 79 (GPU has fallen off the bus) at 2026-05-01T12:00:00Z"}}},
	}}
	want := []state.NodeGPU{
		{ID: "GPU-77e0", Model: "A100-SXM4-80GB"},
		{ID: "GPU-0f31", Model: "H100", Reason: "XID 79 (GPU has fallen off the bus) at 2026-05-01T12:00:00Z"},
		{ID: "GPU-a9d4", Model: "H100", Healthy: true},
		{ID: "GPU-b2c7", Model: "H100", Healthy: true},
	}
	if diff := cmp.Diff(want, gpuRows(&n)); diff != "" {
		t.Errorf("gpuRows (-want +got):\n%s", diff)
	}

	// The reconcile record carries them on the node's row: a row stored
	// before the field (same counts, no GPUs) is written again, and one
	// that already lists them is not.
	for _, tc := range []struct {
		name      string
		stored    []state.NodeGPU
		wantWrite bool
	}{
		{"row without GPUs is rewritten", nil, true},
		{"row with the same GPUs is kept", want, false},
		{"row with a GPU healthy again is rewritten", append([]state.NodeGPU{{ID: "GPU-77e0", Model: "A100-SXM4-80GB", Healthy: true}}, want[1:]...), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			view := storedState(t, nil, nil, []state.Node{{ID: n.ID, Name: "gpu-3", Drain: policy.NodeNormal,
				Since: rowsT0.Add(-time.Hour), TotalGPUs: 4, HealthyGPUs: 2, GPUs: tc.stored}}, nil)
			f := newRowsFixture(view)
			f.in.state.Nodes[n.ID] = n
			f.in.snap.Nodes = []policy.Node{{ID: n.ID}}
			rows := nodeRows(f.in)
			if !tc.wantWrite {
				if len(rows) != 0 {
					t.Fatalf("rows %+v, want none", rows)
				}
				return
			}
			if len(rows) != 1 || rows[0].TotalGPUs != 4 || rows[0].HealthyGPUs != 2 {
				t.Fatalf("node rows %+v: want one row, 2 of 4 GPUs healthy", rows)
			}
			if diff := cmp.Diff(want, rows[0].GPUs); diff != "" {
				t.Errorf("row GPUs (-want +got):\n%s", diff)
			}
		})
	}
}

// A node with more GPUs than a row lists keeps every unhealthy one, and
// strings longer than their bound are cut on a rune boundary.
func TestGPURowsBounded(t *testing.T) {
	m := nomad.GPUModel{Model: "B200"}
	for i := range 70 {
		m.HealthyIDs = append(m.HealthyIDs, fmt.Sprintf("GPU-%02d", i))
	}
	long := strings.Repeat("é", state.MaxGPUReasonBytes) // two bytes each
	m.Unhealthy = []nomad.DeviceHealth{{ID: "GPU-zz", Reason: long}}
	n := nomad.Node{GPUs: []nomad.GPUModel{m}}
	rows := gpuRows(&n)
	if len(rows) != state.MaxNodeGPUs {
		t.Fatalf("%d rows, want %d", len(rows), state.MaxNodeGPUs)
	}
	last := rows[len(rows)-1]
	if last.ID != "GPU-zz" || last.Healthy || rows[0].ID != "GPU-00" || rows[62].ID != "GPU-62" {
		t.Fatalf("rows %v ... %v: want GPU-00..GPU-62 then the unhealthy GPU-zz", rows[0], last)
	}
	if len(last.Reason) > state.MaxGPUReasonBytes || !utf8.ValidString(last.Reason) || !strings.HasSuffix(last.Reason, "…") {
		t.Errorf("reason cut to %d bytes (valid UTF-8: %t), want at most %d ending in …", len(last.Reason), utf8.ValidString(last.Reason), state.MaxGPUReasonBytes)
	}
	if err := state.CheckNodeGPUs(0, &state.Node{GPUs: rows}); err != nil {
		t.Errorf("clipped rows out of the state's bounds: %v", err)
	}
}
