package e2e

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/overlay/policy"
)

// Scenario 4: a user re-runs a managed job with a new priority: the user's
// registration stands (no stale write overwrites it) and allot converges.
func TestReconcileUserRerunPriority(t *testing.T) {
	c := startGPUCluster(t)
	al := startAllot(t, c, allotOptions{})
	c.register(t, gpuJob{ID: "blocker", Budget: "lab/a", MinRuntime: "1h", GPUs: 8})
	c.waitRunning(t, "blocker", 1, 60*time.Second)
	c.register(t, gpuJob{ID: "j", Budget: "lab/b", MinRuntime: "1m", GPUs: 8})
	level := c.waitPriority(t, "j", func(p int) bool { return p != 50 && p >= 40 && p <= 89 }, "written in the pending band", 10*time.Second)
	c.register(t, gpuJob{ID: "j", Budget: "lab/b", MinRuntime: "1m", GPUs: 8, Priority: 33})
	c.waitPriority(t, "j", func(p int) bool { return p == level }, fmt.Sprintf("back at %d", level), 10*time.Second)
	vs := c.versions(t, "j")
	userAt := -1
	for i, v := range vs {
		if v.Priority == 33 {
			userAt = i
		}
	}
	if userAt < 0 || userAt == len(vs)-1 {
		t.Fatalf("versions %+v: want the user's priority 33 kept as a version and allot's after it", vs)
	}
	if next := vs[userAt+1]; next.Priority != level || next.JobModifyIndex <= vs[userAt].JobModifyIndex {
		t.Fatalf("after the user's version came %+v, want allot's %d checked against the user's index", next, level)
	}
	// The pass that restored the level records its decisions once its
	// writes are done, after Nomad already shows the write.
	waitFor(t, 10*time.Second, "a decision recording the user's priority", func() (bool, error) {
		for _, d := range al.Srv.FSM().Read().Decisions(0) {
			if d.JobID == "default/j" && strings.Contains(d.Reason, "set outside allot") {
				return true, nil
			}
		}
		return false, nil
	})
	t.Logf("user's version %d (priority 33) kept; allot's version %d restored %d", vs[userAt].Version, vs[userAt+1].Version, level)
}

// Scenario 5: allot restarts mid-run: charges are neither lost nor doubled
// (ledger against Nomad's allocation run times) and protection holds.
func TestReconcileRestartKeepsChargesAndProtection(t *testing.T) {
	c := startGPUCluster(t)
	dir := t.TempDir()
	begin := time.Now()
	al := startAllot(t, c, allotOptions{DataDir: dir})
	now := time.Now()
	al.seedUsage("lab/a", 8, now.Add(-2*time.Hour), now.Add(-time.Hour))
	c.register(t, gpuJob{ID: "prot", Budget: "lab/a", MinRuntime: "25s", GPUs: 4})
	c.register(t, gpuJob{ID: "short", Budget: "lab/b", MinRuntime: "5s", GPUs: 2, Sleep: 8})
	prot := c.waitRunning(t, "prot", 1, 60*time.Second)[0]
	c.waitRunning(t, "short", 1, 60*time.Second)
	c.waitLevel(t, "prot", bands.Protected, "protected", 10*time.Second)
	time.Sleep(2 * time.Second) // let some charges land before the stop
	al.Stop()
	down := time.Now()
	// While allot is down: short finishes, a job that wants prot's GPUs arrives.
	// waiter's window (8 GPUs x 30 s) outweighs prot's lost work (4 GPUs x
	// ~25 s), so policy MaxSliceLoss lets allot stop prot for it.
	c.register(t, gpuJob{ID: "waiter", Budget: "lab/b", MinRuntime: "30s", GPUs: 8, Sleep: 5})
	waitFor(t, 30*time.Second, "short to finish while allot is down", func() (bool, error) {
		a := c.allocs(t, "short")[0]
		return a.ClientStatus == "complete", nil
	})
	up := time.Now()
	al2 := startAllot(t, c, allotOptions{DataDir: dir})
	windowEnd := prot.started().Add(25 * time.Second)
	c.waitRunning(t, "waiter", 1, 60*time.Second)
	first := c.allocs(t, "prot")[0]
	if k := first.killedAt(); k.IsZero() || k.Before(windowEnd) {
		t.Fatalf("prot killed at %s, its window ends %s: protection not honoured after the restart", k, windowEnd)
	}
	for _, id := range []string{"prot", "short", "waiter"} {
		c.stopJob(t, id)
	}
	// Expected charges from Nomad's own start and finish times, per leaf.
	// The ledger charges whole seconds from each start to each finish, so
	// each allocation may differ by up to a second per GPU either way (plus
	// the view's lag behind a finish); that is far below what a lost outage
	// (4 GPUs x the time allot was down) or a doubled charge would show.
	want, tol := map[string]float64{}, map[string]float64{}
	waitFor(t, 30*time.Second, "every allocation to finish", func() (bool, error) {
		clear(want)
		clear(tol)
		for _, j := range []struct {
			id, leaf string
			gpus     int
		}{{"prot", "lab/a", 4}, {"short", "lab/b", 2}, {"waiter", "lab/b", 8}} {
			for _, a := range c.allocs(t, j.id) {
				if a.started().IsZero() {
					continue
				}
				if a.finished().IsZero() {
					return false, nil
				}
				want[j.leaf] += float64(j.gpus) * a.finished().Sub(a.started()).Seconds()
				tol[j.leaf] += float64(2 * j.gpus)
			}
		}
		return true, nil
	})
	if outage := 4 * up.Sub(down).Seconds(); tol["lab/a"] >= outage {
		t.Fatalf("precondition: tolerance %.0f GPU-s would hide prot's %.0f GPU-s while allot was down", tol["lab/a"], outage)
	}
	var got map[string]int64
	defer func() {
		if t.Failed() {
			t.Logf("last ledger read %v; from Nomad's run times %v (tolerance %v)", got, want, tol)
		}
	}()
	waitFor(t, 30*time.Second, "the ledger to match Nomad's run times", func() (bool, error) {
		got = map[string]int64{}
		ok := true
		for leaf, w := range want {
			// Whole 1-minute buckets: a bucket counts when its start lies in the window.
			got[leaf] = al2.usage(leaf, begin.Truncate(time.Minute), time.Now().Add(time.Minute))
			ok = ok && math.Abs(float64(got[leaf])-w) <= tol[leaf]
		}
		return ok, nil
	})
	t.Logf("ledger GPU-seconds %v; from Nomad's run times %v (tolerance %v); allot was down %s",
		got, roundAll(want), tol, up.Sub(down).Round(time.Millisecond))
}

// roundAll rounds each value to a tenth, for logs.
func roundAll(m map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = math.Round(v*10) / 10
	}
	return out
}

// Scenario 6: the event stream is cut (through a proxy the test controls):
// allot resumes or rebuilds its view and misses nothing.
func TestReconcileStreamCut(t *testing.T) {
	c := startGPUCluster(t)
	px := newCutProxy(t, strings.TrimPrefix(c.Addr, "http://"))
	al := startAllot(t, c, allotOptions{NomadAddr: "http://" + px.Addr()})
	low := policy.DefaultConfig().FreeLevels().Low // free work that has not run 5m yet
	c.register(t, gpuJob{ID: "before", GPUs: 1})
	c.waitPriority(t, "before", func(p int) bool { return p == low }, fmt.Sprintf("= %d", low), 10*time.Second)
	resyncs := al.Rec.Watcher().Resyncs()
	px.Cut()
	c.register(t, gpuJob{ID: "during", GPUs: 1}) // directly at Nomad: allot cannot see it now
	time.Sleep(3 * time.Second)                  // the outage lasts this long
	if p := c.job(t, "during").Priority; p != 50 {
		t.Fatalf("during the cut allot wrote priority %d", p)
	}
	px.Restore()
	c.waitPriority(t, "during", func(p int) bool { return p == low }, fmt.Sprintf("= %d after the stream is back", low), 30*time.Second)
	t.Logf("after the cut: %d rebuild(s) from the list endpoints, %d proxied connection(s) cut",
		al.Rec.Watcher().Resyncs()-resyncs, px.Cuts())
}

// Scenario 7: a job asking for all 8 GPUs at the top of the order while
// 1-GPU jobs keep arriving: allot reserves the node and the large job starts
// when the GPUs free up instead of starving behind the small ones.
func TestReconcileReservationForLargeJob(t *testing.T) {
	c := startGPUCluster(t)
	al := startAllot(t, c, allotOptions{})
	now := time.Now()
	al.seedUsage("lab/a", 8, now.Add(-2*time.Hour), now.Add(-time.Hour))
	var lastEnd time.Time
	for i := 0; i < 8; i++ {
		id := fmt.Sprintf("small-%d", i)
		c.register(t, gpuJob{ID: id, Budget: "lab/a", MinRuntime: "40s", GPUs: 1, Sleep: 6 + i})
	}
	for i := 0; i < 8; i++ {
		a := c.waitRunning(t, fmt.Sprintf("small-%d", i), 1, 30*time.Second)[0]
		if e := a.started().Add(time.Duration(6+i) * time.Second); e.After(lastEnd) {
			lastEnd = e
		}
	}
	c.register(t, gpuJob{ID: "big", Budget: "lab/b", MinRuntime: "1m", GPUs: 8})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // arrivals: one small job a second
		defer wg.Done()
		for k := 0; ; k++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			if err := c.Put("/v1/jobs", jobBody(gpuJob{ID: fmt.Sprintf("arrive-%d", k), Budget: "lab/a", MinRuntime: "1h", GPUs: 1}), nil); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	reserved := false
	// What `allot nodes -json` shows while the node is held.
	api, err := client.New(al.Srv.HTTPAddr(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var held *client.Node
	waitFor(t, 60*time.Second, "big to start", func() (bool, error) {
		var n struct{ SchedulingEligibility string }
		if err := c.Get("/v1/node/"+c.Node, &n); err == nil && n.SchedulingEligibility == "ineligible" {
			reserved = true
		}
		if ns, err := api.Nodes(context.Background(), false); err == nil && held == nil {
			for i := range ns.Nodes {
				if ns.Nodes[i].Reservation != nil {
					held = &ns.Nodes[i]
				}
			}
		}
		return len(c.running(t, "big")) == 1, nil
	})
	if held != nil {
		// startAllot's ReservationMaxAge is 2m.
		if r := held.Reservation; r.Job != "default/big" || !r.Until.Equal(r.Since.Add(2*time.Minute)) || held.Drain != "active" {
			t.Errorf("reserved node in GET /v1/nodes: drain %q, reservation %+v; want active, held for default/big for at most 2m",
				held.Drain, *r)
		}
	} else {
		t.Logf("the reservation was not seen in GET /v1/nodes (it lasted less than a poll)")
	}
	big := c.running(t, "big")[0]
	t.Logf("big started %s after the last small job's GPUs freed; node seen reserved: %t",
		big.started().Sub(lastEnd).Round(time.Millisecond), reserved)
	if big.started().Sub(lastEnd) > time.Second { // say what it waited for
		for _, d := range al.Srv.FSM().Read().Decisions(0) {
			if d.At.After(lastEnd.Add(-2*time.Second)) && (strings.Contains(d.Reason, "big") || d.JobID == "default/big") {
				t.Logf("  decision %s %s %s: %s", d.At.Format("15:04:05.000"), d.Kind, d.JobID, d.Reason)
			}
		}
	}
	if d := big.started().Sub(lastEnd); d > 5*time.Second {
		t.Fatalf("big started %s after the GPUs freed, want within 5 s", d)
	}
	found := false
	for _, d := range al.Srv.FSM().Read().Decisions(0) {
		found = found || d.Kind == "reserve" && strings.Contains(d.Reason, "reserved for default/big")
	}
	if !found {
		t.Fatalf("no reservation decision for big")
	}
}

// cutProxy forwards TCP to Nomad; Cut drops every connection and refuses
// new ones until Restore.
type cutProxy struct {
	t      *testing.T
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]bool
	cuts   int
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{t: t, ln: ln, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close(); p.Cut() })
	go p.serve()
	return p
}

func (p *cutProxy) Addr() string { return p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			in.Close()
			continue
		}
		p.conns[in], p.conns[out] = true, true
		p.mu.Unlock()
		go func() { io.Copy(out, in); out.Close() }()
		go func() { io.Copy(in, out); in.Close() }()
	}
}

// Cut closes every proxied connection and refuses new ones.
func (p *cutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
		p.cuts++
	}
	clear(p.conns)
}

// Restore accepts connections again.
func (p *cutProxy) Restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

func (p *cutProxy) Cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}
