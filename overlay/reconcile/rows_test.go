package reconcile

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/contract"
	"github.com/allot-sched/allot/overlay/nomad"
	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/state"
)

var rowsT0 = time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC)

// storedState returns a view of a state holding the given rows.
func storedState(t *testing.T, jobs []state.Job, allocs []state.Alloc, nodes []state.Node, queue []state.QueueEntry) *state.View {
	t.Helper()
	fsm, err := state.NewFSM(state.FSMConfig{})
	if err != nil {
		t.Fatal(err)
	}
	apply := func(mt state.MessageType, req any) { t.Helper(); applyEntry(t, fsm, mt, req) }
	if len(jobs) > 0 {
		apply(state.JobUpsertType, state.JobUpsertRequest{Jobs: jobs})
	}
	if len(allocs) > 0 {
		apply(state.AllocUpsertType, state.AllocUpsertRequest{Allocs: allocs})
		var charges []state.Charge
		for _, a := range allocs {
			if !a.ChargedThrough.IsZero() {
				charges = append(charges, state.Charge{Alloc: a.ID, Leaf: a.Leaf, GPUs: a.GPUs, From: a.StartedAt, To: a.ChargedThrough})
			}
		}
		if len(charges) > 0 {
			apply(state.ChargeType, state.ChargeRequest{Charges: charges})
		}
	}
	if len(nodes) > 0 {
		apply(state.NodeUpsertType, state.NodeUpsertRequest{Nodes: nodes})
	}
	if queue != nil {
		apply(state.PlanRecordType, state.PlanRecordRequest{At: rowsT0, Queue: queue})
	}
	return fsm.Read()
}

// rowsFixture is a Nomad with a lab/a job "train" (2 GPUs, min_runtime 1h)
// and an unallocated job "free" (1 GPU), in namespace default.
type rowsFixture struct {
	in rowsInput
}

func newRowsFixture(view *state.View, allocs ...nomad.Alloc) *rowsFixture {
	st := &nomad.State{Jobs: map[nomad.JobKey]nomad.Job{}, Allocs: map[string]nomad.Alloc{}, Nodes: map[string]nomad.Node{}, Synced: true}
	train := nomad.Job{Key: key("default", "train"), Type: "batch", NodePool: "default", Priority: 50,
		Meta:   map[string]string{"budget": "lab/a", "min_runtime": "1h"},
		Groups: []nomad.Group{{Name: "g", Count: 1, GPUs: 2}}}
	free := nomad.Job{Key: key("default", "free"), Type: "batch", NodePool: "default", Priority: 50,
		Groups: []nomad.Group{{Name: "g", Count: 1, GPUs: 1}}}
	st.Jobs[train.Key], st.Jobs[free.Key] = train, free
	for _, a := range allocs {
		st.Allocs[a.ID] = a
	}
	leaf := contract.LeafCheck(func(p string) (bool, bool) { return p == "lab/a" || p == "lab", p == "lab/a" })
	cfg := &Config{}
	snap := &policy.Snapshot{}
	for _, k := range []nomad.JobKey{train.Key, free.Key} {
		j := st.Jobs[k]
		snap.Jobs = append(snap.Jobs, policy.Job{ID: PolicyJobID(k), Namespace: k.Namespace,
			Contract: contract.Parse(PolicyJobID(k), j.Meta, cfg.Policy.Config, leaf),
			Groups:   []policy.TaskGroup{{Name: "g", Count: 1, GPUs: j.Groups[0].GPUs}}})
	}
	return &rowsFixture{in: rowsInput{view: view, state: st, snap: snap, plan: &policy.Plan{Now: rowsT0},
		firstSeen: map[string]time.Time{"default/train": rowsT0.Add(-time.Hour), "default/free": rowsT0.Add(-time.Hour)},
		leaf:      leaf, cfg: cfg, now: rowsT0}}
}

func runningAlloc(id, job string, gpus int, started time.Time) nomad.Alloc {
	return nomad.Alloc{ID: id, Name: job + ".g[0]", Job: key("default", job), TaskGroup: "g", NodeID: "n1",
		DesiredStatus: "run", ClientStatus: "running", GPUs: gpus, StartedAt: started}
}

func TestAllocRows(t *testing.T) {
	start := rowsT0.Add(-10 * time.Minute)
	stored := state.Alloc{ID: "a1", JobID: "default/train", NodeID: "n1", Leaf: "lab/a", GPUs: 2, StartedAt: start,
		ProtectedUntil: start.Add(time.Hour), ChargedThrough: rowsT0.Add(-time.Minute)}
	finished := runningAlloc("a1", "train", 2, start)
	finished.ClientStatus, finished.FinishedAt = "complete", rowsT0.Add(-30*time.Second)
	preempted := runningAlloc("a1", "train", 2, start)
	preempted.DesiredStatus, preempted.ClientStatus, preempted.PreemptedBy = "evict", "complete", "other"
	preempted.FinishedAt = rowsT0.Add(-20 * time.Second)
	old := runningAlloc("gone", "train", 2, rowsT0.Add(-3*time.Hour))
	old.ClientStatus, old.FinishedAt = "complete", rowsT0.Add(-2*time.Hour) // before the job was first seen
	pending := runningAlloc("p1", "train", 2, time.Time{})
	pending.ClientStatus = "pending"

	for _, tc := range []struct {
		name    string
		stored  []state.Alloc
		nomad   []nomad.Alloc
		stopped []string // allocations this pass stopped
		want    []state.Alloc
	}{
		{
			name:  "a new running allocation of an allocated job is charged to its leaf and protected",
			nomad: []nomad.Alloc{runningAlloc("a1", "train", 2, start)},
			want: []state.Alloc{{ID: "a1", JobID: "default/train", NodeID: "n1", Leaf: "lab/a", GPUs: 2,
				StartedAt: start, ProtectedUntil: start.Add(time.Hour)}},
		},
		{
			name:  "an unallocated job's allocation has no leaf and no window",
			nomad: []nomad.Alloc{runningAlloc("f1", "free", 1, start)},
			want:  []state.Alloc{{ID: "f1", JobID: "default/free", NodeID: "n1", GPUs: 1, StartedAt: start}},
		},
		{
			name:   "an unchanged allocation records nothing",
			stored: []state.Alloc{stored},
			nomad:  []nomad.Alloc{runningAlloc("a1", "train", 2, start)},
		},
		{
			name:   "a finished allocation is closed at Nomad's finish, its charging state kept",
			stored: []state.Alloc{stored},
			nomad:  []nomad.Alloc{finished},
			want: []state.Alloc{{ID: "a1", JobID: "default/train", NodeID: "n1", Leaf: "lab/a", GPUs: 2, StartedAt: start,
				ProtectedUntil: start.Add(time.Hour), StoppedAt: finished.FinishedAt,
				ChargedThrough: stored.ChargedThrough, ChargedGPUSeconds: 2 * 9 * 60}},
		},
		{
			name:   "a preemption by Nomad counts once",
			stored: []state.Alloc{stored},
			nomad:  []nomad.Alloc{preempted},
			want: []state.Alloc{{ID: "a1", JobID: "default/train", NodeID: "n1", Leaf: "lab/a", GPUs: 2, StartedAt: start,
				ProtectedUntil: start.Add(time.Hour), StoppedAt: preempted.FinishedAt, Preemptions: 1,
				ChargedThrough: stored.ChargedThrough, ChargedGPUSeconds: 2 * 9 * 60}},
		},
		{
			name:    "an allocation allot stopped this pass counts a preemption",
			stored:  []state.Alloc{stored},
			nomad:   []nomad.Alloc{runningAlloc("a1", "train", 2, start)},
			stopped: []string{"a1"},
			want: []state.Alloc{{ID: "a1", JobID: "default/train", NodeID: "n1", Leaf: "lab/a", GPUs: 2, StartedAt: start,
				ProtectedUntil: start.Add(time.Hour), Preemptions: 1,
				ChargedThrough: stored.ChargedThrough, ChargedGPUSeconds: 2 * 9 * 60}},
		},
		{
			name:   "an allocation gone from Nomad is closed where its charges end: nothing more is claimed",
			stored: []state.Alloc{stored},
			want: []state.Alloc{{ID: "a1", JobID: "default/train", NodeID: "n1", Leaf: "lab/a", GPUs: 2, StartedAt: start,
				ProtectedUntil: start.Add(time.Hour), StoppedAt: stored.ChargedThrough,
				ChargedThrough: stored.ChargedThrough, ChargedGPUSeconds: 2 * 9 * 60}},
		},
		{
			name:  "never started, or finished before the job was first seen: no row",
			nomad: []nomad.Alloc{pending, old},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			view := storedState(t, []state.Job{{ID: "default/train", Namespace: "default", Name: "train",
				SubmittedAt: rowsT0.Add(-time.Hour)}}, tc.stored, nil, nil)
			f := newRowsFixture(view, tc.nomad...)
			for _, id := range tc.stopped {
				f.in.results = append(f.in.results, nomad.Outcome{Op: nomad.Op{Kind: nomad.OpStop, Job: key("default", "train"), Allocs: []string{id}}})
			}
			got := allocRows(f.in, jobRows(f.in))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("alloc rows (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFinishedJobs(t *testing.T) {
	start := rowsT0.Add(-time.Hour)
	stop := rowsT0.Add(-time.Minute)
	job := state.Job{ID: "default/done", Namespace: "default", Name: "done", SubmittedAt: start}
	charged := state.Alloc{ID: "d1", JobID: job.ID, Leaf: "lab/a", GPUs: 1, StartedAt: start, StoppedAt: stop, ChargedThrough: stop}
	owing := charged
	owing.ChargedThrough = stop.Add(-10 * time.Second)
	running := charged
	running.StoppedAt = time.Time{}
	for _, tc := range []struct {
		name   string
		allocs []state.Alloc
		want   []string
	}{
		{name: "gone from Nomad, every allocation stopped and charged: its rows go", allocs: []state.Alloc{charged}, want: []string{job.ID}},
		{name: "a final charge still owed keeps the rows", allocs: []state.Alloc{owing}},
		{name: "an allocation still running keeps the rows", allocs: []state.Alloc{running}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			view := storedState(t, []state.Job{job}, tc.allocs, nil, nil)
			f := newRowsFixture(view)
			if got := finishedJobs(f.in, jobRows(f.in), nil); !cmp.Equal(got, tc.want) {
				t.Fatalf("finished jobs %v, want %v", got, tc.want)
			}
		})
	}
	// A row this pass records (its final stop) keeps the job until it is charged.
	view := storedState(t, []state.Job{job}, []state.Alloc{charged}, nil, nil)
	f := newRowsFixture(view)
	if got := finishedJobs(f.in, jobRows(f.in), []state.Alloc{{ID: "d1", JobID: job.ID}}); len(got) != 0 {
		t.Fatalf("finished jobs %v while one of its rows is being recorded", got)
	}
}

func TestJobRowsAndBuildOutcome(t *testing.T) {
	f := newRowsFixture(storedState(t, nil, nil, nil, nil))
	out := buildOutcome(f.in)
	byID := map[string]state.Job{}
	for _, j := range out.Jobs {
		byID[j.ID] = j
	}
	train, free := byID["default/train"], byID["default/free"]
	if train.Contract.Budget != "lab/a" || train.Contract.MinRuntime != time.Hour || train.Contract.Reason != "" ||
		train.GPUs != 2 || train.Name != "train" || !train.UpdatedAt.Equal(rowsT0) || !train.SubmittedAt.Equal(rowsT0.Add(-time.Hour)) {
		t.Fatalf("train row %+v", train)
	}
	if !strings.Contains(free.Contract.Reason, "no positive min_runtime") {
		t.Fatalf("free row reason %q", free.Contract.Reason)
	}
	// Stored as they are, the next pass (later) records no job again.
	f2 := newRowsFixture(storedState(t, out.Jobs, nil, nil, nil))
	f2.in.now = rowsT0.Add(time.Minute)
	if again := buildOutcome(f2.in); len(again.Jobs) != 0 {
		t.Fatalf("unchanged jobs recorded again: %+v", again.Jobs)
	}
}

func TestWriteRows(t *testing.T) {
	f := newRowsFixture(storedState(t, nil, nil, nil, nil))
	f.in.plan = &policy.Plan{
		SetPriorities: []policy.SetPriority{{Job: "default/train", Namespace: "default", From: 50, To: 60},
			{Job: "default/free", Namespace: "default", From: 50, To: 29}},
		Stops: []policy.StopJob{{Job: "default/free", Namespace: "default", Allocs: []string{"f1", "f2"},
			Reason: policy.Reason{Code: policy.ReasonVictim}}},
	}
	f.in.results = []nomad.Outcome{
		{Op: nomad.Op{Kind: nomad.OpSetPriority, Job: key("default", "train"), Priority: 60, ModifyIndex: 11, Reason: "pending 1st"}},
		{Op: nomad.Op{Kind: nomad.OpSetPriority, Job: key("default", "free"), Priority: 29, ModifyIndex: 12, Reason: "unallocated"},
			Err: nomad.ErrConflict},
		{Op: nomad.Op{Kind: nomad.OpStop, Job: key("default", "free"), Allocs: []string{"f1", "f2"}, Reason: "victim"}},
	}
	prios, decs := writeRows(f.in)
	wantPrios := []state.Priority{{JobID: "default/train", Priority: 60, WrittenAt: rowsT0, ModifyIndex: 11}}
	if diff := cmp.Diff(wantPrios, prios); diff != "" {
		t.Fatalf("priorities (-want +got):\n%s", diff)
	}
	if len(decs) != 4 {
		t.Fatalf("decisions %+v, want 4 (two writes, one per stopped allocation)", decs)
	}
	if decs[0].Kind != "priority" || decs[0].Reason != "priority 60: pending 1st" {
		t.Errorf("decision 0 %+v", decs[0])
	}
	if !strings.HasPrefix(decs[1].Reason, "priority 29: unallocated (not done: ") {
		t.Errorf("a failed write must say so: %q", decs[1].Reason)
	}
	if decs[2].Kind != "preempt" || decs[2].AllocID != "f1" || decs[3].AllocID != "f2" || decs[3].JobID != "default/free" {
		t.Errorf("stop decisions %+v %+v", decs[2], decs[3])
	}
}

func TestNodeRowsReservation(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opErr     error
		wantDrain policy.NodeState
		wantFor   string
		wantUntil time.Time
	}{
		{name: "reserved once Nomad took the eligibility change", wantDrain: policy.NodeReserved, wantFor: "default/big",
			wantUntil: rowsT0.Add(2 * time.Hour)},
		{name: "unchanged when the eligibility write failed", opErr: errors.New("boom"), wantDrain: policy.NodeNormal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			view := storedState(t, nil, nil, []state.Node{{ID: "n1", Name: "gpu-1", Drain: policy.NodeNormal,
				Since: rowsT0.Add(-time.Hour), TotalGPUs: 8, HealthyGPUs: 8}}, nil)
			f := newRowsFixture(view)
			f.in.state.Nodes["n1"] = nomad.Node{ID: "n1", Name: "gpu-1", GPUs: []nomad.GPUModel{{Model: "H100", Total: 8, Healthy: 8}}}
			f.in.snap.Nodes = []policy.Node{{ID: "n1"}}
			f.in.cfg.Policy.ReservationMaxAge = 2 * time.Hour
			f.in.plan = &policy.Plan{
				NodeActions:  []policy.NodeAction{{Node: "n1", Kind: policy.NodeReserve, Reason: policy.Reason{Code: policy.ReasonReserved, Job: "default/big"}}},
				Reservations: []policy.Reservation{{Job: "default/big", Nodes: []string{"n1"}, Since: rowsT0}},
			}
			f.in.results = []nomad.Outcome{{Op: nomad.Op{Kind: nomad.OpEligibility, Node: "n1", Eligible: false}, Err: tc.opErr}}
			rows := nodeRows(f.in)
			if tc.opErr != nil {
				if len(rows) != 0 {
					t.Fatalf("rows %+v after a failed write", rows)
				}
				return
			}
			if len(rows) != 1 || rows[0].Drain != tc.wantDrain || rows[0].ReservedFor != tc.wantFor || !rows[0].Since.Equal(rowsT0) ||
				!rows[0].ReservedUntil.Equal(tc.wantUntil) {
				t.Fatalf("rows %+v", rows)
			}
		})
	}
}

func TestQueueRows(t *testing.T) {
	f := newRowsFixture(storedState(t, nil, nil, nil, nil))
	f.in.plan = &policy.Plan{Explanations: []policy.Explanation{
		{Job: "default/train", Band: policy.BandPending, Priority: 60, Position: 1, Budget: "lab/a",
			Wait: policy.WaitQueue, Reason: policy.Reason{Code: policy.ReasonPending, N: 1}},
	}}
	q := queueRows(f.in)
	if len(q) != 1 || q[0].JobID != "default/train" || q[0].Band != "pending" || q[0].Position != 1 ||
		!strings.Contains(q[0].Explanation, "waiting for queue") {
		t.Fatalf("queue %+v", q)
	}
	// The same queue stored: nothing to record (nil keeps the stored one).
	f.in.view = storedState(t, nil, nil, nil, q)
	if again := queueRows(f.in); again != nil {
		t.Fatalf("unchanged queue recorded again: %+v", again)
	}
	// An empty plan replaces a stored queue with an empty, non-nil one.
	f.in.plan = &policy.Plan{}
	if empty := queueRows(f.in); empty == nil || len(empty) != 0 {
		t.Fatalf("empty plan: %#v, want an empty non-nil queue", empty)
	}
}

// Each queue row carries its leaf's fair-share standing: the sort metric,
// served ratio and the level fairshare of each level, an idle sibling's
// level +Inf, with the job's protected window and free-at time.
func TestQueueRowsRecordStanding(t *testing.T) {
	tree, err := budgets.NewTree([]budgets.Spec{{Path: "lab", Share: 1}, {Path: "lab/ops", Share: 1},
		{Path: "lab/x", Share: 1}, {Path: "lab/x/a", Share: 3}, {Path: "lab/x/b", Share: 1}})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := tree.Lookup("lab/x/a")
	b, _ := tree.Lookup("lab/x/b")
	usage := make([]int64, len(tree.Leaves()))
	usage[a.LeafIndex] = 3600
	fs := budgets.ComputeFairShare(tree, usage)
	free := rowsT0.Add(30 * time.Minute)
	f := newRowsFixture(storedState(t, nil, nil, nil, nil))
	f.in.plan = &policy.Plan{Explanations: []policy.Explanation{
		{Job: "default/a1", Band: policy.BandRunning, Priority: 60, Budget: "lab/x/a", Rank: fs.Rank(a.LeafIndex),
			ProtectedUntil: rowsT0.Add(time.Hour), Reason: policy.Reason{Code: policy.ReasonRunning}},
		{Job: "default/b1", Band: policy.BandPending, Priority: 70, Position: 1, Budget: "lab/x/b", Rank: fs.Rank(b.LeafIndex),
			Wait: policy.WaitWindows, FreeAt: free, Reason: policy.Reason{Code: policy.ReasonPending, N: 1}},
	}}
	q := queueRows(f.in)
	if len(q) != 2 || q[0].Standing == nil || q[1].Standing == nil {
		t.Fatalf("queue %+v, want two rows with a standing", q)
	}
	sa, sb := q[0].Standing, q[1].Standing
	// lab/ops (no jobs) used nothing and comes first; then lab/b, which used
	// nothing under lab/x (LF +Inf at its level), then lab/a.
	if sb.LeafPosition != 2 || sb.Metric != budgets.Ratio(2.0/3) || sa.LeafPosition != 3 || sa.Metric != budgets.Ratio(1.0/3) {
		t.Errorf("positions/metrics a=%+v b=%+v, want b 2nd (2/3), a 3rd (1/3)", sa, sb)
	}
	lab := state.StandingPart{Path: "lab/x", Share: 0.5, UsageFraction: 1, Level: 0.5}
	if len(sb.Parts) != 2 || sb.Parts[0] != lab || sa.Parts[0] != lab || sb.Parts[1].Path != "lab/x/b" || !math.IsInf(float64(sb.Parts[1].Level), 1) ||
		sb.Parts[1].Share != 0.25 || sb.Parts[1].UsageFraction != 0 {
		t.Errorf("lab/x/b parts %+v, want lab/x/b share 0.25, usage 0, LF +Inf", sb.Parts)
	}
	// lab/a used all of the window on 75% of lab/x's half: LF 0.75, served 1/0.375.
	if len(sa.Parts) != 2 || sa.Parts[1].Share != 0.75 || sa.Parts[1].UsageFraction != 1 || sa.Parts[1].Level != 0.75 ||
		sa.UsageShare != 1 || sa.Effective != 0.375 || sa.ServedRatio != 2.667 {
		t.Errorf("lab/x/a standing %+v parts %+v", sa, sa.Parts)
	}
	if !q[0].ProtectedUntil.Equal(rowsT0.Add(time.Hour)) || !q[1].FreeAt.Equal(free) || !q[1].ProtectedUntil.IsZero() {
		t.Errorf("times: a protected %v, b free %v protected %v", q[0].ProtectedUntil, q[1].FreeAt, q[1].ProtectedUntil)
	}
	// The rows encode (LF "inf") and, stored, are not recorded again.
	f.in.view = storedState(t, nil, nil, nil, q)
	if again := queueRows(f.in); again != nil {
		t.Fatalf("unchanged standing recorded again: %+v", again)
	}
	stored := f.in.view.QueueEntry("default/b1")
	if stored == nil || stored.Standing == nil || !math.IsInf(float64(stored.Standing.Parts[1].Level), 1) {
		t.Fatalf("stored b1 %+v, want its standing with LF +Inf", stored)
	}
}

// A release (rule 5c: a job placed in part gives its GPUs back) is logged as
// kind "release", not as a time-slicing stop ("preempt"): it stops the job
// for no other job, though its reason names the job its rest waits for.
func TestWriteRowsRelease(t *testing.T) {
	f := newRowsFixture(storedState(t, nil, nil, nil, nil))
	f.in.plan = &policy.Plan{
		Stops: []policy.StopJob{{Job: "default/gang", Namespace: "default", Allocs: []string{"g1"},
			Reason: policy.Reason{Code: policy.ReasonPartialRelease, N: 1, Detail: policy.WaitFairShare.String(), Job: "default/train"}}},
	}
	f.in.results = []nomad.Outcome{{Op: nomad.Op{Kind: nomad.OpStop, Job: key("default", "gang"), Allocs: []string{"g1"}, Reason: "released"}}}
	_, decs := writeRows(f.in)
	if len(decs) != 1 || decs[0].Kind != "release" || decs[0].AllocID != "g1" || decs[0].JobID != "default/gang" {
		t.Fatalf("release decisions %+v, want one of kind release for g1", decs)
	}
}
