package policy

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// place walks the waiting allocated jobs in order (partially placed first,
// then pending by position) through the placement model. A job that fits
// takes its GPUs, so lower jobs see what is left, as Nomad places blocked
// jobs highest first (docs/nomad-facts.md d). For the first MaxEvaluations jobs that
// do not fit, time slicing looks for victims (rule 5); the first job for
// which it finds none may get a reservation (rule 7).
func (d *Decider) place() {
	examined := 0
	d.sliceFailed = d.sliceFailed[:0]
	d.reserveFor = d.reserveFor[:0]
	d.starved = d.starved[:0]
	d.active = 0
	for _, r := range d.plan.Reservations {
		if !r.Expired {
			d.active++
		}
	}
	d.smallestAsks()
	for oi, k := range d.order {
		j := k.job
		info := &d.jobs[j]
		if d.tl != nil && !d.tl.crossed && d.tl.first > 0 && d.pastTail(k) {
			d.crossTail(examined)
		}
		if info.fits {
			continue // placed on its released reservation
		}
		if info.victimFor >= 0 {
			continue // placed in part and stopped for a job placed in part before it
		}
		job := d.jp[j]
		d.asks = d.jobAsks(j, d.asks)
		if info.reserved >= 0 {
			info.wait = WaitReserved
			if info.state == jsPending {
				d.waitWhole(j) // a gathering reservation's gang waits whole while it gathers
			}
			continue
		}
		if info.heldFor >= 0 {
			info.wait = WaitHeld // its replacement waits below the job it made room for
			continue
		}
		if info.holding > 0 {
			d.creditHeld(j)
			if d.tl != nil {
				d.checkTailRoom()
			}
		}
		if d.keepNoticed(j, d.asks) { // notice.go: notices sent for it are not re-decided
			continue
		}
		mark := d.cap.mark()
		if d.fitAll(job, d.asks) {
			if d.holdRestart(j, oi, true) { // restart.go: it would be stopped again at its window end
				d.cap.rollback(mark)
				continue
			}
			info.fits, info.wait = true, WaitPlacement
			continue
		}
		d.cap.rollback(mark)
		if d.anyTooLarge(job, d.asks) {
			info.wait = d.tooLargeWait(job, d.asks)
			continue
		}
		if examined >= d.cfg.MaxEvaluations || d.evals >= d.cfg.MaxEvaluations {
			if requeuedLoser(d.jp[j]) && d.holdRestart(j, oi, false) {
				continue // restart.go: Nomad would place it from the queue as GPUs free up
			}
			info.wait = WaitQueue
			continue
		}
		if d.holdRestart(j, oi, false) { // restart.go: nor take victims
			continue
		}
		// A job an earlier sibling's failure implies fails too (quick.go)
		// is not examined and does not use one of the MaxEvaluations; it
		// stays a candidate for a reservation, as an examined one.
		if info.state != jsPending || !d.impliedFailure(j, d.asks) {
			examined++
			if d.sliceFor(j, d.asks) {
				continue
			}
			if info.state == jsPending {
				d.noteFailure(j, d.asks)
			}
		}
		if info.state == jsPartial && (info.wait == WaitFairShare || info.wait == WaitOrder || d.restFarOff(j)) {
			d.giveBack(j)
			continue
		}
		if info.state == jsPartial {
			for _, a := range d.asks {
				d.starved = append(d.starved, starvedAsk{job: j, ask: a})
			}
		}
		d.reserveFor = append(d.reserveFor, orderRef{job: j, at: oi})
		if oi+1 < len(d.order) && d.minAskBelow[oi+1] < d.asks[0].gpus {
			d.yieldReservation(j) // reserve.go: a more served job's reservation gives way
			d.newReservation(j)   // smaller jobs behind it would take its GPUs as they free up
		}
		if info.state == jsPending {
			d.waitWhole(j)
		}
	}
	if d.tl != nil && !d.tl.crossed && d.tl.first > 0 {
		d.crossTail(examined)
	}
	d.placeQuick()
}

// placeQuick is rule 5b: past the first MaxEvaluations, up to
// MaxEvaluations more debug-shaped jobs (quickJob) left waiting in the
// queue are examined for time slicing, in order, with the same victim
// rules. A small ask with a window of minutes fits more places than a
// large one, and its wait can often be bought in seconds from the
// cheapest past-window victim; left in the queue behind large jobs that
// cannot place, it would wait for hours. A quick job that an earlier one
// of its leaf's failure implies fails too is skipped (impliedFailure). An
// Incremental reads every
// queued quick job (incremental.go), so its plans equal Decide's.
func (d *Decider) placeQuick() {
	if d.cfg.QuickWindow <= 0 {
		return
	}
	examined, evals := 0, d.evals
	for _, k := range d.order {
		if examined >= d.cfg.MaxEvaluations || d.evals-evals >= d.cfg.MaxEvaluations {
			return
		}
		j := k.job
		info := &d.jobs[j]
		if info.wait != WaitQueue || info.state != jsPending || !quickJob(d.jp[j], d.cfg) {
			continue
		}
		d.asks = d.jobAsks(j, d.asks)
		if d.impliedFailure(j, d.asks) { // quick.go: an earlier sibling's failure holds for it
			continue
		}
		examined++
		if !d.sliceFor(j, d.asks) {
			d.noteFailure(j, d.asks)
		}
	}
}

// quickJob reports whether job is debug-shaped (Config.QuickWindow,
// QuickGPUs): allocated, asking at most QuickGPUs GPUs in all, with a
// protected window of at most QuickWindow.
func quickJob(job *Job, cfg Config) bool {
	w := min(job.Contract.Protected, cfg.RuntimeCap)
	if cfg.QuickWindow <= 0 || w <= 0 || w > cfg.QuickWindow || job.Contract.Budget == "" {
		return false
	}
	gpus := 0
	for _, g := range job.Groups {
		gpus += max(g.GPUs, 0) * max(g.Count, 0)
	}
	return gpus > 0 && gpus <= cfg.QuickGPUs
}

// giveBack releases job j, placed in part, by rule 5c (releasePartial),
// unless a release of it is held: its replacements took the GPUs back, and
// it is held low, not stopped again. It then waits whole (rule 5d).
func (d *Decider) giveBack(j int32) {
	if info := &d.jobs[j]; info.backHeld {
		info.keptBack = true
	} else {
		d.releasePartial(j)
	}
	d.waitWhole(j)
}

// releasePartial stops every allocation of job j, placed in part, whose
// missing allocations find no victims because of fair share or its own
// budget's order (rule 5c). Neither changes while it waits: the GPUs it
// holds are charged to its budget, so its standing only worsens, and a job
// placed in part makes no progress. Holding them would stall them for as
// long as it waits (a gang of 31 of 32 nodes held the cluster for days);
// stopped, it loses nothing and waits in the pending queue at its
// position, below the jobs Nomad should place first. Waits that end by
// themselves (protected windows, the loss bound) keep the allocations.
func (d *Decider) releasePartial(j int32) {
	info, job := &d.jobs[j], d.jp[j]
	info.givenBack = true
	r := d.releaseReason(j)
	for _, ai := range d.jobAllocs.row(j) {
		if al := d.ap[ai]; al.live() && d.allocNode[ai] >= 0 {
			d.cap.change(d.allocNode[ai], int32(al.GPUs))
		}
	}
	d.plan.Stops = append(d.plan.Stops, StopJob{Job: job.ID, Namespace: job.Namespace, Allocs: d.liveAllocs(j, -1), Reason: r})
	if d.tl != nil {
		d.checkTailRoom()
	}
}

// restFarOff reports whether the missing allocations of job j, placed in
// part and examined without victims, wait for protected windows or the
// loss bound that end more than ReservationMaxAge from now, or at no known
// time (as behind another job's rest, rule 5g); it sets the job's FreeAt
// to that time (zero: unknown). A placement
// in part is a reservation that Nomad made: its GPUs sit idle (stalled)
// until the rest comes. allot reserves nodes only when they all free up
// within ReservationMaxAge (rule 7), and keeps Nomad's on the same terms:
// past that, rule 5c releases the job, which waits whole (rule 5d) at its
// position. On large-gangs of the suite (a4eb181 plus this) 2,711 of the
// 5,998 stalled GPU hours were gangs held in part for windows, some for
// up to RuntimeCap.
func (d *Decider) restFarOff(j int32) bool {
	info := &d.jobs[j]
	switch info.wait {
	case WaitWindows:
		d.asks = d.jobAsks(j, d.asks)
		info.freeAt = d.honestFreeAt(d.freeAt(j, d.usableNodes()), false)
	case WaitWork: // freeAt: when the bound lapses (cheaperAt)
	case WaitRestFirst: // behind another job's rest (rule 5g): no known time
		info.freeAt = time.Time{}
	default:
		return false
	}
	return info.freeAt.IsZero() || info.freeAt.After(d.now.Add(d.cfg.ReservationMaxAge))
}

// waitWhole is rule 5d, for gang job j (more than one allocation) that the
// placement model cannot place whole and that holds no reservation:
// examined without victims, or placed in part and released (rule 5c). Nomad has no
// gang placement: left at its position's level, it is the first job Nomad
// serves as GPUs free up, so it takes them an allocation at a time and
// holds them without running (stalled) until the rest frees too, while
// jobs that could run wait; released by rule 5c, it was placed in part
// again at once, pass after pass (a 32-node gang on heavy-256 went round
// 827 times). So a pending gang waiting whole is written at the bottom of
// the pending band (tier.go; levels leaves it out), below every job Nomad
// can place; its position in the order and its explanation stay, and once
// the model places it whole (GPUs free at once, victims that fair share
// allows, or its reservation released) it is written at its position's
// level again. A gang released by rule 5c keeps its level in the plan that
// stops its allocations and goes to the bottom from the next one (lowered
// in the same plan, heavy-256 stalled 11.5% of the cluster instead of
// 1.3%). What it waits for is the rule its wait names (fair share, its own
// budget's order, protected windows, the loss bound). Gangs left in the
// queue past the first MaxEvaluations are not examined and keep their
// levels (an Incremental leaves most of them out of its read).
func (d *Decider) waitWhole(j int32) {
	if info := &d.jobs[j]; (info.reserved < 0 || d.gathering(j)) && allocations(d.jp[j]) > 1 {
		info.whole = true
	}
}

// allocations is the number of GPU allocations job asks for in all.
func allocations(job *Job) int {
	n := 0
	for _, g := range job.Groups {
		if g.GPUs > 0 {
			n += max(g.Count, 0)
		}
	}
	return n
}

// releaseReason is why job j, placed in part, is released (rule 5c).
func (d *Decider) releaseReason(j int32) Reason {
	info := &d.jobs[j]
	r := Reason{Code: ReasonPartialRelease, N: int(info.missing), Detail: info.wait.String()}
	if info.wait.Timed() {
		r.At = info.shownFreeAt() // restFarOff: too far off (zero: at no known time)
	}
	if info.waitFor >= 0 {
		r.Job = d.jp[info.waitFor].ID
	}
	return r
}

// releasedLevel is where a job released by rule 5c waits, and where it
// stays when placed in part again while the release is held (keptBack):
// one level above Pending.Low - PreemptionGap, below the pending band.
// Every pending job above the band's bottom may preempt its replacements
// (a released gang makes no progress until all of it can be placed at
// once, so any job that can run should have those GPUs first), but a
// gang waiting whole at Pending.Low (rule 5d), which could not run on
// them either, may not. Like a victim at the floor, its replacements can
// still evict the youngest free work (two levels of FreeLevels). It was a
// preemption gap below the level of its
// standing: a gang waiting whole that Nomad placed in part at Pending.Low
// was raised by its release above most pending jobs and placed in part
// again at once, held there for VictimHold; and a gang released at 30
// (the floor) was within reach of every gang waiting whole at 40. On
// large-gangs of the suite (seed 1) stalled GPU hours came 2,111 from such
// release and re-place cycles and 1,552 from gangs taking each other's
// allocations through Nomad, out of 4,756.
func (c *Config) releasedLevel() int {
	return c.Pending.Low - c.PreemptionGap + 1
}

// smallestAsks fills minAskBelow[i]: the smallest per-allocation GPU ask of
// the jobs at order index i and after.
func (d *Decider) smallestAsks() {
	d.minAskBelow = resize(d.minAskBelow, len(d.order))
	least := int32(1 << 30)
	if d.tl != nil && d.tl.first > 0 {
		least = d.tl.minAsk // the left-out jobs sort below every job examined (tail.go)
	}
	for i := len(d.order) - 1; i >= 0; i-- {
		for _, g := range d.jp[d.order[i].job].Groups {
			if g.GPUs > 0 && g.Count > 0 {
				least = min(least, int32(g.GPUs))
			}
		}
		d.minAskBelow[i] = least
	}
}

// fitAll places every ask of job on the best-fit node, taking the GPUs.
func (d *Decider) fitAll(job *Job, asks []ask) bool {
	for i := range asks {
		n := d.bestFit(job, &asks[i])
		if n < 0 {
			return false
		}
		asks[i].node = n
		d.cap.change(n, -asks[i].gpus)
	}
	return true
}

// tooLargeWait names why a job that fits no node waits: no node of its pool
// and model exists at all (WaitPool), or none has enough healthy GPUs, or
// all of them together have too few (WaitTooLarge).
func (d *Decider) tooLargeWait(job *Job, asks []ask) Wait {
	for i := range asks {
		if d.poolless(job, &asks[i]) {
			return WaitPool
		}
	}
	return WaitTooLarge
}

func (d *Decider) anyTooLarge(job *Job, asks []ask) bool {
	for i := range asks {
		if d.tooLarge(job, &asks[i]) {
			return true
		}
	}
	return d.overCapacity(job, asks)
}

// candidate is a possible victim on one node.
type candidate struct {
	job    int32
	gpus   int32 // held on this node
	whole  int32 // held by the whole job
	lost   int64 // GPU-seconds of work its stop throws away (lostWork)
	served float64
}

// lostWork is the work, in GPU-seconds, that stopping running job v throws
// away: for a job that is not resumable, everything since its allocations
// last started (it restarts from zero); for a resumable one, what it ran
// since then up to ResumeLoss (what it has not checkpointed yet).
func (d *Decider) lostWork(v int32) int64 {
	info, job := &d.jobs[v], d.jp[v]
	if info.lostSet {
		return info.lost
	}
	if info.state == jsPartial {
		info.lost, info.lostSet = 0, true // placed in part: it has made no progress
		return 0
	}
	start := info.windowEnd.Add(-min(job.Contract.Protected, d.cfg.RuntimeCap))
	ran := d.cfg.unsaved(d.now.Sub(start), job.Contract.Resumable)
	if job.Contract.Notice > 0 {
		ran = 0 // it saves its work when signalled (notice.go)
	}
	info.lost, info.lostSet = int64(info.held)*int64(ran/time.Second), true
	return info.lost
}

type victimScratch struct {
	cands  []candidate
	chosen []candidate
	best   []candidate
	added  []int32 // victims chosen in this attempt, for rollback
	limit  int64   // sliceLossLimit of the job nodeCandidates listed for
	lossy  bool    // pickOnNode refused a set over limit
	order  bool    // mayStop found a job of the same leaf that its order keeps
	// noBound lifts the loss bound for one chooseVictims (cheaperInSight).
	noBound bool
	// The first job found that each rule keeps from being a victim (the
	// order, the margin), and the first victim of the cheapest set the
	// loss bound refused; -1 when none: what the job waits for.
	orderJob, marginJob, lossyJob int32
	lossyLost                     int64
	// starvedJob is the first job placed in part whose rest would take
	// what the victims free (starvedBy); -1 when none.
	starvedJob int32
}

// sliceFor looks for victims so that every ask of pending job j fits (rule
// 5). On success it plans the stops and the evaluation; on failure it leaves
// the placement model as it was and says what the job waits for.
func (d *Decider) sliceFor(j int32, asks []ask) bool {
	job := d.jp[j]
	info := &d.jobs[j]
	mark := d.cap.mark()
	sc := &d.scratch
	sc.added = sc.added[:0]
	sc.order = false
	sc.orderJob, sc.marginJob, sc.lossyJob, sc.lossyLost = -1, -1, -1, math.MaxInt64
	sc.starvedJob = -1
	blockedByMargin := false
	for i := range asks {
		a := &asks[i]
		if n := d.bestFit(job, a); n >= 0 {
			a.node = n
			d.cap.change(n, -a.gpus)
			continue
		}
		sc.lossyJob, sc.lossyLost = -1, math.MaxInt64 // this ask's cheapest refused set
		n, margin, lossy := d.chooseVictims(j, a)
		var sight time.Time
		guess := false
		if n < 0 && lossy {
			if sight = d.cheaperAt(j, a); sight.IsZero() {
				if at := d.lapseAt(j, sc.lossyLost); d.now.Before(at) {
					sight = at // no cheaper stop in sight: the bound lapses in time (bound.go)
				}
			} else {
				guess = true
			}
		}
		if n < 0 && lossy && sight.IsZero() {
			// Waiting would not buy a cheaper stop: take the cheapest now.
			sc.noBound = true
			n, margin, lossy = d.chooseVictims(j, a)
			sc.noBound = false
		}
		blockedByMargin = blockedByMargin || margin
		if n < 0 {
			d.cap.rollback(mark)
			for _, v := range sc.added {
				d.jobs[v].victimFor = -1
			}
			switch {
			case lossy:
				// The bound lasts SliceLossMaxWait: then the cheapest set is taken.
				info.wait, info.freeAt, info.waitFor = WaitWork, sight, sc.lossyJob
				info.freeGuess = guess
				d.wakeAt(info.freeAt)
			case blockedByMargin:
				info.wait, info.waitFor = WaitFairShare, sc.marginJob
				if gap := d.vServed - d.served[info.leaf]; gap > 0 {
					d.wakeAt(d.marginEnds(j, gap)) // the margin shrinks to the most served victim's gap
				}
			case sc.order:
				info.wait, info.waitFor = WaitOrder, sc.orderJob
			case sc.starvedJob >= 0:
				// Behind the rest of a job placed in part (starvedBy).
				info.wait, info.waitFor = WaitRestFirst, sc.starvedJob
			default:
				info.wait = WaitWindows
			}
			return false
		}
		a.node = n
	}
	if len(sc.added) == 0 {
		return true // the asks fit once earlier victims freed GPUs
	}
	info.wait = WaitVictims
	var node string
	for _, v := range sc.added {
		vi := &d.jobs[v]
		vj := d.jp[v]
		node = d.snap.Nodes[vi.victimNode].ID
		r := Reason{Code: ReasonVictim, Job: job.ID, Node: node, N: int(vi.victimGPUs)}
		switch {
		case vi.state == jsPartial:
			r.Code = ReasonVictimPartial
		case vi.leaf == info.leaf:
			r.Code = ReasonVictimOwn
			r.Detail = strconv.Itoa(job.Contract.Priority) + " over " + strconv.Itoa(vj.Contract.Priority)
		}
		d.plan.Stops = append(d.plan.Stops, StopJob{Job: vj.ID, Namespace: vj.Namespace,
			Allocs: d.liveAllocs(v, -1), Reason: r})
	}
	d.evaluate(j, Reason{Code: ReasonVictimsStopped, Node: node})
	return true
}

// liveAllocs lists the IDs of job j's live allocations (on node n, or all
// when n < 0).
func (d *Decider) liveAllocs(j, n int32) []string {
	var ids []string
	for _, ai := range d.jobAllocs.row(j) {
		a := d.ap[ai]
		if a.live() && (n < 0 || d.allocNode[ai] == n) {
			ids = append(ids, a.ID)
		}
	}
	return ids
}

// victimOK reports whether running job v may be stopped for pending job j:
// past its window, not already leaving, and either of j's own leaf with a
// lower meta priority than j's (the budget's own order rotates its own
// work), or of another leaf served at least the margin more than j's
// (served = usage share / effective share; marginFor). marginOnly reports a job that
// only the margin protects.
func (d *Decider) victimOK(v, j int32) (ok, marginOnly bool) {
	vi := &d.jobs[v]
	if vi.state == jsPartial && vi.victimFor < 0 && vi.heldFor < 0 && !vi.moving && !vi.givenBack {
		return d.partialBefore(j, v), false
	}
	if vi.state != jsRunning || vi.victimFor >= 0 || vi.heldFor >= 0 || vi.moving || !d.noticeAllows(v, j) {
		return false, false
	}
	return d.mayStop(v, j)
}

// partialBefore reports whether job j, placed in part, sorts before job v,
// also placed in part. Jobs placed in part make no progress (a distributed
// job waits for its last allocation), so when two hold the GPUs each needs
// to complete, neither ever runs: the first in the order may stop the
// later one, which throws no work away (lostWork is 0), whatever its
// budget.
func (d *Decider) partialBefore(j, v int32) bool {
	return d.jobs[j].state == jsPartial && d.compareKeys(d.keyOf(j, true), d.keyOf(v, true)) < 0
}

// mayStop is victimOK's rule on standing alone, whatever v's state: the
// budget's own order within a leaf, fair share with the margin (marginFor)
// across leaves. Within a leaf only a higher meta priority stops a job: submit
// time orders who waits first, but stopping a running job for an older
// one of the same budget and priority changes neither the budget's
// standing nor its own order, and only throws work away (each requeued
// job would evict its younger sibling).
func (d *Decider) mayStop(v, j int32) (ok, marginOnly bool) {
	if d.jobs[v].leaf == d.jobs[j].leaf {
		ok = d.outranks(j, v, 0)
		if !ok && !d.scratch.order {
			d.scratch.order, d.scratch.orderJob = true, v
		}
		return ok, false
	}
	m := d.marginFor(j)
	if d.noMargin { // a gathering reservation (reserve.go): strict fair-share standing
		m = 0
	}
	if !d.outranks(j, v, m) {
		if d.scratch.marginJob < 0 {
			d.scratch.marginJob = v
		}
		return false, true
	}
	return true, false
}

// outranks is mayStop's rule on standing without its bookkeeping: job j
// may stop job v, within one leaf by a strictly higher meta priority,
// across leaves when v's leaf is served at least margin more than j's.
func (d *Decider) outranks(j, v int32, margin float64) bool {
	vi, ji := &d.jobs[v], &d.jobs[j]
	if vi.leaf == ji.leaf {
		return d.jp[j].Contract.Priority > d.jp[v].Contract.Priority
	}
	return d.served[vi.leaf] >= d.served[ji.leaf]+margin
}

// indexVictims lists, by node, the live allocations of the jobs time
// slicing may ever stop in this decision: running past their window, not
// moved by a drain, not held below another job (victimOK's fixed part;
// whether a job was just chosen is checked as victims are picked). It runs
// once drain and keepVictims have marked the jobs.
func (d *Decider) indexVictims() {
	d.vGPUs = resize(d.vGPUs, len(d.nodes))
	clear(d.vGPUs)
	d.vServed = -1
	d.vMost = resize(d.vMost, len(d.nodes))
	d.vLeaves = resize(d.vLeaves, len(d.nodes))
	clear(d.vLeaves)
	d.vAnyLeaf = 0
	for n := range d.vMost {
		d.vMost[n] = -1
	}
	items := d.vAlloc.items[:0]
	for _, ai := range d.nodeAlloc.items { // by node, so items are too
		v := d.allocJob[ai]
		if v < 0 || !d.alive[ai] {
			continue
		}
		vi := &d.jobs[v]
		if vi.state != jsRunning && vi.state != jsPartial || vi.moving || vi.heldFor >= 0 {
			continue
		}
		items = append(items, ai)
		n, sv := d.allocNode[ai], d.served[vi.leaf]
		d.vGPUs[n] += d.allocGPUs[ai]
		d.vMost[n] = max(d.vMost[n], sv)
		d.vServed = max(d.vServed, sv)
		bit := leafBit(vi.leaf)
		if vi.state == jsPartial {
			bit = ^uint64(0) // a victim for a job placed in part, of any leaf
		}
		d.vLeaves[n] |= bit
		d.vAnyLeaf |= bit
	}
	d.vAlloc.setItems(len(d.nodes), items, d.allocNode)
}

// leafBit is leaf l's bit in a set of leaves folded into 64 bits: a
// filter that may name leaves that are not there, never one that is
// missing (nodeCandidates checks each job).
func leafBit(l int32) uint64 { return 1 << (uint32(l) & 63) }

// chooseVictims frees GPUs for ask a of job j on one node, choosing the node
// whose victim set is best by (work lost, victims, GPUs of the victims, then
// the most over-served victim) and returns it, or -1. It marks
// the victims, returns their GPUs to the model and takes the ask.
func (d *Decider) chooseVictims(j int32, a *ask) (node int32, margin, lossy bool) {
	job := d.jp[j]
	sc := &d.scratch
	best := int32(-1)
	var bestScore victimScore
	// No candidate anywhere when no possible victim is served enough and
	// none is of j's own leaf.
	least := d.served[d.jobs[j].leaf] + d.marginFor(j)
	own := leafBit(d.jobs[j].leaf)
	some := d.vServed >= least || d.vAnyLeaf&own != 0
	sc.lossy = false
	sc.limit = d.sliceLossLimit(j)
	if sc.noBound {
		sc.limit = math.MaxInt64
	}
	for c := range d.classes {
		if !d.classFits(int32(c), job, a) {
			continue
		}
		if s := d.starvedBy(int32(c), a); s >= 0 {
			if sc.starvedJob < 0 {
				sc.starvedJob = s
			}
			continue
		}
		for _, n := range d.classNode.row(int32(c)) {
			if !d.cap.usable[n] || int32(d.snap.Nodes[n].GPUs) < a.gpus {
				continue
			}
			need := a.gpus - d.cap.avail[n]
			if !some || d.vGPUs[n] < need || d.vMost[n] < least && d.vLeaves[n]&own == 0 {
				// Not enough to take here: only the margin is news.
				margin = margin || d.nodeMargin(n, j)
				if margin && !some {
					return -1, true, false // no node has victims: nothing more to learn
				}
				continue
			}
			m := d.nodeCandidates(n, j)
			margin = margin || m
			if !d.pickOnNode(need) {
				continue
			}
			if s := scoreOf(sc.chosen); best < 0 || s.less(bestScore) {
				best, bestScore = n, s
				sc.best = append(sc.best[:0], sc.chosen...)
			}
		}
	}
	if best < 0 {
		return -1, margin, sc.lossy
	}
	for _, v := range sc.best {
		vi := &d.jobs[v.job]
		vi.victimFor, vi.victimNode, vi.victimGPUs = j, best, a.gpus
		sc.added = append(sc.added, v.job)
		for _, ai := range d.jobAllocs.row(v.job) {
			if al := d.ap[ai]; al.live() && d.allocNode[ai] >= 0 {
				d.cap.change(d.allocNode[ai], int32(al.GPUs))
			}
		}
	}
	d.cap.change(best, -a.gpus)
	return best, margin, false
}

// sliceLossLimit is the most work, in GPU-seconds, that the victims freeing
// one node for job j may throw away: MaxSliceLoss × P, P = GPUs of j's
// missing allocations (d.asks) × max(min(Protected, RuntimeCap),
// ResumeLoss), the GPU-time j is promised (boundWindow); and no bound
// once j has waited SliceLossMaxWait (since it was submitted or requeued:
// Job.QueuedSince). So the bound paces rotation
// in time and never protects a job past its window for longer, whatever
// its accumulated run; victims are still taken least lost first.
// MaxSliceLoss 0 sets no bound.
func (d *Decider) sliceLossLimit(j int32) int64 {
	if d.cfg.MaxSliceLoss <= 0 || !d.now.Before(d.lossyFrom(j)) {
		return math.MaxInt64
	}
	return int64(d.cfg.MaxSliceLoss * d.promised(j))
}

// lossyFrom is when job j's loss bound ends: SliceLossMaxWait after it
// began to wait (its submission or its requeue).
func (d *Decider) lossyFrom(j int32) time.Time {
	return d.queuedSince(j).Add(d.cfg.SliceLossMaxWait)
}

// cheaperAt is when ask a of job j could be freed with cheaper stops, if
// before its loss bound lapses (lossyFrom); zero when no such time is in
// sight. It is the earliest, over usable nodes of its class, of the time
// by which the node has room for the ask, counting the GPUs free or held by
// unallocated work and those of protected jobs rule 5 may stop once their
// windows end (the last such window end counted). Only then does waiting
// buy a cheaper stop; otherwise the bound would only delay the same stop,
// and j takes the cheapest set at once. Jobs finishing are not counted:
// their ends are not known.
func (d *Decider) cheaperAt(j int32, a *ask) time.Time {
	until := d.lossyFrom(j)
	job := d.jp[j]
	var best time.Time
	for c := range d.classes {
		if !d.classFits(int32(c), job, a) {
			continue
		}
		d.indexProtected()
		for _, n := range d.classNode.row(int32(c)) {
			if !d.cap.usable[n] || int32(d.snap.Nodes[n].GPUs) < a.gpus || d.cap.avail[n]+d.pGPUs[n] < a.gpus {
				continue
			}
			have := d.cap.avail[n]
			last := d.now
			for _, ai := range d.pAlloc.row(n) {
				v := d.allocJob[ai]
				vi := &d.jobs[v]
				if vi.windowEnd.After(until) || vi.victimFor >= 0 {
					continue
				}
				if ok, _ := d.mayStop(v, j); ok {
					have += int32(d.ap[ai].GPUs)
					last = maxTime(last, vi.windowEnd)
				}
			}
			if have >= a.gpus && (best.IsZero() || last.Before(best)) {
				best = last
			}
		}
	}
	return best
}

// indexProtected lists, by node, the live allocations of protected jobs
// (pAlloc) and their GPUs (pGPUs), once per decision: cheaperAt reads them.
func (d *Decider) indexProtected() {
	if d.pBuilt {
		return
	}
	d.pBuilt = true
	d.pGPUs = resize(d.pGPUs, len(d.nodes))
	clear(d.pGPUs)
	items := d.pAlloc.items[:0]
	for _, ai := range d.nodeAlloc.items { // by node, so items are too
		if v := d.allocJob[ai]; v >= 0 && d.alive[ai] && d.jobs[v].state == jsProtected {
			items = append(items, ai)
			d.pGPUs[d.allocNode[ai]] += int32(d.ap[ai].GPUs)
		}
	}
	d.pAlloc.setItems(len(d.nodes), items, d.allocNode)
}

// promised is the GPU-time, in GPU-seconds, job j's missing allocations
// (d.asks) are protected for, at least ResumeLoss of them (boundWindow).
func (d *Decider) promised(j int32) float64 {
	var gpus int64
	for _, a := range d.asks {
		gpus += int64(a.gpus)
	}
	return float64(gpus) * d.boundWindow(j).Seconds()
}

// queuedSince is when waiting job j last began to wait: its submission or
// its requeue (Job.QueuedSince).
func (d *Decider) queuedSince(j int32) time.Time {
	job := d.jp[j]
	return maxTime(job.SubmitTime, job.QueuedSince)
}

// nodeMargin reports whether node n holds a job that only the fairness
// margin keeps from being a victim for job j (victimOK's marginOnly).
func (d *Decider) nodeMargin(n, j int32) bool {
	for _, ai := range d.vAlloc.row(n) {
		if _, m := d.victimOK(d.allocJob[ai], j); m {
			return true
		}
	}
	return false
}

// nodeCandidates fills scratch.cands with the victims allowed on node n for
// job j, one entry per job with its GPUs on n.
func (d *Decider) nodeCandidates(n, j int32) (margin bool) {
	sc := &d.scratch
	sc.cands = sc.cands[:0]
	for _, ai := range d.vAlloc.row(n) {
		al := d.ap[ai]
		v := d.allocJob[ai]
		ok, m := d.victimOK(v, j)
		margin = margin || m
		if !ok {
			continue
		}
		if k := slices.IndexFunc(sc.cands, func(c candidate) bool { return c.job == v }); k >= 0 {
			sc.cands[k].gpus += int32(al.GPUs)
			continue
		}
		sc.cands = append(sc.cands, candidate{job: v, gpus: int32(al.GPUs), whole: d.jobs[v].held,
			lost: d.lostWork(v), served: d.served[d.jobs[v].leaf]})
	}
	return margin
}

// pickOnNode chooses from scratch.cands a set holding at least need GPUs:
// the least work lost first, then the most over-served leaves, then larger
// holdings; then drops every victim the rest can spare.
func (d *Decider) pickOnNode(need int32) bool {
	sc := &d.scratch
	var total int32
	for _, c := range sc.cands {
		total += c.gpus
	}
	if total < need {
		return false
	}
	slices.SortFunc(sc.cands, func(x, y candidate) int {
		switch {
		case x.lost != y.lost:
			if x.lost > y.lost {
				return 1
			}
			return -1
		case x.served != y.served:
			if x.served > y.served {
				return -1
			}
			return 1
		case x.gpus != y.gpus:
			return int(y.gpus - x.gpus)
		}
		return d.firstSubmitted(x.job, y.job)
	})
	sc.chosen = sc.chosen[:0]
	var got int32
	for _, c := range sc.cands {
		if got >= need {
			break
		}
		sc.chosen = append(sc.chosen, c)
		got += c.gpus
	}
	var lost int64
	for i := len(sc.chosen) - 1; i >= 0; i-- {
		if got-sc.chosen[i].gpus >= need {
			got -= sc.chosen[i].gpus
			sc.chosen = slices.Delete(sc.chosen, i, i+1)
		} else {
			lost += sc.chosen[i].lost
		}
	}
	if lost > sc.limit {
		sc.lossy = true // freeing this node would throw away too much work
		if lost < sc.lossyLost && len(sc.chosen) > 0 {
			sc.lossyJob, sc.lossyLost = sc.chosen[0].job, lost
		}
		return false
	}
	return true
}

// firstSubmitted orders two victims otherwise equal by submit time, then
// ID. Not by their indexes: the snapshot's order is the Incremental's slots
// in the simulator and the reconcile pass's sort on a real cluster, and a
// choice between equals must not depend on which one read them.
func (d *Decider) firstSubmitted(x, y int32) int {
	a, b := d.jp[x], d.jp[y]
	return cmp.Or(a.SubmitTime.Compare(b.SubmitTime), strings.Compare(a.ID, b.ID))
}

// victimScore ranks victim sets; lower is better.
type victimScore struct {
	lost       int64
	jobs, gpus int32
	minServed  float64
}

func scoreOf(set []candidate) victimScore {
	s := victimScore{minServed: -1}
	for i, c := range set {
		s.lost += c.lost
		s.jobs++
		s.gpus += c.whole
		if i == 0 || c.served < s.minServed {
			s.minServed = c.served
		}
	}
	return s
}

func (s victimScore) less(o victimScore) bool {
	switch {
	case s.lost != o.lost:
		return s.lost < o.lost
	case s.jobs != o.jobs:
		return s.jobs < o.jobs
	case s.gpus != o.gpus:
		return s.gpus < o.gpus
	}
	return s.minServed > o.minServed
}

// marginFor is the fairness margin job j's victims of other leaves must be
// served above j's own leaf by (rule 5): FairnessMargin when j begins to
// wait (it is submitted or requeued: Job.QueuedSince), shrinking linearly
// to 0 as j waits out its own protected window, min(Protected,
// RuntimeCap). The margin is hysteresis: between budgets served within it
// of each other a stop buys little fairness and soon runs back. Bounded
// by the waiting job's own window it still keeps two nearly equal budgets
// from trading GPUs at every decision (a stop needs the gap to outlast a
// wait as long as the job's promised run), but no longer keeps a budget
// served a little less from a little more served one's past-window job
// for as long as the gap stays under the margin: weeks on a cluster where
// every budget asks for more than its share.
func (d *Decider) marginFor(j int32) float64 { return d.marginAt(j, d.now) }

// marginAt is job j's margin (marginFor) at time t, if it still waits then.
func (d *Decider) marginAt(j int32, t time.Time) float64 {
	m := d.cfg.FairnessMargin
	w := min(d.jp[j].Contract.Protected, d.cfg.RuntimeCap)
	waited := t.Sub(d.queuedSince(j))
	switch {
	case m <= 0 || w <= 0 || waited >= w:
		return 0
	case waited <= 0:
		return m
	}
	return m * float64(w-waited) / float64(w)
}

// marginEnds is when job j's margin (marginFor) falls to gap, the
// standing gap to the nearest job it protects; zero when it already has.
func (d *Decider) marginEnds(j int32, gap float64) time.Time {
	m := d.cfg.FairnessMargin
	w := min(d.jp[j].Contract.Protected, d.cfg.RuntimeCap)
	if m <= 0 || w <= 0 {
		return time.Time{}
	}
	gap = max(gap, 0)
	at := d.queuedSince(j).Add(time.Duration(float64(w) * (1 - min(gap/m, 1))))
	at = at.Add(time.Second - 1).Truncate(time.Second) // to the second after
	if !at.After(d.now) {
		return time.Time{}
	}
	return at
}

// starvedAsk is a missing allocation of a job placed in part that found no
// victims in this plan (Decider.starved).
type starvedAsk struct {
	job int32
	ask ask
}

// starvedBy (rule 5g, doc.go) is the job placed in part, examined before
// and left without victims, whose rest would take what victims stopped
// for ask a free on a node of class c (-1 when none): Nomad places the
// rest of a job placed in part before any pending job, so the GPUs of
// stops made for a would go to a job whose own claim (fair share, its
// budget's order, its loss bound) could not stop them, and a waits on.
func (d *Decider) starvedBy(c int32, a *ask) int32 {
	for i := range d.starved {
		s := &d.starved[i]
		if s.ask.gpus <= a.gpus && d.classFits(c, d.jp[s.job], &s.ask) {
			return s.job
		}
	}
	return -1
}
