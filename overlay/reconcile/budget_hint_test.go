package reconcile

import (
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/nomad"
	"github.com/allot-sched/allot/overlay/state"
)

// A job naming a misspelt budget runs unallocated, and the reason allot
// explain shows names the leaf it likely meant, from the applied tree; one
// naming an inner budget is told the leaves below it.
func TestMisspeltBudgetGetsDidYouMean(t *testing.T) {
	fsm, err := state.NewFSM(state.FSMConfig{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := state.Encode(state.BudgetsApplyType, state.BudgetsApplyRequest{Revision: "r1", Specs: []budgets.Spec{
		{Path: "ai2"}, {Path: "ai2/vision", Share: 1}, {Path: "ai2/vision/video", Share: 1}, {Path: "ai2/vision/perception", Share: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if res := fsm.ApplyEntry(b); res != nil {
		if e, ok := res.(error); ok {
			t.Fatal(e)
		}
	}
	v := fsm.Read()
	tree, leaf := budgetTree(v)
	st := stateOf([]nomad.Job{
		gpuJob("default", "vid", "gpu", 1, 1, map[string]string{"budget": "ai2/vision/vidoe", "min_runtime": "1h"}),
		gpuJob("default", "far", "gpu", 1, 1, map[string]string{"budget": "lab/other", "min_runtime": "1h"}),
		gpuJob("default", "inner", "gpu", 1, 1, map[string]string{"budget": "ai2/vision", "min_runtime": "1h"}),
	}, nil, nil)
	snap := BuildSnapshot(st, SnapshotInput{Leaf: leaf, Nearest: tree.NearestLeaf, Under: tree.LeavesUnder})
	rows := jobRows(rowsInput{snap: snap, firstSeen: map[string]time.Time{}})
	if got := rows["default/vid"].Contract.Reason; !strings.Contains(got, `no such budget (did you mean "ai2/vision/video"?); the job runs unallocated`) {
		t.Errorf("reason for ai2/vision/vidoe = %q, want the did-you-mean ai2/vision/video", got)
	}
	if got := rows["default/far"].Contract.Reason; !strings.Contains(got, "no such budget; the job runs unallocated") || strings.Contains(got, "did you mean") {
		t.Errorf("reason for lab/other = %q, want no such budget and no suggestion", got)
	}
	if got := rows["default/inner"].Contract.Reason; !strings.Contains(got, "Name one of its leaves instead: ai2/vision/perception, ai2/vision/video") {
		t.Errorf("reason for ai2/vision = %q, want its leaves named", got)
	}
}
