package policy

// tier gives every managed job its band and target priority and plans the
// writes (rules 1-4):
//
//	protected (inside the window, or starting):  Protected
//	running (past the window) or placed in part:  Running
//	pending at position p:                        pendingLevel(p)
//	victim of time slicing for job J:             min(pendingLevel(its position), priority(J) - 1), >= Pending.Low
//	unallocated:                                  Unallocated.High
//
// A write is planned when the job's priority is not its target, except that
// a pending job already inside the pending band is rewritten only when
// |target - priority| >= Hysteresis, and an unallocated job already inside
// the unallocated band is left where it is. Victims are done last, so that
// they land below the final priority of the job they make room for.
func (d *Decider) tier() {
	for j := range d.jobs {
		info := &d.jobs[j]
		if info.state == jsUnmanaged || info.victimFor >= 0 {
			continue
		}
		d.target(int32(j))
		d.write(int32(j))
	}
	for j := range d.jobs {
		if d.jobs[j].state != jsUnmanaged && d.jobs[j].victimFor >= 0 {
			d.target(int32(j))
			d.write(int32(j))
		}
	}
}

func (d *Decider) target(j int32) {
	info := &d.jobs[j]
	c := &d.cfg
	switch info.state {
	case jsProtected:
		info.target, info.reason = c.Protected, Reason{Code: ReasonProtected, At: info.windowEnd}
		d.wakeAt(info.windowEnd)
	case jsStarting:
		info.target, info.reason = c.Protected, Reason{Code: ReasonStarting}
	case jsPartial:
		info.target, info.reason = c.Running, Reason{Code: ReasonPartial, N: int(info.missing)}
		if info.wait == WaitNone {
			info.wait = WaitPartial
		}
	case jsPending:
		info.target, info.reason = d.pendingLevel(info.position), Reason{Code: ReasonPending, N: int(info.position)}
	case jsUnallocated:
		info.target, info.reason = c.Unallocated.High, Reason{Code: ReasonUnallocated}
		if info.gone {
			info.reason = Reason{Code: ReasonBudgetGone, Detail: d.snap.Jobs[j].Contract.Budget}
		}
	case jsRunning:
		if info.victimFor < 0 {
			info.target, info.reason = c.Running, Reason{Code: ReasonRunning, At: info.windowEnd}
			break
		}
		level := d.pendingLevel(d.victimPosition(j))
		level = min(level, d.jobs[info.victimFor].final-1)
		info.target = max(level, c.Pending.Low)
		info.reason = Reason{Code: ReasonVictimLowered, Job: d.snap.Jobs[info.victimFor].ID}
	}
}

// write plans the SetPriority for job j if its priority must change, and
// records the priority it has once the plan is applied.
func (d *Decider) write(j int32) {
	info, job := &d.jobs[j], &d.snap.Jobs[j]
	cur := job.Priority
	change := cur != info.target
	switch {
	case info.state == jsPending:
		change = !d.cfg.Pending.contains(cur) || abs(info.target-cur) >= d.cfg.Hysteresis
	case info.state == jsUnallocated:
		change = !d.cfg.Unallocated.contains(cur)
	}
	info.final = cur
	if !change {
		return
	}
	info.final = info.target
	r := info.reason
	if job.LastWrittenPriority != 0 && cur != job.LastWrittenPriority {
		r = Reason{Code: ReasonUserPriority, N: cur}
	}
	d.plan.SetPriorities = append(d.plan.SetPriorities, SetPriority{Job: job.ID, Namespace: job.Namespace,
		From: cur, To: info.target, ModifyIndex: job.ModifyIndex, Reason: r})
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
