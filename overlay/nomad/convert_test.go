package nomad

import (
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

func ptr[T any](v T) *T { return &v }

func TestGPURequest(t *testing.T) {
	tests := []struct {
		name      string
		wantModel string
		wantOK    bool
	}{
		{"gpu", "", true},
		{"nvidia/gpu", "", true},
		{"nvidia/gpu/H100", "H100", true},
		{"nvidia/gpu/NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3", true},
		{"amd/gpu", "", false},
		{"nvidia/fpga", "", false},
		{"fpga", "", false},
		{"GPU", "", false}, // Nomad matches device names exactly
		{"", "", false},
	}
	for _, tt := range tests {
		model, ok := gpuRequest(tt.name)
		if model != tt.wantModel || ok != tt.wantOK {
			t.Errorf("gpuRequest(%q) = %q, %v; want %q, %v", tt.name, model, ok, tt.wantModel, tt.wantOK)
		}
	}
}

func task(name string, devs ...*api.RequestedDevice) *api.Task {
	return &api.Task{Name: name, Resources: &api.Resources{Devices: devs}}
}

func dev(name string, count *uint64) *api.RequestedDevice {
	return &api.RequestedDevice{Name: name, Count: count}
}

func TestJobFromAPI(t *testing.T) {
	submit := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		job     *api.Job
		want    Job
		wantGPU int
	}{
		{
			name: "one group of four allocations asking 8 GPUs each, with meta",
			job: &api.Job{
				ID: ptr("train"), Name: ptr("train"), Namespace: ptr("research"), Type: ptr("batch"),
				NodePool: ptr("gpu"), Priority: ptr(62), Status: ptr("running"), Version: ptr(uint64(3)),
				ModifyIndex: ptr(uint64(40)), JobModifyIndex: ptr(uint64(38)), SubmitTime: ptr(submit.UnixNano()),
				Meta: map[string]string{"budget": "lab/olmo", "min_runtime": "4h"},
				TaskGroups: []*api.TaskGroup{{
					Name: ptr("train"), Count: ptr(4),
					Tasks: []*api.Task{task("trainer", dev("nvidia/gpu", ptr(uint64(8))))},
				}},
			},
			want: Job{
				Key: JobKey{"research", "train"}, Name: "train", Type: "batch", NodePool: "gpu", Priority: 62,
				Status: "running", Meta: map[string]string{"budget": "lab/olmo", "min_runtime": "4h"},
				SubmitTime: submit, Version: 3, ModifyIndex: 40, JobModifyIndex: 38,
				Groups: []Group{{Name: "train", Count: 4, GPUs: 8}},
			},
			wantGPU: 32,
		},
		{
			name: "defaults: namespace, pool, count and device count left nil",
			job: &api.Job{
				ID: ptr("dbg"), Priority: ptr(50),
				TaskGroups: []*api.TaskGroup{{
					Name:  ptr("g"),
					Tasks: []*api.Task{task("t", dev("gpu", nil))},
				}},
			},
			want: Job{
				Key: JobKey{"default", "dbg"}, NodePool: "default", Priority: 50,
				Groups: []Group{{Name: "g", Count: 1, GPUs: 1}},
			},
			wantGPU: 1,
		},
		{
			name: "model named; two tasks add up; other devices ignored",
			job: &api.Job{
				ID: ptr("m"), Priority: ptr(50), Stop: ptr(true),
				TaskGroups: []*api.TaskGroup{{
					Name: ptr("g"), Count: ptr(2),
					Tasks: []*api.Task{
						task("a", dev("nvidia/gpu/H100", ptr(uint64(2))), dev("xilinx/fpga", ptr(uint64(1)))),
						task("b", dev("nvidia/gpu/H100", ptr(uint64(1)))),
						{Name: "no-resources"},
					},
				}, {
					Name: ptr("cpu-only"), Count: ptr(3),
					Tasks: []*api.Task{task("c")},
				}},
			},
			want: Job{
				Key: JobKey{"default", "m"}, NodePool: "default", Priority: 50, Stop: true,
				Groups: []Group{{Name: "g", Count: 2, GPUs: 3, Model: "H100"}, {Name: "cpu-only", Count: 3}},
			},
			wantGPU: 6,
		},
		{
			name: "amd GPUs are not NVIDIA GPUs",
			job: &api.Job{
				ID: ptr("amd"), Priority: ptr(50),
				TaskGroups: []*api.TaskGroup{{
					Name: ptr("g"), Count: ptr(1),
					Tasks: []*api.Task{task("t", dev("amd/gpu", ptr(uint64(4))))},
				}},
			},
			want: Job{
				Key: JobKey{"default", "amd"}, NodePool: "default", Priority: 50,
				Groups: []Group{{Name: "g", Count: 1}},
			},
			wantGPU: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := jobFromAPI(tt.job)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("jobFromAPI:\n got %+v\nwant %+v", got, tt.want)
			}
			if g := got.GPUs(); g != tt.wantGPU {
				t.Errorf("GPUs() = %d, want %d", g, tt.wantGPU)
			}
		})
	}
}

func TestAllocFromAPI(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	job := &Job{Groups: []Group{{Name: "train", Count: 2, GPUs: 4, Model: "H100"}}}
	tests := []struct {
		name  string
		alloc *api.Allocation
		job   *Job
		want  Alloc
	}{
		{
			name: "running with assigned devices: GPUs and IDs from allocated resources, start is the latest task start",
			alloc: &api.Allocation{
				ID: "a1", Name: "j.train[0]", Namespace: "research", JobID: "j", TaskGroup: "train", NodeID: "n1",
				DesiredStatus: "run", ClientStatus: "running", CreateIndex: 10, ModifyIndex: 12,
				TaskStates: map[string]*api.TaskState{
					"trainer": {State: "running", StartedAt: t0.Add(2 * time.Second)},
					"sidecar": {State: "running", StartedAt: t0},
				},
				AllocatedResources: &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{
					"trainer": {Devices: []*api.AllocatedDeviceResource{
						{Vendor: "nvidia", Type: "gpu", Name: "H100", DeviceIDs: []string{"GPU-b", "GPU-a"}},
						{Vendor: "xilinx", Type: "fpga", Name: "u250", DeviceIDs: []string{"F-1"}},
					}},
				}},
			},
			job: job,
			want: Alloc{
				ID: "a1", Name: "j.train[0]", Job: JobKey{"research", "j"}, TaskGroup: "train", NodeID: "n1",
				DesiredStatus: "run", ClientStatus: "running", GPUs: 2, Model: "H100",
				DeviceIDs: []string{"GPU-a", "GPU-b"}, StartedAt: t0.Add(2 * time.Second),
				CreateIndex: 10, ModifyIndex: 12,
			},
		},
		{
			name: "pending without devices: the group's ask from the job cache, no start time",
			alloc: &api.Allocation{
				ID: "a2", Name: "j.train[1]", JobID: "j", TaskGroup: "train",
				DesiredStatus: "run", ClientStatus: "pending",
				TaskStates: map[string]*api.TaskState{"trainer": {State: "pending"}},
			},
			job: job,
			want: Alloc{
				ID: "a2", Name: "j.train[1]", Job: JobKey{"default", "j"}, TaskGroup: "train",
				DesiredStatus: "run", ClientStatus: "pending", GPUs: 4, Model: "H100",
			},
		},
		{
			name: "preempted: evict, complete, preempter kept; unknown job leaves GPUs at zero",
			alloc: &api.Allocation{
				ID: "a3", JobID: "k", TaskGroup: "g", NodeID: "n2", DesiredStatus: "evict", ClientStatus: "complete",
				PreemptedByAllocation: "a9",
				TaskStates:            map[string]*api.TaskState{"t": {State: "dead", StartedAt: t0, FinishedAt: t0.Add(time.Hour)}},
			},
			want: Alloc{
				ID: "a3", Job: JobKey{"default", "k"}, TaskGroup: "g", NodeID: "n2", DesiredStatus: "evict",
				ClientStatus: "complete", PreemptedBy: "a9", StartedAt: t0, FinishedAt: t0.Add(time.Hour),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := allocFromAPI(tt.alloc, tt.job)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("allocFromAPI:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestAllocFromStubMatchesFull(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	stub := &api.AllocationListStub{
		ID: "a", Name: "j.g[0]", Namespace: "ns", NodeID: "n", JobID: "j", TaskGroup: "g",
		DesiredStatus: "run", ClientStatus: "running", CreateIndex: 5, ModifyIndex: 7,
		TaskStates: map[string]*api.TaskState{"t": {StartedAt: t0}},
		AllocatedResources: &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{
			"t": {Devices: []*api.AllocatedDeviceResource{{Vendor: "nvidia", Type: "gpu", Name: "H100", DeviceIDs: []string{"x"}}}},
		}},
	}
	full := &api.Allocation{
		ID: stub.ID, Name: stub.Name, Namespace: stub.Namespace, NodeID: stub.NodeID, JobID: stub.JobID,
		TaskGroup: stub.TaskGroup, DesiredStatus: stub.DesiredStatus, ClientStatus: stub.ClientStatus,
		CreateIndex: stub.CreateIndex, ModifyIndex: stub.ModifyIndex, TaskStates: stub.TaskStates,
		AllocatedResources: stub.AllocatedResources,
	}
	if a, b := allocFromStub(stub, nil), allocFromAPI(full, nil); !reflect.DeepEqual(a, b) {
		t.Errorf("stub and full allocation differ:\n stub %+v\n full %+v", a, b)
	}
}

func instances(healthy ...bool) []*api.NodeDevice {
	var out []*api.NodeDevice
	for i, h := range healthy {
		d := &api.NodeDevice{ID: "GPU-" + string(rune('0'+i)), Healthy: h}
		if !h {
			d.HealthDescription = "XID 79"
		}
		out = append(out, d)
	}
	return out
}

func TestNodeFromAPI(t *testing.T) {
	started := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		node        *api.Node
		want        Node
		wantHealthy int
		wantTotal   int
	}{
		{
			name: "eight healthy H100s, eligible",
			node: &api.Node{
				ID: "n1", Name: "gpu-1", Datacenter: "dc1", NodePool: "gpu", Status: "ready",
				SchedulingEligibility: "eligible", ModifyIndex: 9,
				NodeResources: &api.NodeResources{Devices: []*api.NodeDeviceResource{
					{Vendor: "nvidia", Type: "gpu", Name: "H100", Instances: instances(true, true, true, true, true, true, true, true)},
				}},
			},
			want: Node{
				ID: "n1", Name: "gpu-1", Datacenter: "dc1", Pool: "gpu", Status: "ready", Eligible: true, ModifyIndex: 9,
				GPUs: []GPUModel{{Model: "H100", Total: 8, Healthy: 8,
					HealthyIDs: []string{"GPU-0", "GPU-1", "GPU-2", "GPU-3", "GPU-4", "GPU-5", "GPU-6", "GPU-7"}}},
			},
			wantHealthy: 8, wantTotal: 8,
		},
		{
			name: "unhealthy instances counted apart, per model; other vendors and nil instances ignored; draining with a deadline",
			node: &api.Node{
				ID: "n2", Status: "ready", SchedulingEligibility: "ineligible", Drain: true,
				DrainStrategy: &api.DrainStrategy{
					DrainSpec:     api.DrainSpec{Deadline: time.Hour, IgnoreSystemJobs: true},
					ForceDeadline: started.Add(time.Hour), StartedAt: started,
				},
				NodeResources: &api.NodeResources{Devices: []*api.NodeDeviceResource{
					{Vendor: "nvidia", Type: "gpu", Name: "H100", Instances: append(instances(true, false, true), nil)},
					{Vendor: "nvidia", Type: "gpu", Name: "A100", Instances: instances(false)},
					{Vendor: "amd", Type: "gpu", Name: "MI300", Instances: instances(true, true)},
				}},
			},
			want: Node{
				ID: "n2", Pool: "default", Status: "ready",
				Drain: &Drain{StartedAt: started, Deadline: started.Add(time.Hour), IgnoreSystemJobs: true},
				GPUs: []GPUModel{
					{Model: "A100", Total: 1, Unhealthy: []DeviceHealth{{ID: "GPU-0", Reason: "XID 79"}}},
					{Model: "H100", Total: 3, Healthy: 2, Unhealthy: []DeviceHealth{{ID: "GPU-1", Reason: "XID 79"}},
						HealthyIDs: []string{"GPU-0", "GPU-2"}},
				},
			},
			wantHealthy: 2, wantTotal: 4,
		},
		{
			name: "forced drain and no deadline drain",
			node: &api.Node{
				ID: "n3", SchedulingEligibility: "ineligible",
				DrainStrategy: &api.DrainStrategy{DrainSpec: api.DrainSpec{Deadline: -1}, StartedAt: started},
			},
			want: Node{ID: "n3", Pool: "default", Drain: &Drain{StartedAt: started, Force: true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := nodeFromAPI(tt.node)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("nodeFromAPI:\n got %+v\nwant %+v", got, tt.want)
			}
			if got.HealthyGPUs() != tt.wantHealthy || got.TotalGPUs() != tt.wantTotal {
				t.Errorf("healthy/total = %d/%d, want %d/%d", got.HealthyGPUs(), got.TotalGPUs(), tt.wantHealthy, tt.wantTotal)
			}
		})
	}
}
