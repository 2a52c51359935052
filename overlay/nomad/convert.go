package nomad

import (
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
)

// The device vendor and type allot manages. Nomad matches device requests by
// exact string on each part it names (structs.DeviceIdTuple.Matches).
const (
	gpuVendor = "nvidia"
	gpuType   = "gpu"
)

// gpuRequest reports whether a device request name asks for NVIDIA GPUs, and
// the model it names. Nomad accepts "<type>", "<vendor>/<type>" and
// "<vendor>/<type>/<model>"; a bare "gpu" matches any vendor's GPUs, which on
// allot's nodes are NVIDIA's.
func gpuRequest(name string) (model string, ok bool) {
	parts := strings.SplitN(name, "/", 3)
	switch len(parts) {
	case 1:
		return "", parts[0] == gpuType
	case 2:
		return "", parts[0] == gpuVendor && parts[1] == gpuType
	default:
		return parts[2], parts[0] == gpuVendor && parts[1] == gpuType
	}
}

// groupFromAPI reads a task group's allocation count and GPU ask. Counts left
// nil take Nomad's defaults (1 allocation, 1 device).
func groupFromAPI(tg *api.TaskGroup) Group {
	g := Group{Name: deref(tg.Name), Count: 1}
	if tg.Count != nil {
		g.Count = *tg.Count
	}
	for _, t := range tg.Tasks {
		if t == nil || t.Resources == nil {
			continue
		}
		for _, d := range t.Resources.Devices {
			if d == nil {
				continue
			}
			model, ok := gpuRequest(d.Name)
			if !ok {
				continue
			}
			n := 1
			if d.Count != nil {
				n = int(*d.Count)
			}
			g.GPUs += n
			if g.Model == "" {
				g.Model = model
			}
		}
	}
	return g
}

// jobFromAPI keeps what allot needs of a full job (from Info or an event).
func jobFromAPI(j *api.Job) Job {
	out := Job{
		Key:            JobKey{Namespace: derefOr(j.Namespace, "default"), ID: deref(j.ID)},
		Name:           deref(j.Name),
		Type:           deref(j.Type),
		NodePool:       derefOr(j.NodePool, "default"),
		Priority:       derefInt(j.Priority),
		Status:         deref(j.Status),
		Stop:           j.Stop != nil && *j.Stop,
		Meta:           copyMeta(j.Meta),
		Version:        derefU64(j.Version),
		ModifyIndex:    derefU64(j.ModifyIndex),
		JobModifyIndex: derefU64(j.JobModifyIndex),
	}
	if j.SubmitTime != nil && *j.SubmitTime != 0 {
		out.SubmitTime = time.Unix(0, *j.SubmitTime).UTC()
	}
	for _, tg := range j.TaskGroups {
		if tg != nil {
			out.Groups = append(out.Groups, groupFromAPI(tg))
		}
	}
	return out
}

// allocFromAPI keeps what allot needs of an allocation. Allocation events and
// list stubs carry no job, so job (from the job cache; may be nil) supplies
// the group's GPU ask when the allocation has no assigned devices yet.
func allocFromAPI(a *api.Allocation, job *Job) Alloc {
	out := Alloc{
		ID:            a.ID,
		Name:          a.Name,
		Job:           JobKey{Namespace: orDefault(a.Namespace), ID: a.JobID},
		TaskGroup:     a.TaskGroup,
		NodeID:        a.NodeID,
		DesiredStatus: a.DesiredStatus,
		ClientStatus:  a.ClientStatus,
		PreemptedBy:   a.PreemptedByAllocation,
		CreateIndex:   a.CreateIndex,
		ModifyIndex:   a.ModifyIndex,
		StartedAt:     startedAt(a.ClientStatus, a.TaskStates),
		CreatedAt:     unixNanos(a.CreateTime),
		FinishedAt:    finishedAt(a.ClientStatus, a.TaskStates, a.ModifyTime),
	}
	assigned := false
	if a.AllocatedResources != nil {
		for _, tr := range a.AllocatedResources.Tasks {
			if tr == nil {
				continue
			}
			for _, d := range tr.Devices {
				if d == nil || d.Type != gpuType || (d.Vendor != gpuVendor && d.Vendor != "") {
					continue
				}
				assigned = true
				out.GPUs += len(d.DeviceIDs)
				out.DeviceIDs = append(out.DeviceIDs, d.DeviceIDs...)
				if out.Model == "" {
					out.Model = d.Name
				}
			}
		}
	}
	sort.Strings(out.DeviceIDs)
	if !assigned && job != nil {
		for _, g := range job.Groups {
			if g.Name == a.TaskGroup {
				out.GPUs, out.Model = g.GPUs, g.Model
			}
		}
	}
	return out
}

// allocFromStub converts a list stub (GET /v1/allocations?resources=true).
func allocFromStub(s *api.AllocationListStub, job *Job) Alloc {
	return allocFromAPI(&api.Allocation{
		ID: s.ID, Namespace: s.Namespace, Name: s.Name, NodeID: s.NodeID, JobID: s.JobID,
		TaskGroup: s.TaskGroup, AllocatedResources: s.AllocatedResources,
		DesiredStatus: s.DesiredStatus, ClientStatus: s.ClientStatus, TaskStates: s.TaskStates,
		PreemptedByAllocation: s.PreemptedByAllocation, CreateIndex: s.CreateIndex, ModifyIndex: s.ModifyIndex,
		CreateTime: s.CreateTime, ModifyTime: s.ModifyTime,
	}, job)
}

// unixNanos is a Nomad time stamp (nanoseconds since the epoch; 0: unset).
func unixNanos(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// startedAt is when an allocation started running: the latest start among
// its tasks that have started. Tasks that never started (poststop hooks) do
// not hold it back; a pending allocation has not started.
func startedAt(clientStatus string, states map[string]*api.TaskState) time.Time {
	if clientStatus == "pending" || clientStatus == "" {
		return time.Time{}
	}
	var t time.Time
	for _, s := range states {
		if s != nil && s.StartedAt.After(t) {
			t = s.StartedAt
		}
	}
	return t.UTC()
}

// finishedAt is when a terminal allocation stopped running: the latest
// finish among its tasks, else Nomad's modify time (ns since the epoch).
func finishedAt(clientStatus string, states map[string]*api.TaskState, modifyTime int64) time.Time {
	switch clientStatus {
	case "complete", "failed", "lost":
	default:
		return time.Time{}
	}
	var t time.Time
	for _, s := range states {
		if s != nil && s.FinishedAt.After(t) {
			t = s.FinishedAt
		}
	}
	if t.IsZero() && modifyTime > 0 {
		t = time.Unix(0, modifyTime)
	}
	return t.UTC()
}

// nodeFromAPI keeps a node's eligibility, drain and GPU capacity. GPU models
// are sorted by name; healthy and unhealthy instances by ID.
func nodeFromAPI(n *api.Node) Node {
	out := Node{
		ID: n.ID, Name: n.Name, Datacenter: n.Datacenter, Pool: orDefault(n.NodePool),
		Status:      n.Status,
		Eligible:    n.SchedulingEligibility == api.NodeSchedulingEligible,
		ModifyIndex: n.ModifyIndex,
	}
	if d := n.DrainStrategy; d != nil {
		out.Drain = &Drain{
			StartedAt:        d.StartedAt.UTC(),
			Force:            d.Deadline < 0,
			IgnoreSystemJobs: d.IgnoreSystemJobs,
		}
		// Nomad sets ForceDeadline = StartedAt + Deadline for a positive
		// Deadline; should a payload carry only the duration, derive it.
		switch {
		case d.Deadline > 0 && !d.ForceDeadline.IsZero():
			out.Drain.Deadline = d.ForceDeadline.UTC()
		case d.Deadline > 0 && !d.StartedAt.IsZero():
			out.Drain.Deadline = d.StartedAt.Add(d.Deadline).UTC()
		}
	} else if n.Drain {
		// A list stub says only that the node drains; the strategy needs Info.
		out.Drain = &Drain{}
	}
	if n.NodeResources != nil {
		out.GPUs = gpuModels(n.NodeResources.Devices)
	}
	return out
}

// nodeFromStub converts a list stub (GET /v1/nodes?resources=true).
func nodeFromStub(s *api.NodeListStub) Node {
	return nodeFromAPI(&api.Node{
		ID: s.ID, Name: s.Name, Datacenter: s.Datacenter, NodePool: s.NodePool, Status: s.Status,
		SchedulingEligibility: s.SchedulingEligibility, Drain: s.Drain,
		NodeResources: s.NodeResources, ModifyIndex: s.ModifyIndex,
	})
}

// gpuModels counts NVIDIA GPU instances per model, healthy ones apart.
func gpuModels(devs []*api.NodeDeviceResource) []GPUModel {
	var out []GPUModel
	for _, d := range devs {
		if d == nil || d.Vendor != gpuVendor || d.Type != gpuType {
			continue
		}
		m := GPUModel{Model: d.Name}
		for _, in := range d.Instances {
			if in == nil {
				continue
			}
			m.Total++
			if in.Healthy {
				m.Healthy++
				m.HealthyIDs = append(m.HealthyIDs, in.ID)
			} else {
				m.Unhealthy = append(m.Unhealthy, DeviceHealth{ID: in.ID, Reason: in.HealthDescription})
			}
		}
		sort.Slice(m.Unhealthy, func(i, j int) bool { return m.Unhealthy[i].ID < m.Unhealthy[j].ID })
		sort.Strings(m.HealthyIDs)
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out
}

func deref(s *string) string { return derefOr(s, "") }

func derefOr(s *string, def string) string {
	if s == nil || *s == "" {
		return def
	}
	return *s
}

func derefInt(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func derefU64(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}

func orDefault(ns string) string {
	if ns == "" {
		return "default"
	}
	return ns
}

func copyMeta(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
