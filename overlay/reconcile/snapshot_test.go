package reconcile

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/allot-sched/allot/overlay/contract"
	"github.com/allot-sched/allot/overlay/nomad"
	"github.com/allot-sched/allot/overlay/policy"
)

// gpuJob is a running batch job of one group "g" asking count
// allocations of gpus GPUs each, as the Nomad adapter keeps it.
func gpuJob(ns, id, pool string, count, gpus int, meta map[string]string) nomad.Job {
	return nomad.Job{Key: nomad.JobKey{Namespace: ns, ID: id}, Name: id, NodePool: pool, Type: "batch", Priority: 50,
		Status: "running", JobModifyIndex: 7, Meta: meta, SubmitTime: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC),
		Groups: []nomad.Group{{Name: "g", Count: count, GPUs: gpus}}}
}

// stateOf is a synced view holding jobs, allocations and nodes.
func stateOf(jobs []nomad.Job, allocs []nomad.Alloc, nodes []nomad.Node) *nomad.State {
	s := &nomad.State{Jobs: map[nomad.JobKey]nomad.Job{}, Allocs: map[string]nomad.Alloc{}, Nodes: map[string]nomad.Node{}, Synced: true}
	for _, j := range jobs {
		s.Jobs[j.Key] = j
	}
	for _, a := range allocs {
		s.Allocs[a.ID] = a
	}
	for _, n := range nodes {
		s.Nodes[n.ID] = n
	}
	return s
}

// h100 is a node's H100s, one per healthy flag; a faulty one reports XID 79.
func h100(healthy ...bool) []nomad.GPUModel {
	m := nomad.GPUModel{Model: "H100", Total: len(healthy)}
	for i, h := range healthy {
		id := "GPU-" + string(rune('0'+i))
		if h {
			m.Healthy++
			m.HealthyIDs = append(m.HealthyIDs, id)
		} else {
			m.Unhealthy = append(m.Unhealthy, nomad.DeviceHealth{ID: id, Reason: "XID 79"})
		}
	}
	return []nomad.GPUModel{m}
}

func TestBuildSnapshot(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	leaf := func(p string) (bool, bool) { return p == "lab/a", p == "lab/a" }
	alloc := func(id, job, desired, client string, gpus int) nomad.Alloc {
		a := nomad.Alloc{ID: id, Job: nomad.JobKey{Namespace: "research", ID: job}, TaskGroup: "g", NodeID: "n1",
			DesiredStatus: desired, ClientStatus: client, GPUs: gpus}
		if client != "pending" {
			a.StartedAt = t0
		}
		return a
	}
	s := stateOf(
		[]nomad.Job{
			gpuJob("research", "train", "gpu", 2, 4, map[string]string{"budget": "lab/a", "min_runtime": "2h"}),
			gpuJob("research", "free", "gpu", 1, 1, nil),
			gpuJob("other", "elsewhere", "gpu", 1, 1, nil),       // namespace not managed
			gpuJob("research", "cpu-pool", "default", 1, 1, nil), // pool not managed
			{Key: nomad.JobKey{Namespace: "research", ID: "web"}, NodePool: "gpu", Priority: 50, // no GPU
				Groups: []nomad.Group{{Name: "g", Count: 1}}},
		},
		[]nomad.Alloc{
			alloc("a1", "train", "run", "running", 4),
			alloc("a2", "train", "stop", "complete", 4), // migrated away: gone
			alloc("a3", "train", "run", "complete", 4),  // finished its work: counts as done
			alloc("a4", "free", "run", "pending", 1),
			alloc("a5", "free", "evict", "complete", 1),
		},
		[]nomad.Node{
			{ID: "n1", Pool: "gpu", Status: "ready", Eligible: true, GPUs: h100(true, true, false, true)},
			{ID: "n2", Pool: "gpu", Status: "down", Eligible: true, GPUs: h100(true, true),
				Drain: &nomad.Drain{Deadline: t0.Add(time.Hour), StartedAt: t0}},
			{ID: "n3", Pool: "gpu", Status: "ready", Eligible: true}, // no GPUs
			{ID: "n4", Pool: "default", Status: "ready", Eligible: true, GPUs: h100(true)},
		},
	)
	in := SnapshotInput{
		Policy: &policy.Config{Namespaces: []string{"research"}, NodePools: []string{"gpu"}},
		Leaf:   leaf,
		Memory: Memory{
			Written:    map[string]int{"research/train": 100},
			FirstSeen:  map[string]time.Time{"research/train": t0.Add(-time.Hour)},
			NodeStates: map[string]policy.NodeState{"n1": policy.NodeDraining},
			Carry:      &policy.Carry{LastDecision: t0},
		},
	}
	got := BuildSnapshot(s, in)
	freeContract := contract.Parse("research/free", nil, contract.Config{}, leaf)
	want := &policy.Snapshot{
		LastDecision: t0,
		Nodes: []policy.Node{
			{ID: "n1", Pool: "gpu", Model: "H100", GPUs: 3, Eligible: true, HealthReason: "XID 79 on GPU-2", State: policy.NodeDraining},
			{ID: "n2", Pool: "gpu", Model: "H100", GPUs: 0, Eligible: true, Healthy: true, Drain: &policy.Drain{Deadline: t0.Add(time.Hour)}},
		},
		Jobs: []policy.Job{
			{ID: "research/free", Namespace: "research", Pool: "gpu", Type: "batch", Contract: freeContract,
				SubmitTime: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), Priority: 50, ModifyIndex: 7,
				Groups: []policy.TaskGroup{{Name: "g", Count: 1, GPUs: 1}}},
			{ID: "research/train", Namespace: "research", Pool: "gpu", Type: "batch",
				Contract:   contract.Parse("research/train", map[string]string{"budget": "lab/a", "min_runtime": "2h"}, contract.Config{}, leaf),
				SubmitTime: t0.Add(-time.Hour), Priority: 50, LastWrittenPriority: 100, ModifyIndex: 7,
				Groups: []policy.TaskGroup{{Name: "g", Count: 2, GPUs: 4}}},
		},
		Allocs: []policy.Alloc{
			{ID: "a1", Job: "research/train", Node: "n1", Group: "g", GPUs: 4, StartedAt: t0, ClientStatus: "running", DesiredStatus: "run"},
			{ID: "a3", Job: "research/train", Node: "n1", Group: "g", GPUs: 4, StartedAt: t0, ClientStatus: "complete", DesiredStatus: "run"},
			{ID: "a4", Job: "research/free", Node: "n1", Group: "g", GPUs: 1, ClientStatus: "pending", DesiredStatus: "run"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("BuildSnapshot (-want +got):\n%s", diff)
	}
	if !got.Jobs[1].Contract.Allocated || got.Jobs[1].Contract.Protected != 2*time.Hour {
		t.Errorf("train's contract = %+v, want allocated with a 2h window", got.Jobs[1].Contract)
	}
}

func TestOpsFromPlan(t *testing.T) {
	p := &policy.Plan{
		Evaluations: []policy.Evaluate{{Job: "research/train", Namespace: "research"}},
		NodeActions: []policy.NodeAction{{Node: "n1", Kind: policy.NodeReserve}, {Node: "n2", Kind: policy.NodeRelease}},
		Stops:       []policy.StopJob{{Job: "research/old", Namespace: "research", Allocs: []string{"a1", "a2"}}},
		SetPriorities: []policy.SetPriority{{Job: "research/new", Namespace: "research", From: 50, To: 80, ModifyIndex: 3, Step: policy.StepPlace},
			{Job: "research/old", Namespace: "research", From: 90, To: 55, ModifyIndex: 12, Step: policy.StepLower}},
	}
	got := OpsFromPlan(p)
	want := []nomad.Op{
		// A job with allocations to place is written without Placed: its
		// write makes Nomad place it; a victim lowered is placed.
		{Kind: nomad.OpSetPriority, Job: key("research", "new"), Priority: 80, ModifyIndex: 3, Reason: p.SetPriorities[0].Reason.String(), Step: 1},
		{Kind: nomad.OpSetPriority, Job: key("research", "old"), Priority: 55, ModifyIndex: 12, Reason: p.SetPriorities[1].Reason.String(), Step: 2, Placed: true},
		{Kind: nomad.OpStop, Job: key("research", "old"), Allocs: []string{"a1", "a2"}, Reason: p.Stops[0].Reason.String()},
		{Kind: nomad.OpEligibility, Node: "n1", Eligible: false, Reason: p.NodeActions[0].Reason.String()},
		{Kind: nomad.OpEligibility, Node: "n2", Eligible: true, Reason: p.NodeActions[1].Reason.String()},
		{Kind: nomad.OpEvaluate, Job: key("research", "train"), Reason: p.Evaluations[0].Reason.String()},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("OpsFromPlan (-want +got):\n%s", diff)
	}
}

// The plan lists its stops lowest level first (policy stoporder.go); each
// level is a step of its own, so the stops of victims lowered below a
// replacement's reach land before any stop that makes that replacement.
func TestOpsFromPlanStopsByLevel(t *testing.T) {
	p := &policy.Plan{Stops: []policy.StopJob{
		{Job: "a", Namespace: "research", Level: 69}, {Job: "b", Namespace: "research", Level: 69},
		{Job: "c", Namespace: "research", Level: 79}, {Job: "d", Namespace: "research", Level: 90},
	}}
	var steps []uint8
	for _, op := range OpsFromPlan(p) {
		steps = append(steps, op.Step)
	}
	if want := []uint8{0, 0, 1, 2}; !cmp.Equal(steps, want) {
		t.Errorf("stop steps %v, want %v", steps, want)
	}
}

func TestJobKeyOf(t *testing.T) {
	for _, tt := range []struct {
		ns, id string
		want   nomad.JobKey
	}{
		{"research", "research/train", key("research", "train")},
		{"research", "train", key("research", "train")},
		{"", "team/x", key("team", "x")},
		{"", "x", key("default", "x")},
		{"a", "a/b/c", key("a", "b/c")},
	} {
		if got := jobKeyOf(tt.ns, tt.id); got != tt.want {
			t.Errorf("jobKeyOf(%q, %q) = %v, want %v", tt.ns, tt.id, got, tt.want)
		}
	}
}

func key(ns, id string) nomad.JobKey { return nomad.JobKey{Namespace: ns, ID: id} }

// The snapshot is in the simulator's order, not in the order of Nomad's
// random IDs: nodes by name, jobs by submit time, allocations by placement
// time (each then by ID), so that the policy's choices between equals do not
// depend on the UUIDs a cluster happened to draw.
func TestBuildSnapshotOrder(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	meta := map[string]string{"budget": "lab/a", "min_runtime": "1h"}
	job := func(id string, at time.Duration) nomad.Job {
		j := gpuJob("research", id, "gpu", 1, 2, meta)
		j.SubmitTime = t0.Add(at)
		return j
	}
	alloc := func(id, job, node string, at time.Duration) nomad.Alloc {
		return nomad.Alloc{ID: id, Job: nomad.JobKey{Namespace: "research", ID: job}, TaskGroup: "g", NodeID: node,
			DesiredStatus: "run", ClientStatus: "running", GPUs: 2, CreatedAt: t0.Add(at), StartedAt: t0.Add(at)}
	}
	node := func(id, name string) nomad.Node {
		return nomad.Node{ID: id, Name: name, Pool: "gpu", Status: "ready", Eligible: true, GPUs: h100(true, true, true, true)}
	}
	s := stateOf(
		[]nomad.Job{job("j-4", 4*time.Minute), job("j-10", 10*time.Minute), job("j-9", 9*time.Minute), job("j-9b", 9*time.Minute)},
		[]nomad.Alloc{alloc("ff", "j-4", "0c", time.Minute), alloc("0a", "j-10", "0c", 12*time.Minute),
			alloc("7b", "j-9", "f1", 11*time.Minute), alloc("7a", "j-9b", "f1", 11*time.Minute)},
		[]nomad.Node{node("f1", "gpu-client-0"), node("0c", "gpu-client-1"), node("5e", "gpu-client-2")},
	)
	snap := BuildSnapshot(s, SnapshotInput{Leaf: func(p string) (bool, bool) { return p == "lab/a", p == "lab/a" }})
	var nodes, jobs, allocs []string
	for _, n := range snap.Nodes {
		nodes = append(nodes, n.ID)
	}
	for _, j := range snap.Jobs {
		jobs = append(jobs, j.ID)
	}
	for _, a := range snap.Allocs {
		allocs = append(allocs, a.ID)
	}
	want := [][]string{{"f1", "0c", "5e"}, {"research/j-4", "research/j-9", "research/j-9b", "research/j-10"}, {"ff", "7a", "7b", "0a"}}
	if diff := cmp.Diff(want, [][]string{nodes, jobs, allocs}); diff != "" {
		t.Fatalf("snapshot order (-want +got):\n%s", diff)
	}
}

// A plan that acts on a node twice (a reservation released and the node
// reserved for the next job) writes its eligibility once, as the plan
// leaves it: eligible then ineligible would let Nomad place blocked jobs on
// it between the two writes.
func TestOpsFromPlanOneEligibilityWritePerNode(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	released := policy.Reason{Code: policy.ReasonReservationDone, Job: "research/a"}
	returned := policy.Reason{Code: policy.ReasonNodeHealthy, At: at}
	reserved := policy.Reason{Code: policy.ReasonReserved, Job: "research/b", At: at}
	p := &policy.Plan{NodeActions: []policy.NodeAction{
		{Node: "n1", Kind: policy.NodeRelease, Reason: released},
		{Node: "n2", Kind: policy.NodeEligible, Reason: returned},
		{Node: "n1", Kind: policy.NodeReserve, Reason: reserved},
	}}
	want := []nomad.Op{
		{Kind: nomad.OpEligibility, Node: "n2", Eligible: true, Reason: returned.String()},
		{Kind: nomad.OpEligibility, Node: "n1", Eligible: false, Reason: released.String() + "; then " + reserved.String()},
	}
	if diff := cmp.Diff(want, OpsFromPlan(p)); diff != "" {
		t.Errorf("OpsFromPlan (-want +got):\n%s", diff)
	}
	// The decision log names each op's kind, one per op.
	if got := opKinds(p); !cmp.Equal(got, []string{"drain", "reserve"}) {
		t.Errorf("opKinds %v, want [drain reserve]", got)
	}
}
