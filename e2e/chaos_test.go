package e2e

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/client"
)

// The chaos test runs three real `allot server` processes on 127.0.0.1
// under a bounded load of budget applies and ledger charges, kills the
// leader with SIGKILL, kills and restarts a follower, then kills and
// restarts all three from disk, and checks that every acknowledged write is
// present exactly once on every server. It needs no Nomad; it runs when
// ALLOT_CHAOS=1 (`make chaos`).

const (
	chaosWriteToken = "chaos-writes"   // budgets and ledger
	chaosOpToken    = "chaos-operator" // join, remove-peer
	chaosWriters    = 4                // ledger writers, one leaf each
	chaosGPUs       = 1
	chaosChargeSecs = 60 // each charge: 1 GPU for one minute
)

type chaosServer struct {
	idx        int
	dir, cfg   string
	http, raft int
	cmd        *exec.Cmd
	out        *lockedBuffer
	done       chan struct{}
}

func (s *chaosServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.http) }

func (s *chaosServer) start(t *testing.T, bin string) {
	t.Helper()
	s.out = &lockedBuffer{}
	s.cmd = exec.Command(bin, "server", "-config", s.cfg, "-log-level", "warn")
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	s.cmd.Env = os.Environ()
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start server %d: %v", s.idx, err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.done)
}

// kill sends SIGKILL to the server's own process (by its PID) and waits
// for it to exit.
func (s *chaosServer) kill(t *testing.T) {
	t.Helper()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	if strings.Contains(s.out.String(), "panic:") {
		t.Errorf("server %d panicked:\n%s", s.idx, s.out.String())
	}
	s.cmd = nil
}

func (s *chaosServer) running() bool {
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// chaosPorts picks free ports below Linux's ephemeral range, so that a
// restarted server gets its ports back (see overlay/server's freePort).
func chaosPorts(t *testing.T, n int) []int {
	var out []int
	seen := map[int]bool{}
	for len(out) < n {
		p := 20000 + rand.IntN(12000)
		if seen[p] {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		ln.Close()
		seen[p] = true
		out = append(out, p)
	}
	return out
}

type chaosCluster struct {
	t       *testing.T
	bin     string
	servers []*chaosServer
}

func newChaosCluster(t *testing.T, bin string) *chaosCluster {
	c := &chaosCluster{t: t, bin: bin}
	ports := chaosPorts(t, 6)
	var join []string
	for i := 0; i < 3; i++ {
		join = append(join, fmt.Sprintf("%q", "127.0.0.1:"+strconv.Itoa(ports[2*i])))
	}
	root := t.TempDir()
	for i := 0; i < 3; i++ {
		s := &chaosServer{idx: i, dir: filepath.Join(root, fmt.Sprintf("s%d", i)), http: ports[2*i], raft: ports[2*i+1]}
		s.cfg = filepath.Join(root, fmt.Sprintf("s%d.hcl", i))
		hcl := fmt.Sprintf(`node_id          = "chaos-%d"
data_dir         = %q
bind_addr        = "127.0.0.1"
bootstrap_expect = 3
retry_join       = [%s]
ports {
  http = %d
  raft = %d
}
server {
  token          = %q
  operator_token = %q
}
`, i, s.dir, strings.Join(join, ", "), s.http, s.raft, chaosWriteToken, chaosOpToken)
		if err := os.WriteFile(s.cfg, []byte(hcl), 0o600); err != nil {
			t.Fatal(err)
		}
		c.servers = append(c.servers, s)
	}
	t.Cleanup(func() {
		for _, s := range c.servers {
			if s.running() {
				s.kill(t)
			}
		}
		if t.Failed() {
			for _, s := range c.servers {
				if s.out != nil {
					t.Logf("server %d output:\n%s", s.idx, s.out.String())
				}
			}
		}
	})
	return c
}

func (c *chaosCluster) client(i int, token string) *client.Client {
	cl, err := client.New(c.servers[i].addr(), token, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

// leader returns the index of the server every running server names as
// leader, polling every 25ms until timeout; it fails the test otherwise.
func (c *chaosCluster) leader(timeout time.Duration, not int) int {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if i := c.agreedLeader(not); i >= 0 {
			return i
		}
		time.Sleep(25 * time.Millisecond)
	}
	c.t.Fatalf("no leader agreed by every running server within %v", timeout)
	return -1
}

func (c *chaosCluster) agreedLeader(not int) int {
	leaderID := ""
	for i, s := range c.servers {
		if !s.running() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		self, err := c.client(i, chaosOpToken).Self(ctx)
		cancel()
		if err != nil || self.Leader == "" || (leaderID != "" && self.Leader != leaderID) {
			return -1
		}
		leaderID = self.Leader
	}
	for i := range c.servers {
		if fmt.Sprintf("chaos-%d", i) == leaderID && i != not && c.servers[i].running() {
			return i
		}
	}
	return -1
}

// chaosLoad is the bounded write load and what was acknowledged.
type chaosLoad struct {
	c        *chaosCluster
	base     time.Time
	stop     atomic.Bool
	wg       sync.WaitGroup
	mu       sync.Mutex
	acked    [chaosWriters]int // charges acknowledged per writer (leaf)
	unknown  [chaosWriters]int // charges given up on: applied or not
	revAcked int               // budget applies acknowledged (sequential: the last one is current)
	revLost  int               // budget applies given up on
	lastRev  string
	retries  atomic.Int64
	lastAck  atomic.Int64 // unix nanos of the latest acknowledgement
	maxCount int          // bound on writes per writer
}

func chaosBudgets(rev string) *client.BudgetsApply {
	b := &client.BudgetsApply{Revision: rev, Budgets: []client.BudgetSpec{{Path: "chaos", Share: 1}}}
	for w := 0; w < chaosWriters; w++ {
		b.Budgets = append(b.Budgets, client.BudgetSpec{Path: fmt.Sprintf("chaos/w%d", w), Share: float64(w + 1)})
	}
	return b
}

// retry sends one write until a server acknowledges it, trying the servers
// in turn; false when it gave up (the write may or may not be applied).
func (l *chaosLoad) retry(first int, write func(*client.Client) error) bool {
	deadline := time.Now().Add(30 * time.Second)
	for attempt := 0; time.Now().Before(deadline); attempt++ {
		i := (first + attempt) % 3
		if err := write(l.c.client(i, chaosWriteToken)); err == nil {
			l.lastAck.Store(time.Now().UnixNano())
			return true
		}
		l.retries.Add(1)
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func (l *chaosLoad) run() {
	for w := 0; w < chaosWriters; w++ {
		l.wg.Add(1)
		go func(w int) {
			defer l.wg.Done()
			leaf := fmt.Sprintf("chaos/w%d", w)
			for k := 0; k < l.maxCount && !l.stop.Load(); k++ {
				// Each charge is its own allocation: resending it (a retry
				// after a lost answer) must count once.
				ch := client.Charge{Alloc: fmt.Sprintf("chaos-%d-%d", w, k), Budget: leaf, GPUs: chaosGPUs,
					From: l.base.Add(time.Duration(k%60) * time.Minute)}
				ch.To = ch.From.Add(chaosChargeSecs * time.Second)
				ok := l.retry(w+k, func(cl *client.Client) error {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					_, err := cl.AppendLedger(ctx, &client.LedgerAppend{Charges: []client.Charge{ch}})
					return err
				})
				l.mu.Lock()
				if ok {
					l.acked[w]++
				} else {
					l.unknown[w]++
				}
				l.mu.Unlock()
			}
		}(w)
	}
	l.wg.Add(1)
	go func() { // one budget writer, as CI applies after each merge
		defer l.wg.Done()
		for k := 0; k < l.maxCount && !l.stop.Load(); k++ {
			rev := fmt.Sprintf("chaos-rev-%04d", k)
			ok := l.retry(k, func(cl *client.Client) error {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_, err := cl.ApplyBudgets(ctx, chaosBudgets(rev))
				return err
			})
			l.mu.Lock()
			if ok {
				l.revAcked++
				l.lastRev = rev
			} else {
				l.revLost++
			}
			l.mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}()
}

// TestChaosThreeServers is the chaos test (see the top of this file).
func TestChaosThreeServers(t *testing.T) {
	if os.Getenv("ALLOT_CHAOS") != "1" {
		t.Skip("skip: chaos test runs with ALLOT_CHAOS=1 (make chaos)")
	}
	bin := allotBinary(t)
	c := newChaosCluster(t, bin)
	start := time.Now()
	for _, s := range c.servers {
		s.start(t, bin)
	}
	lead := c.leader(30*time.Second, -1)
	t.Logf("cluster formed in %v; leader chaos-%d", time.Since(start).Round(time.Millisecond), lead)

	load := &chaosLoad{c: c, base: time.Now().UTC().Truncate(time.Minute).Add(-2 * time.Hour), maxCount: 5000}
	load.run()
	pause := func(d time.Duration) { time.Sleep(d) } // the load runs meanwhile

	pause(3 * time.Second)
	// 1. kill -9 the leader.
	killed := lead
	c.servers[killed].kill(t)
	killAt := time.Now()
	lead = c.leader(15*time.Second, killed)
	failover := time.Since(killAt)
	firstAck := waitAckAfter(t, load, killAt)
	t.Logf("kill -9 leader chaos-%d: new leader chaos-%d after %v; first write acknowledged %v after the kill",
		killed, lead, failover.Round(time.Millisecond), firstAck.Round(time.Millisecond))
	pause(2 * time.Second)
	c.servers[killed].start(t, bin) // the old leader comes back as a follower
	pause(3 * time.Second)

	// 2. kill -9 a follower and restart it.
	follower := (lead + 1) % 3
	c.servers[follower].kill(t)
	pause(2 * time.Second)
	c.servers[follower].start(t, bin)
	pause(3 * time.Second)

	// 3. stop the load, then kill -9 all three and restart them from disk.
	load.stop.Store(true)
	load.wg.Wait()
	for _, s := range c.servers {
		s.kill(t)
	}
	restartAt := time.Now()
	for _, s := range c.servers {
		s.start(t, bin)
	}
	lead = c.leader(30*time.Second, -1)
	t.Logf("kill -9 all three, restart from disk: leader chaos-%d after %v", lead, time.Since(restartAt).Round(time.Millisecond))

	// Every acknowledged write, exactly once, on every server (read from
	// each server's own state with ?stale).
	var ackedTotal, unknownTotal int
	for w := 0; w < chaosWriters; w++ {
		ackedTotal += load.acked[w]
		unknownTotal += load.unknown[w]
	}
	lost := 0
	waitFor(t, 30*time.Second, "every server to hold every acknowledged write", func() (bool, error) {
		lost = 0
		for i := range c.servers {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			u, err := c.client(i, chaosWriteToken).Usage(ctx, "1d", true)
			b, berr := c.client(i, chaosWriteToken).Budgets(ctx, true)
			cancel()
			if err != nil || berr != nil {
				return false, nil
			}
			if b.Revision != load.lastRev && load.revLost == 0 {
				return false, nil
			}
			for w := 0; w < chaosWriters; w++ {
				got := usageSeconds(u, fmt.Sprintf("chaos/w%d", w))
				lo, hi := int64(load.acked[w]*chaosChargeSecs), int64((load.acked[w]+load.unknown[w])*chaosChargeSecs)
				if got < lo || got > hi {
					if got < lo {
						lost = int(lo-got) / chaosChargeSecs
					}
					return false, nil
				}
			}
		}
		return true, nil
	})
	t.Logf("CHAOS: %d charges acknowledged (%d given up, %d retries), %d budget applies acknowledged (%d given up); "+
		"lost 0, duplicated 0 on each of 3 servers; failover after kill -9 of the leader: new leader in %v, writes acknowledged again after %v",
		ackedTotal, unknownTotal, load.retries.Load(), load.revAcked, load.revLost, failover.Round(time.Millisecond), firstAck.Round(time.Millisecond))
	if lost != 0 {
		t.Fatalf("%d acknowledged charges lost", lost)
	}
	if failover > 3*time.Second {
		t.Errorf("new leader after %v, want <= 3s", failover)
	}
}

// waitAckAfter waits until the load has a write acknowledged after at and
// returns how long after at that was.
func waitAckAfter(t *testing.T, l *chaosLoad, at time.Time) time.Duration {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if ns := l.lastAck.Load(); ns > at.UnixNano() {
			return time.Duration(ns - at.UnixNano())
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no write acknowledged within 30s of the kill")
	return 0
}

// usageSeconds returns a budget's charged GPU-seconds from a usage answer.
func usageSeconds(u *client.Usage, path string) int64 {
	for _, r := range u.Budgets {
		if r.Path == path {
			return int64(math.Round(r.Charged * 3600))
		}
	}
	return -1
}
