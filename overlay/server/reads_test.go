package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/state"
	"github.com/hashicorp/go-hclog"
)

// TestIdleKeepAliveClosed: idle keep-alive connections were never closed.
func TestIdleKeepAliveClosed(t *testing.T) {
	s := devServer(t, Config{Token: testToken, HTTPIdleTimeout: 200 * time.Millisecond})
	conn, err := net.Dial("tcp", s.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/agent/self HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	discard(resp)
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection: read returned %v, want EOF (closed by the server)", err)
	}
	if idle := time.Since(start); idle > 5*time.Second {
		t.Fatalf("closed after %v idle, want about 200ms", idle)
	}
}

// TestReadsBeyondLimitGet429: a read beyond MaxConcurrentReads waits for a
// slot, is served when one frees in time, and gets 429 when none does.
func TestReadsBeyondLimitGet429(t *testing.T) {
	s := devServer(t, Config{Token: testToken, MaxConcurrentReads: 2})
	s.reads <- struct{}{}
	s.reads <- struct{}{} // two reads in flight
	go func() { time.Sleep(100 * time.Millisecond); <-s.reads }()
	if code, body := rawRequest(t, s, "GET", "/v1/decisions", "", nil); code != 200 {
		t.Fatalf("a slot freed while waiting: %d %s", code, body)
	}
	s.reads <- struct{}{}
	start := time.Now()
	req, _ := http.NewRequest("GET", "http://"+s.HTTPAddr()+"/v1/decisions", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" || !strings.Contains(string(body), "serving 2 reads already") {
		t.Fatalf("full: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if waited := time.Since(start); waited < readQueueWait {
		t.Fatalf("429 after %v, want after waiting %v for a slot", waited, readQueueWait)
	}
	<-s.reads
	if code, body := rawRequest(t, s, "GET", "/v1/decisions", "", nil); code != 200 {
		t.Fatalf("after a slot freed: %d %s", code, body)
	}
	// Writes are not held up by reads.
	if code, body := rawRequest(t, s, "PUT", "/v1/budgets", testToken, strings.NewReader(`{"revision":"r","budgets":[{"path":"a","share":1}]}`)); code != 200 {
		t.Fatalf("write while reads are full: %d %s", code, body)
	}
}

func TestDecisionsLimitCapped(t *testing.T) {
	s := devServer(t, Config{Token: testToken})
	for _, q := range []string{"10000", "1001", "0", "-1", "x"} {
		code, body := rawRequest(t, s, "GET", "/v1/decisions?limit="+q, "", nil)
		if code != 400 || !strings.Contains(body, "want 1 to 1000") {
			t.Errorf("limit=%s: %d %s", q, code, body)
		}
	}
	if code, body := rawRequest(t, s, "GET", "/v1/decisions?limit=1000", "", nil); code != 200 {
		t.Errorf("limit=1000: %d %s", code, body)
	}
}

// TestViewDecisionsNewestPage: a page is the newest rows, oldest first.
func TestViewDecisionsNewestPage(t *testing.T) {
	s := devServer(t, Config{Token: testToken})
	var ds []state.Decision
	for i := range 30 {
		ds = append(ds, state.Decision{At: tBase, Kind: "priority", Reason: strconv.Itoa(i)})
	}
	if _, _, err := s.Apply(state.DecisionAppendType, state.DecisionAppendRequest{Decisions: ds}); err != nil {
		t.Fatal(err)
	}
	page := s.FSM().Read().Decisions(5)
	if len(page) != 5 || page[0].Reason != "25" || page[4].Reason != "29" || page[0].Seq+4 != page[4].Seq {
		t.Fatalf("page %+v", page)
	}
}

// steppedClock is a wall clock and a monotonic clock moved separately, to
// make the wall clock jump.
type steppedClock struct {
	mu   sync.Mutex
	wall time.Time
	mono time.Duration
}

func (c *steppedClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.wall }
func (c *steppedClock) Mono() time.Duration { c.mu.Lock(); defer c.mu.Unlock(); return c.mono }
func (c *steppedClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.wall, c.mono = c.wall.Add(d), c.mono+d
	c.mu.Unlock()
}
func (c *steppedClock) JumpWall(d time.Duration) { c.mu.Lock(); c.wall = c.wall.Add(d); c.mu.Unlock() }

// TestLeaderClockJumpNotObeyed: the leader's wall clock jumps ten years
// ahead mid-term; the jump is logged, the next reconcile pass charges the
// minute that really passed, and the ledger keeps its history.
func TestLeaderClockJumpNotObeyed(t *testing.T) {
	clock := &steppedClock{wall: tBase}
	var logs strings.Builder
	var logMu sync.Mutex
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return logs.Write(p)
	})})
	rec := NewInmemReconciler()
	s := devServer(t, Config{Token: testToken, Reconciler: rec, Clock: clock.Now, Monotonic: clock.Mono, Logger: logger})
	ctx := context.Background()
	if _, _, err := s.Apply(state.BudgetsApplyType, state.BudgetsApplyRequest{Revision: "r", Specs: toSpecs(testBudgets()), AppliedAt: tBase}); err != nil {
		t.Fatal(err)
	}
	rec.SetNode(state.Node{ID: "n1", Drain: policy.NodeNormal, TotalGPUs: 8, HealthyGPUs: 8, Since: tBase})
	rec.SetJob(state.Job{ID: "default/j", GPUs: 8, Contract: state.Contract{Budget: "ai2/nlp", MinRuntime: time.Hour}, SubmittedAt: tBase})
	rec.SetAlloc(state.Alloc{ID: "a1", JobID: "default/j", NodeID: "n1", Leaf: "ai2/nlp", GPUs: 8, StartedAt: tBase})
	if err := s.ReconcileOnce(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if err := s.ReconcileOnce(ctx); err != nil {
		t.Fatal(err)
	}
	clock.JumpWall(10 * 365 * 24 * time.Hour)
	clock.Advance(time.Minute)
	if err := s.ReconcileOnce(ctx); err != nil {
		t.Fatal(err)
	}
	a := s.FSM().Read().Alloc("a1")
	if a.ChargedGPUSeconds != 8*120 || !a.ChargedThrough.Equal(tBase.Add(2*time.Minute)) {
		t.Fatalf("after the jump: charged %d through %v, want %d through %v", a.ChargedGPUSeconds, a.ChargedThrough, 8*120, tBase.Add(2*time.Minute))
	}
	if h, _ := ledgerHorizon(s); h.After(tBase) {
		t.Fatalf("ledger horizon moved to %v", h)
	}
	if s.clock.Jumps() != 1 {
		t.Fatalf("%d jumps detected, want 1", s.clock.Jumps())
	}
	logMu.Lock()
	got := logs.String()
	logMu.Unlock()
	if !strings.Contains(got, "wall clock jumped: not obeyed") {
		t.Fatalf("no jump logged:\n%s", got)
	}
	// The wall clock is put right: it is followed again.
	clock.JumpWall(-10 * 365 * 24 * time.Hour)
	clock.Advance(time.Minute)
	if now := s.clock.Now(); !now.Equal(tBase.Add(3 * time.Minute)) {
		t.Fatalf("after the fix: %v, want %v", now, tBase.Add(3*time.Minute))
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func ledgerHorizon(s *Server) (h time.Time, ok bool) {
	s.FSM().WithLedger(func(l *budgets.Ledger) { h, ok = l.Horizon() })
	return h, ok
}

// requestsServed reads, from a server's /v1/metrics, how many requests it
// answered on the routes that match (route="decisions" and code 200, or
// every route but the metrics scrapes themselves).
func requestsServed(t *testing.T, s *Server, match func(route, code string) bool) float64 {
	t.Helper()
	_, body := rawGet(t, "http://"+s.HTTPAddr()+"/v1/metrics")
	var n float64
	for _, line := range strings.Split(body, "\n") {
		labels, ok := strings.CutPrefix(line, "allot_http_requests_total{")
		if !ok {
			continue
		}
		labels, value, _ := strings.Cut(labels, "} ")
		var route, code string
		for _, kv := range strings.Split(labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch v = strings.Trim(v, `"`); k {
			case "route":
				route = v
			case "code":
				code = v
			}
		}
		if !match(route, code) {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		n += v
	}
	return n
}

func decisionReads(route, code string) bool { return route == "decisions" && code == "200" }
func anyButMetrics(route, _ string) bool    { return route != "metrics" }

// TestFollowerReadsSpareTheLeader is issue 14's fifth case on a 3-server
// in-process cluster: 200 concurrent anonymous reads of the decision log
// through a follower used to be forwarded to the leader, which stepped
// down. Now the follower answers them from its own state (with the index it
// is at), a page is at most 1000 decisions, reads beyond the follower's
// limit (one per core) get 429, and the leader is asked nothing at all.
//
// What spares the leader is checked on the leader's own request counters,
// not by whether it keeps its term: the three servers share this process's
// scheduler with the 200 readers, and on the shared 2-core CI machine a
// goroutine here waited up to 1.2 s for a CPU during the burst (300 ms with
// no reads at all, at load 24), past raft's 500 ms leader lease; the leader
// stepped down in 2 runs of 10 though it was sent nothing. On its own
// machine a leader never sees a follower's reads. The term is logged.
func TestFollowerReadsSpareTheLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("three-server cluster test skipped in -short mode")
	}
	// raft's own timing (what `allot server` runs with), not fastRaft.
	tune := RaftTuning{CommitTimeout: 5 * time.Millisecond}
	c := newCluster(t, 3, tune)
	lead := c.leader()
	f := (lead + 1) % 3
	leader, follower := c.nodes[lead].srv, c.nodes[f].srv
	if got, want := cap(follower.reads), runtime.GOMAXPROCS(0); got != want {
		t.Fatalf("the follower serves %d reads at once, want one per core (%d)", got, want)
	}
	var idx uint64
	for b := 0; b < 5; b++ {
		var ds []state.Decision
		for i := range 200 {
			ds = append(ds, state.Decision{At: tBase, Kind: "priority", JobID: "default/j", Reason: strings.Repeat("r", 100) + strconv.Itoa(b*200+i)})
		}
		var err error
		if _, idx, err = leader.Apply(state.DecisionAppendType, state.DecisionAppendRequest{Decisions: ds}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "the follower to apply the decisions", func() error {
		if got := follower.Raft().AppliedIndex(); got < idx {
			return fmt.Errorf("follower at %d, want %d", got, idx)
		}
		return nil
	})
	fURL := "http://" + follower.HTTPAddr()
	if code, body := rawGet(t, fURL+"/v1/decisions?limit=10000"); code != 400 || !strings.Contains(body, "want 1 to 1000") {
		t.Fatalf("limit=10000: %d %s", code, body)
	}
	term := leader.Raft().Stats()["term"]
	asked0 := requestsServed(t, leader, anyButMetrics)

	const readers = 200
	var ok, limited, other atomic.Int64
	var badHeader atomic.Value
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: readers}}
	var wg sync.WaitGroup
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := hc.Get(fURL + "/v1/decisions?limit=1000")
			if err != nil {
				other.Add(1)
				return
			}
			defer discard(resp)
			switch resp.StatusCode {
			case http.StatusOK:
				ok.Add(1)
				// The follower's own index, at least what it had applied
				// before the reads, and whether it knows a leader (it may
				// not for a moment, should the leader step down).
				known := resp.Header.Get("X-Allot-Known-Leader")
				if got, _ := strconv.ParseUint(resp.Header.Get("X-Allot-Index"), 10, 64); got < idx || (known != "true" && known != "false") || resp.Header.Get("X-Allot-Last-Contact") == "" {
					badHeader.Store(fmt.Sprintf("index %q, known leader %q, last contact %q", resp.Header.Get("X-Allot-Index"), known, resp.Header.Get("X-Allot-Last-Contact")))
				}
			case http.StatusTooManyRequests:
				limited.Add(1)
			default:
				other.Add(1)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d reads through a follower: %d served, %d refused with 429, %d other; leader's term %s -> %s, still leading: %v", readers, ok.Load(), limited.Load(), other.Load(), term, leader.Raft().Stats()["term"], leader.IsLeader())
	if other.Load() != 0 || ok.Load() == 0 {
		t.Fatalf("answers: %d ok, %d 429, %d other; want only 200 and 429", ok.Load(), limited.Load(), other.Load())
	}
	if h := badHeader.Load(); h != nil {
		t.Fatalf("a follower's answer does not say how fresh it is: %v", h)
	}
	if got := requestsServed(t, leader, anyButMetrics); got != asked0 {
		t.Fatalf("the leader answered %v requests during the reads through a follower: they were forwarded", got-asked0)
	}

	// ?consistent goes to the leader, which confirms it leads. The leader
	// may have changed during the burst (see above): ask the one that leads
	// now, through a server that follows it.
	lead = c.leader()
	leader = c.nodes[lead].srv
	if f == lead {
		f = (lead + 1) % 3
	}
	follower, fURL = c.nodes[f].srv, "http://"+c.nodes[f].srv.HTTPAddr()
	resp, err := http.Get(fURL + "/v1/decisions?limit=1")
	if err != nil {
		t.Fatal(err)
	}
	discard(resp)
	if got, _ := strconv.ParseUint(resp.Header.Get("X-Allot-Index"), 10, 64); resp.StatusCode != 200 || got < idx || resp.Header.Get("X-Allot-Known-Leader") != "true" {
		t.Fatalf("a follower that knows its leader answers %d, index %q, known leader %q", resp.StatusCode, resp.Header.Get("X-Allot-Index"), resp.Header.Get("X-Allot-Known-Leader"))
	}
	served0 := requestsServed(t, leader, decisionReads)
	if code, body := rawGet(t, fURL+"/v1/decisions?limit=1&consistent"); code != 200 || !strings.Contains(body, "r999") {
		t.Fatalf("consistent read: %d %.300s", code, body)
	}
	if got := requestsServed(t, leader, decisionReads); got != served0+1 {
		t.Fatalf("consistent read: the leader served %v, want 1", got-served0)
	}

	// A forwarded write whose connection drops may have been applied: the
	// 502 says so and how to check. The leader's registered HTTP address is
	// pointed at a listener that reads the request and hangs up.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = http.ReadRequest(bufio.NewReader(conn))
			conn.Close()
		}
	}()
	me := state.Server{ID: leader.ID(), RaftAddr: leader.RaftAddr(), HTTPAddr: ln.Addr().String()}
	if _, idx, err = leader.Apply(state.ServerUpsertType, state.ServerUpsertRequest{Server: me}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the follower to see the leader's new address", func() error {
		if follower.Raft().AppliedIndex() < idx {
			return errors.New("not yet")
		}
		return nil
	})
	code, body := rawRequest(t, follower, "PUT", "/v1/budgets", testToken, strings.NewReader(`{"revision":"r2","budgets":[{"path":"a","share":1}]}`))
	if code != http.StatusBadGateway || !strings.Contains(body, "The leader may have applied it: check with GET /v1/budgets?consistent") {
		t.Fatalf("forwarded write that lost its answer: %d %s", code, body)
	}
}

func rawGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestClockCheckedAgainstLedgerOnLeading: a new leader whose clock is
// behind the replicated ledger, or far ahead of it, says so.
func TestClockCheckedAgainstLedgerOnLeading(t *testing.T) {
	clock := &fakeClock{now: tBase}
	var logs strings.Builder
	var mu sync.Mutex
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	})})
	s := devServer(t, Config{Token: testToken, Clock: clock.Now, Logger: logger})
	if _, _, err := s.Apply(state.ChargeType, state.ChargeRequest{Now: tBase, Charges: []state.Charge{
		{Alloc: "a", Leaf: "x", GPUs: 1, From: tBase.Add(-time.Minute), To: tBase}}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		shift time.Duration
		want  string
	}{
		{-2 * time.Hour, "clock is behind the replicated ledger"},
		{5 * time.Hour, "clock is far ahead of the replicated ledger"},
	} {
		clock.mu.Lock()
		clock.now = tBase.Add(tc.shift)
		clock.mu.Unlock()
		s.checkClockAgainstState()
		mu.Lock()
		got := logs.String()
		mu.Unlock()
		if !strings.Contains(got, tc.want) {
			t.Errorf("clock %v from the ledger: log lacks %q:\n%s", tc.shift, tc.want, got)
		}
	}
}
