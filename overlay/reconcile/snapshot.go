package reconcile

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/allot-sched/allot/overlay/contract"
	"github.com/allot-sched/allot/overlay/nomad"
	"github.com/allot-sched/allot/overlay/policy"
)

// Memory is what the reconcile pass remembers between decisions and the
// policy needs back in each Snapshot.
type Memory struct {
	// NodeStates: NodeAction.State() of each applied node action.
	NodeStates map[string]policy.NodeState
	// HealthySince: when each node last turned healthy (Carry.Health).
	HealthySince map[string]time.Time
	// Carry is the policy's memory from the previous decision (nil: none):
	// reservations, held victims, issued actions, its time.
	Carry *policy.Carry
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
	// Policy bounds what allot manages: its namespaces and node pools
	// (nil: all).
	Policy   *policy.Config
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
func PolicyJobID(k nomad.JobKey) string { return k.String() }

// jobKeyOf maps a plan's job back to Nomad's namespace and ID.
func jobKeyOf(namespace, id string) nomad.JobKey {
	if namespace != "" {
		if rest, ok := strings.CutPrefix(id, namespace+"/"); ok {
			return nomad.JobKey{Namespace: namespace, ID: rest}
		}
		return nomad.JobKey{Namespace: namespace, ID: id}
	}
	if ns, rest, ok := strings.Cut(id, "/"); ok {
		return nomad.JobKey{Namespace: ns, ID: rest}
	}
	return nomad.JobKey{Namespace: "default", ID: id}
}

// BuildSnapshot converts the view into the policy's Snapshot: GPU nodes in
// the configured pools, managed jobs Nomad has not finished (Config.Manages:
// a GPU request, a configured namespace and pool), and their allocations
// that hold GPUs or finished their work. Equal views give equal snapshots,
// in the order the simulator's model reads the same cluster (snapshotOrder).
func BuildSnapshot(s *nomad.State, in SnapshotInput) *policy.Snapshot {
	cfg := in.Policy
	if cfg == nil {
		cfg = &policy.Config{}
	}
	snap := &policy.Snapshot{}
	if in.Memory.Carry != nil {
		in.Memory.Carry.Fill(snap)
	}
	names := make(map[string]string, len(s.Nodes))
	for _, n := range s.Nodes {
		if pn, ok := policyNode(&n, cfg, in.Memory); ok {
			snap.Nodes = append(snap.Nodes, pn)
			names[pn.ID] = n.Name
		}
	}
	managed := map[nomad.JobKey]string{}
	// A job whose allocations stopped waits again from the last stop.
	stopped := map[nomad.JobKey]time.Time{}
	// An allocation placed by preemption waits until its victims stop.
	waits := map[string]bool{}
	for _, a := range s.Allocs {
		if !holdsOrDone(&a) && a.FinishedAt.After(stopped[a.Job]) {
			stopped[a.Job] = a.FinishedAt
		}
		if a.PreemptedBy != "" && (a.ClientStatus == "pending" || a.ClientStatus == "running") {
			waits[a.PreemptedBy] = true
		}
	}
	runs := lastRuns(s, stopped)
	for _, j := range s.SortedJobs() {
		if j.Stop || j.Status == "dead" {
			continue
		}
		pj := ruleJob(&j)
		if !cfg.Manages(&pj) {
			continue
		}
		id := PolicyJobID(j.Key)
		managed[j.Key] = id
		fillJob(&pj, &j, id, in)
		pj.QueuedSince = stopped[j.Key]
		if r := runs[j.Key]; r.allocs >= wantAllocs(&j) && pj.QueuedSince.After(r.from) {
			pj.LastRun = pj.QueuedSince.Sub(r.from)
		}
		pj.EvaluatingSince = s.Evaluating[j.Key]
		snap.Jobs = append(snap.Jobs, pj)
	}
	for _, a := range s.Allocs {
		id, ok := managed[a.Job]
		if !ok || !(holdsOrDone(&a)) {
			continue
		}
		snap.Allocs = append(snap.Allocs, policy.Alloc{
			ID: a.ID, Job: id, Node: a.NodeID, Group: a.TaskGroup, GPUs: a.GPUs,
			StartedAt: a.StartedAt, PlacedAt: a.CreatedAt, WaitsForVictims: waits[a.ID],
			ClientStatus: a.ClientStatus, DesiredStatus: a.DesiredStatus,
		})
	}
	snapshotOrder(snap, names)
	return snap
}

// snapshotOrder sorts the snapshot as the simulator's model holds the same
// cluster: nodes by name, jobs by submit time, allocations by placement
// time, each then by ID. The policy breaks some ties by the order it reads
// (the first node of equal cost to clear, the first job of equal standing):
// sorted by Nomad's IDs, random UUIDs, those choices were a coin toss on a
// real cluster, another in every run of the fidelity harness, where the
// model, reading in its own order, always made the same one.
func snapshotOrder(snap *policy.Snapshot, names map[string]string) {
	slices.SortFunc(snap.Nodes, func(a, b policy.Node) int {
		return cmp.Or(cmp.Compare(names[a.ID], names[b.ID]), cmp.Compare(a.ID, b.ID))
	})
	slices.SortFunc(snap.Jobs, func(a, b policy.Job) int {
		return cmp.Or(a.SubmitTime.Compare(b.SubmitTime), cmp.Compare(a.ID, b.ID))
	})
	slices.SortFunc(snap.Allocs, func(a, b policy.Alloc) int {
		return cmp.Or(a.PlacedAt.Compare(b.PlacedAt), cmp.Compare(a.ID, b.ID))
	})
}

// stopSpread is how far apart the allocations of one stop of a job may
// finish: allot stops all of a job's allocations in one operation, and
// Nomad's clients report them stopped within seconds.
const stopSpread = time.Minute

// lastRun is what a job's last stop ended: how many of its allocations
// that had started it stopped, and when the last of them started.
type lastRun struct {
	allocs int
	from   time.Time
}

// lastRuns reads, for each job with stopped allocations, the run its last
// stop (stopped, Job.QueuedSince) ended: the allocations that had started
// and finished within stopSpread of it.
func lastRuns(s *nomad.State, stopped map[nomad.JobKey]time.Time) map[nomad.JobKey]lastRun {
	out := map[nomad.JobKey]lastRun{}
	for _, a := range s.Allocs {
		at, ok := stopped[a.Job]
		if !ok || holdsOrDone(&a) || a.StartedAt.IsZero() || a.FinishedAt.Before(at.Add(-stopSpread)) {
			continue
		}
		r := out[a.Job]
		r.allocs++
		if a.StartedAt.After(r.from) {
			r.from = a.StartedAt
		}
		out[a.Job] = r
	}
	return out
}

// wantAllocs is the number of allocations job asks for: a run is the job's
// only when all of them ran (Job.LastRun; a job placed in part makes no
// progress).
func wantAllocs(j *nomad.Job) int {
	n := 0
	for _, g := range j.Groups {
		n += max(g.Count, 0)
	}
	return max(n, 1)
}

// manages is cfg.Manages for a Nomad job.
func manages(cfg *policy.Config, j *nomad.Job) bool {
	pj := ruleJob(j)
	return cfg.Manages(&pj)
}

// Manages is the policy's rule 11 over Nomad's jobs, for those who read
// Nomad without building a snapshot (the start-up warning about unmanaged
// allocations on GPU nodes).
func Manages(cfg policy.Config) func(*nomad.Job) bool {
	return func(j *nomad.Job) bool { return manages(&cfg, j) }
}

// ruleJob is what policy.Config.Manages reads of a job: its namespace, node
// pool and task groups.
func ruleJob(j *nomad.Job) policy.Job {
	pj := policy.Job{Namespace: j.Key.Namespace, Pool: j.NodePool}
	for _, g := range j.Groups {
		pj.Groups = append(pj.Groups, policy.TaskGroup{Name: g.Name, Count: g.Count, GPUs: g.GPUs, Model: g.Model})
	}
	return pj
}

func holdsOrDone(a *nomad.Alloc) bool {
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
func policyNode(n *nomad.Node, cfg *policy.Config, mem Memory) (policy.Node, bool) {
	if len(n.GPUs) == 0 {
		return policy.Node{}, false
	}
	if len(cfg.NodePools) > 0 && !slices.Contains(cfg.NodePools, n.Pool) {
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

// fillJob completes pj (from ruleJob) with the rest of the policy's job.
func fillJob(pj *policy.Job, j *nomad.Job, id string, in SnapshotInput) {
	submit := j.SubmitTime
	if t, ok := in.Memory.FirstSeen[id]; ok {
		submit = t
	}
	pj.ID, pj.Type, pj.SubmitTime = id, j.Type, submit
	pj.Contract = contract.ParseIn(id, j.Meta, in.Contract, contract.Budgets{Leaf: in.Leaf, Nearest: in.Nearest, Under: in.Under})
	pj.Priority, pj.LastWrittenPriority, pj.ModifyIndex = j.Priority, in.Memory.Written[id], j.JobModifyIndex
}

// eligibilityOps writes each node's eligibility once, as the plan leaves it:
// where the plan acts on a node twice (a reservation released and the node
// reserved for the next job, a node returned from a drain and reserved), a
// write of eligible then of ineligible would unblock Nomad's blocked
// evaluations between the two, and Nomad places on the node within
// milliseconds (fidelity run 50, drain: two jobs placed on a node 3 and 10
// ms of wall time after the pass that returned it began), taking the GPUs
// the plan holds for its job. The simulator's model applies a plan's node
// actions with no placement between them: this one write is what it models. The one write is where the node's last action is, with the
// reasons of all of them.
func eligibilityOps(actions []policy.NodeAction) []nomad.Op {
	why := make(map[string]string, len(actions))
	for _, na := range actions {
		if w, ok := why[na.Node]; ok {
			why[na.Node] = w + "; then " + na.Reason.String()
		} else {
			why[na.Node] = na.Reason.String()
		}
	}
	var ops []nomad.Op
	for _, i := range lastNodeActions(actions) {
		na := actions[i]
		ops = append(ops, nomad.Op{Kind: nomad.OpEligibility, Node: na.Node, Eligible: na.Kind.Eligible(), Reason: why[na.Node]})
	}
	return ops
}

// lastNodeActions is the index of each node's last action, in the plan's
// order: the actions eligibilityOps writes (and opKinds names).
func lastNodeActions(actions []policy.NodeAction) []int {
	last := make(map[string]int, len(actions))
	for i, na := range actions {
		last[na.Node] = i
	}
	var out []int
	for i, na := range actions {
		if last[na.Node] == i {
			out = append(out, i)
		}
	}
	return out
}

// OpsFromPlan lists a plan's writes in the order the plan prescribes:
// priorities (in their policy.WriteStep steps), stops (a step per level,
// lowest first), signals, node
// actions (one write per node: eligibilityOps), evaluations. The Applier
// skips the stops of a job whose priority write failed.
func OpsFromPlan(p *policy.Plan) []nomad.Op {
	var ops []nomad.Op
	for _, sp := range p.SetPriorities {
		ops = append(ops, nomad.Op{Kind: nomad.OpSetPriority, Job: jobKeyOf(sp.Namespace, sp.Job), Priority: sp.To,
			ModifyIndex: sp.ModifyIndex, Reason: sp.Reason.String(), Step: uint8(sp.Step), Placed: sp.Step != policy.StepPlace})
	}
	var step uint8 // stops lowest level first, each level a step (policy stoporder.go)
	for i, st := range p.Stops {
		if i > 0 && st.Level != p.Stops[i-1].Level && step < 255 {
			step++
		}
		ops = append(ops, nomad.Op{Kind: nomad.OpStop, Job: jobKeyOf(st.Namespace, st.Job), Allocs: st.Allocs,
			Reason: st.Reason.String(), Step: step})
	}
	for _, sg := range p.Signals {
		ops = append(ops, nomad.Op{Kind: nomad.OpSignal, Job: jobKeyOf(sg.Namespace, sg.Job), Allocs: sg.Allocs, Signal: sg.Signal,
			Reason: sg.Reason.String()})
	}
	ops = append(ops, eligibilityOps(p.NodeActions)...)
	for _, ev := range p.Evaluations {
		ops = append(ops, nomad.Op{Kind: nomad.OpEvaluate, Job: jobKeyOf(ev.Namespace, ev.Job), Reason: ev.Reason.String()})
	}
	return ops
}
