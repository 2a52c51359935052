package nomad

import (
	"sort"
	"strings"
	"time"

	"github.com/allot-sched/allot/overlay/contract"
	"github.com/allot-sched/allot/overlay/policy"
)

// Memory is what the caller (the reconcile loop) remembers between
// decisions and the policy needs back in each Snapshot.
type Memory struct {
	// NodeStates: NodeAction.State() of each applied node action.
	NodeStates map[string]policy.NodeState
	// HealthySince: when each node last turned healthy.
	HealthySince map[string]time.Time
	// Reservations: Plan.Reservations of the previous decision.
	Reservations []policy.Reservation
	// Victims and Issued: Plan.Victims and Plan.Issued of the previous
	// decision, less what Nomad did not accept (appliedMemory).
	Victims []policy.Victim
	Issued  []policy.Issued
	// Notices: Plan.Notices of the previous decision (checkpoint notices
	// running), kept whether or not the signal went through.
	Notices []policy.Notice
	// LastDecision: the now of the previous decision.
	LastDecision time.Time
	// Written: the priority allot last wrote, by policy job ID.
	Written map[string]int
	// ReturnRequested: drained nodes an operator asked back (allot nodes
	// return), from the replicated drain records.
	ReturnRequested map[string]bool
	// FirstSeen: when allot first saw each job, by policy job ID. Nomad's
	// SubmitTime moves on every registration (allot's own priority writes
	// too), so it cannot order jobs of one leaf by arrival; when a job is
	// missing here its SubmitTime is used.
	FirstSeen map[string]time.Time
}

// SnapshotInput is what the conversion needs besides the view.
type SnapshotInput struct {
	Config   *Config
	Contract contract.Config
	Leaf     contract.LeafCheck
	// Nearest and Under (optional) give a misspelt budget its did-you-mean
	// and an inner budget the leaves below it (contract.Budgets).
	Nearest func(path string) string
	Under   func(path string) []string
	Memory  Memory
}

// PolicyJobID is the policy's (and allot state's) ID of a job:
// "namespace/id", unique across namespaces.
func PolicyJobID(k JobKey) string { return k.String() }

// jobKeyOf maps a plan's job back to Nomad's namespace and ID.
func jobKeyOf(namespace, id string) JobKey {
	if namespace != "" {
		if rest, ok := strings.CutPrefix(id, namespace+"/"); ok {
			return JobKey{Namespace: namespace, ID: rest}
		}
		return JobKey{Namespace: namespace, ID: id}
	}
	if ns, rest, ok := strings.Cut(id, "/"); ok {
		return JobKey{Namespace: ns, ID: rest}
	}
	return JobKey{Namespace: "default", ID: id}
}

// BuildSnapshot converts the view into the policy's Snapshot: GPU nodes in
// the configured pools, managed jobs Nomad has not finished (a GPU request,
// a configured namespace and pool), and their allocations that hold GPUs or
// finished their work. The output is sorted by ID, so equal views give equal
// snapshots.
func BuildSnapshot(s *State, in SnapshotInput) *policy.Snapshot {
	cfg := in.Config
	if cfg == nil {
		cfg = &Config{}
	}
	snap := &policy.Snapshot{Reservations: in.Memory.Reservations, Victims: in.Memory.Victims, Issued: in.Memory.Issued, Notices: in.Memory.Notices,
		LastDecision: in.Memory.LastDecision}
	for _, n := range s.Nodes {
		if pn, ok := policyNode(&n, cfg, in.Memory); ok {
			snap.Nodes = append(snap.Nodes, pn)
		}
	}
	sort.Slice(snap.Nodes, func(i, j int) bool { return snap.Nodes[i].ID < snap.Nodes[j].ID })
	managed := map[JobKey]string{}
	// A job whose allocations stopped waits again from the last stop.
	stopped := map[JobKey]time.Time{}
	for _, a := range s.Allocs {
		if !holdsOrDone(&a) && a.FinishedAt.After(stopped[a.Job]) {
			stopped[a.Job] = a.FinishedAt
		}
	}
	for _, j := range s.SortedJobs() {
		if j.Stop || j.Status == "dead" || !cfg.Manages(&j) {
			continue
		}
		id := PolicyJobID(j.Key)
		managed[j.Key] = id
		pj := policyJob(&j, id, in)
		pj.QueuedSince = stopped[j.Key]
		snap.Jobs = append(snap.Jobs, pj)
	}
	for _, a := range s.Allocs {
		id, ok := managed[a.Job]
		if !ok || !(holdsOrDone(&a)) {
			continue
		}
		snap.Allocs = append(snap.Allocs, policy.Alloc{
			ID: a.ID, Job: id, Node: a.NodeID, Group: a.TaskGroup, GPUs: a.GPUs,
			StartedAt: a.StartedAt, ClientStatus: a.ClientStatus, DesiredStatus: a.DesiredStatus,
		})
	}
	sort.Slice(snap.Allocs, func(i, j int) bool { return snap.Allocs[i].ID < snap.Allocs[j].ID })
	return snap
}

func holdsOrDone(a *Alloc) bool {
	switch a.ClientStatus {
	case "pending", "running":
		return true
	case "complete":
		return a.DesiredStatus == "run"
	}
	return false
}

// policyNode keeps a GPU node. The policy assumes one model per node: the
// model with the most instances is the node's; its healthy instances are the
// capacity. A node that is not ready has no capacity.
func policyNode(n *Node, cfg *Config, mem Memory) (policy.Node, bool) {
	if len(n.GPUs) == 0 {
		return policy.Node{}, false
	}
	if len(cfg.NodePools) > 0 && !contains(cfg.NodePools, n.Pool) {
		return policy.Node{}, false
	}
	main := n.GPUs[0]
	for _, m := range n.GPUs[1:] {
		if m.Total > main.Total {
			main = m
		}
	}
	out := policy.Node{
		ID: n.ID, Pool: n.Pool, Model: main.Model, GPUs: main.Healthy, Eligible: n.Eligible, Healthy: true,
		HealthySince: mem.HealthySince[n.ID], State: mem.NodeStates[n.ID],
		ReturnRequested: mem.ReturnRequested[n.ID],
	}
	if n.Status != "ready" {
		out.GPUs = 0
	}
	var faults []string
	for _, m := range n.GPUs {
		for _, u := range m.Unhealthy {
			faults = append(faults, strings.TrimSpace(u.Reason+" on "+u.ID))
		}
	}
	if len(faults) > 0 {
		out.Healthy = false
		out.HealthReason = strings.Join(faults, "; ")
	}
	if n.Drain != nil {
		out.Drain = &policy.Drain{Deadline: n.Drain.Deadline}
		if n.Drain.Force {
			out.Drain.Deadline = n.Drain.StartedAt
		}
	}
	return out, true
}

func policyJob(j *Job, id string, in SnapshotInput) policy.Job {
	submit := j.SubmitTime
	if t, ok := in.Memory.FirstSeen[id]; ok {
		submit = t
	}
	pj := policy.Job{
		ID: id, Namespace: j.Key.Namespace, Pool: j.NodePool, Type: j.Type,
		Contract:   contract.ParseIn(id, j.Meta, in.Contract, contract.Budgets{Leaf: in.Leaf, Nearest: in.Nearest, Under: in.Under}),
		SubmitTime: submit, Priority: j.Priority, LastWrittenPriority: in.Memory.Written[id],
		ModifyIndex: j.JobModifyIndex,
	}
	for _, g := range j.Groups {
		pj.Groups = append(pj.Groups, policy.TaskGroup{Name: g.Name, Count: g.Count, GPUs: g.GPUs, Model: g.Model})
	}
	return pj
}

// OpsFromPlan lists a plan's writes in the order the plan prescribes:
// priorities, stops, node actions, evaluations. The Applier skips the stops
// of a job whose priority write failed.
func OpsFromPlan(p *policy.Plan) []Op {
	var ops []Op
	for _, sp := range p.SetPriorities {
		ops = append(ops, Op{Kind: OpSetPriority, Job: jobKeyOf(sp.Namespace, sp.Job), Priority: sp.To,
			ModifyIndex: sp.ModifyIndex, Reason: sp.Reason.String()})
	}
	for _, st := range p.Stops {
		ops = append(ops, Op{Kind: OpStop, Job: jobKeyOf(st.Namespace, st.Job), Allocs: st.Allocs,
			Reason: st.Reason.String()})
	}
	for _, sg := range p.Signals {
		ops = append(ops, Op{Kind: OpSignal, Job: jobKeyOf(sg.Namespace, sg.Job), Allocs: sg.Allocs, Signal: sg.Signal,
			Reason: sg.Reason.String()})
	}
	for _, na := range p.NodeActions {
		ops = append(ops, Op{Kind: OpEligibility, Node: na.Node, Eligible: na.Kind.Eligible(), Reason: na.Reason.String()})
	}
	for _, ev := range p.Evaluations {
		ops = append(ops, Op{Kind: OpEvaluate, Job: jobKeyOf(ev.Namespace, ev.Job), Reason: ev.Reason.String()})
	}
	return ops
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
