package nomad

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"

	"github.com/allot-sched/allot/overlay/contract"
	"github.com/allot-sched/allot/overlay/policy"
)

func gpuJob(ns, id, pool string, count, gpus int, meta map[string]string) *api.Job {
	return &api.Job{
		ID: ptr(id), Namespace: ptr(ns), NodePool: ptr(pool), Type: ptr("batch"), Priority: ptr(50),
		Status: ptr("running"), JobModifyIndex: ptr(uint64(7)), Meta: meta,
		SubmitTime: ptr(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC).UnixNano()),
		TaskGroups: []*api.TaskGroup{{Name: ptr("g"), Count: ptr(count),
			Tasks: []*api.Task{task("t", dev("nvidia/gpu", ptr(uint64(gpus))))}}},
	}
}

func stateOf(jobs []*api.Job, allocs []*api.Allocation, nodes []*api.Node) *State {
	s := &State{Jobs: map[JobKey]Job{}, Allocs: map[string]Alloc{}, Nodes: map[string]Node{}}
	for _, j := range jobs {
		c := jobFromAPI(j)
		s.Jobs[c.Key] = c
	}
	for _, a := range allocs {
		j := s.Jobs[JobKey{orDefault(a.Namespace), a.JobID}]
		s.Allocs[a.ID] = allocFromAPI(a, &j)
	}
	for _, n := range nodes {
		s.Nodes[n.ID] = nodeFromAPI(n)
	}
	return s
}

func TestBuildSnapshot(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	leaf := func(p string) (bool, bool) { return p == "lab/a", p == "lab/a" }
	alloc := func(id, job, desired, client string) *api.Allocation {
		return &api.Allocation{ID: id, Namespace: "research", JobID: job, TaskGroup: "g", NodeID: "n1",
			DesiredStatus: desired, ClientStatus: client,
			TaskStates: map[string]*api.TaskState{"t": {StartedAt: t0}}}
	}
	h100 := func(healthy ...bool) *api.NodeResources {
		return &api.NodeResources{Devices: []*api.NodeDeviceResource{{Vendor: "nvidia", Type: "gpu", Name: "H100", Instances: instances(healthy...)}}}
	}
	s := stateOf(
		[]*api.Job{
			gpuJob("research", "train", "gpu", 2, 4, map[string]string{"budget": "lab/a", "min_runtime": "2h"}),
			gpuJob("research", "free", "gpu", 1, 1, nil),
			gpuJob("other", "elsewhere", "gpu", 1, 1, nil),       // namespace not managed
			gpuJob("research", "cpu-pool", "default", 1, 1, nil), // pool not managed
			{ID: ptr("web"), Namespace: ptr("research"), NodePool: ptr("gpu"), Priority: ptr(50), // no GPU
				TaskGroups: []*api.TaskGroup{{Name: ptr("g"), Tasks: []*api.Task{task("t")}}}},
		},
		[]*api.Allocation{
			alloc("a1", "train", "run", "running"),
			alloc("a2", "train", "stop", "complete"), // migrated away: gone
			alloc("a3", "train", "run", "complete"),  // finished its work: counts as done
			alloc("a4", "free", "run", "pending"),
			alloc("a5", "free", "evict", "complete"),
		},
		[]*api.Node{
			{ID: "n1", NodePool: "gpu", Status: "ready", SchedulingEligibility: "eligible", NodeResources: h100(true, true, false, true)},
			{ID: "n2", NodePool: "gpu", Status: "down", SchedulingEligibility: "eligible", NodeResources: h100(true, true),
				DrainStrategy: &api.DrainStrategy{DrainSpec: api.DrainSpec{Deadline: time.Hour}, ForceDeadline: t0.Add(time.Hour), StartedAt: t0}},
			{ID: "n3", NodePool: "gpu", Status: "ready", SchedulingEligibility: "eligible"}, // no GPUs
			{ID: "n4", NodePool: "default", Status: "ready", SchedulingEligibility: "eligible", NodeResources: h100(true)},
		},
	)
	in := SnapshotInput{
		Config: &Config{Namespaces: []string{"research"}, NodePools: []string{"gpu"}},
		Leaf:   leaf,
		Memory: Memory{
			Written:      map[string]int{"research/train": 100},
			FirstSeen:    map[string]time.Time{"research/train": t0.Add(-time.Hour)},
			NodeStates:   map[string]policy.NodeState{"n1": policy.NodeDraining},
			LastDecision: t0,
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
		Evaluations:   []policy.Evaluate{{Job: "research/train", Namespace: "research"}},
		NodeActions:   []policy.NodeAction{{Node: "n1", Kind: policy.NodeReserve}, {Node: "n2", Kind: policy.NodeRelease}},
		Stops:         []policy.StopJob{{Job: "research/old", Namespace: "research", Allocs: []string{"a1", "a2"}}},
		SetPriorities: []policy.SetPriority{{Job: "research/old", Namespace: "research", From: 90, To: 55, ModifyIndex: 12}},
	}
	got := OpsFromPlan(p)
	want := []Op{
		{Kind: OpSetPriority, Job: JobKey{"research", "old"}, Priority: 55, ModifyIndex: 12, Reason: p.SetPriorities[0].Reason.String()},
		{Kind: OpStop, Job: JobKey{"research", "old"}, Allocs: []string{"a1", "a2"}, Reason: p.Stops[0].Reason.String()},
		{Kind: OpEligibility, Node: "n1", Eligible: false, Reason: p.NodeActions[0].Reason.String()},
		{Kind: OpEligibility, Node: "n2", Eligible: true, Reason: p.NodeActions[1].Reason.String()},
		{Kind: OpEvaluate, Job: JobKey{"research", "train"}, Reason: p.Evaluations[0].Reason.String()},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("OpsFromPlan (-want +got):\n%s", diff)
	}
}

func TestJobKeyOf(t *testing.T) {
	for _, tt := range []struct {
		ns, id string
		want   JobKey
	}{
		{"research", "research/train", JobKey{"research", "train"}},
		{"research", "train", JobKey{"research", "train"}},
		{"", "team/x", JobKey{"team", "x"}},
		{"", "x", JobKey{"default", "x"}},
		{"a", "a/b/c", JobKey{"a", "b/c"}},
	} {
		if got := jobKeyOf(tt.ns, tt.id); got != tt.want {
			t.Errorf("jobKeyOf(%q, %q) = %v, want %v", tt.ns, tt.id, got, tt.want)
		}
	}
}
