package main

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/overlay/server"
	"github.com/allot-sched/allot/overlay/state"
)

// A budget whose sibling used nothing over the window has Level Fairshare
// +Inf. An infinite float anywhere on the way (raft entry, HTTP answer,
// -json) used to fail the whole encoding; it must come out as "inf".
func TestInfiniteFloatsReachJSON(t *testing.T) {
	rec := server.NewInmemReconciler()
	s := devServer(t, server.Config{Reconciler: rec})
	ctx := context.Background()
	cl, _ := client.New(s.HTTPAddr(), cliToken, nil)
	if _, err := cl.ApplyBudgets(ctx, &client.BudgetsApply{Revision: "r1", Budgets: []client.BudgetSpec{
		{Path: "lab", Share: 1}, {Path: "lab/a", Share: 1}, {Path: "lab/b", Share: 1}}}); err != nil {
		t.Fatal(err)
	}

	// lab/a used an hour, lab/b nothing: lab/b's level is +Inf.
	tree := s.FSM().Read().Budgets().Tree()
	usage := make([]int64, tree.Len())
	a, _ := tree.Lookup("lab/a")
	usage[a.LeafIndex] = 3600
	fs := budgets.ComputeFairShare(tree, usage)
	var level float64
	for _, r := range fs.Leaves {
		if r.Leaf.Path == "lab/b" {
			level = r.Parts[len(r.Parts)-1].Level
		}
	}
	if !math.IsInf(level, 1) {
		t.Fatalf("setup: lab/b level %v, want +Inf", level)
	}
	job := state.Job{ID: "default/b1", Namespace: "default", Name: "b1", GPUs: 8,
		Contract: state.Contract{Budget: "lab/b", MinRuntime: time.Hour}, SubmittedAt: time.Now()}
	rec.SetJob(job)
	rec.SetQueue([]state.QueueEntry{{JobID: job.ID, Leaf: "lab/b", Band: "pending", Priority: 89, Position: 1,
		SortMetric: budgets.Ratio(level), Explanation: "pending, 1st in the pending queue"}})
	if err := s.ReconcileOnce(ctx); err != nil {
		t.Fatalf("recording a queue with an infinite sort metric: %v", err)
	}

	for _, path := range []string{"/v1/queue", "/v1/explain/job/default/b1"} {
		resp, err := http.Get("http://" + s.HTTPAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(strings.Join(strings.Fields(string(body)), ""), `"sort_metric":"inf"`) {
			t.Errorf("GET %s: %d %s, want sort_metric \"inf\"", path, resp.StatusCode, body)
		}
	}
	q, err := cl.Queue(ctx, false)
	if err != nil || len(q.Jobs) != 1 || !math.IsInf(float64(q.Jobs[0].SortMetric), 1) {
		t.Errorf("client queue %+v, %v; want b1 with sort metric +Inf", q, err)
	}

	t.Setenv("ALLOT_ADDR", s.HTTPAddr())
	for _, args := range [][]string{{"queue", "-json"}, {"explain", "job", "-json", "default/b1"}, {"usage", "-json"}} {
		code, out, errOut := runCLI(t, args...)
		if code != exitOK || !json.Valid([]byte(out)) {
			t.Errorf("%v: %d %q %q, want valid JSON", args, code, out, errOut)
			continue
		}
		if args[0] != "usage" && !strings.Contains(out, `"sort_metric": "inf"`) {
			t.Errorf("%v: %s, want sort_metric \"inf\"", args, out)
		}
	}
	if code, out, _ := runCLI(t, "queue"); code != exitOK || !strings.Contains(out, "+Inf") {
		t.Errorf("queue text: %d %q, want the metric shown as +Inf", code, out)
	}
}
