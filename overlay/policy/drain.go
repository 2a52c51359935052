package policy

import "time"

// ReturnedInNomad is the Detail of a ReasonNodeReturned when the operator
// made the node eligible in Nomad rather than through allot.
const ReturnedInNomad = "made eligible in Nomad: nomad node eligibility -enable"

// drain handles unhealthy nodes (rule 9), Nomad drains (rule 10) and the
// return of repaired nodes. It runs before the placement model is built, so
// nodes it takes out of service are not counted as capacity. It looks only
// at the nodes it may act on (Decider.drainNodes, in node order): a healthy
// node in service, not draining, that never turned healthy needs nothing.
func (d *Decider) drain() {
	d.recovered = -1
	for _, i := range d.drainNodes {
		n, ni := &d.snap.Nodes[i], &d.nodes[i]
		switch {
		case !n.Healthy:
			if n.Eligible || (n.State != NodeDraining && n.State != NodeDrained) {
				d.nodeAction(n.ID, NodeIneligible, Reason{Code: ReasonNodeUnhealthy, Detail: n.HealthReason})
			}
			ni.eligible = false
		case n.State == NodeDraining || n.State == NodeDrained:
			d.returnNode(i)
		case !n.HealthySince.IsZero() && n.HealthySince.After(d.snap.LastDecision) && !n.HealthySince.After(d.now):
			d.recovered = i
		}
		if ni.draining {
			d.moveOff(i)
		}
		if !n.Healthy && n.State != NodeDrained && d.empty(i) {
			d.nodeAction(n.ID, NodeMarkDrained, Reason{Code: ReasonNodeDrained})
		}
	}
}

// returnNode puts a healthy node that allot drained back in service once
// it has been healthy for DrainReturnAfter (0: an operator does it), or at
// once when an operator asked for it. An operator who marked it eligible in
// Nomad (nomad node eligibility -enable) has returned it already: the plan
// records that return, so allot's memory of the node (its state, what the
// caller keeps) agrees with Nomad and the drain lifecycle. Nomad has the
// node eligible, so applying the action writes nothing.
func (d *Decider) returnNode(i int32) {
	n, ni := &d.snap.Nodes[i], &d.nodes[i]
	if n.Eligible {
		d.nodeAction(n.ID, NodeEligible, Reason{Code: ReasonNodeReturned, At: n.HealthySince, Detail: ReturnedInNomad})
		d.recovered = i
		return
	}
	if n.ReturnRequested {
		d.nodeAction(n.ID, NodeEligible, Reason{Code: ReasonNodeReturned, At: n.HealthySince})
		ni.eligible = true
		d.recovered = i
		return
	}
	if d.cfg.DrainReturnAfter <= 0 {
		return
	}
	back := n.HealthySince.Add(d.cfg.DrainReturnAfter)
	if n.HealthySince.IsZero() || !back.After(d.now) {
		d.nodeAction(n.ID, NodeEligible, Reason{Code: ReasonNodeHealthy, At: n.HealthySince})
		ni.eligible = true
		d.recovered = i
		return
	}
	d.wakeAt(back)
}

// empty reports whether no allocation holds GPUs on node i, counting those
// this plan stops as still there (they leave before the next decision).
func (d *Decider) empty(i int32) bool {
	for _, ai := range d.nodeAlloc.row(i) {
		if d.ap[ai].holds() {
			return false
		}
	}
	return true
}

// moveOff stops the managed jobs' allocations on an unhealthy or draining
// node, each when it may be stopped:
//
//	unallocated, placed in part, or past its window:  now
//	inside its protected window:                       at the window's end
//	starting (window not open yet):                    not before it opens
//
// and under a Nomad drain with a deadline, never later than
// deadline - DrainLead (Nomad would kill it without a replacement).
func (d *Decider) moveOff(i int32) {
	n := &d.snap.Nodes[i]
	var deadline time.Time
	if n.Drain != nil && !n.Drain.Deadline.IsZero() {
		deadline = n.Drain.Deadline.Add(-d.cfg.DrainLead)
	}
	for _, ai := range d.nodeAlloc.row(i) {
		j := d.allocJob[ai]
		if j < 0 || !d.ap[ai].live() {
			continue
		}
		info, job := &d.jobs[j], d.jp[j]
		if info.state == jsUnmanaged || info.movedOn == i+1 {
			continue
		}
		info.movedOn = i + 1
		if n.Healthy && job.Type != "" && job.Type != "batch" {
			continue // Nomad's drain migrates service jobs itself
		}
		var at time.Time // zero: no known time
		switch info.state {
		case jsProtected:
			at = info.windowEnd
		case jsStarting:
		default:
			at = d.now
		}
		if !deadline.IsZero() && (at.IsZero() || deadline.Before(at)) {
			at = deadline
		}
		if at.IsZero() {
			continue
		}
		if at.After(d.now) && !d.noticeAhead(j, at) { // notice.go: signalled its notice before at
			continue
		}
		info.moving = true
		r := Reason{Code: ReasonDrainStop, Node: n.ID, At: info.windowEnd}
		switch {
		case n.Drain != nil:
			r = Reason{Code: ReasonNomadDrain, Node: n.ID, At: n.Drain.Deadline}
		case info.state == jsUnallocated:
			r = Reason{Code: ReasonDrainUnallocated, Node: n.ID}
		}
		d.plan.Stops = append(d.plan.Stops, StopJob{Job: job.ID, Namespace: job.Namespace,
			Allocs: d.liveAllocs(j, i), Reason: r})
	}
}

func (d *Decider) nodeAction(node string, k NodeActionKind, r Reason) {
	d.plan.NodeActions = append(d.plan.NodeActions, NodeAction{Node: node, Kind: k, Reason: r})
}
