package policy

import (
	"math"
	"slices"
)

// levelScratch is the memory of levels, kept between decisions.
type levelScratch struct {
	ents     []levelEntry
	cost     []int64 // by window offset: the least cost from this job down, at that level
	best     []int64 // by window offset of the next job: the least cost at or below that level
	arg      []int32 // the level giving best
	prevBest []int64 // best before a step of a run, to see it repeat
	prevArg  []int32
	back     []int32 // by step and window offset: the next job's level
	// The last assignment computed, to reuse when the entries repeat (the
	// steady state: same order, targets and priorities between decisions).
	memo     []levelEntry // its entries (job: 0 for a job, -1 for a run)
	memoOut  []int32      // the levels of its job entries, in order
	memoH    int
	memoBand Range
	memoRun  bool // a run of its entries was raised above the band's bottom (checkRun)
	raised   bool // checkRun found a run raised in this computation
}

// repeat reports whether ents (with hysteresis window h and band) are the
// entries of the last assignment computed; levels is a function of the
// entries' runs, targets and priorities alone, so the levels are then the
// same, and repeat gives them to the jobs.
func (ls *levelScratch) repeat(d *Decider, ents []levelEntry, h int, band Range) bool {
	if len(ents) != len(ls.memo) || h != ls.memoH || band != ls.memoBand {
		return false
	}
	for i := range ents {
		e, m := &ents[i], &ls.memo[i]
		if e.n != m.n || e.t != m.t || e.cur != m.cur || e.gap != m.gap || (e.job < 0) != (m.job < 0) {
			return false
		}
	}
	k := 0
	for i := range ents {
		if ents[i].job >= 0 {
			d.jobs[ents[i].job].level = int(ls.memoOut[k])
			k++
		}
	}
	if ls.memoRun {
		d.tl.unsound = true
	}
	return true
}

// remember keeps the assignment levels just computed for ents.
func (ls *levelScratch) remember(d *Decider, ents []levelEntry, h int, band Range) {
	ls.memo, ls.memoOut = ls.memo[:0], ls.memoOut[:0]
	for _, e := range ents {
		m := levelEntry{n: e.n, t: e.t, cur: e.cur, gap: e.gap}
		if e.job < 0 {
			m.job = -1
		} else {
			ls.memoOut = append(ls.memoOut, int32(d.jobs[e.job].level))
		}
		ls.memo = append(ls.memo, m)
	}
	ls.memoH, ls.memoBand = h, band
	ls.memoRun = ls.raised
}

// levelEntry is one pending job in levels, or a run of n pending jobs an
// Incremental left out of the snapshot: each targeted at the band's bottom
// and sitting there (tail.go), so the run is the same step n times.
type levelEntry struct {
	job    int32 // -1 for a run
	n      int32 // 1 for a job
	t, cur int32
	gap    int32 // the least difference to the next entry's level where targets differ: 1, or PreemptionGap below a reservation's job
	back   int32 // offset of its first back map in levelScratch.back
	steps  int32 // back maps stored; a run's last one holds for its remaining steps
}

// levels chooses the level written or kept for every pending job (rule 3
// with hysteresis). Let pending jobs 1..m be in order, t_i = pendingLevel
// of job i's position, c_i its priority, h = Hysteresis - 1. The levels f_i
// are, among the assignments with
//
//	f_i in the pending band and |f_i - t_i| <= h
//	f_i - f_{i+1} >= min(g_i, t_i - t_{i+1})
//
// with g_i = PreemptionGap when job i holds a reservation (reserve.go: the
// targets after it are that far below), else 1; that is f_i > f_{i+1} when
// t_i > t_{i+1} and f_i >= f_{i+1} when t_i = t_{i+1}, and a full gap
// below a reservation's job wherever the targets leave room for it (the
// targets always satisfy the constraints, so an assignment exists). While a
// job placed in part holds a reservation the band's top is Running -
// PreemptionGap.
//
// the one that rewrites the fewest jobs (keeping f_i = c_i is free when c_i
// is in the band and |t_i - c_i| <= h), then with the least sum of
// |f_i - t_i|, then with higher levels first. So a job never sorts below
// another at a level at or above the other's while their targets differ,
// jobs share a level only in the band's bottom levels where their targets
// do (pendingLevel: one leaf's deeper jobs; Nomad serves those first come,
// first served), and the same inputs keep
// every level: the current levels, once written, are the cheapest
// assignment. Found by dynamic programming from the last job up: O(m * (2h+1)).
// A run of jobs left out by an Incremental is stepped until a step repeats
// the one before (a fixed point: every further step is the same), so the
// cost does not grow with the run.
func (d *Decider) levels() {
	ls := &d.lv
	ents := ls.ents[:0]
	band := d.gapBand()
	prev := int32(0)
	for _, k := range d.order {
		info := &d.jobs[k.job]
		if info.state != jsPending {
			continue
		}
		if d.tl != nil {
			if gap := info.position - prev - 1; gap > 0 {
				ents = append(ents, levelEntry{job: -1, n: gap, t: int32(band.Low), cur: int32(band.Low), gap: 1})
			}
			prev = info.position
		}
		if info.heldFor < 0 && !info.whole && !info.restartHeld && !info.first { // a gang waiting whole, a restart held: below; a job its victims' GPUs are for: above (tier.go)
			g := int32(1)
			if len(d.gaps) > 0 && d.gapAfter(k.job) {
				g = int32(d.cfg.PreemptionGap)
			}
			ents = append(ents, levelEntry{job: k.job, n: 1, t: int32(info.target), cur: int32(d.jp[k.job].Priority), gap: g})
		}
	}
	if d.tl != nil {
		if gap := d.tl.total - prev; gap > 0 {
			ents = append(ents, levelEntry{job: -1, n: gap, t: int32(band.Low), cur: int32(band.Low), gap: 1})
		}
	}
	ls.ents = ents
	m := len(ents)
	if m == 0 {
		return
	}
	h := max(d.cfg.Hysteresis-1, 0)
	ls.raised = false
	if ls.repeat(d, ents, h, band) {
		return
	}
	defer ls.remember(d, ents, h, band)
	w := min(2*h+1, band.Levels())
	start := func(t int) int { return max(band.Low, min(t-h, band.High-w+1)) }
	ls.cost = resize(ls.cost, w)
	ls.best, ls.arg = resize(ls.best, w), resize(ls.arg, w)
	ls.prevBest, ls.prevArg = resize(ls.prevBest, w), resize(ls.prevArg, w)
	ls.back = ls.back[:0]
	for i := m - 1; i >= 0; i-- {
		e := &ents[i]
		e.back = int32(len(ls.back))
		last := i+1 == m
		var sep, sNext int
		if !last {
			tNext := int(ents[i+1].t)
			sep, sNext = min(int(e.gap), max(int(e.t)-tNext, 0)), start(tNext)
		}
		for q := int32(0); q < e.n; q++ {
			if e.n > 1 {
				copy(ls.prevBest, ls.best)
				copy(ls.prevArg, ls.arg)
			}
			ls.back = slices.Grow(ls.back, w)[:len(ls.back)+w]
			d.levelStep(band, int(e.t), int(e.cur), last, sep, sNext, start, ls.back[len(ls.back)-w:])
			e.steps = q + 1
			if q > 0 && slices.Equal(ls.prevBest, ls.best) && slices.Equal(ls.prevArg, ls.arg) {
				break // every further step of the run is this one
			}
			last, sep, sNext = false, 0, start(int(e.t))
		}
	}
	// The first job takes its cheapest level (ties: the higher); the rest
	// follow the choices made for it.
	f := int(ls.arg[w-1])
	for i := 0; i < m-1; i++ {
		e := &ents[i]
		if e.job >= 0 {
			d.jobs[e.job].level = f
		} else {
			d.checkRun(f, band)
		}
		s := start(int(e.t))
		step := func(q int32, f int) int { return int(ls.back[int(e.back)+int(q)*w+f-s]) }
		for q := e.n - 1; q >= e.steps; q-- {
			g := step(e.steps-1, f)
			if g == f {
				break
			}
			f = g
		}
		for q := min(e.n, e.steps) - 1; q >= 0; q-- {
			f = step(q, f)
		}
	}
	if e := &ents[m-1]; e.job >= 0 {
		d.jobs[e.job].level = f
	} else {
		d.checkRun(f, band)
	}
}

// checkRun checks the level f chosen for the first job of a run an
// Incremental left out: levels never rise down the order, so the run stays
// at the band's bottom, where its jobs sit, only when f does. Otherwise
// (the jobs after the run keep higher levels) Decide would rewrite jobs of
// the run: leaving them out changed the plan.
func (d *Decider) checkRun(f int, band Range) {
	if f != band.Low {
		d.tl.unsound, d.lv.raised = true, true
	}
}

// levelStep is one job of levels: from best and arg of the job below (none
// when last), the cost of each level of a job with target t and priority
// cur, at least sep above the level below, its back map into back, then
// best and arg of this job.
func (d *Decider) levelStep(band Range, t, cur int, last bool, sep, sNext int, start func(int) int, back []int32) {
	ls := &d.lv
	h := max(d.cfg.Hysteresis-1, 0)
	w := len(ls.cost)
	const inf = int64(math.MaxInt64 / 4)
	const rewrite = int64(1) << 40 // more than any sum of distances
	s := start(t)
	keep := band.contains(cur) && abs(t-cur) <= h
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
		if last {
			ls.cost[o] = own
			continue
		}
		limit := f - sep
		k := min(limit-sNext, w-1)
		if k < 0 || ls.best[k] >= inf {
			ls.cost[o] = inf
			continue
		}
		ls.cost[o] = own + ls.best[k]
		back[o] = ls.arg[k]
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
