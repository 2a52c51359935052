package reconcile

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/contract"
	"github.com/allot-sched/allot/overlay/nomad"
	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/server"
	"github.com/allot-sched/allot/overlay/state"
)

// rowsInput is what one pass turns into replicated rows.
type rowsInput struct {
	view      *state.View
	state     *nomad.State
	snap      *policy.Snapshot
	plan      *policy.Plan
	held      []policy.Victim // the victims held after the plan, less those whose stop failed (Carry.Victims)
	results   []nomad.Outcome // the plan's ops, applied, in OpsFromPlan order
	firstSeen map[string]time.Time
	leaf      contract.LeafCheck
	nearest   func(path string) string   // the did-you-mean of a misspelt budget
	under     func(path string) []string // the leaves below an inner budget
	cfg       *Config
	now       time.Time
}

// buildOutcome lists every row that differs from the replicated state.
// Allocation rows carry the start and stop times Nomad reports, which the
// server charges the ledger from (each allocation only past its
// ChargedThrough), so a pass repeated by this leader or the next charges
// nothing twice.
func buildOutcome(in rowsInput) server.Outcome {
	var out server.Outcome
	jobs := jobRows(in)
	for _, j := range jobs {
		old := in.view.Job(j.ID)
		if old != nil {
			j.UpdatedAt = old.UpdatedAt
		}
		if old == nil || !sameRow(*old, j) {
			j.UpdatedAt = in.now
			out.Jobs = append(out.Jobs, j)
		}
	}
	out.Allocs = allocRows(in, jobs)
	out.DeletedJobs = finishedJobs(in, jobs, out.Allocs)
	out.Nodes = nodeRows(in)
	out.Priorities, out.Decisions = writeRows(in)
	out.Queue = queueRows(in)
	out.Drains = drainRows(in)   // drain_rows.go
	out.Notices = noticeRows(in) // notice_rows.go
	out.HeldVictims = heldVictimRows(in)
	return out
}

// jobRows are the managed jobs Nomad has not finished, by policy job ID.
func jobRows(in rowsInput) map[string]state.Job {
	out := make(map[string]state.Job, len(in.snap.Jobs))
	for i := range in.snap.Jobs {
		pj := &in.snap.Jobs[i]
		c := pj.Contract
		row := state.Job{ID: pj.ID, Namespace: pj.Namespace, SubmittedAt: in.firstSeen[pj.ID],
			Contract: state.Contract{Budget: c.Budget, MinRuntime: c.MinRuntime, Resumable: c.Resumable,
				Priority: c.Priority, Reason: unallocatedReason(&c)}}
		row.Name = strings.TrimPrefix(pj.ID, pj.Namespace+"/")
		for _, g := range pj.Groups {
			row.GPUs += g.Count * g.GPUs
		}
		out[pj.ID] = row
	}
	return out
}

// unallocatedReason says why a job runs unallocated ("" when it does not).
func unallocatedReason(c *contract.Contract) string {
	if c.Allocated {
		return ""
	}
	var parts []string
	if c.MinRuntime <= 0 {
		parts = append(parts, "no positive min_runtime in the job's meta")
	}
	for _, w := range c.Warnings {
		parts = append(parts, w.Message)
	}
	if len(parts) == 0 {
		parts = append(parts, "no budget leaf named in the job's meta")
	}
	return strings.Join(parts, "; ")
}

// allocRows are the allocation lifecycles that changed: allocations of jobs
// allot tracks that started running, with Nomad's start and finish times.
// A row gone from Nomad (garbage-collected) is closed at its ChargedThrough:
// nothing beyond what was already charged is claimed for it.
func allocRows(in rowsInput, jobs map[string]state.Job) []state.Alloc {
	contracts := map[nomad.JobKey]contract.Contract{}
	tracked := func(k nomad.JobKey) (contract.Contract, bool) {
		if c, ok := contracts[k]; ok {
			return c, true
		}
		id := PolicyJobID(k)
		if _, ok := jobs[id]; !ok && in.view.Job(id) == nil {
			return contract.Contract{}, false
		}
		j, ok := in.state.Jobs[k]
		if !ok || !manages(&in.cfg.Policy, &j) {
			return contract.Contract{}, false
		}
		c := contract.ParseIn(id, j.Meta, in.cfg.Policy.Config, contract.Budgets{Leaf: in.leaf, Nearest: in.nearest, Under: in.under})
		contracts[k] = c
		return c, true
	}
	jobStart := map[nomad.JobKey]time.Time{}
	for _, a := range in.state.Allocs {
		if !a.Terminal() && !a.StartedAt.IsZero() && a.StartedAt.After(jobStart[a.Job]) {
			jobStart[a.Job] = a.StartedAt
		}
	}
	stopped := stoppedByAllot(in.results)
	var out []state.Alloc
	seen := map[string]bool{}
	for _, a := range in.state.Allocs {
		if a.StartedAt.IsZero() {
			continue // never ran: nothing to charge, no window
		}
		c, ok := tracked(a.Job)
		if !ok {
			continue
		}
		id := PolicyJobID(a.Job)
		old := in.view.Alloc(a.ID)
		if old == nil && !a.FinishedAt.IsZero() && !a.FinishedAt.After(firstSeenOf(in, id)) {
			continue // finished before this run of the job was first seen: charged then, or never ours
		}
		seen[a.ID] = true
		row := state.Alloc{ID: a.ID, JobID: id, NodeID: a.NodeID, GPUs: a.GPUs, StartedAt: a.StartedAt,
			StoppedAt: a.FinishedAt}
		if c.Allocated {
			row.Leaf = c.Budget
			row.ProtectedUntil = a.StartedAt.Add(c.Protected)
			if s := jobStart[a.Job]; !a.Terminal() && s.After(a.StartedAt) {
				row.ProtectedUntil = s.Add(c.Protected)
			}
		}
		if old != nil {
			row.Preemptions = old.Preemptions
			if a.Terminal() && !old.ProtectedUntil.IsZero() {
				row.ProtectedUntil = old.ProtectedUntil
			}
		}
		if stopped[a.ID] || (a.PreemptedBy != "" && row.Preemptions == 0) {
			row.Preemptions++
		}
		out = appendChanged(out, old, row)
	}
	for _, old := range in.view.Allocs() {
		if seen[old.ID] || !old.Running() || old.JobID == "" {
			continue
		}
		if _, ok := in.state.Allocs[old.ID]; ok {
			continue // in Nomad but no longer tracked: its job's rows are deleted below
		}
		row := *old
		row.StoppedAt = old.ChargedThrough
		if row.StoppedAt.Before(row.StartedAt) {
			row.StoppedAt = row.StartedAt
		}
		out = append(out, row)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func firstSeenOf(in rowsInput, id string) time.Time {
	if j := in.view.Job(id); j != nil {
		return j.SubmittedAt
	}
	return in.firstSeen[id]
}

func appendChanged(out []state.Alloc, old *state.Alloc, row state.Alloc) []state.Alloc {
	if old != nil {
		row.ChargedThrough, row.ChargedGPUSeconds = old.ChargedThrough, old.ChargedGPUSeconds
		if sameRow(*old, row) {
			return out
		}
	}
	return append(out, row)
}

// stoppedByAllot lists the allocations this pass stopped.
func stoppedByAllot(results []nomad.Outcome) map[string]bool {
	out := map[string]bool{}
	for _, o := range results {
		if o.Op.Kind == nomad.OpStop && o.Err == nil {
			for _, id := range o.Op.Allocs {
				out[id] = true
			}
		}
	}
	return out
}

// finishedJobs are tracked jobs Nomad finished, forgot or allot no longer
// manages, whose allocations are all stopped and charged through their stop:
// only then may their rows go, or a final charge would be lost. A requeued
// job keeps its rows (see requeued).
func finishedJobs(in rowsInput, jobs map[string]state.Job, allocs []state.Alloc) []string {
	pending := map[string]bool{}
	for _, a := range allocs {
		pending[a.JobID] = true
	}
	var newest map[nomad.JobKey]*nomad.Alloc // each job's newest allocation, built when first needed
	var out []string
	for _, j := range in.view.Jobs() {
		if _, ok := jobs[j.ID]; ok || pending[j.ID] {
			continue
		}
		if newest == nil {
			newest = newestAllocs(in.state)
		}
		if requeued(in.state, jobKeyOf(j.Namespace, j.ID), newest) {
			continue
		}
		done := true
		for _, a := range in.view.JobAllocs(j.ID) {
			if a.Running() || (a.Leaf != "" && a.GPUs > 0 && a.ChargedThrough.Before(a.StoppedAt.Truncate(time.Second))) {
				done = false
				break
			}
		}
		if done {
			out = append(out, j.ID)
		}
	}
	return out
}

// requeued reports whether Nomad still lists job k, not stopped and asking
// for allocations, and its newest allocation was stopped (by allot, a user
// or a drain) or preempted instead of finishing on its own: Nomad places
// such a job again without a new registration, and may show it dead until
// the evaluation that does so exists. Its rows stay meanwhile: deleted,
// they would come back as new rows when the job does, and its stopped
// allocations, already charged through their stop, would be charged again
// from their start (their finish lies after the job's SubmitTime, which
// allot's own priority write moved before the stop).
func requeued(st *nomad.State, k nomad.JobKey, newest map[nomad.JobKey]*nomad.Alloc) bool {
	j, ok := st.Jobs[k]
	if !ok || j.Stop || j.GPUs() == 0 {
		return false
	}
	a := newest[k]
	return a != nil && (a.DesiredStatus == "stop" || a.DesiredStatus == "evict")
}

// newestAllocs is each job's allocation with the highest CreateIndex.
func newestAllocs(st *nomad.State) map[nomad.JobKey]*nomad.Alloc {
	out := map[nomad.JobKey]*nomad.Alloc{}
	for id := range st.Allocs {
		a := st.Allocs[id]
		if n := out[a.Job]; n == nil || a.CreateIndex > n.CreateIndex {
			out[a.Job] = &a
		}
	}
	return out
}

// nodeRows are the GPU nodes whose drain state, reason, capacity or GPU
// instances (gpu_rows.go) changed.
func nodeRows(in rowsInput) []state.Node {
	acts := map[string]policy.NodeAction{}
	ok := map[string]bool{}
	for _, na := range in.plan.NodeActions {
		acts[na.Node] = na
	}
	for _, o := range in.results {
		if o.Op.Kind == nomad.OpEligibility && o.Err == nil {
			ok[o.Op.Node] = true
		}
	}
	reservedFor := map[string]policy.Reservation{}
	for _, r := range in.plan.Reservations {
		if !r.Expired {
			for _, n := range r.Nodes {
				reservedFor[n] = r
			}
		}
	}
	var out []state.Node
	for _, pn := range in.snap.Nodes {
		n := in.state.Nodes[pn.ID]
		row := state.Node{ID: pn.ID, Name: n.Name, Drain: policy.NodeNormal, Since: in.now,
			TotalGPUs: n.TotalGPUs(), HealthyGPUs: n.HealthyGPUs(), GPUs: gpuRows(&n)}
		old := in.view.Node(pn.ID)
		if old != nil {
			row.Drain, row.Reason, row.Since = old.Drain, old.Reason, old.Since
		}
		if na, has := acts[pn.ID]; has && ok[pn.ID] {
			if d := na.State(); d != row.Drain || old == nil {
				row.Drain, row.Since = d, in.now
			}
			row.Reason = na.Reason.String()
		}
		if r, ok := reservedFor[pn.ID]; ok && row.Drain == policy.NodeReserved {
			row.ReservedFor, row.ReservedUntil = r.Job, r.Since.Add(in.cfg.Policy.ReservationAge(len(r.Nodes))).UTC()
		}
		if old == nil || !sameRow(*old, row) {
			out = append(out, row)
		}
	}
	return out
}

// writeRows records the priorities Nomad accepted and one decision per
// write attempted, with its reason and, when it failed, why.
func writeRows(in rowsInput) ([]state.Priority, []state.Decision) {
	kinds := opKinds(in.plan)
	var prios []state.Priority
	var decs []state.Decision
	for i, o := range in.results {
		op := o.Op
		if op.Kind == nomad.OpSetPriority && o.Err == nil {
			prios = append(prios, state.Priority{JobID: PolicyJobID(op.Job), Priority: op.Priority,
				WrittenAt: in.now, ModifyIndex: op.ModifyIndex})
		}
		reason := op.Reason
		switch op.Kind {
		case nomad.OpSetPriority:
			reason = fmt.Sprintf("priority %d: %s", op.Priority, reason)
		case nomad.OpEligibility:
			reason = fmt.Sprintf("eligible=%t: %s", op.Eligible, reason)
		}
		if o.Err != nil {
			reason += " (not done: " + o.Err.Error() + ")"
		}
		d := state.Decision{At: in.now, Kind: kinds[i], NodeID: op.Node, Reason: reason}
		if op.Kind != nomad.OpEligibility {
			d.JobID = PolicyJobID(op.Job)
		}
		if op.Kind == nomad.OpStop || op.Kind == nomad.OpSignal {
			for _, a := range op.Allocs {
				d.AllocID = a
				decs = append(decs, d)
			}
			continue
		}
		decs = append(decs, d)
	}
	return prios, decs
}

// opKinds names the decision kind of each op of OpsFromPlan(p), in order.
func opKinds(p *policy.Plan) []string {
	var out []string
	for range p.SetPriorities {
		out = append(out, "priority")
	}
	for _, s := range p.Stops {
		switch s.Reason.Code {
		case policy.ReasonVictim, policy.ReasonVictimOwn, policy.ReasonVictimPartial:
			out = append(out, "preempt")
		case policy.ReasonPartialRelease:
			out = append(out, "release") // placed in part, its GPUs given back: for no job
		case policy.ReasonReservationStop:
			out = append(out, "reserve")
		default:
			out = append(out, "drain")
		}
	}
	for range p.Signals {
		out = append(out, "notice") // a checkpoint signal before a stop (issue 16)
	}
	for _, i := range lastNodeActions(p.NodeActions) {
		switch p.NodeActions[i].Kind {
		case policy.NodeReserve, policy.NodeRelease:
			out = append(out, "reserve")
		default:
			out = append(out, "drain")
		}
	}
	for range p.Evaluations {
		out = append(out, "evaluate")
	}
	return out
}

// queueRows is the plan's queue when it differs from the stored one (nil
// keeps the stored one).
func queueRows(in rowsInput) []state.QueueEntry {
	q := make([]state.QueueEntry, 0, len(in.plan.Explanations))
	for i := range in.plan.Explanations {
		e := &in.plan.Explanations[i]
		row := state.QueueEntry{JobID: e.Job, Leaf: e.Budget, Band: e.Band.String(), Priority: e.Priority,
			Position: e.Position, Explanation: explanationText(e)}
		if e.Rank != nil {
			row.SortMetric = budgets.Ratio(e.Rank.Metric)
			row.Standing = state.NewStanding(e.Rank)
		}
		row.ProtectedUntil, row.FreeAt = e.ProtectedUntil.UTC(), e.FreeAt.UTC()
		q = append(q, row)
	}
	old := in.view.Queue()
	if len(old) == len(q) {
		same := true
		byID := make(map[string]*state.QueueEntry, len(old))
		for _, o := range old {
			byID[o.JobID] = o
		}
		for _, row := range q {
			o := byID[row.JobID]
			if o == nil {
				same = false
				break
			}
			cp := *o
			cp.PlannedAt = time.Time{}
			if !sameRow(cp, row) {
				same = false
				break
			}
		}
		if same {
			return nil
		}
	}
	return q
}

// explanationText is what `allot queue` and `allot explain` print.
func explanationText(e *policy.Explanation) string {
	var b strings.Builder
	b.WriteString(e.Reason.String())
	if e.Wait != policy.WaitNone {
		b.WriteString("; waiting for " + e.Wait.String())
		if e.WaitsFor != "" {
			b.WriteString(" (" + e.WaitsFor + ")")
		}
	}
	switch {
	case !e.FreeAt.IsZero():
		b.WriteString(" (GPUs free at " + e.FreeAt.UTC().Format(time.RFC3339) + ")")
	case e.Wait.Timed():
		b.WriteString(" (when its GPUs free up is unknown)")
	}
	if len(e.ReservedNodes) > 0 {
		b.WriteString("; reserved nodes: " + strings.Join(e.ReservedNodes, ", "))
	}
	if e.Rank != nil {
		fmt.Fprintf(&b, "; budget %s at %.0f%% of its share", e.Budget, 100*e.Rank.ServedRatio())
	}
	for _, w := range e.Warnings {
		b.WriteString("; warning: " + w.String())
	}
	return b.String()
}

// sameRow compares rows by their encoding, so that equal instants in
// different time zones compare equal.
func sameRow(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}
