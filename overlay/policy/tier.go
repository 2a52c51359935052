package policy

import (
	"slices"
	"time"
)

// tier gives every managed job its band and target priority and plans the
// writes (rules 1-4):
//
//	protected (inside the window, or starting):  Protected
//	running (past the window) or placed in part:  Running
//	pending at position p, leaf l:                pendingLevel(gapPosition(p), l), then levels (hysteresis, order)
//	pending gang that cannot be placed whole (rule 5d): Pending.Low
//	pending job victims are stopped for (rule 5f):    the band's top (placesFirst)
//	requeued job whose restart rule 5e holds back:    restartLevel (FreeLevels().Low + PreemptionGap - 1)
//	victim stopped for job B (fresh or held):     victimLevel: min(pendingLevel(its position + shift, its leaf), final(B) - PreemptionGap, ceiling)
//	unallocated:                                  FreeLevels, by the work a stop would lose (free.go)
//
// A write is planned when the job's priority is not its target, except that
// pending jobs get the levels chosen by levels, and a victim keeps a
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
	// Victims were written last; the other writes go in step order
	// (WriteStep), each step in job order.
	slices.SortStableFunc(d.plan.SetPriorities, func(a, b SetPriority) int { return int(a.Step) - int(b.Step) })
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
		if d.restartLoses(j) && d.stopsAgain(j) >= 0 { // rule 5e (restart.go): its replacement would be stopped again
			info.target, info.restartHeld = c.restartLevel(), true
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
		switch {
		case info.givenBack:
			// Released (rule 5c): it waits below the jobs of its
			// standing, so Nomad places the jobs before it first.
			info.target = d.cfg.releasedLevel()
			info.reason = d.plan.Stops[slices.IndexFunc(d.plan.Stops, func(s StopJob) bool { return s.Job == d.jp[j].ID })].Reason
		case info.keptBack:
			// Released earlier and placed in part again (its
			// replacements took GPUs no job before it could): it stays
			// there until the hold ends, within reach of those jobs.
			info.target, info.reason = d.cfg.releasedLevel(), d.releaseReason(j)
		}
		if info.wait == WaitNone {
			info.wait = WaitPartial
		}
	case jsPending:
		info.target, info.reason = d.pendingLevel(d.gapPosition(info.position), info.leaf), Reason{Code: ReasonPending, N: int(info.position)}
		if info.target != d.pendingLevel(info.position, info.leaf) { // moved down by a reservation (not at the bottom anyway)
			info.reason = Reason{Code: ReasonPendingReserved, N: int(info.position), Job: d.jp[d.gapAbove(info.position)].ID}
		}
		if info.reason.Code == ReasonPending && !d.jp[j].Contract.Resumable {
			info.reason.Code = ReasonPendingRestart
		}
	case jsUnallocated:
		info.target, info.reason = c.freePriority(d.jp[j].Priority, info.free, d.jp[j].Contract.Resumable, d.now.UnixNano()), Reason{Code: ReasonUnallocated}
		if info.gone {
			info.reason = Reason{Code: ReasonBudgetGone, Detail: d.jp[j].Contract.Budget}
		}
	case jsRunning:
		info.target, info.reason = c.Running, Reason{Code: ReasonRunning, At: info.windowEnd}
		if !d.jp[j].Contract.Resumable {
			info.reason.Code = ReasonRunningRestart
		}
	}
	if info.released >= 0 && info.releasedBy != ReasonNone {
		info.reason = Reason{Code: info.releasedBy, Job: d.jp[info.released].ID, At: info.heldSince}
	}
	// notice.go: signalled, stopped at the deadline
	d.noticeReason(j, &info.reason)
	if info.whole && info.state == jsPending { // rule 5d: below every job Nomad can place (levels leaves it out)
		info.target, info.level = c.Pending.Low, c.Pending.Low
		info.reason = Reason{Code: ReasonPendingWhole, N: int(info.position)}
	}
	if d.placesFirst(j) { // rule 5f (first.go): Nomad must give it the GPUs its victims free (levels leaves it out)
		top := d.gapBand().High
		if info.target != top {
			info.reason = Reason{Code: ReasonPendingFirst, N: int(info.position), Detail: info.reason.Detail}
			if !d.jp[j].Contract.Resumable {
				info.reason.Detail = notResumable
			}
		}
		info.target, info.level, info.first = top, top, true
	}
	if info.restartHeld && info.state == jsPending { // rule 5e (restart.go): at restartLevel, evicting no running work (levels leaves it out)
		info.target, info.level = c.restartLevel(), c.restartLevel()
		info.reason = Reason{Code: info.restartWhy, N: int(info.position), Job: d.jp[info.waitFor].ID}
		if info.restartWhy == ReasonPendingRestartRun {
			info.reason.At, info.reason.Detail = info.freeAt, shortDuration(d.jp[j].LastRun)
		}
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
		change = cur > ceil || cur <= to-c.Hysteresis || cur < c.Pending.Low-c.PreemptionGap && !info.restartHeld || info.restartHeld && cur != to
	case info.state == jsPending:
		to = info.level
		change = cur != to
	}
	info.final = cur
	if !change {
		return
	}
	if info.victimOf() < 0 && d.placing(j) {
		return // written once the placement is done (its allocation's or evaluation's event wakes the pass)
	}
	info.final = to
	r := info.reason
	if job.LastWrittenPriority != 0 && cur != job.LastWrittenPriority {
		r = Reason{Code: ReasonUserPriority, N: cur}
	}
	step := StepShield
	switch {
	case info.victimOf() >= 0:
		step = StepLower
	case info.missing > 0:
		step = StepPlace
	}
	d.plan.SetPriorities = append(d.plan.SetPriorities, SetPriority{Job: job.ID, Namespace: job.Namespace,
		From: cur, To: to, ModifyIndex: job.ModifyIndex, Reason: r, Step: step})
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// placing reports whether job j's placement is in flight in Nomad: an
// evaluation of it is pending, or an allocation of it waits for the
// allocations Nomad preempted for it to stop. A priority write then makes
// Nomad update the job while the allocation waits, which it does by
// replacing the allocation ("alloc is being updated due to job update"):
// the job starts late and Nomad may evict more (observed with Nomad 2.0.6).
// A write to an allocation placed on free GPUs, or whose victims are gone,
// is done in place, and is not held: a job left at a low priority while it
// starts could itself be preempted. So the write waits for the placement,
// at most Settle from its start (Settle 0 turns the wait off); the event
// that ends it wakes the next decision, and the bound is a wake of its own.
// An allocation placed at an unknown time waits until its victims stop.
// Victims are exempt: they must go below the job they make room for at once.
func (d *Decider) placing(j int32) bool {
	if d.cfg.Settle <= 0 {
		return false
	}
	var until time.Time // the end of the wait; zero: until the placement ends
	inFlight, bounded := false, true
	since := func(t time.Time) {
		switch end := t.Add(d.cfg.Settle); {
		case t.IsZero():
			inFlight, bounded = true, false
		case d.now.Before(end):
			inFlight = true
			if end.After(until) {
				until = end
			}
		}
	}
	if t := d.jp[j].EvaluatingSince; !t.IsZero() {
		since(t)
	}
	for _, ai := range d.jobAllocs.row(j) {
		if a := d.ap[ai]; a.live() && a.ClientStatus == ClientPending && a.WaitsForVictims {
			since(a.PlacedAt)
		}
	}
	if inFlight && bounded {
		d.wakeAt(until)
	}
	return inFlight
}
