package policy

import (
	"math"
	"strings"
	"time"
)

// Restarts held back (rule 5e). A job stopped for time slicing (or a
// drain) is requeued, and on Nomad its replacement starts again as soon as
// GPUs free or it can evict lower work: free work, or victims of its own.
// A job that is not resumable restarts from zero, and once restarted it is,
// the moment its new window ends, the cheapest victim for a job fair share
// favours: what it loses is only that window's run, against longer runs
// elsewhere. So it was stopped again at each window end and every hour it
// ran was thrown away (a livelock: on the 30-day example one 32-GPU job
// was stopped six times, five of them after exactly its 3h window, and each
// restart evicted free work a job of a less served budget would have
// found free). restartHeld keeps a requeued job pending or placed in part
// from taking GPUs while its budget stands where it would be stopped again:
//
//   - (a) it is not resumable and has no checkpoint notice (restartLoses),
//     and an examined job before it in the order that found no victims
//     (d.reserveFor: waiting for protected windows, the loss bound, the
//     fairness margin or its own budget's order) would stop it at the end
//     of the window a start now would begin, by the rule that would then
//     pick it (wouldStop), on nodes of a class both could use (couldUse); or
//   - (b) its start would evict work (Nomad's preemption of free work, or
//     time slicing: it does not fit on GPUs nobody holds), and its leaf is
//     served at least its share and at least FairnessMargin more than the
//     least served other leaf running work on nodes it could use
//     (lessServedRunning): that leaf's next job that finds no room would
//     stop it at its window end, and the evicted free work is the room
//     that job would have found; or
//   - (c) it restartLoses, its last run was stopped after Job.LastRun (it
//     did not finish in it, so it needs a longer one), it has waited less
//     than min(LastRun, RuntimeCap) since that stop (restartUntil), and
//     the first job before it in the order of another leaf that place
//     left waiting without victims, on nodes of a class it could use,
//     would stop it before it had run that long again: its own run, at its
//     GPUs, would leave its leaf served at least that job's margin then
//     more (stopsWithin, outrunsIn). Not for a gang that cannot be
//     placed whole: it waits whole (rule 5d), and held below the band it
//     would only be placed in part on GPUs nobody holds.
//
// Rules (a) and (c) also hold a restart that waits in the queue, past the
// jobs examined for time slicing: Nomad places it from there as GPUs free
// up (and evicts free work for it), and restarted so it was stopped again.
//
// A held job is written at restartLevel (29 at the defaults), below every
// pending job and too low to evict any free work (a job placed in part is
// released by rule 5c instead); it waits (WaitRestart, naming the job of (a) or (b))
// while the rule holds, and may still start on GPUs nobody holds. No job is
// protected by it: it holds back only jobs that are not running, only
// while fair share or their own budget's order puts another job first
// (in (c), a job sorting before it), in (b) only while their budget has
// at least its share, and in (c) at most min(LastRun, RuntimeCap). A victim
// that is not resumable is written at the same level when it is stopped
// and (a) holds for it, so that its replacement does not evict free work in
// the instant of its stop, before the next decision could hold it.
//
// holdRestart is place's hook: it reports whether rule 5e holds job j,
// at order index oi, back, releasing a job placed in part (rule 5c) when
// it does.
func (d *Decider) holdRestart(j int32, oi int, fits bool) bool {
	if !d.restartHeld(j, oi, fits) {
		return false
	}
	if d.jobs[j].state == jsPartial {
		d.giveBack(j)
	}
	return true
}

// restartHeld applies rule 5e to job j (rule 5h to one never stopped),
// waiting in place's walk at order index oi: fits says whether its missing
// asks were just placed in the model (d.asks) or would need victims. It
// marks the job held and says so.
func (d *Decider) restartHeld(j int32, oi int, fits bool) bool {
	if info := &d.jobs[j]; info.state != jsPending && info.state != jsPartial || info.holding > 0 {
		return false // victims held below it were stopped for it: their GPUs are its
	}
	if d.jp[j].Contract.Session {
		return false // a requeued session restarts ahead of its budget's other work (notice.go), with its state saved
	}
	if !d.requeued(j) {
		return d.startHeld(j, fits)
	}
	w, why := int32(-1), ReasonPendingRestartHeld
	if d.restartLoses(j) {
		w = d.stopsAgain(j)
		if w < 0 && (fits || allocations(d.jp[j]) == 1) {
			w, why = d.stopsWithin(j, oi), ReasonPendingRestartRun
		}
	}
	if w < 0 && (!fits || d.preemptsFree()) {
		w, why = d.lessServedRunning(j), ReasonPendingRestartServed
	}
	if w < 0 {
		return false
	}
	info := &d.jobs[j]
	info.restartHeld, info.restartWhy, info.wait, info.waitFor = true, why, WaitRestart, w
	if why == ReasonPendingRestartRun {
		info.freeAt = d.restartUntil(j)
		d.wakeAt(info.freeAt)
	}
	return true
}

// startHeld is rule 5h, rule 5e (b) for a job's first start: job j,
// pending and never stopped, is held at restartLevel while its start would
// evict work (free work Nomad would preempt for it, or victims of time
// slicing, its own budget's included: fits is false when the placement
// model found no room for it) and its leaf is served at least its share
// and at least FairnessMargin more than the least served other leaf
// running work on nodes it could use (lessServedRunning). Not held: a quick
// (debug-shaped) job, whose window of minutes takes little from anyone
// (Config.QuickWindow, QuickGPUs: small, short work first where it fits),
// and a session (restartHeld). It may still start on GPUs nobody holds, and nothing
// running is protected by it: past their windows its budget's jobs stay
// candidates for every less served budget's job.
//
// Why: a job that starts begins a protected window. A budget served well
// above one running beside it that starts its next job by evicting work,
// above all by stopping its own lower-priority job past its window (the
// budget's own order allows that stop), keeps the GPUs it already had in
// protected windows: rotating its own work renews the protection its
// budget holds on them, and the less served budget's next job, which
// could have taken them (they were past their windows), finds them
// protected again. Fair share across budgets comes before the order within
// one: the budget's own order decides among its jobs for the GPUs fair
// share leaves it, not whether it keeps GPUs a less served budget is
// owed. On the suite (allot sim suite examples/sim/suite, over main
// 33ce6c5) heavy-1024's leaves at >= 95% of owed went from 21/18/17 of 22
// to 22/22/20 (worst 93/87/79% to 101/99/92%), debug p99 from
// 15.7h/11.6h/4.2d to 1.6h/4.7h/3.3h; the work redone rose from
// 43,653/31,872/28,031 to 54,577/35,065/37,054 GPU hours (the less served
// budgets' stops of long runs past their windows that the renewed windows
// had kept out of reach). Letting it stop its own budget's jobs alone kept
// heavy-1024 seed 3's worst leaf at 60%.
func (d *Decider) startHeld(j int32, fits bool) bool {
	info := &d.jobs[j]
	if info.state != jsPending || quickJob(d.jp[j], d.cfg) || fits && !d.preemptsFree() {
		return false
	}
	w := d.lessServedRunning(j)
	if w < 0 {
		return false
	}
	info.restartHeld, info.restartWhy, info.wait, info.waitFor = true, ReasonPendingStartServed, WaitStanding, w
	return true
}

// restartLoses reports whether a stop of job j throws its whole run away:
// it is not resumable and has no checkpoint notice.
func (d *Decider) restartLoses(j int32) bool { return losesRun(d.jp[j]) }

// losesRun is Decider.restartLoses for a job.
func losesRun(job *Job) bool { return !job.Contract.Resumable && job.Contract.Notice <= 0 }

// requeuedLoser reports whether job waits after a stop that threw its
// whole run away and would throw the next away too (Decider.requeued,
// Decider.restartLoses): rule 5e may hold it wherever it sorts, so an
// Incremental never leaves it out (offIdle).
func requeuedLoser(job *Job) bool {
	return requeuedJob(job) && losesRun(job)
}

// stopsWithin is rule 5e (c): the first job waiting before job j (at
// order index oi) of another leaf, on nodes of a class j could use, that
// would stop j before it had run as long again as the run its last stop
// threw away (Job.LastRun: j is not resumable and did not finish in it,
// so a restart stopped sooner is thrown away whole), predicted from the
// standings as j's run would move them (outrunsIn); -1 when none would,
// LastRun is unknown, or j has waited restartUntil. Held, j waits at most
// min(LastRun, RuntimeCap) from its stop: bounded in time, whatever its
// standing, and no job is protected by it.
func (d *Decider) stopsWithin(j int32, oi int) int32 {
	job := d.jp[j]
	if job.LastRun <= 0 || d.fs == nil || d.fs.Total <= 0 || !d.now.Before(d.restartUntil(j)) {
		return -1
	}
	leaf := d.jobs[j].leaf
	for c := range d.classes {
		if !d.groupsFit(int32(c), job) {
			continue
		}
		if w := d.firstWaiting(int32(c), leaf, oi); w >= 0 && d.outrunsIn(w, j, job.LastRun) {
			return w
		}
	}
	return -1
}

// restartUntil is when rule 5e (c) stops holding job j: min(LastRun,
// RuntimeCap) after its stop (Job.QueuedSince).
func (d *Decider) restartUntil(j int32) time.Time {
	job := d.jp[j]
	return job.QueuedSince.Add(min(job.LastRun, d.cfg.RuntimeCap))
}

// outrunsIn reports whether waiting job w, of another leaf, would stop
// job j once j had run for t from now: by the standings then, j's leaf's
// window usage grown by j's GPUs for t and the whole tree's by the GPUs
// allocated work holds now plus j's, w's leaf's not grown (it waits), with
// the margin w will have by then (marginAt). The lookback window's oldest
// usage sliding out is not counted: the policy does not see it.
func (d *Decider) outrunsIn(w, j int32, t time.Duration) bool {
	d.indexRunningLeaves()
	rj, rw := d.fs.Rank(int(d.jobs[j].leaf)), d.fs.Rank(int(d.jobs[w].leaf))
	if rj.Effective <= 0 || rw.Effective <= 0 {
		return false
	}
	var g float64
	for _, tg := range d.jp[j].Groups {
		g += float64(max(tg.Count, 0) * max(tg.GPUs, 0))
	}
	sec := t.Seconds()
	total := float64(d.fs.Total) + (float64(d.runGPUs)+g)*sec
	sj := (float64(rj.Usage) + g*sec) / total / rj.Effective
	sw := float64(rw.Usage) / total / rw.Effective
	return sj >= sw+d.marginAt(w, d.now.Add(t))
}

// waitingFirst is, for one class of nodes, the first job in the order
// place left waiting without victims that could use it, and the first of
// another leaf than that one's (-1 when none); firstWaiting fills it.
type waitingFirst struct{ job [2]int32 }

// firstWaiting is the first job before order index oi, of a leaf other
// than leaf, that place left waiting without victims (waitsUnserved) with
// an ask that nodes of class c could take; -1 when none. It scans the
// order once per decision, only as far as the jobs asked about need
// (place walks them in order, so every job before oi is decided). A job
// left out of an Incremental's read (tail.go) might be the answer: when
// the scan runs past the first left-out place, the tail is unsound.
func (d *Decider) firstWaiting(c, leaf int32, oi int) int32 {
	if !d.waitBuilt {
		d.waitBuilt, d.waitScanned = true, 0
		d.waitFirst = resize(d.waitFirst, len(d.classes))
		for k := range d.waitFirst {
			d.waitFirst[k] = waitingFirst{job: [2]int32{-1, -1}}
		}
	}
	for {
		r := &d.waitFirst[c]
		if w := r.job[0]; w >= 0 && d.jobs[w].leaf != leaf {
			return w
		}
		if w := r.job[1]; w >= 0 {
			return w
		}
		if d.waitScanned >= oi {
			if d.pastTail(d.order[oi]) {
				d.tl.unsound = true // a left-out job sorting before it may wait where it runs
			}
			return -1
		}
		k := d.order[d.waitScanned]
		d.waitScanned++
		if d.waitsUnserved(k.job) {
			if d.tl != nil && d.tl.first > 0 && d.pastTail(k) {
				d.tl.unsound = true // a left-out job before it may come first
			}
			d.noteWaiting(k.job)
		}
	}
}

// waitsUnserved reports whether place left job w waiting for GPUs that
// only stops or windows ending would free: not placed, no victims found
// for it, not held.
func (d *Decider) waitsUnserved(w int32) bool {
	wi := &d.jobs[w]
	if wi.fits || wi.leaf < 0 || wi.restartHeld || wi.victimFor >= 0 {
		return false
	}
	switch wi.wait {
	case WaitQueue, WaitWindows, WaitWork, WaitFairShare, WaitOrder, WaitReserved, WaitRestFirst:
		return true
	}
	return false
}

// noteWaiting records job w in waitFirst for every class an ask of it
// could use (couldUse's test).
func (d *Decider) noteWaiting(w int32) {
	for c := range d.classes {
		if !d.asksFit(int32(c), w) {
			continue
		}
		r := &d.waitFirst[c]
		switch {
		case r.job[0] < 0:
			r.job[0] = w
		case r.job[1] < 0 && d.jobs[r.job[0]].leaf != d.jobs[w].leaf:
			r.job[1] = w
		}
	}
}

// asksFit reports whether some ask of job w fits nodes of class c, one
// large enough for it.
func (d *Decider) asksFit(c, w int32) bool {
	d.restartAsks = d.jobAsks(w, d.restartAsks)
	for i := range d.restartAsks {
		if a := &d.restartAsks[i]; d.classFits(c, d.jp[w], a) && d.cap.maxCap[c] >= a.gpus {
			return true
		}
	}
	return false
}

// stopsAgain is the first examined job without victims (d.reserveFor)
// that would stop job j at the end of a window begun now, on GPUs of a
// class it could use; -1 when none would.
func (d *Decider) stopsAgain(j int32) int32 {
	job := d.jp[j]
	end := d.now.Add(min(job.Contract.Protected, d.cfg.RuntimeCap))
	for _, ref := range d.reserveFor {
		w := ref.job
		wi := &d.jobs[w]
		switch wi.wait {
		case WaitWindows, WaitWork, WaitFairShare, WaitOrder, WaitRestFirst:
		default:
			continue
		}
		if w != j && wi.reserved < 0 && d.wouldStop(j, w, end) && d.couldUse(w, j) {
			return w
		}
	}
	return -1
}

// preemptsFree reports whether the asks just placed in the model (d.asks)
// left a node they took fewer GPUs than unallocated work holds there:
// they would evict free work.
func (d *Decider) preemptsFree() bool {
	for i := range d.asks {
		if n := d.asks[i].node; n >= 0 && d.cap.avail[n] < d.nodes[n].heldFree {
			return true
		}
	}
	return false
}

// lessServedRunning is a job running (or starting) on nodes of a class
// job j could use, of the least served leaf other than j's with one, when
// j's leaf is served at least its share and at least FairnessMargin more
// than that leaf; -1 otherwise.
func (d *Decider) lessServedRunning(j int32) int32 {
	d.indexRunningLeaves()
	ji, job := &d.jobs[j], d.jp[j]
	best, bj := math.Inf(1), int32(-1)
	for c := range d.classes {
		if !d.groupsFit(int32(c), job) {
			continue
		}
		r := &d.runLeast[c]
		k := 0
		if r.job[0] >= 0 && d.jobs[r.job[0]].leaf == ji.leaf {
			k = 1
		}
		if w := r.job[k]; w >= 0 && d.served[d.jobs[w].leaf] < best {
			best, bj = d.served[d.jobs[w].leaf], w
		}
	}
	if bj >= 0 && d.served[ji.leaf] >= max(best+d.cfg.FairnessMargin, 1) {
		return bj
	}
	return -1
}

// leastRunning is, for one class of nodes, a job of the least served leaf
// running there and one of the least served other leaf (-1 when none).
type leastRunning struct{ job [2]int32 }

// indexRunningLeaves fills runLeast once per decision: for each class,
// the first-found job of the least served leaf with an allocated job
// running or starting on its nodes, and of the next least served leaf.
func (d *Decider) indexRunningLeaves() {
	if d.runBuilt {
		return
	}
	d.runBuilt, d.runGPUs = true, 0
	d.runLeast = resize(d.runLeast, len(d.classes))
	for c := range d.runLeast {
		d.runLeast[c] = leastRunning{job: [2]int32{-1, -1}}
	}
	for ai := range d.ap {
		n, v := d.allocNode[ai], d.allocJob[ai]
		if n < 0 || v < 0 || d.nodes[n].class < 0 || !d.ap[ai].live() {
			continue
		}
		vi := &d.jobs[v]
		if vi.leaf < 0 || vi.state < jsStarting {
			continue
		}
		d.runGPUs += int64(d.ap[ai].GPUs)
		r, sv := &d.runLeast[d.nodes[n].class], d.served[vi.leaf]
		switch {
		case r.job[0] < 0 || sv < d.served[d.jobs[r.job[0]].leaf]:
			if r.job[0] >= 0 && d.jobs[r.job[0]].leaf != vi.leaf {
				r.job[1] = r.job[0]
			}
			r.job[0] = v
		case vi.leaf != d.jobs[r.job[0]].leaf && (r.job[1] < 0 || sv < d.served[d.jobs[r.job[1]].leaf]):
			r.job[1] = v
		}
	}
}

// requeued reports whether job j waits after allocations of it that ran
// were stopped (Job.QueuedSince).
func (d *Decider) requeued(j int32) bool { return requeuedJob(d.jp[j]) }

// requeuedJob is Decider.requeued for a job.
func requeuedJob(job *Job) bool {
	return !job.QueuedSince.IsZero() && job.QueuedSince.After(job.SubmitTime)
}

// wouldStop reports whether waiting job w may stop job v once v runs past
// a window ending at end: mayStop's rule on standing (outranks), with the
// margin w will have by then.
func (d *Decider) wouldStop(v, w int32, end time.Time) bool {
	return d.outranks(w, v, d.marginAt(w, end))
}

// couldUse reports whether some ask of waiting job w and some task group
// of job v fit nodes of one class (pool and GPU model), one large enough
// for w's ask.
func (d *Decider) couldUse(w, v int32) bool {
	for c := range d.classes {
		if d.groupsFit(int32(c), d.jp[v]) && d.asksFit(int32(c), w) {
			return true
		}
	}
	return false
}

// groupsFit reports whether some GPU task group of job fits class c.
func (d *Decider) groupsFit(c int32, job *Job) bool {
	for _, g := range job.Groups {
		if g.GPUs > 0 && d.classFits(c, job, &ask{gpus: int32(g.GPUs), model: g.Model}) {
			return true
		}
	}
	return false
}

// restartLevel is where rule 5e holds a restart back: the highest priority
// that evicts no free work (FreeLevels().Low + PreemptionGap - 1, 29 at the
// defaults), below every pending job (Validate keeps Pending.Low at least
// PreemptionGap above Unallocated.High). Held there, the job starts only on
// GPUs nobody holds; one level higher it could evict free work that ran
// less than FreeLevelBase, and Nomad then replaced its allocation to write
// it protected, a preemption gap above jobs running past their windows.
func (c *Config) restartLevel() int {
	return c.FreeLevels().Low + c.PreemptionGap - 1
}

// shortDuration writes d to the second without zero tails: "5h", "1h30m",
// "45m10s".
func shortDuration(d time.Duration) string {
	s := d.Truncate(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
