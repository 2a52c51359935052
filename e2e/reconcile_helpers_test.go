package e2e

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/nomad"
	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/reconcile"
	"github.com/allot-sched/allot/overlay/server"
	"github.com/allot-sched/allot/overlay/state"
	"github.com/hashicorp/go-hclog"
)

// gpuCluster is a dev agent with allot-nvml's 8 fake H100s and preemption on.
type gpuCluster struct {
	*agent
	Node string
}

// startGPUCluster starts the agent and waits for 8 healthy GPUs.
func startGPUCluster(t testing.TB) *gpuCluster {
	t.Helper()
	return startGPUClusterHCL(t, fmt.Sprintf(`
plugin "allot-nvml" {
  config {
    fake               = "dgxh100"
    fake_state_dir     = %q
    fingerprint_period = "1s"
  }
}
`, t.TempDir()))
}

// startGPUClusterHCL starts the agent with hcl added to its config, which
// must load allot-nvml with 8 fake GPUs, and waits for them to be healthy.
func startGPUClusterHCL(t testing.TB, hcl string) *gpuCluster {
	t.Helper()
	nomadBinary(t)
	pluginDir := installPlugin(t, allotNVML(t))
	a := startAgent(t, agentConfig{PluginDir: pluginDir, HCL: hcl})
	node := a.WaitNode()
	waitFor(t, 60*time.Second, "8 healthy GPUs", func() (bool, error) {
		healthy, _, err := gpuInstances(a, node)
		n := 0
		for _, h := range healthy {
			if h {
				n++
			}
		}
		return err == nil && n == 8, nil
	})
	return &gpuCluster{agent: a, Node: node}
}

// allot is an allot server in this process driving a Nomad.
type allot struct {
	t      testing.TB
	Srv    *server.Server
	Rec    *reconcile.Reconciler
	cancel context.CancelFunc
	done   chan struct{}
}

// allotOptions shape an allot server.
type allotOptions struct {
	NomadAddr string // default: the cluster's address
	DataDir   string // "": -dev (in-memory state)
	Policy    func(*policy.Config)
	// ReconcileInterval is the periodic pass's (default 2s).
	ReconcileInterval time.Duration
	// Parallel is the adapter's writes to different jobs at once
	// (nomad.ApplyConfig.Parallel; 0: its default).
	Parallel int
}

// testBudgets: two leaves with equal shares.
var testBudgets = []budgets.Spec{{Path: "lab"}, {Path: "lab/a", Share: 1}, {Path: "lab/b", Share: 1}}

// startAllot starts an allot server pointed at the cluster, applies
// testBudgets when the state has none, and waits until it leads with a
// synced view. It stops when the test ends (or at Stop).
func startAllot(t testing.TB, c *gpuCluster, o allotOptions) *allot {
	t.Helper()
	addr := o.NomadAddr
	if addr == "" {
		addr = c.Addr
	}
	client, err := nomad.NewClientFor(addr)
	if err != nil {
		t.Fatal(err)
	}
	pre, err := nomad.Preflight(context.Background(), client, true)
	if err != nil {
		t.Fatalf("preflight: %v", err)
	}
	t.Logf("preflight: nomad %s, preemption turned on now: %t", pre.Version, pre.PreemptionEnabled)
	pc := policy.DefaultConfig()
	pc.ReservationMaxAge = 2 * time.Minute
	if o.Policy != nil {
		o.Policy(&pc)
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "allot", Level: hclog.Warn, Output: testWriter{t}})
	ad, err := nomad.NewAdapter(client, nomad.Config{Watch: nomad.WatchConfig{ResyncInterval: time.Minute, RetryMax: time.Second},
		Apply: nomad.ApplyConfig{Parallel: o.Parallel}}, log)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := reconcile.New(reconcile.Config{Nomad: ad, Policy: pc, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	lns := listeners(t, 2)
	cfg := server.Config{Dev: o.DataDir == "", DataDir: o.DataDir, BootstrapExpect: 1, NodeID: "allot-e2e",
		HTTPListener: lns[0], RaftListener: lns[1], Token: "e2e", Reconciler: rec,
		ReconcileInterval: cmp.Or(o.ReconcileInterval, 2*time.Second), Logger: log,
		Raft: server.RaftTuning{HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
			LeaderLeaseTimeout: 100 * time.Millisecond, CommitTimeout: 5 * time.Millisecond}}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatalf("allot server: %v", err)
	}
	rec.AttachLedger(srv.FSM())
	ctx, cancel := context.WithCancel(context.Background())
	al := &allot{t: t, Srv: srv, Rec: rec, cancel: cancel, done: make(chan struct{})}
	go func() { rec.Run(ctx); close(al.done) }()
	t.Cleanup(al.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			al.dump()
		}
	})
	waitFor(t, 30*time.Second, "allot to lead", func() (bool, error) { return srv.IsLeader(), nil })
	// A restarted server leads before it has replayed its log: read the
	// budgets only once everything committed before is applied.
	if err := srv.Raft().Barrier(10 * time.Second).Error(); err != nil {
		t.Fatalf("raft barrier: %v", err)
	}
	if srv.FSM().Read().Budgets() == nil {
		if _, _, err := srv.Apply(state.BudgetsApplyType, state.BudgetsApplyRequest{Revision: "e2e",
			Specs: testBudgets, AppliedAt: time.Now().UTC()}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "allot's view of nomad", func() (bool, error) { return rec.View().State().Synced, nil })
	return al
}

// dump logs allot's queue and decision log.
func (a *allot) dump() {
	v := a.Srv.FSM().Read()
	for _, q := range v.Queue() {
		a.t.Logf("queue: %s band=%s prio=%d pos=%d: %s", q.JobID, q.Band, q.Priority, q.Position, q.Explanation)
	}
	for _, d := range v.Decisions(0) {
		a.t.Logf("decision %d %s %s %s job=%s alloc=%s node=%s: %s", d.Seq, d.At.Format("15:04:05.000"), d.Kind, "", d.JobID, d.AllocID, d.NodeID, d.Reason)
	}
}

// Stop shuts the server down and stops the watcher.
func (a *allot) Stop() {
	select {
	case <-a.done:
		return
	default:
	}
	a.Srv.Shutdown()
	a.cancel()
	<-a.done
}

// listeners returns n listeners on free ports of 127.0.0.1.
func listeners(t testing.TB, n int) []net.Listener {
	t.Helper()
	var out []net.Listener
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// seedUsage charges GPU-seconds to a leaf as a finished allocation over
// [from, to), so the leaf starts over its share.
func (a *allot) seedUsage(leaf string, gpus int, from, to time.Time) {
	a.t.Helper()
	id := "seed-" + leaf
	if _, _, err := a.Srv.Apply(state.AllocUpsertType, state.AllocUpsertRequest{Allocs: []state.Alloc{{
		ID: id, Leaf: leaf, GPUs: gpus, StartedAt: from.UTC(), StoppedAt: to.UTC()}}}); err != nil {
		a.t.Fatal(err)
	}
	if _, _, err := a.Srv.Apply(state.ChargeType, state.ChargeRequest{Charges: []state.Charge{{
		Alloc: id, Leaf: leaf, GPUs: gpus, From: from, To: to}}}); err != nil {
		a.t.Fatal(err)
	}
}

// usage is a leaf's charged GPU-seconds over [from, to).
func (a *allot) usage(leaf string, from, to time.Time) int64 {
	var n int64
	a.Srv.FSM().WithLedger(func(l *budgets.Ledger) { n = l.Usage(leaf, from, to) })
	return n
}

// gpuJob describes a batch raw_exec job asking for GPUs.
type gpuJob struct {
	ID         string
	Budget     string // meta budget ("" none)
	MinRuntime string // meta min_runtime ("" none: unallocated)
	GPUs       int    // per allocation
	Count      int    // allocations (default 1)
	Priority   int    // Nomad priority at registration (default 50)
	Sleep      int    // seconds the task sleeps (default 3600)
	// NotResumable sets meta resumable = false (default true);
	// MetaPriority sets meta priority (0: not set).
	NotResumable bool
	MetaPriority int
	// Node pins the job to the client of that name ("": any). SlowExit:
	// the task ignores SIGINT and SIGTERM, so a stop ends it only when
	// Nomad kills it, 20 s later (its kill_timeout; 1 s otherwise).
	Node     string
	SlowExit bool
}

// register submits the job and returns Nomad's answer.
func (c *gpuCluster) register(t testing.TB, j gpuJob) {
	t.Helper()
	if err := c.Put("/v1/jobs", jobBody(j), nil); err != nil {
		t.Fatalf("register %s: %v", j.ID, err)
	}
}

func jobBody(j gpuJob) map[string]any {
	if j.Count == 0 {
		j.Count = 1
	}
	if j.Priority == 0 {
		j.Priority = 50
	}
	if j.Sleep == 0 {
		j.Sleep = 3600
	}
	meta := map[string]string{"resumable": strconv.FormatBool(!j.NotResumable)}
	if j.MetaPriority != 0 {
		meta["priority"] = strconv.Itoa(j.MetaPriority)
	}
	if j.Budget != "" {
		meta["budget"] = j.Budget
	}
	if j.MinRuntime != "" {
		meta["min_runtime"] = j.MinRuntime
	}
	kill, config := time.Second, map[string]any{"command": "/bin/sleep", "args": []string{strconv.Itoa(j.Sleep)}}
	if j.SlowExit {
		kill = 20 * time.Second
		config = map[string]any{"command": "/bin/sh", "args": []string{"-c",
			fmt.Sprintf("trap '' INT TERM; sleep %d & wait; sleep %d", j.Sleep, j.Sleep)}}
	}
	group := map[string]any{
		"Name": "g", "Count": j.Count,
		"RestartPolicy":    map[string]any{"Attempts": 0, "Mode": "fail"},
		"ReschedulePolicy": map[string]any{"Attempts": 0, "Unlimited": false},
		"Tasks": []any{map[string]any{
			"Name": "t", "Driver": "raw_exec", "KillTimeout": int64(kill), "Config": config,
			"Resources": map[string]any{"CPU": 20, "MemoryMB": 16,
				"Devices": []any{map[string]any{"Name": "nvidia/gpu", "Count": j.GPUs}}},
		}},
	}
	if j.Node != "" {
		group["Constraints"] = []any{map[string]any{"LTarget": "${node.unique.name}", "RTarget": j.Node, "Operand": "="}}
	}
	return map[string]any{"Job": map[string]any{
		"ID": j.ID, "Name": j.ID, "Type": "batch", "Datacenters": []string{"dc1"}, "Priority": j.Priority, "Meta": meta,
		"TaskGroups": []any{group},
	}}
}

// nomadJob is what the tests read of GET /v1/job/<id>.
type nomadJob struct {
	ID             string
	Priority       int
	Status         string
	Version        uint64
	JobModifyIndex uint64
	SubmitTime     int64
}

func (c *gpuCluster) job(t testing.TB, id string) nomadJob {
	t.Helper()
	var j nomadJob
	if err := c.Get("/v1/job/"+url.PathEscape(id), &j); err != nil {
		t.Fatal(err)
	}
	return j
}

// versions returns the job's versions, oldest first.
func (c *gpuCluster) versions(t testing.TB, id string) []nomadJob {
	t.Helper()
	var v struct{ Versions []nomadJob }
	if err := c.Get("/v1/job/"+url.PathEscape(id)+"/versions", &v); err != nil {
		t.Fatal(err)
	}
	sort.Slice(v.Versions, func(i, j int) bool { return v.Versions[i].Version < v.Versions[j].Version })
	return v.Versions
}

// nomadAlloc is what the tests read of an allocation.
type nomadAlloc struct {
	ID, Name, JobID, NodeID     string
	NodeName                    string
	DesiredStatus, ClientStatus string
	DesiredDescription          string
	PreemptedByAllocation       string
	RescheduleTracker           *struct{ Events []any }
	CreateIndex, ModifyIndex    uint64
	TaskStates                  map[string]struct {
		StartedAt, FinishedAt time.Time
		Events                []struct {
			Type string
			Time int64
		}
	}
}

func (a nomadAlloc) started() time.Time  { return a.TaskStates["t"].StartedAt }
func (a nomadAlloc) finished() time.Time { return a.TaskStates["t"].FinishedAt }

// killedAt is when the client started killing the task (zero if never).
func (a nomadAlloc) killedAt() time.Time {
	for _, e := range a.TaskStates["t"].Events {
		if e.Type == "Killing" {
			return time.Unix(0, e.Time)
		}
	}
	return time.Time{}
}

func (c *gpuCluster) allocs(t testing.TB, job string) []nomadAlloc {
	t.Helper()
	var out []nomadAlloc
	if err := c.Get("/v1/job/"+url.PathEscape(job)+"/allocations", &out); err != nil {
		t.Fatal(err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreateIndex < out[j].CreateIndex })
	return out
}

// alloc returns the job's allocation with that ID (the zero value when
// Nomad no longer lists it).
func (c *gpuCluster) alloc(t testing.TB, job, id string) nomadAlloc {
	t.Helper()
	for _, a := range c.allocs(t, job) {
		if a.ID == id {
			return a
		}
	}
	return nomadAlloc{}
}

// running returns the job's allocations running and meant to keep running.
func (c *gpuCluster) running(t testing.TB, job string) []nomadAlloc {
	var out []nomadAlloc
	for _, a := range c.allocs(t, job) {
		if a.ClientStatus == "running" && a.DesiredStatus == "run" {
			out = append(out, a)
		}
	}
	return out
}

func (c *gpuCluster) waitRunning(t testing.TB, job string, n int, timeout time.Duration) []nomadAlloc {
	t.Helper()
	var rs []nomadAlloc
	waitFor(t, timeout, fmt.Sprintf("%d running allocation(s) of %s", n, job), func() (bool, error) {
		rs = c.running(t, job)
		return len(rs) >= n, nil
	})
	return rs
}

func (c *gpuCluster) waitPriority(t testing.TB, job string, ok func(int) bool, what string, timeout time.Duration) int {
	t.Helper()
	var p int
	waitFor(t, timeout, job+" priority "+what, func() (bool, error) {
		p = c.job(t, job).Priority
		return ok(p), nil
	})
	return p
}

// bands are the Nomad priorities allot writes with its default config.
var bands = policy.DefaultConfig().BandsConfig

// waitLevel waits until job is written at level (a band's one priority:
// bands.Protected, bands.Running), named what in a failure.
func (c *gpuCluster) waitLevel(t testing.TB, job string, level int, what string, timeout time.Duration) {
	t.Helper()
	c.waitPriority(t, job, func(p int) bool { return p == level }, fmt.Sprintf("= %d (%s)", level, what), timeout)
}

// stopJob deregisters (stops) a job.
func (c *gpuCluster) stopJob(t testing.TB, id string) {
	t.Helper()
	if err := c.do("DELETE", "/v1/job/"+url.PathEscape(id), nil, nil); err != nil {
		t.Fatal(err)
	}
}

// percentile returns the p-th percentile (0-100) of ds by nearest rank.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	k := int(p/100*float64(len(s))+0.999999) - 1
	return s[max(0, min(k, len(s)-1))]
}
