package main

import (
	"context"
	"encoding/json"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/overlay/server"
	"github.com/allot-sched/allot/overlay/state"
)

// `allot explain job` and `allot queue` show the fair-share sort metric
// with its parts: the served ratio and each level's share, usage and level
// fairshare, where a level whose usage is zero has LF "inf".
func TestExplainShowsStanding(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := server.NewInmemReconciler()
	s, err := server.New(server.Config{Dev: true, Token: cliToken, HTTPListener: ln, ReconcileInterval: time.Hour, Reconciler: rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown() })
	ctx := context.Background()
	cl, _ := client.New(s.HTTPAddr(), cliToken, nil)
	waitUntil(t, "the dev server to lead", func() bool { _, err := cl.Budgets(ctx, false); return err == nil })

	free := time.Date(2026, 6, 1, 14, 5, 0, 0, time.UTC)
	job := state.Job{ID: "default/train-7", Namespace: "default", Name: "train-7", GPUs: 8,
		Contract: state.Contract{Budget: "ai2/prior/olmo", MinRuntime: time.Hour}, SubmittedAt: time.Now()}
	rec.SetJob(job)
	rec.SetQueue([]state.QueueEntry{{JobID: job.ID, Leaf: "ai2/prior/olmo", Band: "pending", Priority: 87, Position: 3,
		SortMetric: 0.8, Explanation: "pending, 3rd in the fair-share order", FreeAt: free,
		Standing: &state.Standing{Metric: 0.8, LeafPosition: 4, ServedRatio: 0.4091, UsageShare: 0.054, Effective: 0.132,
			Parts: []state.StandingPart{
				{Path: "ai2/prior", Share: 0.4, UsageFraction: 0.221, Level: 1.81},
				{Path: "ai2/prior/olmo", Share: 0.55, UsageFraction: 0, Level: budgets.Ratio(math.Inf(1))},
			}}}})
	if err := s.ReconcileOnce(ctx); err != nil {
		t.Fatalf("recording the queue: %v", err)
	}
	t.Setenv("ALLOT_ADDR", s.HTTPAddr())

	code, out, errOut := runCLI(t, "explain", "job", "default/train-7")
	if code != exitOK {
		t.Fatalf("explain: %d %q", code, errOut)
	}
	for _, want := range []string{
		"Position:     3 in line\n" +
			"Fair share:   budget ai2/prior/olmo is #4 in the fair-share order (sort metric 0.8000); served 0.41 (usage 5.4% of the window, share 13.2%)\n" +
			"  LEVEL           SHARE  USAGE  LEVEL FAIRSHARE\n" +
			"  ai2/prior       40.0%  22.1%  1.81\n" +
			"  ai2/prior/olmo  55.0%  0.0%   inf\n" +
			"GPUs free at: 2026-06-01T14:05:00Z\n" +
			"Why:          pending, 3rd in the fair-share order\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain text lacks %q:\n%s", want, out)
		}
	}

	code, out, errOut = runCLI(t, "explain", "job", "-json", "default/train-7")
	var ex client.Explain
	if code != exitOK || json.Unmarshal([]byte(out), &ex) != nil {
		t.Fatalf("explain -json: %d %q %q", code, out, errOut)
	}
	st := ex.Queue.Standing
	if st == nil || st.LeafPosition != 4 || st.ServedRatio != 0.4091 || st.Effective != 0.132 || len(st.Parts) != 2 ||
		st.Parts[0].Level != 1.81 || !math.IsInf(float64(st.Parts[1].Level), 1) || !ex.Queue.FreeAt.Equal(free) {
		t.Errorf("explain -json standing %+v, free at %v", st, ex.Queue.FreeAt)
	}
	if !strings.Contains(out, `"level_fairshare": "inf"`) || !strings.Contains(out, `"free_at": "2026-06-01T14:05:00Z"`) ||
		strings.Contains(out, "protected_until") {
		t.Errorf("explain -json: %s, want LF \"inf\", free_at and no protected_until", out)
	}

	code, out, errOut = runCLI(t, "queue")
	if code != exitOK || !strings.Contains(out, "SERVED  LEVEL FAIRSHARE") || !strings.Contains(out, "0.41    1.81 > inf") {
		t.Errorf("queue text: %d %q %q, want served 0.41 and levels 1.81 > inf", code, out, errOut)
	}
	code, out, _ = runCLI(t, "queue", "-json")
	var q client.Queue
	if code != exitOK || json.Unmarshal([]byte(out), &q) != nil || len(q.Jobs) != 1 || q.Jobs[0].Standing == nil ||
		len(q.Jobs[0].Standing.Parts) != 2 || !math.IsInf(float64(q.Jobs[0].Standing.Parts[1].Level), 1) {
		t.Errorf("queue -json: %d %s", code, out)
	}
}
