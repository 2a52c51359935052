package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/server"
	"github.com/allot-sched/allot/overlay/state"
)

// `allot explain job` and `allot queue` show the fair-share sort metric
// with its parts: the served ratio and each level's share, usage and level
// fairshare, where a level whose usage is zero has LF "inf".
func TestExplainShowsStanding(t *testing.T) {
	rec := server.NewInmemReconciler()
	s := devServer(t, server.Config{Reconciler: rec})
	ctx := context.Background()
	cl, _ := client.New(s.HTTPAddr(), cliToken, nil)

	if _, err := cl.ApplyBudgets(ctx, &client.BudgetsApply{Revision: "r1", Budgets: []client.BudgetSpec{
		{Path: "ai2", Share: 1}, {Path: "ai2/prior", Share: 2}, {Path: "ai2/mosaic", Share: 1},
		{Path: "ai2/prior/olmo", Share: 3}, {Path: "ai2/prior/molmo", Share: 2},
		{Path: "ai2/prior/olmo/pretrain", Share: 3}, {Path: "ai2/prior/olmo/eval", Share: 1}}}); err != nil {
		t.Fatal(err)
	}
	// GPU-hours over the window: pretrain 40, molmo 30, mosaic 50, eval none.
	tree := s.FSM().Read().Budgets().Tree()
	usage := make([]int64, len(tree.Leaves()))
	for path, hours := range map[string]int64{"ai2/prior/olmo/pretrain": 40, "ai2/prior/molmo": 30, "ai2/mosaic": 50} {
		n, _ := tree.Lookup(path)
		usage[n.LeafIndex] = hours * 3600
	}
	fs := budgets.ComputeFairShare(tree, usage)
	rank := func(path string) *budgets.LeafRank { n, _ := tree.Lookup(path); return fs.Rank(n.LeafIndex) }
	free := time.Date(2026, 6, 1, 14, 5, 0, 0, time.UTC)
	var queue []state.QueueEntry
	for i, name := range []string{"eval-1", "train-7"} {
		leaf := map[string]string{"eval-1": "ai2/prior/olmo/eval", "train-7": "ai2/prior/olmo/pretrain"}[name]
		job := state.Job{ID: "default/" + name, Namespace: "default", Name: name, GPUs: 8,
			Contract: state.Contract{Budget: leaf, MinRuntime: time.Hour}, SubmittedAt: time.Now()}
		rec.SetJob(job)
		queue = append(queue, state.QueueEntry{JobID: job.ID, Leaf: leaf, Band: "pending", Priority: 88 - i, Position: i + 1,
			SortMetric: budgets.Ratio(rank(leaf).Metric), Standing: state.NewStanding(rank(leaf)), FreeAt: free,
			Explanation: fmt.Sprintf("pending, %s in the pending queue; waiting for protected windows", policy.Ordinal(i+1))})
	}
	rec.SetQueue(queue)
	if err := s.ReconcileOnce(ctx); err != nil {
		t.Fatalf("recording the queue: %v", err)
	}
	t.Setenv("ALLOT_ADDR", s.HTTPAddr())

	code, out, errOut := runCLI(t, "explain", "job", "default/train-7")
	if code != exitOK {
		t.Fatalf("explain: %d %q", code, errOut)
	}
	// pretrain: 2nd of 4 leaves (eval, idle, comes first): metric 3/4.
	// Usage 40 of 120 h = 33.3%; share 2/3 * 3/5 * 3/4 = 30%: served 1.11.
	// Levels: prior S 2/3, U 70/120; olmo S 3/5, U 40/70; pretrain S 3/4, U 40/40.
	for _, want := range []string{
		"Queue:        2nd in the pending queue\n" +
			"Fair share:   budget ai2/prior/olmo/pretrain ranks 2nd among budgets, most owed first (sort metric 0.7500); served 1.11 (usage 33.3% of the window, share 30.0%)\n" +
			"  LEVEL                    SHARE  USAGE   LEVEL FAIRSHARE\n" +
			"  ai2/prior                66.7%  58.3%   1.14\n" +
			"  ai2/prior/olmo           60.0%  57.1%   1.05\n" +
			"  ai2/prior/olmo/pretrain  75.0%  100.0%  0.75\n" +
			"GPUs free at: 2026-06-01T14:05:00Z\n" +
			"Why:          pending, 2nd in the pending queue; waiting for protected windows\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain text lacks %q:\n%s", want, out)
		}
	}
	// Two rankings, two names: the budget's fair-share rank among budgets
	// and the job's place in the pending queue; neither is "the fair-share order".
	if strings.Contains(out, "fair-share order") {
		t.Errorf("explain text names a ranking ambiguously:\n%s", out)
	}

	// eval used nothing: first in the order, LF "inf" at its own level.
	code, out, errOut = runCLI(t, "explain", "job", "-json", "default/eval-1")
	var ex client.Explain
	if code != exitOK || json.Unmarshal([]byte(out), &ex) != nil || ex.Queue == nil {
		t.Fatalf("explain -json: %d %q %q", code, out, errOut)
	}
	st := ex.Queue.Standing
	if st == nil || st.LeafPosition != 1 || st.Metric != 1 || st.ServedRatio != 0 || st.UsageShare != 0 || st.Effective != 0.1 ||
		len(st.Parts) != 3 || st.Parts[0].Path != "ai2/prior" || st.Parts[0].Level != 1.143 ||
		st.Parts[2].Share != 0.25 || st.Parts[2].UsageFraction != 0 || !math.IsInf(float64(st.Parts[2].Level), 1) ||
		!ex.Queue.FreeAt.Equal(free) {
		t.Errorf("explain -json standing %+v, free at %v", st, ex.Queue.FreeAt)
	}
	if !strings.Contains(out, `"level_fairshare": "inf"`) || !strings.Contains(out, `"free_at": "2026-06-01T14:05:00Z"`) ||
		strings.Contains(out, "protected_until") {
		t.Errorf("explain -json: %s, want LF \"inf\", free_at and no protected_until", out)
	}

	code, out, errOut = runCLI(t, "queue")
	if code != exitOK || !strings.HasPrefix(out, "QUEUE #  JOB ") || !strings.Contains(out, "SERVED  LEVEL FAIRSHARE") ||
		!strings.Contains(out, "0.00    1.14 > 1.05 > inf") || !strings.Contains(out, "1.11    1.14 > 1.05 > 0.75") {
		t.Errorf("queue text: %d %q %q, want eval served 0.00, LF 1.14 > 1.05 > inf and train served 1.11, LF ... > 0.75", code, out, errOut)
	}
	code, out, _ = runCLI(t, "queue", "-json")
	var q client.Queue
	if code != exitOK || json.Unmarshal([]byte(out), &q) != nil || len(q.Jobs) != 2 || q.Jobs[0].Standing == nil ||
		!math.IsInf(float64(q.Jobs[0].Standing.Parts[2].Level), 1) || q.Jobs[1].Standing == nil || q.Jobs[1].Standing.Parts[2].Level != 0.75 {
		t.Errorf("queue -json: %d %s", code, out)
	}
}
