package sim

import (
	"cmp"
	"math/bits"
	"slices"
)

// preemptionGap is Nomad's: an allocation is a preemption candidate only
// when its job's priority is at least 10 below the placing job's (facts b, i).
const preemptionGap = 10

// schedule processes evals the way Nomad's eval broker and blocked-evals
// tracker do: when capacity changed, every blocked eval (but the
// class-ineligible ones) is retried; otherwise only the new evals. Evals run
// highest priority first, then by CreateIndex (facts d). Preemption can leave
// GPUs free (whole allocations are evicted), which wakes the blocked evals
// again, so the pass repeats until nothing is left to try.
func (s *State) schedule() {
	for round := 0; s.wakeAll || len(s.readyQ) > 0; round++ {
		if s.wakeAll {
			s.wakeAll = false
			s.passNew(true)
		} else {
			s.passNew(false)
		}
		if round > 1000 {
			// Each round places or evicts something; this bound is never
			// reached in practice and keeps a model bug from hanging a run.
			break
		}
	}
}

// runNew (with Options.EvalOrder) processes the evals created since the
// last pass, and only them:
// what Nomad does with the eval a lever creates (a stopped allocation's
// replacement, a re-registered job's, an evaluate). Its eval broker hands an
// eval to an idle scheduler as soon as it is created, and allot's adapter
// makes its calls one after another, each after the last returned, so the
// eval of one call is processed before the next call makes its own: a time
// slicing victim's replacement is placed (on the GPUs its stop just freed)
// before the evaluate of the job it was stopped for, which then preempts
// (the fidelity harness saw it on every time-slice stop it looked at). The
// blocked evals are not retried here: capacity a stop or a preemption frees
// wakes them at the end of the instant (schedule), as the blocked-evals
// tracker does once the clients report the stopped tasks done.
func (s *State) runNew() {
	if !s.opts.EvalOrder {
		return // the evals wait for the instant's end (schedule), by priority
	}
	wake := s.wakeAll
	for round := 0; len(s.readyQ) > 0 && round <= 1000; round++ {
		s.wakeAll = false
		s.passNew(false)
		wake = wake || s.wakeAll
	}
	s.wakeAll = wake
}

// passNew runs one pass: over every blocked eval (all), or over the new
// evals only, in retry order; an eval that places nothing blocks.
func (s *State) passNew(all bool) {
	ready := append(s.buf.ready[:0], s.readyQ...)
	s.buf.ready = ready
	s.readyQ = s.readyQ[:0]
	if all {
		s.passAll()
	} else {
		slices.SortFunc(ready, s.queueCmp)
		s.passReady(ready)
	}
	for _, i := range ready {
		if s.jobs[i].ready {
			s.block(i)
		}
	}
}

// threshold is the largest ask an eval at priority p could place now: no
// more than the most free GPUs on a node plus what it may preempt, and less
// than an ask that already failed in this pass at a higher or equal priority
// (a lower priority can preempt only a subset of what it could).
func (s *State) threshold(p, failAsk int) int {
	t := min(failAsk-1, 64)
	mf := s.maxFree()
	pb := s.preemptibleBelow(p - preemptionGap)
	return min(t, mf+int(min(pb, 64)))
}

// passReady tries the new evals only, in retry order.
func (s *State) passReady(order []int32) {
	for _, i := range order {
		j := &s.jobs[i]
		if !j.inQueue {
			j.ready = false
			continue
		}
		if j.spec.GPUs > s.threshold(j.prio, 65) {
			s.block(i)
			continue
		}
		s.place(i)
	}
}

// passAll retries every blocked eval, level by level, skipping the buckets
// whose ask exceeds the threshold.
func (s *State) passAll() {
	failAsk := 65
	var cur [65]int
	for p := s.queue.below(256); p >= 0; p = s.queue.below(p) {
		lv := s.queue.levels[p]
		cur = [65]int{}
		for {
			thr := s.threshold(p, failAsk)
			if thr <= 0 {
				break
			}
			bk, i := -1, int32(-1)
			for m := lv.asks & (1<<uint(thr) - 1); m != 0; m &= m - 1 {
				k := bits.TrailingZeros64(m) + 1
				if cur[k] < len(lv.buckets[k]) {
					c := lv.buckets[k][cur[k]]
					if i < 0 || s.jobs[c].evalIdx < s.jobs[i].evalIdx {
						bk, i = k, c
					}
				}
			}
			if i < 0 {
				break
			}
			j := &s.jobs[i]
			if s.classBad(j) && !j.ready {
				cur[bk]++
				continue
			}
			free := s.freeTotal()
			if !s.place(i) {
				cur[bk]++
				if j.feas == s.allFeas {
					// A job that may use only some nodes failing says
					// nothing of the asks of jobs that may use others.
					failAsk = min(failAsk, j.spec.GPUs)
				}
			}
			if s.freeTotal() > free {
				failAsk = 65
			}
		}
	}
}

// block leaves job i's eval blocked, recording whether it is class
// ineligible (no eligible node has enough healthy GPUs in all: facts i).
func (s *State) block(i int32) {
	j := &s.jobs[i]
	j.ready = false
	if j.inQueue {
		j.classBadGen = 0
		if j.spec.GPUs > s.maxHealthyFor(j) {
			j.classBadGen = s.classGen
		}
	}
}

func (s *State) freeTotal() int { return s.freeGPUs }

// place tries every unplaced slot of job i; each allocation is placed on its
// own (no gang placement). It reports whether all slots are placed.
func (s *State) place(i int32) bool {
	j := &s.jobs[i]
	j.ready = false
	g := j.spec.GPUs
	for slot := range j.slots {
		if j.slots[slot] >= 0 {
			continue
		}
		if n := s.pickNode(j, g); n >= 0 {
			s.startAlloc(i, slot, n, lowBits(s.nodes[n].freeMask(), g))
			continue
		}
		// Preemption is a second pass, only when no node fits (facts i).
		if s.preemptibleBelow(j.prio-preemptionGap)+int64(s.maxFree()) < int64(g) {
			break
		}
		n, victims := s.pickPreemption(i, g)
		if n < 0 {
			break
		}
		for _, v := range victims {
			s.stopAlloc(v, StopPreempted, i)
		}
		for _, v := range victims {
			s.requeue(s.allocs[v].job)
		}
		s.startAlloc(i, slot, n, lowBits(s.nodes[n].freeMask(), g))
		s.preempting(int32(len(s.allocs) - 1))
	}
	if j.placed == len(j.slots) {
		s.dequeue(i)
		return true
	}
	s.block(i)
	return false
}

// lowBits returns the n lowest set bits of m.
func lowBits(m uint64, n int) uint64 {
	var out uint64
	for ; n > 0 && m != 0; n-- {
		b := m & -m
		out |= b
		m &^= b
	}
	return out
}

func (s *State) fits(n int32, g int) bool { return int(s.freeOn[n]) >= g }

// pickNode chooses a node of job j's classes with g free healthy GPUs
// without preemption.
func (s *State) pickNode(j *job, g int) int32 {
	if j.feas != s.allFeas {
		return s.pickNodeIn(j, g)
	}
	feasible := 0
	for m := s.freeSet >> uint(g-1); m != 0; m &= m - 1 {
		feasible += int(s.freeHist[g+bits.TrailingZeros64(m)])
	}
	if feasible == 0 {
		return -1
	}
	if s.opts.Placement == PlacementBestFit {
		best := int32(-1)
		for n, f := range s.freeOn {
			if int(f) >= g && (best < 0 || s.fuller(int32(n), g, best, g)) {
				best = int32(n)
			}
		}
		return best
	}
	a, b := s.drawTwo(g, feasible)
	if b >= 0 && s.freeOn[b] < s.freeOn[a] {
		return b
	}
	return a
}

// pickNodeIn is pickNode for a job that may use only some nodes (its pool
// or model constraint): the same choice, made over its feasible nodes.
func (s *State) pickNodeIn(j *job, g int) int32 {
	f := s.buf.feasible[:0]
	for n, free := range s.freeOn {
		if int(free) >= g && s.feasible(j, int32(n)) {
			f = append(f, int32(n))
		}
	}
	s.buf.feasible = f
	switch {
	case len(f) == 0:
		return -1
	case s.opts.Placement == PlacementBestFit:
		best := f[0]
		for _, n := range f[1:] {
			if s.fuller(n, g, best, g) {
				best = n
			}
		}
		return best
	case len(f) == 1:
		return f[0]
	}
	x := s.rng.IntN(len(f))
	y := s.rng.IntN(len(f) - 1)
	if y >= x {
		y++
	}
	if s.freeOn[f[y]] < s.freeOn[f[x]] {
		return f[y]
	}
	return f[x]
}

// drawTwo draws two distinct feasible nodes uniformly at random (b = -1 when
// only one is feasible): the first two feasible nodes of a shuffled list.
func (s *State) drawTwo(g, feasible int) (int32, int32) {
	nn := len(s.nodes)
	if feasible*8 >= nn {
		a := int32(-1)
		for {
			n := int32(s.rng.IntN(nn))
			if n == a || !s.fits(n, g) {
				continue
			}
			if a < 0 {
				a = n
				if feasible == 1 {
					return a, -1
				}
				continue
			}
			return a, n
		}
	}
	f := s.buf.feasible[:0]
	for n, free := range s.freeOn {
		if int(free) >= g {
			f = append(f, int32(n))
		}
	}
	s.buf.feasible = f
	if len(f) == 1 {
		return f[0], -1
	}
	x := s.rng.IntN(len(f))
	y := s.rng.IntN(len(f) - 1)
	if y >= x {
		y++
	}
	return f[x], f[y]
}

// fuller reports whether node a with addA more GPUs held is fuller than
// node b with addB more: the larger share of its GPUs held (Nomad's binpack
// score of the node with the placement, from CPU and memory asked in
// proportion to GPUs; unhealthy GPUs nobody holds count as free), ties to
// the lower index (the fidelity harness's node affinities break Nomad's
// ties so). PlacementBestFit's choice.
func (s *State) fuller(a int32, addA int, b int32, addB int) bool {
	na, nb := &s.nodes[a], &s.nodes[b]
	ha, hb := bits.OnesCount64(na.held)+addA, bits.OnesCount64(nb.held)+addB
	if x, y := ha*nb.total, hb*na.total; x != y {
		return x > y
	}
	return a < b
}

// pickPreemption finds a node where evicting allocations frees g healthy
// GPUs for job i. Nodes are visited in a random rotation; of the first two
// that work, the one with the lower victim priority sum (then fewer GPUs
// evicted) wins, after Nomad's preemption scoring. With PlacementBestFit
// every node is visited and the fullest after its evictions wins (fuller):
// Nomad's preemption score (a logistic of the victims' priorities centred
// far above any job's) moves a node's score by far less than one GPU's
// binpack does.
func (s *State) pickPreemption(i int32, g int) (int32, []int32) {
	nn := len(s.nodes)
	bestFit := s.opts.Placement == PlacementBestFit
	start, limit := 0, nn
	if !bestFit {
		start, limit = s.rng.IntN(nn), 2
	}
	best := int32(-1)
	var bestScore, bestGPUs int
	found := 0
	low := int32(s.jobs[i].prio - preemptionGap)
	for k, n := 0, int32(start); k < nn && found < limit; k, n = k+1, n+1 {
		if int(n) == nn {
			n = 0
		}
		if s.lowOn[n] > low || !s.feasible(&s.jobs[i], n) {
			continue // no candidate on the node, or not the job's pool or model
		}
		v := s.victims(i, n, g)
		if v == nil {
			continue
		}
		found++
		score, gpus := 0, 0
		for _, a := range v {
			score += s.jobs[s.allocs[a].job].prio
			gpus += int(s.allocs[a].gpus)
		}
		better := best < 0 || score < bestScore || score == bestScore && gpus < bestGPUs
		if bestFit && best >= 0 {
			better = s.fuller(n, g-gpus, best, g-bestGPUs)
		}
		if better {
			best, bestScore, bestGPUs = n, score, gpus
			s.buf.best = append(s.buf.best[:0], v...)
		}
	}
	if best < 0 {
		return -1, nil
	}
	return best, s.buf.best
}

// victims is Nomad's device-preemption choice on one node (facts i):
// candidates at least the gap below, never of the same job, gathered from
// the lowest priority up until enough devices would be free, re-sorted by
// devices held (largest first) and trimmed. Devices are counted whether
// healthy or not; if the chosen set does not free enough healthy GPUs, the
// node fails without trying other victims. nil when the node cannot work.
func (s *State) victims(i int32, n int32, g int) []int32 {
	nd := &s.nodes[n]
	j := &s.jobs[i]
	if !nd.eligible || nd.healthyTotal() < g || !s.feasible(j, n) {
		return nil
	}
	free := nd.free()
	cand := s.buf.cand[:0]
	for _, a := range nd.allocs {
		al := &s.allocs[a]
		if al.job != i && s.jobs[al.job].prio <= j.prio-preemptionGap && !s.exitHeld(a) {
			cand = append(cand, a)
		}
	}
	s.buf.cand = cand
	if len(cand) == 0 {
		return nil
	}
	slices.SortFunc(cand, func(a, b int32) int {
		return cmp.Or(cmp.Compare(s.jobs[s.allocs[a].job].prio, s.jobs[s.allocs[b].job].prio), cmp.Compare(a, b))
	})
	need := g - free
	got, k := 0, 0
	for ; k < len(cand) && got < need; k++ {
		got += int(s.allocs[cand[k]].gpus)
	}
	if got < need {
		return nil
	}
	gathered := cand[:k]
	slices.SortStableFunc(gathered, func(a, b int32) int {
		return cmp.Compare(s.allocs[b].gpus, s.allocs[a].gpus)
	})
	got, k = 0, 0
	var freed uint64
	for ; k < len(gathered) && got < need; k++ {
		got += int(s.allocs[gathered[k]].gpus)
		freed |= s.allocs[gathered[k]].mask
	}
	if free+bits.OnesCount64(freed&^nd.sick) < g {
		return nil
	}
	s.buf.victims = append(s.buf.victims[:0], gathered[:k]...)
	return s.buf.victims
}
