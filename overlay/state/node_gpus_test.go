package state

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/allot-sched/allot/overlay/policy"
)

// A node row keeps its GPUs through a log entry and a snapshot; a row
// written before the field decodes with none.
func TestNodeGPUsRoundTrip(t *testing.T) {
	f := newFSM(t, FSMConfig{})
	gpus := []NodeGPU{
		{ID: "GPU-0a1b", Model: "H100", Healthy: true},
		{ID: "GPU-3c4d", Model: "H100", Reason: "XID 79 (GPU has fallen off the bus)"},
	}
	mustApply(t, f, NodeUpsertType, NodeUpsertRequest{Nodes: []Node{{ID: "n1", Drain: policy.NodeDraining, Since: t0,
		TotalGPUs: 2, HealthyGPUs: 1, GPUs: gpus}}})
	old := `{"Nodes":[{"ID":"n2","Name":"gpu-2","Drain":"active","Reason":"","Since":"2026-03-02T09:00:00Z",` +
		`"ReservedFor":"","ReservedUntil":"0001-01-01T00:00:00Z","TotalGPUs":8,"HealthyGPUs":8}]}`
	if err, ok := f.ApplyEntry(append([]byte{byte(NodeUpsertType)}, old...)).(error); ok {
		t.Fatalf("node row without GPUs: %v", err)
	}
	if n := f.Read().Node("n1"); n == nil || !reflect.DeepEqual(n.GPUs, gpus) {
		t.Fatalf("n1 after apply: %+v, want GPUs %+v", n, gpus)
	}
	if n := f.Read().Node("n2"); n == nil || n.GPUs != nil || n.TotalGPUs != 8 {
		t.Fatalf("old row n2 read as %+v, want 8 GPUs counted and none listed", n)
	}

	snap := snapshotBytes(t, f)
	if !bytes.Contains(snap, []byte(`"GPUs":[{"ID":"GPU-0a1b","Model":"H100","Healthy":true}`)) {
		t.Errorf("snapshot lacks n1's GPU rows under their JSON names")
	}
	g := newFSM(t, FSMConfig{})
	if err := g.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	if n := g.Read().Node("n1"); n == nil || !reflect.DeepEqual(n.GPUs, gpus) {
		t.Fatalf("n1 after restore: %+v, want GPUs %+v", n, gpus)
	}
	if n := g.Read().Node("n2"); n == nil || n.GPUs != nil {
		t.Fatalf("n2 after restore: %+v", n)
	}
}

// The FSM refuses a node row beyond the GPU list's bounds, naming the field.
func TestNodeGPUsBounded(t *testing.T) {
	many := make([]NodeGPU, MaxNodeGPUs+1)
	for i := range many {
		many[i] = NodeGPU{ID: "GPU-x", Model: "H100", Healthy: true}
	}
	for _, tt := range []struct {
		name string
		gpus []NodeGPU
		want string
	}{
		{"too many GPUs", many, "nodes[0].gpus has 65 GPUs; at most 64"},
		{"long ID", []NodeGPU{{ID: strings.Repeat("x", MaxIDBytes+1)}}, "nodes[0].gpus[0].id is 257 bytes"},
		{"long model", []NodeGPU{{ID: "g", Model: strings.Repeat("x", MaxIDBytes+1)}}, "nodes[0].gpus[0].model is 257 bytes"},
		{"long reason", []NodeGPU{{ID: "g", Reason: strings.Repeat("x", MaxGPUReasonBytes+1)}}, "nodes[0].gpus[0].reason is 1025 bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFSM(t, FSMConfig{})
			data, err := Encode(NodeUpsertType, NodeUpsertRequest{Nodes: []Node{{ID: "n1", Drain: policy.NodeNormal, GPUs: tt.gpus}}})
			if err != nil {
				t.Fatal(err)
			}
			err, _ = f.ApplyEntry(data).(error)
			if !errors.Is(err, ErrOutOfBounds) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want ErrOutOfBounds saying %q", err, tt.want)
			}
			if f.Read().Node("n1") != nil {
				t.Fatal("a refused row was stored")
			}
		})
	}
	f := newFSM(t, FSMConfig{})
	mustApply(t, f, NodeUpsertType, NodeUpsertRequest{Nodes: []Node{{ID: "n1", Drain: policy.NodeNormal, GPUs: many[:MaxNodeGPUs]}}})
}
