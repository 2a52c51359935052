package reconcile

import (
	"context"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/nomad"
	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/server"
	"github.com/allot-sched/allot/overlay/state"
)

// commitPass applies a pass's record with its charges, as the server's
// leader does (Server.passRequest): the charges are those due on the state
// as it will be once the pass's rows are in.
func commitPass(t testing.TB, fsm *state.FSM, o server.Outcome, now time.Time) {
	t.Helper()
	req := state.PassRequest{At: now, Jobs: o.Jobs, DeletedJobs: o.DeletedJobs, Allocs: o.Allocs, Nodes: o.Nodes,
		Priorities: o.Priorities, ReplaceQueue: o.Queue != nil, Queue: o.Queue,
		ReplaceNotices: o.Notices != nil, Notices: o.Notices,
		ReplaceHeldVictims: o.HeldVictims != nil, HeldVictims: o.HeldVictims}
	since := fsm.Config().LedgerWindow(now).From
	if err := fsm.Preview(&req, func(pv *state.View) { req.Charges = state.ChargesDue(pv, now, since) }); err != nil {
		t.Fatal(err)
	}
	applyEntry(t, fsm, state.PassType, req)
}

// A batch job allot stopped to requeue it: Nomad may show it dead for a
// moment (its allocations all stopped, no evaluation in flight yet) before
// the evaluation that places it again. Had the pass that sees it dead
// deleted its rows (its stopped allocation being charged through its
// stop), the pass that sees it back would record that allocation anew and
// charge it a second time from its start: found in the e2e test
// TestReconcileRestartKeepsChargesAndProtection, lab/a charged 208 GPU-s
// for prot's one run of 26 s on 4 GPUs. Its rows stay until it is back.
func TestRequeuedJobDeadForAMomentIsChargedOnce(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC)
	fsm := budgetsFSM(t, []budgets.Spec{{Path: "lab"}, {Path: "lab/a", Share: 1}})
	node := nomad.Node{ID: "n1", Pool: "default", Status: "ready", Eligible: true,
		GPUs: []nomad.GPUModel{{Model: "H100", Total: 4, Healthy: 4, HealthyIDs: []string{"GPU-0", "GPU-1", "GPU-2", "GPU-3"}}}}
	job := gpuJob("default", "prot", "default", 1, 4, map[string]string{"budget": "lab/a", "min_runtime": "25s"})
	job.SubmitTime = t0
	run := nomad.Alloc{ID: "a1", Name: "prot.g[0]", Job: job.Key, TaskGroup: "g", NodeID: "n1",
		DesiredStatus: "run", ClientStatus: "running", GPUs: 4, StartedAt: t0.Add(time.Second), CreateIndex: 10}
	r := &Reconciler{cfg: Config{Policy: policy.DefaultConfig()}}
	pass := func(j nomad.Job, a nomad.Alloc, now time.Time) server.Outcome {
		t.Helper()
		out, _ := r.pass(context.Background(), fsm.Read(), stateOf([]nomad.Job{j}, []nomad.Alloc{a}, []nomad.Node{node}), fsm, now, acceptAll)
		commitPass(t, fsm, out, now)
		return out
	}
	pass(job, run, t0.Add(2*time.Second))

	// allot lowers prot's priority (a registration: a new SubmitTime) and
	// stops its allocation; Nomad reports it stopped at 27 s.
	job.SubmitTime, job.Status = t0.Add(26*time.Second), "pending"
	stopped := run
	stopped.DesiredStatus, stopped.ClientStatus, stopped.FinishedAt = "stop", "complete", t0.Add(27*time.Second)
	pass(job, stopped, t0.Add(28*time.Second))
	want := int64(4 * 26) // from its start (1 s) to its stop (27 s), 4 GPUs
	usage := func() int64 {
		var n int64
		fsm.WithLedger(func(l *budgets.Ledger) { n = l.Usage("lab/a", t0.Add(-time.Hour), t0.Add(time.Hour)) })
		return n
	}
	if got := usage(); got != want {
		t.Fatalf("after the stop lab/a holds %d GPU-s, want %d", got, want)
	}

	dead := job
	dead.Status = "dead"
	deleted := pass(dead, stopped, t0.Add(29*time.Second)).DeletedJobs
	pass(job, stopped, t0.Add(30*time.Second)) // back: an evaluation places it again
	if got := usage(); got != want {
		t.Fatalf("after prot came back lab/a holds %d GPU-s, want %d: its stopped allocation was charged again (rows deleted while dead: %v)",
			got, want, deleted)
	}
	if fsm.Read().Alloc("a1") == nil {
		t.Fatal("prot's stopped allocation lost its row")
	}

	// Its next allocation is charged as usual.
	next := run
	next.ID, next.StartedAt, next.CreateIndex = "a2", t0.Add(40*time.Second), 20
	pass(job, next, t0.Add(50*time.Second))
	if got := usage(); got != want+4*10 {
		t.Fatalf("with its next allocation 10 s in, lab/a holds %d GPU-s, want %d", got, want+4*10)
	}
}

// A job that is done for good still loses its rows once they are charged:
// its newest allocation finished on its own, or it was stopped, or it asks
// for nothing any more.
func TestFinishedJobsRequeued(t *testing.T) {
	start, stop := rowsT0.Add(-time.Hour), rowsT0.Add(-time.Minute)
	row := state.Alloc{ID: "a1", JobID: "default/train", Leaf: "lab/a", GPUs: 2, StartedAt: start, StoppedAt: stop, ChargedThrough: stop}
	ended := func(desired, client string, createIndex uint64) nomad.Alloc {
		a := runningAlloc("a1", "train", 2, start)
		a.DesiredStatus, a.ClientStatus, a.FinishedAt, a.CreateIndex = desired, client, stop, createIndex
		return a
	}
	replacement := runningAlloc("a2", "train", 2, time.Time{})
	replacement.DesiredStatus, replacement.ClientStatus, replacement.CreateIndex = "evict", "complete", 20
	for _, tc := range []struct {
		name   string
		allocs []nomad.Alloc
		edit   func(*nomad.Job)
		keep   bool
	}{
		{name: "completed on its own: rows go", allocs: []nomad.Alloc{ended("run", "complete", 10)}},
		{name: "failed for good: rows go", allocs: []nomad.Alloc{ended("run", "failed", 10)}},
		{name: "its allocation stopped, Nomad places it again: rows stay", allocs: []nomad.Alloc{ended("stop", "complete", 10)}, keep: true},
		{name: "its replacement preempted before it started: rows stay",
			allocs: []nomad.Alloc{ended("stop", "complete", 10), replacement}, keep: true},
		{name: "stopped by its user: rows go", allocs: []nomad.Alloc{ended("stop", "complete", 10)},
			edit: func(j *nomad.Job) { j.Stop = true }},
		{name: "scaled to zero: rows go", allocs: []nomad.Alloc{ended("stop", "complete", 10)},
			edit: func(j *nomad.Job) { j.Groups[0].Count = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			view := storedState(t, []state.Job{{ID: "default/train", Namespace: "default", Name: "train", SubmittedAt: start}},
				[]state.Alloc{row}, nil, nil)
			f := newRowsFixture(view, tc.allocs...)
			train := f.in.state.Jobs[key("default", "train")]
			train.Status = "dead"
			if tc.edit != nil {
				tc.edit(&train)
			}
			f.in.state.Jobs[train.Key] = train
			f.in.snap.Jobs = f.in.snap.Jobs[1:] // dead or stopped: not in the snapshot
			got := finishedJobs(f.in, jobRows(f.in), nil)
			if kept := len(got) == 0; kept != tc.keep {
				t.Fatalf("finished jobs %v; want the rows kept: %v", got, tc.keep)
			}
		})
	}
}
