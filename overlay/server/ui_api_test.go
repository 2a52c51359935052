package server

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/state"
)

// seriesServer is a -dev server at a fixed clock with budgets ai2/{a,b/x,b/y}
// and a ledger: a runs 4 GPUs over the last 2 hours, b/x 2 GPUs over the
// last hour, b/y nothing.
func seriesServer(t *testing.T) (*Server, *client.Client, time.Time) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	s := devServer(t, Config{Token: testToken, Clock: func() time.Time { return now }, Lookback: 3 * time.Hour})
	cl, _ := client.New(s.HTTPAddr(), testToken, nil)
	ctx := context.Background()
	if _, err := cl.ApplyBudgets(ctx, &client.BudgetsApply{Revision: "r1", Budgets: []client.BudgetSpec{
		{Path: "ai2"}, {Path: "ai2/a", Share: 1}, {Path: "ai2/b", Share: 1}, {Path: "ai2/b/x", Share: 3}, {Path: "ai2/b/y", Share: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.AppendLedger(ctx, &client.LedgerAppend{
		Charges: []client.Charge{{Alloc: "a1", Budget: "ai2/a", GPUs: 4, From: now.Add(-2 * time.Hour), To: now},
			{Alloc: "x1", Budget: "ai2/b/x", GPUs: 2, From: now.Add(-time.Hour), To: now}},
		Demand: []client.Demand{{Budget: "ai2/b/x", GPUs: 6, From: now.Add(-time.Hour), To: now}}}); err != nil {
		t.Fatal(err)
	}
	return s, cl, now
}

func TestUsageSeries(t *testing.T) {
	_, cl, now := seriesServer(t)
	ctx := context.Background()
	u, err := cl.UsageSeries(ctx, "", "4h", "1h", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Times) != 4 || u.Times[0] != now.Add(-4*time.Hour).Unix() || u.StepSeconds != 3600 || u.LookbackSeconds != 3*3600 {
		t.Fatalf("times %v step %d lookback %d: want 4 hourly steps from 08:00 and a 3h lookback", u.Times, u.StepSeconds, u.LookbackSeconds)
	}
	want := map[string][]float64{"ai2": {0, 0, 4, 6}, "ai2/a": {0, 0, 4, 4}, "ai2/b": {0, 0, 0, 2}}
	if len(u.Series) != 3 {
		t.Fatalf("series %+v: want the root and its 2 children", u.Series)
	}
	for _, s := range u.Series {
		if got := s.UsedGPUs; len(got) != 4 || got[0] != want[s.Path][0] || got[2] != want[s.Path][2] || got[3] != want[s.Path][3] {
			t.Errorf("%s used %v, want %v", s.Path, got, want[s.Path])
		}
	}
	if u.Series[1].Program != "ai2/a" || u.Series[0].Program != "" {
		t.Errorf("programs %q %q: want ai2/a for a, none for the root", u.Series[1].Program, u.Series[0].Program)
	}
	// A subtree: b's children, the leaf x with its demand.
	u, err = cl.UsageSeries(ctx, "ai2/b", "2h", "30m", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Series) != 3 || u.Series[1].Path != "ai2/b/x" || u.Series[1].UsedGPUs[3] != 2 || u.Series[1].DemandGPUs[2] != 6 ||
		u.Series[2].UsedGPUs[3] != 0 || u.Series[1].Program != "ai2/b" {
		t.Errorf("ai2/b series %+v", u.Series)
	}
	// A leaf alone is its own series.
	u, err = cl.UsageSeries(ctx, "ai2/a", "1h", "", false)
	if err != nil || len(u.Series) != 1 || u.StepSeconds != 60 || len(u.Times) != 60 || u.Series[0].UsedGPUs[59] != 4 {
		t.Errorf("ai2/a over 1h: %v %+v, want one series of 60 one-minute points at 4 GPUs", err, u)
	}
	for _, tc := range []struct{ q, want string }{
		{"?step=90s", "multiple of the ledger's 1m0s buckets"},
		{"?since=14d&step=1m", "at most 10080"},
		{"?since=30d", "beyond the ledger's"},
		{"?budget=ai2/nope", "not in the budget tree"},
		{"?step=x", "step"},
	} {
		q, _ := url.ParseQuery(strings.TrimPrefix(tc.q, "?"))
		err := cl.Do(ctx, http.MethodGet, "/v1/usage/series", q, nil, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("GET /v1/usage/series%s: %v, want an error saying %q", tc.q, err, tc.want)
		}
	}
}

// The series answer is one line of JSON (one number per line would triple
// a large answer), other answers stay indented.
func TestUsageSeriesCompact(t *testing.T) {
	s, _, _ := seriesServer(t)
	code, body := rawRequest(t, s, "GET", "/v1/usage/series?since=6h", "", nil)
	if code != 200 || strings.Count(strings.TrimSpace(body), "\n") != 0 {
		t.Errorf("series: %d, %d lines", code, strings.Count(body, "\n"))
	}
	if _, body := rawRequest(t, s, "GET", "/v1/budgets", "", nil); !strings.Contains(body, "\n  ") {
		t.Errorf("budgets answer is not indented: %s", body)
	}
}

// The history parser reads the beneficiary out of the policy's own words.
func TestForJobFromPolicyReasons(t *testing.T) {
	for _, r := range []policy.Reason{
		{Code: policy.ReasonVictim, Job: "research/nav-rl", N: 8, Node: "node-3"},
		{Code: policy.ReasonReservationStop, Job: "research/nav-rl", Node: "node-3"},
	} {
		m := forJobRe.FindStringSubmatch(r.String())
		if m == nil || m[1]+m[2] != "research/nav-rl" {
			t.Errorf("reason %q: found %q, want research/nav-rl", r.String(), m)
		}
	}
}

// historyOutcome is one job preempted for time slicing and requeued, and
// one Nomad preempted.
type historyOutcome struct{ out Outcome }

func (h *historyOutcome) Reconcile(context.Context, *state.View, time.Time) (Outcome, error) {
	o := h.out
	h.out = Outcome{}
	return o, nil
}

func TestJobHistory(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	at := func(h float64) time.Time { return now.Add(time.Duration(h * float64(time.Hour))) }
	victim := policy.Reason{Code: policy.ReasonVictim, Job: "default/winner", N: 8, Node: "n1"}
	rec := &historyOutcome{out: Outcome{
		Jobs: []state.Job{{ID: "default/v", Namespace: "default", Name: "v", GPUs: 8, SubmittedAt: at(-10),
			Contract: state.Contract{Budget: "ai2/a", MinRuntime: time.Hour, Resumable: true}},
			{ID: "default/free", Namespace: "default", Name: "free", GPUs: 1, SubmittedAt: at(-3)}},
		Allocs: []state.Alloc{
			{ID: "v1", JobID: "default/v", NodeID: "n1", Leaf: "ai2/a", GPUs: 8, StartedAt: at(-9), ProtectedUntil: at(-8), StoppedAt: at(-5)},
			{ID: "v2", JobID: "default/v", NodeID: "n2", Leaf: "ai2/a", GPUs: 8, StartedAt: at(-4), ProtectedUntil: at(-3)},
			{ID: "f1", JobID: "default/free", NodeID: "n2", GPUs: 1, StartedAt: at(-3), StoppedAt: at(-2), Preemptions: 1}},
		Queue: []state.QueueEntry{
			{JobID: "default/v", Leaf: "ai2/a", Band: "protected", Priority: 100,
				Standing: &state.Standing{Metric: 0, LeafPosition: 2, ServedRatio: 1.5}},
			{JobID: "default/winner", Leaf: "ai2/b", Band: "pending", Priority: 89, Position: 1,
				Standing: &state.Standing{Metric: 0.5, LeafPosition: 1, ServedRatio: 0.25}}},
		Decisions: []state.Decision{{At: at(-5), Kind: "preempt", JobID: "default/v", AllocID: "v1", NodeID: "n1", Reason: victim.String()},
			{At: at(-5), Kind: "priority", JobID: "default/v", Reason: "priority 85: lowered"}},
	}}
	s := devServer(t, Config{Token: testToken, Clock: func() time.Time { return now }, Reconciler: rec})
	cl, _ := client.New(s.HTTPAddr(), testToken, nil)
	ctx := context.Background()
	if _, err := cl.ApplyBudgets(ctx, &client.BudgetsApply{Revision: "r", Budgets: []client.BudgetSpec{{Path: "ai2"}, {Path: "ai2/a", Share: 1}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.ReconcileOnce(ctx); err != nil {
		t.Fatal(err)
	}
	h, err := cl.JobHistory(ctx, "default/v", false)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range h.Events {
		detail := e.StopKind
		if detail == "" {
			detail = e.DecisionKind
		}
		kinds = append(kinds, e.Kind+"/"+detail)
	}
	want := "submitted/,placed/,protected/,stopped/time-slicing,decision/priority,requeued/,protected/"
	if got := strings.Join(kinds, ","); got != want {
		t.Errorf("events %s, want %s", got, want)
	}
	// 4h on n1 and 4h since the requeue, 8 GPUs each: charged by the leader.
	if h.Placements != 2 || h.Requeues != 1 || h.ChargedGPUHours != 64 {
		t.Errorf("placements %d requeues %d charged %.2f, want 2, 1, 64", h.Placements, h.Requeues, h.ChargedGPUHours)
	}
	if st := h.Events[3]; st.ForJob != "default/winner" || st.ChargedGPUH != 32 || !strings.Contains(st.Reason, "time slicing") {
		t.Errorf("stop %+v: want for default/winner, 32 GPU-h", st)
	}
	// The standings that justified the stop are kept with it, as they were
	// when it was decided.
	if st := h.Events[3]; st.StandingAtStop == nil || st.StandingAtStop.LeafPosition != 2 || st.StandingAtStop.ServedRatio != 1.5 ||
		st.ForJobStandingAtStop == nil || st.ForJobStandingAtStop.LeafPosition != 1 || st.ForJobBudget != "ai2/b" {
		t.Errorf("stop standings: victim %+v, beneficiary %+v (%s); want #2 served 1.5 and #1 of ai2/b",
			st.StandingAtStop, st.ForJobStandingAtStop, st.ForJobBudget)
	}
	// Escaped and bare IDs reach the same job; Nomad's preemption is named.
	for _, path := range []string{"/v1/jobs/default%2Ffree/history", "/v1/jobs/free/history"} {
		var fh client.JobHistory
		if err := cl.Do(ctx, http.MethodGet, path, nil, nil, &fh); err != nil || fh.JobID != "default/free" ||
			fh.Events[len(fh.Events)-1].StopKind != client.StopNomad {
			t.Errorf("GET %s: %v %+v", path, err, fh.Events)
		}
	}
	if err := cl.Do(ctx, http.MethodGet, "/v1/jobs/default/v", nil, nil, nil); err == nil || !strings.Contains(err.Error(), "/history") {
		t.Errorf("GET /v1/jobs/default/v: %v, want a pointer to /history", err)
	}
	if _, err := cl.JobHistory(ctx, "default/nope", false); err == nil || !strings.Contains(err.Error(), "not managed") {
		t.Errorf("unknown job: %v", err)
	}
	// Decisions filtered by kind, job, node and budget.
	for raw, wantN := range map[string]int{"kind=preempt": 1, "job=default/v": 2, "node=n1": 1, "budget=ai2": 2, "budget=ai2/b": 0, "kind=priority&job=default/v": 1} {
		var d client.Decisions
		q, _ := url.ParseQuery(raw)
		if err := cl.Do(ctx, http.MethodGet, "/v1/decisions", q, nil, &d); err != nil || len(d.Decisions) != wantN {
			t.Errorf("decisions?%s: %v, %d decisions, want %d", q, err, len(d.Decisions), wantN)
		}
	}
}

func TestUIServed(t *testing.T) {
	s := devServer(t, Config{})
	for _, tc := range []struct {
		path       string
		wantStatus int
		wantIn     string
	}{
		{"/ui/", 200, `<script src="app.js">`},
		{"/ui/app.js", 200, `"../v1/"`},
		{"/ui/uPlot.iife.min.js", 200, "uPlot"},
		{"/ui/nope.js", 404, "no UI file"},
	} {
		req, _ := http.NewRequest("GET", "http://"+s.HTTPAddr()+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.wantStatus || !strings.Contains(string(body), tc.wantIn) {
			t.Errorf("GET %s: %d, want %d with %q", tc.path, resp.StatusCode, tc.wantStatus, tc.wantIn)
		}
		if tc.wantStatus == 200 && !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("GET %s: CSP %q", tc.path, resp.Header.Get("Content-Security-Policy"))
		}
	}
	// /ui redirects relatively, so a proxy's path prefix is kept.
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get("http://" + s.HTTPAddr() + "/ui")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "ui/" {
		t.Errorf("GET /ui: %d to %q, want 301 to ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
}
