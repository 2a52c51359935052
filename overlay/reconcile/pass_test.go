package reconcile

import (
	"context"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/nomad"
	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/server"
	"github.com/allot-sched/allot/overlay/state"
)

// recordPass stores what of a pass's record the next pass reads back in
// fsm (as the server's record does: jobs, allocations, nodes, priorities,
// the queue, drain observations, notices and held victims), so the next
// pass starts from it.
func recordPass(t testing.TB, fsm *state.FSM, o server.Outcome, now time.Time) {
	t.Helper()
	apply := func(mt state.MessageType, req any) { t.Helper(); applyEntry(t, fsm, mt, req) }
	if len(o.Jobs) > 0 {
		apply(state.JobUpsertType, state.JobUpsertRequest{Jobs: o.Jobs})
	}
	if len(o.Allocs) > 0 {
		apply(state.AllocUpsertType, state.AllocUpsertRequest{Allocs: o.Allocs})
	}
	if len(o.Nodes) > 0 {
		apply(state.NodeUpsertType, state.NodeUpsertRequest{Nodes: o.Nodes})
	}
	if len(o.Priorities) > 0 {
		apply(state.PrioritiesType, state.PrioritiesRequest{Priorities: o.Priorities})
	}
	if o.Queue != nil {
		apply(state.PlanRecordType, state.PlanRecordRequest{At: now, Queue: o.Queue})
	}
	if len(o.Drains) > 0 {
		apply(state.DrainObserveType, state.DrainObserveRequest{At: now, Nodes: o.Drains})
	}
	if o.Notices != nil || o.HeldVictims != nil {
		apply(state.PassType, state.PassRequest{At: now, ReplaceNotices: o.Notices != nil, Notices: o.Notices,
			ReplaceHeldVictims: o.HeldVictims != nil, HeldVictims: o.HeldVictims})
	}
}

// acceptAll stands in for the Applier: every op lands, and a priority write
// moves the job's JobModifyIndex to 1000 + the index it was read at.
func acceptAll(_ context.Context, ops []nomad.Op) []nomad.Outcome {
	out := make([]nomad.Outcome, len(ops))
	for i, op := range ops {
		out[i] = nomad.Outcome{Op: op}
		if op.Kind == nomad.OpSetPriority {
			out[i].ModifyIndex = op.ModifyIndex + 1000
		}
	}
	return out
}

func budgetsFSM(t testing.TB, specs []budgets.Spec) *state.FSM {
	t.Helper()
	fsm, err := state.NewFSM(state.FSMConfig{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := state.Encode(state.BudgetsApplyType, state.BudgetsApplyRequest{Revision: "r1", Specs: specs})
	if err != nil {
		t.Fatal(err)
	}
	if res := fsm.ApplyEntry(b); res != nil {
		if e, ok := res.(error); ok {
			t.Fatal(e)
		}
	}
	return fsm
}

// A pass writes a waiting allocated job's pending priority and records it;
// the next pass, on a view that does not show the write yet, neither
// rewrites it nor takes it for a user's change: nothing to do.
func TestPassRemembersLandedWrites(t *testing.T) {
	now := time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC)
	fsm := budgetsFSM(t, []budgets.Spec{{Path: "lab"}, {Path: "lab/a", Share: 1}})
	job := gpuJob("default", "train", "default", 1, 2, map[string]string{"budget": "lab/a", "min_runtime": "1h"})
	st := stateOf([]nomad.Job{job}, nil, []nomad.Node{{ID: "n1", Pool: "default", Status: "ready", Eligible: true,
		GPUs: []nomad.GPUModel{{Model: "H100", Total: 1, Healthy: 1, HealthyIDs: []string{"GPU-0"}}}}})
	r := &Reconciler{cfg: Config{Policy: policy.DefaultConfig()}}
	out, _ := r.pass(context.Background(), fsm.Read(), st, fsm, now, acceptAll)
	if len(out.Priorities) != 1 || out.Priorities[0].JobID != "default/train" || out.Priorities[0].Priority == job.Priority {
		t.Fatalf("first pass priorities %+v, want one new priority for default/train", out.Priorities)
	}
	if len(out.Jobs) != 1 || out.Jobs[0].ID != "default/train" || out.Jobs[0].Contract.Budget != "lab/a" {
		t.Fatalf("first pass job rows %+v, want default/train charged to lab/a", out.Jobs)
	}
	recordPass(t, fsm, out, now)

	later := now.Add(time.Second)
	var ops []nomad.Op
	out, _ = r.pass(context.Background(), fsm.Read(), st, fsm, later, func(ctx context.Context, o []nomad.Op) []nomad.Outcome {
		ops = append(ops, o...)
		return acceptAll(ctx, o)
	})
	if len(ops) != 0 || len(out.Priorities) != 0 || len(out.Jobs) != 0 {
		t.Errorf("second pass on a lagging view: ops %+v, priorities %+v, jobs %+v; want none", ops, out.Priorities, out.Jobs)
	}
}

// BenchmarkPass is one steady-state reconcile pass on BenchmarkDecide's
// cluster (overlay/policy): 1,250 nodes of 8 GPUs, about 8,000 running
// allocations, 50,000 pending jobs and 1,000 budget leaves. A pass reads
// the replicated state, builds the snapshot, decides, converts the plan to
// ops (applied by a stand-in that accepts them all) and builds the record,
// whose rows the state already holds from the passes before.
func BenchmarkPass(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	specs, leaves := benchTree(r)
	fsm := budgetsFSM(b, specs)
	now := time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC)
	st := benchCluster(r, leaves, now)
	rec := &Reconciler{cfg: Config{Policy: policy.DefaultConfig()}}
	ctx := context.Background()
	// Steady state: the passes before, a second apart, stored their
	// records and their writes are in the view, until a pass changes no job,
	// allocation, node or priority (three passes: the first writes every
	// priority, which moves queue positions twice). The timed passes run at
	// the last one's instant.
	for i := 0; ; i++ {
		now = now.Add(time.Second)
		var ops []nomad.Op
		out, _ := rec.pass(ctx, fsm.Read(), st, fsm, now, func(ctx context.Context, o []nomad.Op) []nomad.Outcome {
			ops = append(ops, o...)
			return acceptAll(ctx, o)
		})
		for _, op := range ops {
			if n, ok := st.Nodes[op.Node]; ok && op.Kind == nomad.OpEligibility {
				n.Eligible = op.Eligible
				st.Nodes[op.Node] = n
			}
		}
		recordPass(b, fsm, out, now)
		if len(out.Jobs)+len(out.Allocs)+len(out.Nodes)+len(out.Priorities) == 0 {
			break // the queue's explanations move with the clock: it is rewritten each second
		}
		if i == 10 {
			b.Fatalf("no steady state after %d passes: the last one wrote %d jobs, %d allocations, %d nodes, %d priorities",
				i, len(out.Jobs), len(out.Allocs), len(out.Nodes), len(out.Priorities))
		}
		for _, p := range out.Priorities {
			k := jobKeyOf("", p.JobID)
			j := st.Jobs[k]
			j.Priority, j.JobModifyIndex = p.Priority, p.ModifyIndex+1000
			st.Jobs[k] = j
		}
	}
	v := fsm.Read()
	var out server.Outcome
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		out, _ = rec.pass(ctx, v, st, fsm, now, acceptAll)
	}
	b.ReportMetric(float64(len(st.Allocs)), "allocations")
	b.ReportMetric(float64(len(st.Jobs)), "jobs")
	b.ReportMetric(float64(len(out.Priorities)), "writes/op")
	b.ReportMetric(float64(len(out.Jobs)+len(out.Allocs)+len(out.Nodes)+len(out.Queue)+len(out.Decisions)+len(out.Drains)), "rows/op")
}

// benchTree is BenchmarkDecide's tree: 10 programs of 10 projects of 10
// people.
func benchTree(r *rand.Rand) ([]budgets.Spec, []string) {
	specs := []budgets.Spec{{Path: "lab"}}
	var leaves []string
	for p := 0; p < 10; p++ {
		pp := fmt.Sprintf("lab/p%d", p)
		specs = append(specs, budgets.Spec{Path: pp, Share: float64(1 + r.Intn(4))})
		for q := 0; q < 10; q++ {
			qq := fmt.Sprintf("%s/q%d", pp, q)
			specs = append(specs, budgets.Spec{Path: qq, Share: float64(1 + r.Intn(4))})
			for u := 0; u < 10; u++ {
				uu := fmt.Sprintf("%s/u%d", qq, u)
				specs = append(specs, budgets.Spec{Path: uu, Share: float64(1 + r.Intn(4))})
				leaves = append(leaves, uu)
			}
		}
	}
	return specs, leaves
}

// benchCluster is BenchmarkDecide's cluster as the Nomad adapter sees it:
// 5 nodes with a faulty GPU, 5 under a Nomad drain, 8,000 running
// allocated jobs, 500 free jobs (half of them running) and 50,000 waiting
// allocated jobs, one allocation each of 1 or 2 GPUs.
func benchCluster(r *rand.Rand, leaves []string, now time.Time) *nomad.State {
	st := &nomad.State{Jobs: map[nomad.JobKey]nomad.Job{}, Allocs: map[string]nomad.Alloc{}, Nodes: map[string]nomad.Node{}, Synced: true}
	models := []string{"h100", "b200"}
	const nodes, perNode = 1250, 8
	free := make([]int, nodes)
	for i := 0; i < nodes; i++ {
		n := nomad.Node{ID: fmt.Sprintf("n%d", i), Name: fmt.Sprintf("gpu-%d", i), Pool: "default", Status: "ready", Eligible: true}
		m := nomad.GPUModel{Model: models[i%len(models)], Total: perNode, Healthy: perNode}
		for g := 0; g < perNode; g++ {
			m.HealthyIDs = append(m.HealthyIDs, fmt.Sprintf("GPU-%d-%d", i, g))
		}
		switch {
		case i < 5:
			m.Healthy, m.HealthyIDs = perNode-1, m.HealthyIDs[1:]
			m.Unhealthy = []nomad.DeviceHealth{{ID: fmt.Sprintf("GPU-%d-0", i), Reason: "XID 79"}}
		case i < 10:
			n.Eligible, n.Drain = false, &nomad.Drain{StartedAt: now, Deadline: now.Add(time.Duration(r.Intn(120)) * time.Minute)}
		}
		n.GPUs = []nomad.GPUModel{m}
		free[i] = m.Healthy
		st.Nodes[n.ID] = n
	}
	asks := []int{1, 1, 1, 1, 2}
	newJob := func(id string, allocated bool) nomad.Job {
		meta := map[string]string{}
		if allocated {
			meta["budget"] = leaves[r.Intn(len(leaves))]
			meta["min_runtime"] = fmt.Sprintf("%dm", 30+r.Intn(600))
			if r.Intn(2) == 0 {
				meta["resumable"] = "true"
			}
			meta["priority"] = fmt.Sprint(r.Intn(101))
		}
		g := nomad.Group{Name: "g", Count: 1, GPUs: asks[r.Intn(len(asks))]}
		if r.Intn(4) == 0 {
			g.Model = models[r.Intn(len(models))]
		}
		return nomad.Job{Key: nomad.JobKey{Namespace: "default", ID: id}, Name: id, Type: "batch", NodePool: "default",
			Priority: 50, Status: "pending", Meta: meta, JobModifyIndex: uint64(1 + r.Intn(1000)),
			SubmitTime: now.Add(-time.Duration(r.Intn(100000)) * time.Second), Groups: []nomad.Group{g}}
	}
	place := func(j *nomad.Job) {
		g := j.Groups[0]
		for tries := 0; tries < 20; tries++ {
			i := r.Intn(nodes)
			n := st.Nodes[fmt.Sprintf("n%d", i)]
			if free[i] < g.GPUs || (g.Model != "" && n.GPUs[0].Model != g.Model) {
				continue
			}
			free[i] -= g.GPUs
			a := nomad.Alloc{ID: j.Key.ID + ".0", Name: j.Key.ID + ".g[0]", Job: j.Key, TaskGroup: "g", NodeID: n.ID,
				DesiredStatus: "run", ClientStatus: "running", GPUs: g.GPUs,
				StartedAt: now.Add(-time.Duration(r.Intn(12*3600)) * time.Second)}
			st.Allocs[a.ID] = a
			j.Status = "running"
			return
		}
	}
	add := func(prefix string, n int, allocated bool, placed func() bool) {
		for i := 0; i < n; i++ {
			j := newJob(fmt.Sprintf("%s%d", prefix, i), allocated)
			if placed() {
				place(&j)
			}
			st.Jobs[j.Key] = j
		}
	}
	add("r", 8000, true, func() bool { return true })
	add("f", 500, false, func() bool { return r.Intn(2) == 0 })
	add("p", 50000, true, func() bool { return false })
	return st
}
