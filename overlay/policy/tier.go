package policy

// tier gives every managed job its band and target priority and plans the
// writes (rules 1-4):
//
//	protected (inside the window, or starting):  Protected
//	running (past the window) or placed in part:  Running
//	pending at position p:                        pendingLevel(gapPosition(p)), then levels (hysteresis, order)
//	victim stopped for job B (fresh or held):     victimLevel: min(pendingLevel(its position + shift), final(B) - PreemptionGap, ceiling)
//	unallocated:                                  Unallocated.High
//
// A write is planned when the job's priority is not its target, except that
// pending jobs get the levels chosen by levels, an unallocated job already
// inside the unallocated band is left where it is, and a victim keeps a
// priority at most final(B) - PreemptionGap and less than Hysteresis below
// its target. Victims are done last, so that they land below the final
// priority of the job they make room for. Jobs sorting after a job that
// holds a reservation sit a preemption gap below it (reserve.go).
func (d *Decider) tier() {
	d.gapHolders()
	for j := range d.jobs {
		info := &d.jobs[j]
		if info.state != jsUnmanaged && info.victimOf() < 0 {
			d.target(int32(j))
		}
	}
	d.levels()
	for j := range d.jobs {
		info := &d.jobs[j]
		if info.state != jsUnmanaged && info.victimOf() < 0 {
			d.write(int32(j))
		}
	}
	for j := range d.jobs {
		if d.jobs[j].state != jsUnmanaged && d.jobs[j].victimOf() >= 0 {
			d.target(int32(j))
			d.write(int32(j))
		}
	}
}

func (d *Decider) target(j int32) {
	info := &d.jobs[j]
	c := &d.cfg
	if b := info.victimOf(); b >= 0 {
		info.target = d.victimLevel(j, b)
		info.reason = Reason{Code: ReasonVictimLowered, Job: d.jp[b].ID}
		if info.victimFor < 0 {
			info.reason = Reason{Code: ReasonVictimHeld, Job: d.jp[b].ID, At: info.heldSince}
		}
		if info.landed {
			info.reason = Reason{Code: ReasonReservationLanded, Job: d.jp[b].ID, At: info.heldSince}
		}
		return
	}
	switch info.state {
	case jsProtected:
		info.target, info.reason = c.Protected, Reason{Code: ReasonProtected, At: info.windowEnd}
		if !d.jp[j].Contract.Resumable {
			info.reason.Code = ReasonProtectedRestart
		}
		d.wakeAt(info.windowEnd)
	case jsStarting:
		info.target, info.reason = c.Protected, Reason{Code: ReasonStarting}
	case jsPartial:
		info.target, info.reason = c.Running, Reason{Code: ReasonPartial, N: int(info.missing)}
		if info.wait == WaitNone {
			info.wait = WaitPartial
		}
	case jsPending:
		info.target, info.reason = d.pendingLevel(d.gapPosition(info.position)), Reason{Code: ReasonPending, N: int(info.position)}
		if info.target != d.pendingLevel(info.position) { // moved down by a reservation (not at the bottom anyway)
			info.reason = Reason{Code: ReasonPendingReserved, N: int(info.position), Job: d.jp[d.gapAbove(info.position)].ID}
		}
	case jsUnallocated:
		info.target, info.reason = c.Unallocated.High, Reason{Code: ReasonUnallocated}
		if info.gone {
			info.reason = Reason{Code: ReasonBudgetGone, Detail: d.jp[j].Contract.Budget}
		}
	case jsRunning:
		info.target, info.reason = c.Running, Reason{Code: ReasonRunning, At: info.windowEnd}
		if !d.jp[j].Contract.Resumable {
			info.reason.Code = ReasonRunningRestart
		}
	}
	if info.released >= 0 {
		info.reason = Reason{Code: ReasonVictimReleased, Job: d.jp[info.released].ID, At: info.heldSince}
	}
	if r, ok := d.noticeReason(j); ok {
		info.reason = r // notice.go: signalled, stopped at the deadline
	}
}

// write plans the SetPriority for job j if its priority must change, and
// records the priority it has once the plan is applied.
func (d *Decider) write(j int32) {
	info, job := &d.jobs[j], d.jp[j]
	c := &d.cfg
	cur, to := job.Priority, info.target
	change := cur != to
	switch {
	case info.victimOf() >= 0:
		ceil := d.victimCeiling(j, info.victimOf())
		change = cur > ceil || cur <= to-c.Hysteresis || cur < c.Pending.Low-c.PreemptionGap
	case info.state == jsPending:
		to = info.level
		change = cur != to
	case info.state == jsUnallocated:
		change = !c.Unallocated.contains(cur)
	}
	info.final = cur
	if !change {
		return
	}
	info.final = to
	r := info.reason
	if job.LastWrittenPriority != 0 && cur != job.LastWrittenPriority {
		r = Reason{Code: ReasonUserPriority, N: cur}
	}
	d.plan.SetPriorities = append(d.plan.SetPriorities, SetPriority{Job: job.ID, Namespace: job.Namespace,
		From: cur, To: to, ModifyIndex: job.ModifyIndex, Reason: r})
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
