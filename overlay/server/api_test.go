package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/state"
)

// fakeClock is a settable clock for the leader's timestamps.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// devServer starts a -dev server on a free loopback port.
func devServer(t testing.TB, cfg Config) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dev, cfg.HTTPListener = true, ln
	if cfg.ReconcileInterval == 0 {
		cfg.ReconcileInterval = time.Hour // tests drive passes with ReconcileOnce
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown() })
	waitFor(t, 10*time.Second, "the dev server to lead and register", func() error {
		_, err := s.leaderHTTP()
		return err
	})
	return s
}

func rawRequest(t *testing.T, s *Server, method, path, token string, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+s.HTTPAddr()+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAPIWriteSecurity(t *testing.T) {
	s := devServer(t, Config{Token: testToken, MaxBodyBytes: 1 << 16})
	good := `{"revision":"r1","budgets":[{"path":"ai2","share":1},{"path":"ai2/nlp","share":1}]}`
	for _, tc := range []struct {
		name, method, path, token, body string
		wantStatus                      int
		wantIn                          string
	}{
		{"no token", "PUT", "/v1/budgets", "", good, 401, "token is required"},
		{"wrong token", "PUT", "/v1/budgets", "nope", good, 403, "token refused"},
		{"wrong token of the same length", "PUT", "/v1/budgets", strings.Repeat("x", len(testToken)), good, 403, "token refused"},
		{"ledger without token", "POST", "/v1/ledger", "", `{"charges":[]}`, 401, "token"},
		{"join without token", "PUT", "/v1/operator/raft/join", "", `{"id":"x","raft_addr":"1.2.3.4:1"}`, 401, "token"},
		{"malformed JSON", "PUT", "/v1/budgets", testToken, `{"revision":`, 400, "malformed request body"},
		{"unknown field", "PUT", "/v1/budgets", testToken, `{"revision":"r","budgetz":[]}`, 400, "unknown field"},
		{"invalid tree", "PUT", "/v1/budgets", testToken, `{"revision":"r","budgets":[{"path":"a","share":1},{"path":"b","share":1}]}`, 400, "second root"},
		{"no revision", "PUT", "/v1/budgets", testToken, `{"budgets":[{"path":"a","share":1}]}`, 400, "revision is required"},
		{"oversized body", "PUT", "/v1/budgets", testToken, `{"revision":"` + strings.Repeat("x", 1<<17) + `"}`, 413, "over 65536 bytes"},
		{"empty ledger append", "POST", "/v1/ledger", testToken, `{}`, 400, "nothing to append"},
		{"read-only endpoint", "POST", "/v1/queue", testToken, `{}`, 405, ""},
		{"unknown endpoint", "GET", "/v1/nope", "", "", 404, "no endpoint"},
		{"unknown job", "GET", "/v1/explain/job/default/ghost", "", "", 404, "not managed by allot"},
		{"bad since", "GET", "/v1/usage?since=forever", "", "", 400, "want a positive duration"},
		{"since beyond retention", "GET", "/v1/usage?since=30d", "", "", 400, "beyond the ledger"},
		{"good apply", "PUT", "/v1/budgets", testToken, good, 200, `"index"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := rawRequest(t, s, tc.method, tc.path, tc.token, strings.NewReader(tc.body))
			if code != tc.wantStatus || !strings.Contains(body, tc.wantIn) {
				t.Fatalf("got %d %s, want %d containing %q", code, body, tc.wantStatus, tc.wantIn)
			}
		})
	}
	// Only the good apply changed state.
	b := s.FSM().Read().Budgets()
	if b == nil || b.Revision != "r1" {
		t.Fatalf("budgets %+v", b)
	}
	if n := len(s.FSM().Read().Decisions(0)); n != 1 {
		t.Fatalf("%d decisions, want 1 (the one apply)", n)
	}
}

func TestAPIServerWithoutTokenRefusesAllWrites(t *testing.T) {
	s := devServer(t, Config{})
	code, body := rawRequest(t, s, "PUT", "/v1/budgets", "anything", strings.NewReader(`{"revision":"r","budgets":[{"path":"a","share":1}]}`))
	if code != 403 || !strings.Contains(body, "no budgets token configured") {
		t.Fatalf("got %d %s", code, body)
	}
	if s.FSM().Read().Budgets() != nil {
		t.Fatal("an anonymous write changed state")
	}
}

func TestClientErrors(t *testing.T) {
	s := devServer(t, Config{Token: testToken})
	ctx := context.Background()
	bad, _ := client.New(s.HTTPAddr(), "wrong", nil)
	if _, err := bad.ApplyBudgets(ctx, testBudgets()); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("wrong token: %v", err)
	}
	good, _ := client.New(s.HTTPAddr(), testToken, nil)
	if _, err := good.Explain(ctx, "ghost", false); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("unknown job: %v", err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	down, _ := client.New(addr, "", nil)
	if _, err := down.Queue(ctx, false); !errors.Is(err, client.ErrUnreachable) || !strings.Contains(err.Error(), "ALLOT_ADDR") {
		t.Fatalf("unreachable: %v", err)
	}
}

// TestReconcileLoopRecordsAndCharges drives the leader's reconcile pass with
// the in-memory reconciler and a fake clock, then reads everything back
// through the API.
func TestReconcileLoopRecordsAndCharges(t *testing.T) {
	clock := &fakeClock{now: tBase}
	rec := NewInmemReconciler()
	s := devServer(t, Config{Token: testToken, Reconciler: rec, Clock: clock.Now})
	ctx := context.Background()
	cl, _ := client.New(s.HTTPAddr(), testToken, nil)
	if _, err := cl.ApplyBudgets(ctx, testBudgets()); err != nil {
		t.Fatal(err)
	}
	job := state.Job{ID: "default/train", Namespace: "default", Name: "train", GPUs: 8,
		Contract: state.Contract{Budget: "ai2/nlp", MinRuntime: 4 * time.Hour}, SubmittedAt: tBase}
	rec.SetJob(job)
	rec.SetAlloc(state.Alloc{ID: "a1", JobID: job.ID, NodeID: "n1", Leaf: "ai2/nlp", GPUs: 8, StartedAt: tBase,
		ProtectedUntil: tBase.Add(4 * time.Hour)})
	rec.SetNode(state.Node{ID: "n1", Name: "gpu-1", Drain: policy.NodeNormal, TotalGPUs: 8, HealthyGPUs: 8, Since: tBase})
	rec.SetQueue([]state.QueueEntry{{JobID: job.ID, Leaf: "ai2/nlp", Band: "protected", Priority: 100,
		Explanation: "running inside its protected window until 13:00"}})
	before := rec.Passes() // the loop's own first pass on gaining leadership
	if err := s.ReconcileOnce(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Advance(90 * time.Minute)
	// One entry moves the ledger at most an hour (state.DefaultMaxAdvance):
	// after a 90-minute gap, the first pass charges 61 minutes and the next
	// the rest.
	for range 2 {
		if err := s.ReconcileOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if rec.Passes() != before+3 {
		t.Fatalf("passes %d", rec.Passes())
	}
	ex, err := cl.Explain(ctx, "train", false)
	if err != nil {
		t.Fatal(err)
	}
	if ex.Queue == nil || ex.Queue.Band != "protected" || len(ex.Allocs) != 1 || ex.Allocs[0].ChargedGPUSeconds != 8*90*60 {
		t.Fatalf("explain %+v", ex)
	}
	u, err := cl.Usage(ctx, "1d", false)
	if err != nil {
		t.Fatal(err)
	}
	var nlp *client.UsageRow
	for i := range u.Budgets {
		if u.Budgets[i].Path == "ai2/nlp" {
			nlp = &u.Budgets[i]
		}
	}
	if u.CapacityGPUs != 8 || nlp == nil || nlp.Charged != 12 || nlp.Demand != 12 || nlp.Owed != 3 || nlp.Ratio != 4 ||
		nlp.Credited != 3 || nlp.CreditedRatio != 1 {
		t.Fatalf("usage %+v nlp %+v", u, nlp)
	}
	q, err := cl.Queue(ctx, true)
	if err != nil || len(q.Jobs) != 1 || !strings.Contains(q.Jobs[0].Explanation, "protected window") {
		t.Fatalf("queue %+v %v", q, err)
	}
	// The job disappears from the cluster: the next pass forgets it.
	rec.RemoveJob(job.ID)
	if err := s.ReconcileOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Explain(ctx, job.ID, false); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("explain after removal: %v", err)
	}
}

func TestMetricsEndpoint(t *testing.T) {
	s := devServer(t, Config{Token: testToken})
	rawRequest(t, s, "GET", "/v1/queue", "", nil)
	code, body := rawRequest(t, s, "GET", "/v1/metrics", "", nil)
	if code != 200 {
		t.Fatalf("metrics: %d", code)
	}
	for _, want := range []string{"allot_raft_leader 1", `allot_http_requests_total{code="200",route="queue"} 1`,
		`allot_raft_writes_total{result="ok",type="server_upsert"} 1`, "allot_ledger_bytes"} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestReadsOnFollowerStaleAndForwarded(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test skipped in -short mode")
	}
	c := newCluster(t, 3, fastRaft())
	ctx := context.Background()
	c.applyBudgets(ctx, "")
	lead := c.leader()
	f := (lead + 1) % 3
	// A consistent read on a follower is forwarded: it sees the write at once.
	var b *client.Budgets
	err := retry503(t, "a consistent read", func() (err error) {
		b, err = c.client(f, "").Budgets(ctx, false)
		return err
	})
	if err != nil || b.Revision != "rev-1" {
		t.Fatalf("forwarded read: %+v %v", b, err)
	}
	code, body := rawRequest(t, c.nodes[f].srv, "GET", "/v1/budgets?stale", "", nil)
	if code != 200 || !bytes.Contains([]byte(body), []byte("revision")) {
		t.Fatalf("stale read: %d %s", code, body)
	}
	peers, err := c.client(f, "").Peers(ctx)
	if err != nil || len(peers.Servers) != 3 {
		t.Fatalf("peers %+v %v", peers, err)
	}
	leaders := 0
	for _, p := range peers.Servers {
		if p.Leader {
			leaders++
			if p.HTTPAddr != c.nodes[lead].srv.HTTPAddr() {
				t.Errorf("leader's HTTP address %q, want %q", p.HTTPAddr, c.nodes[lead].srv.HTTPAddr())
			}
		}
	}
	if leaders != 1 {
		t.Fatalf("peers %+v", peers)
	}
}
