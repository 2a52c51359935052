package uitest

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/hcl"
	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/server"
	"github.com/allot-sched/allot/overlay/state"
)

// Capacity is the seeded cluster's GPUs: 8 nodes of 8.
const (
	Nodes       = 8
	GPUsPerNode = 8
	Capacity    = Nodes * GPUsPerNode
)

// GPUModel is every seeded GPU's model.
const GPUModel = "NVIDIA H100 80GB HBM3"

// UnhealthyGPUReason is why node-06's GPU-3 is unhealthy in a cluster
// seeded at now, as allot-nvml describes it through Nomad: the fault that
// drains node-06.
func UnhealthyGPUReason(now time.Time) string {
	return "XID 79 (GPU has fallen off the bus) at " + now.Add(-40*time.Minute).Format(time.RFC3339)
}

// IdleLeaf used nothing and wants nothing; ExactLeaf runs no seeded job, so
// its ledger holds only HourlyGPUs.
const (
	IdleLeaf  = "ai2/robotics/simulation"
	ExactLeaf = "ai2/nlp/safety"
)

// HourlyGPUs is the GPUs leaf (of effective share eff) used in the hour
// starting at t: its share of the cluster swung by a daily wave, a busy
// leaf (olmo pretraining) over its share, the idle leaf at zero.
func HourlyGPUs(leaf string, eff float64, t time.Time) int {
	if leaf == IdleLeaf {
		return 0
	}
	phase := float64(len(leaf)%7) / 7 * 2 * math.Pi
	wave := 1 + 0.6*math.Sin(2*math.Pi*float64(t.Hour())/24+phase)
	g := eff * Capacity * wave
	if leaf == "ai2/prior/olmo/pretrain" {
		g *= 1.8
	}
	return int(math.Round(g))
}

// HourlyDemand is what leaf wanted that hour: a third more than it used.
func HourlyDemand(leaf string, eff float64, t time.Time) int {
	return HourlyGPUs(leaf, eff, t) * 4 / 3
}

// ExpectedCharged is leaf's charged GPU-hours over [from, to) as seeded
// (whole hours), for a leaf no seeded allocation runs on.
func ExpectedCharged(leaf string, eff float64, from, to time.Time) float64 {
	var sum int
	for t := from; t.Before(to); t = t.Add(time.Hour) {
		sum += HourlyGPUs(leaf, eff, t)
	}
	return float64(sum)
}

// Reconciler hands the server one Outcome at its next pass, then nothing.
type Reconciler struct {
	mu   sync.Mutex
	next *server.Outcome
}

// Reconcile returns the pending Outcome once.
func (r *Reconciler) Reconcile(ctx context.Context, _ *state.View, _ time.Time) (server.Outcome, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.next == nil {
		return server.Outcome{}, ctx.Err()
	}
	out := *r.next
	r.next = nil
	return out, nil
}

func (r *Reconciler) set(o server.Outcome) { r.mu.Lock(); r.next = &o; r.mu.Unlock() }

// ExamplesDir is the repository's examples/budgets.
func ExamplesDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "examples", "budgets")
}

// Seed fills s (a -dev server whose Reconciler is rec, whose Clock returns
// now, a whole hour, and whose token is token) with the fixed cluster.
func Seed(ctx context.Context, s *server.Server, rec *Reconciler, token string, now time.Time) error {
	cl, err := client.New(s.HTTPAddr(), token, nil)
	if err != nil {
		return err
	}
	tree, err := hcl.LoadDir(ExamplesDir())
	if err != nil {
		return err
	}
	var specs []client.BudgetSpec
	for _, n := range tree.Nodes() {
		specs = append(specs, client.BudgetSpec{Path: n.Path, Share: n.Share, Description: n.Description, Owners: n.Owners})
	}
	if _, err := cl.ApplyBudgets(ctx, &client.BudgetsApply{Revision: "3f9c2ab", Budgets: specs}); err != nil {
		return fmt.Errorf("applying budgets: %w", err)
	}
	// One past allocation per leaf carries its 14 days of hourly charges;
	// the seeded outcome records it stopped at now and charged through now,
	// so the leader charges nothing more to it.
	var led client.LedgerAppend
	var past []state.Alloc
	// The server takes writes back to its retention less a bucket and its
	// clock skew allowance: the history starts an hour after that horizon.
	start := now.Add(-14*24*time.Hour + time.Hour)
	for _, leaf := range tree.Leaves() {
		a := state.Alloc{ID: "hist-" + leaf.Path, Leaf: leaf.Path, GPUs: 1, StartedAt: start, StoppedAt: now, ChargedThrough: now}
		for t := start; t.Before(now); t = t.Add(time.Hour) {
			if g := HourlyGPUs(leaf.Path, leaf.Effective, t); g > 0 {
				led.Charges = append(led.Charges, client.Charge{Alloc: a.ID, Budget: leaf.Path, GPUs: g, From: t, To: t.Add(time.Hour)})
				a.ChargedGPUSeconds += int64(g) * 3600
			}
			if d := HourlyDemand(leaf.Path, leaf.Effective, t); d > 0 {
				led.Demand = append(led.Demand, client.Demand{Budget: leaf.Path, GPUs: d, From: t, To: t.Add(time.Hour)})
			}
		}
		if a.ChargedGPUSeconds > 0 {
			past = append(past, a)
		}
	}
	if res, err := cl.AppendLedger(ctx, &led); err != nil {
		return fmt.Errorf("appending the ledger: %w", err)
	} else if len(res.Errors) > 0 {
		return fmt.Errorf("appending the ledger: %v", res.Errors)
	}
	// The queue's standings come from the same fair share the policy
	// computes: usage over the 7-day window.
	usage := make([]int64, len(tree.Leaves()))
	s.FSM().WithLedger(func(l *budgets.Ledger) {
		for i, leaf := range tree.Leaves() {
			usage[i] = l.Usage(leaf.Path, now.Add(-7*24*time.Hour), now)
		}
	})
	out := outcome(tree, budgets.ComputeFairShare(tree, usage), now)
	out.Allocs = append(out.Allocs, past...)
	rec.set(out)
	return s.ReconcileOnce(ctx)
}

type seedJob struct {
	id, leaf       string
	gpus           int
	minRuntime     time.Duration
	band           string
	priority, pos  int
	explanation    string
	protectedUntil time.Time
	freeAt         time.Time
	submitted      time.Duration // before now
}

// seedJobs are the jobs of the seeded queue, in queue order.
func seedJobs(now time.Time) []seedJob {
	return []seedJob{
		{"default/olmo-eval-sweep", "ai2/prior/olmo/evals", 8, 2 * time.Hour, "pending", 89, 1,
			"pending, 1st in the pending queue; waiting for protected windows: 8 GPUs free in 35m", time.Time{}, now.Add(35 * time.Minute), 50 * time.Minute},
		{"research/nav-rl", "ai2/robotics/navigation", 8, 4 * time.Hour, "pending", 88, 2,
			"pending, 2nd in the pending queue; waiting for protected windows", time.Time{}, now.Add(2 * time.Hour), 3 * time.Hour},
		{"default/big-pretrain", "ai2/prior/olmo/pretrain", 16, 8 * time.Hour, "pending", 87, 3,
			"pending, 3rd in the pending queue; nodes gpu-07, gpu-08 reserved for it", time.Time{}, now.Add(90 * time.Minute), 5 * time.Hour},
		{"default/video-diffusion", "ai2/vision/video", 8, 4 * time.Hour, "protected", 99, 0,
			"running inside its protected window (requeued after time slicing)", now.Add(2 * time.Hour), time.Time{}, 21 * time.Hour},
		{"default/reasoning-grpo", "ai2/nlp/reasoning", 8, 6 * time.Hour, "protected", 99, 0,
			"running inside its protected window", now.Add(3 * time.Hour), time.Time{}, 4 * time.Hour},
		{"default/molmo-sft", "ai2/prior/molmo", 8, time.Hour, "running", 90, 0,
			"running past its protected window: may be stopped for a less served budget", now.Add(-5 * time.Hour), time.Time{}, 9 * time.Hour},
		{"default/scratch-notebook", "", 4, 0, "unallocated", 20, 0,
			"unallocated: free of charge, preemptible at any moment", time.Time{}, time.Time{}, 2 * time.Hour},
	}
}

func outcome(tree *budgets.Tree, fs *budgets.FairShare, now time.Time) server.Outcome {
	var out server.Outcome
	for i := 1; i <= Nodes; i++ {
		n := state.Node{ID: fmt.Sprintf("node-%02d", i), Name: fmt.Sprintf("gpu-%02d", i), Drain: policy.NodeNormal,
			Since: now.Add(-48 * time.Hour), TotalGPUs: GPUsPerNode, HealthyGPUs: GPUsPerNode}
		for g := range GPUsPerNode {
			n.GPUs = append(n.GPUs, state.NodeGPU{ID: fmt.Sprintf("GPU-%d", g), Model: GPUModel, Healthy: true})
		}
		switch i {
		case 6:
			n.Drain, n.HealthyGPUs, n.Reason, n.Since = policy.NodeDraining, 7, "unhealthy: XID 79 (GPU has fallen off the bus) on GPU-3", now.Add(-40*time.Minute)
			n.GPUs[3] = state.NodeGPU{ID: "GPU-3", Model: GPUModel, Reason: UnhealthyGPUReason(now)}
		case 7, 8:
			n.Drain, n.ReservedFor, n.Reason, n.Since = policy.NodeReserved, "default/big-pretrain", "reserved for default/big-pretrain (16 GPUs)", now.Add(-30*time.Minute)
			n.ReservedUntil = n.Since.Add(2 * time.Hour)
		}
		out.Nodes = append(out.Nodes, n)
	}
	for _, j := range seedJobs(now) {
		ns, name, _ := cut(j.id)
		out.Jobs = append(out.Jobs, state.Job{ID: j.id, Namespace: ns, Name: name, GPUs: j.gpus,
			Contract: state.Contract{Budget: j.leaf, MinRuntime: j.minRuntime, Resumable: true,
				Reason: map[bool]string{true: "no budget in meta"}[j.leaf == ""]},
			SubmittedAt: now.Add(-j.submitted), UpdatedAt: now.Add(-j.submitted)})
		q := state.QueueEntry{JobID: j.id, Leaf: j.leaf, Band: j.band, Priority: j.priority, Position: j.pos,
			Explanation: j.explanation, PlannedAt: now, ProtectedUntil: j.protectedUntil, FreeAt: j.freeAt}
		if n, ok := tree.Lookup(j.leaf); ok && j.minRuntime > 0 {
			r := fs.Rank(n.LeafIndex)
			q.SortMetric, q.Standing = budgets.Ratio(r.Metric), state.NewStanding(r)
		}
		out.Queue = append(out.Queue, q)
	}
	alloc := func(id, job, node, leaf string, gpus int, started, protected time.Duration, stopped time.Duration) state.Alloc {
		a := state.Alloc{ID: id, JobID: job, NodeID: node, Leaf: leaf, GPUs: gpus, StartedAt: now.Add(-started)}
		if protected != 0 {
			a.ProtectedUntil = a.StartedAt.Add(protected)
		}
		if stopped != 0 {
			a.StoppedAt = now.Add(-stopped)
		}
		return a
	}
	out.Allocs = []state.Alloc{
		// video-diffusion: placed 20h ago on gpu-03, stopped 3h ago for
		// reasoning-grpo (time slicing), requeued on gpu-05 2h ago.
		alloc("a1-video", "default/video-diffusion", "node-03", "ai2/vision/video", 8, 20*time.Hour, 4*time.Hour, 3*time.Hour),
		alloc("a2-video", "default/video-diffusion", "node-05", "ai2/vision/video", 8, 2*time.Hour, 4*time.Hour, 0),
		alloc("a3-grpo", "default/reasoning-grpo", "node-03", "ai2/nlp/reasoning", 8, 3*time.Hour, 6*time.Hour, 0),
		alloc("a4-molmo", "default/molmo-sft", "node-01", "ai2/prior/molmo", 8, 6*time.Hour, time.Hour, 0),
		alloc("a5-scratch", "default/scratch-notebook", "node-06", "", 4, 2*time.Hour, 0, 0),
	}
	victim := policy.Reason{Code: policy.ReasonVictim, Job: "default/reasoning-grpo", N: 8, Node: "node-03"}
	out.Decisions = []state.Decision{
		{At: now.Add(-3 * time.Hour), Kind: "preempt", JobID: "default/video-diffusion", AllocID: "a1-video", NodeID: "node-03", Reason: victim.String()},
		{At: now.Add(-3 * time.Hour), Kind: "priority", JobID: "default/video-diffusion", Reason: "priority 86: lowered to its pending level before its stop, so its replacement waits its turn"},
		{At: now.Add(-3 * time.Hour), Kind: "priority", JobID: "default/reasoning-grpo", Reason: "priority 99: running inside its protected window"},
		{At: now.Add(-2 * time.Hour), Kind: "priority", JobID: "default/video-diffusion", Reason: "priority 99: running inside its protected window"},
		{At: now.Add(-30 * time.Minute), Kind: "reserve", NodeID: "node-07", Reason: "eligible=false: reserved for default/big-pretrain, which fits nowhere (16 GPUs)"},
		{At: now.Add(-30 * time.Minute), Kind: "reserve", NodeID: "node-08", Reason: "eligible=false: reserved for default/big-pretrain, which fits nowhere (16 GPUs)"},
	}
	out.Drains = []state.NodeObservation{{NodeID: "node-06", Name: "gpu-06", Healthy: false,
		Fault: UnhealthyGPUReason(now) + " on GPU-3", Eligible: false, HealthyGPUs: 7,
		Allocs: []state.DrainAlloc{{ID: "a5-scratch", JobID: "default/scratch-notebook", GPUs: 4, LeavesAt: now}}}}
	return out
}

func cut(id string) (string, string, bool) {
	for i := range id {
		if id[i] == '/' {
			return id[:i], id[i+1:], true
		}
	}
	return "default", id, false
}
