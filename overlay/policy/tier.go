package policy

import "math"

// tier gives every managed job its band and target priority and plans the
// writes (rules 1-4):
//
//	protected (inside the window, or starting):  Protected
//	running (past the window) or placed in part:  Running
//	pending at position p:                        pendingLevel(p), then levels (hysteresis, order)
//	victim stopped for job B (fresh or held):     victimLevel: min(pendingLevel(its position), final(B) - PreemptionGap)
//	unallocated:                                  Unallocated.High
//
// A write is planned when the job's priority is not its target, except that
// pending jobs get the levels chosen by levels, an unallocated job already
// inside the unallocated band is left where it is, and a victim keeps a
// priority at most final(B) - PreemptionGap and less than Hysteresis below
// its target. Victims are done last, so that they land below the final
// priority of the job they make room for.
func (d *Decider) tier() {
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
		info.reason = Reason{Code: ReasonVictimLowered, Job: d.snap.Jobs[b].ID}
		if info.victimFor < 0 {
			info.reason = Reason{Code: ReasonVictimHeld, Job: d.snap.Jobs[b].ID, At: info.heldSince}
		}
		return
	}
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
		info.target, info.reason = c.Running, Reason{Code: ReasonRunning, At: info.windowEnd}
	}
	if info.released >= 0 {
		info.reason = Reason{Code: ReasonVictimReleased, Job: d.snap.Jobs[info.released].ID, At: info.heldSince}
	}
}

// write plans the SetPriority for job j if its priority must change, and
// records the priority it has once the plan is applied.
func (d *Decider) write(j int32) {
	info, job := &d.jobs[j], &d.snap.Jobs[j]
	c := &d.cfg
	cur, to := job.Priority, info.target
	change := cur != to
	switch {
	case info.victimOf() >= 0:
		ceil := d.jobs[info.victimOf()].final - c.PreemptionGap
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

// levelScratch is the memory of levels, kept between decisions.
type levelScratch struct {
	cost   []int64 // by window offset: the least cost from this job down, at that level
	best   []int64 // by window offset of the next job: the least cost at or below that level
	arg    []int32 // the level giving best
	back   []int32 // by job in order and window offset: the next job's level
	t, cur []int32 // by job in order: target and current priority
}

// levels chooses the level written or kept for every pending job (rule 3
// with hysteresis). Let pending jobs 1..m be in order, t_i = pendingLevel
// of job i's position, c_i its priority, h = Hysteresis - 1. The levels f_i
// are, among the assignments with
//
//	f_i in the pending band and |f_i - t_i| <= h
//	f_i > f_{i+1} when t_i > t_{i+1}, f_i >= f_{i+1} when t_i = t_{i+1}
//
// the one that rewrites the fewest jobs (keeping f_i = c_i is free when c_i
// is in the band and |t_i - c_i| <= h), then with the least sum of
// |f_i - t_i|, then with higher levels first. So a job never sorts below
// another at a level at or above the other's while their targets differ,
// jobs share a level only at the bottom of the band where their targets do
// (Nomad serves those first come, first served), and the same inputs keep
// every level: the current levels, once written, are the cheapest
// assignment. Found by dynamic programming from the last job up: O(m * (2h+1)).
func (d *Decider) levels() {
	ls := &d.lv
	pend := d.pend[:0]
	ls.t, ls.cur = ls.t[:0], ls.cur[:0]
	for _, k := range d.order {
		if info := &d.jobs[k.job]; info.state == jsPending && info.heldFor < 0 {
			pend = append(pend, k.job)
			ls.t = append(ls.t, int32(info.target))
			ls.cur = append(ls.cur, int32(d.snap.Jobs[k.job].Priority))
		}
	}
	d.pend = pend
	m := len(pend)
	if m == 0 {
		return
	}
	band := d.cfg.Pending
	h := max(d.cfg.Hysteresis-1, 0)
	w := min(2*h+1, band.Levels())
	start := func(t int) int { return max(band.Low, min(t-h, band.High-w+1)) }
	const inf = int64(math.MaxInt64 / 4)
	const rewrite = int64(1) << 40 // more than any sum of distances
	ls.cost = resize(ls.cost, w)
	ls.best, ls.arg = resize(ls.best, w), resize(ls.arg, w)
	ls.back = resize(ls.back, m*w)
	for i := m - 1; i >= 0; i-- {
		t, cur := int(ls.t[i]), int(ls.cur[i])
		s := start(t)
		keep := band.contains(cur) && abs(t-cur) <= h
		var strict bool
		var sNext int
		if i+1 < m {
			tNext := int(ls.t[i+1])
			strict, sNext = t > tNext, start(tNext)
		}
		for o := 0; o < w; o++ {
			f := s + o
			if abs(f-t) > h {
				ls.cost[o] = inf
				continue
			}
			own := rewrite + int64(abs(f-t))
			if keep && f == cur {
				own = 0
			}
			if i+1 == m {
				ls.cost[o] = own
				continue
			}
			limit := f
			if strict {
				limit--
			}
			k := min(limit-sNext, w-1)
			if k < 0 || ls.best[k] >= inf {
				ls.cost[o] = inf
				continue
			}
			ls.cost[o] = own + ls.best[k]
			ls.back[i*w+o] = ls.arg[k]
		}
		// best[k]: the least cost of this job at a level <= s+k (ties: the higher level).
		least, arg := inf, int32(-1)
		for o := 0; o < w; o++ {
			if ls.cost[o] <= least && ls.cost[o] < inf {
				least, arg = ls.cost[o], int32(s+o)
			}
			ls.best[o], ls.arg[o] = least, arg
		}
	}
	// The first job takes its cheapest level (ties: the higher); the rest
	// follow the choices made for it.
	f := int(ls.arg[w-1])
	for i := 0; i < m; i++ {
		d.jobs[pend[i]].level = f
		if i+1 < m {
			f = int(ls.back[i*w+f-start(int(ls.t[i]))])
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
