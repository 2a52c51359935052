package reconcile

import (
	"slices"
	"sort"
	"time"

	"github.com/allot-sched/allot/overlay/nomad"
	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/state"
)

// drainRows observes, after a pass's writes, every GPU node that is out of
// service for a drain (a faulty GPU, or `nomad node drain`) or that allot
// still holds in one. The replicated state derives the drain lifecycle
// (cordoned, draining, drained, returned) from these observations.
func drainRows(in rowsInput) []state.NodeObservation {
	eligible := map[string]bool{}
	for _, o := range in.results {
		if o.Op.Kind == nomad.OpEligibility && o.Err == nil {
			eligible[o.Op.Node] = o.Op.Eligible
		}
	}
	returned := map[string]policy.NodeAction{}
	for _, na := range in.plan.NodeActions {
		if na.Kind == policy.NodeEligible {
			returned[na.Node] = na
		}
	}
	stopped := stoppedByAllot(in.results)
	leaves := windowEnds(in)
	var out []state.NodeObservation
	for i := range in.snap.Nodes {
		pn := &in.snap.Nodes[i]
		rec := in.view.Drain(pn.ID)
		if pn.Healthy && pn.Drain == nil && (rec == nil || !rec.Active()) {
			continue
		}
		n := in.state.Nodes[pn.ID]
		o := state.NodeObservation{NodeID: pn.ID, Name: n.Name, Healthy: pn.Healthy, Fault: pn.HealthReason,
			Eligible: n.Eligible, HealthyGPUs: n.HealthyGPUs()}
		if e, ok := eligible[pn.ID]; ok {
			o.Eligible = e
			if na, ok := returned[pn.ID]; ok && e {
				o.ReturnedBy, o.ReturnReason = state.ReturnedByPolicy, na.Reason.String()
				if na.Reason.Code == policy.ReasonNodeReturned {
					o.ReturnedBy = state.ReturnedByOperator
				}
			}
		}
		if n.Drain != nil {
			o.NomadDrain, o.Deadline = true, n.Drain.Deadline
		}
		o.Allocs, o.Requeued = nodeAllocs(in, pn.ID, stopped, leaves, o.Deadline)
		o.ForeignStops = foreignStops(in, rec, stopped, n.Drain != nil)
		out = append(out, o)
	}
	return out
}

// windowEnds maps each managed job to the end of its protected window, when
// it is still ahead: a drain moves the job then.
func windowEnds(in rowsInput) map[string]time.Time {
	out := map[string]time.Time{}
	for i := range in.plan.Explanations {
		e := &in.plan.Explanations[i]
		if e.Band == policy.BandProtected && e.ProtectedUntil.After(in.now) {
			out[e.Job] = e.ProtectedUntil
		}
	}
	return out
}

// nodeAllocs lists the allocations holding GPUs on a node, each with when
// allot moves it, and those this pass stopped off it.
func nodeAllocs(in rowsInput, node string, stopped map[string]bool, ends map[string]time.Time, deadline time.Time) ([]state.DrainAlloc, []string) {
	managed := map[string]*policy.Job{}
	for i := range in.snap.Jobs {
		managed[in.snap.Jobs[i].ID] = &in.snap.Jobs[i]
	}
	lead := in.cfg.Policy.DrainLead
	var allocs []state.DrainAlloc
	var requeued []string
	for _, a := range in.state.Allocs {
		if a.NodeID != node || a.GPUs <= 0 || (a.ClientStatus != "pending" && a.ClientStatus != "running") {
			continue
		}
		id := PolicyJobID(a.Job)
		da := state.DrainAlloc{ID: a.ID, GPUs: a.GPUs}
		if j, ok := managed[id]; ok {
			da.JobID = id
			switch {
			case stopped[a.ID] || a.DesiredStatus != "run":
				da.LeavesAt = in.now
			case !ends[id].IsZero():
				da.LeavesAt = ends[id]
			case !j.Contract.Allocated:
				da.LeavesAt = in.now
			}
			if !deadline.IsZero() && (j.Type == "" || j.Type == "batch") {
				if last := deadline.Add(-lead); da.LeavesAt.IsZero() || last.Before(da.LeavesAt) {
					da.LeavesAt = last
				}
			}
		}
		if stopped[a.ID] {
			requeued = append(requeued, a.ID)
		}
		allocs = append(allocs, da)
	}
	sort.Slice(allocs, func(i, j int) bool { return allocs[i].ID < allocs[j].ID })
	sort.Strings(requeued)
	return allocs, requeued
}

// foreignStops are allocations the drain record listed that someone other
// than allot stopped: an operator, or Nomad's drain deadline killing batch
// work. Nomad's drain migrating service allocations is its own rule, not an
// operator's hand, and does not count.
func foreignStops(in rowsInput, rec *state.DrainRecord, stopped map[string]bool, nomadDrain bool) []string {
	if rec == nil {
		return nil
	}
	var out []string
	for _, da := range rec.Allocs {
		a, ok := in.state.Allocs[da.ID]
		if !ok || stopped[da.ID] || a.DesiredStatus != "stop" || slices.Contains(rec.Requeued, da.ID) {
			continue
		}
		if j, ok := in.state.Jobs[a.Job]; ok && nomadDrain && j.Type != "batch" {
			continue
		}
		out = append(out, da.ID)
	}
	return out
}

// returnRequests are the nodes an operator asked back with `allot nodes
// return` that have not returned yet.
func returnRequests(v *state.View) map[string]bool {
	out := map[string]bool{}
	for _, r := range v.Drains() {
		if r.ReturnRequested && r.Active() {
			out[r.NodeID] = true
		}
	}
	return out
}
