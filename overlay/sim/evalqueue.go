package sim

import (
	"math/bits"
	"slices"
)

// evalQueue holds the blocked evals, bucketed by priority and then by GPUs
// per allocation, each bucket in CreateIndex order. Nomad retries them
// highest priority first, then first come (facts d); the buckets let a pass
// skip, in O(1), every eval whose ask cannot fit, instead of walking a
// backlog of thousands at every capacity change.
type evalQueue struct {
	levels   [256]*evalLevel
	nonEmpty [4]uint64 // bit p: levels[p] has evals
	n        int
}

type evalLevel struct {
	buckets [65][]int32 // by ask; job indexes in evalIdx order
	asks    uint64      // bit k-1: buckets[k] is non-empty
}

func (q *evalQueue) add(jobs []job, i int32) {
	j := &jobs[i]
	lv := q.levels[j.prio]
	if lv == nil {
		lv = &evalLevel{}
		q.levels[j.prio] = lv
	}
	g := j.spec.GPUs
	// evalIdx only grows, so appending keeps the bucket sorted.
	lv.buckets[g] = append(lv.buckets[g], i)
	lv.asks |= 1 << uint(g-1)
	q.nonEmpty[j.prio/64] |= 1 << uint(j.prio%64)
	q.n++
}

func (q *evalQueue) remove(jobs []job, i int32) {
	j := &jobs[i]
	lv := q.levels[j.prio]
	g := j.spec.GPUs
	b := lv.buckets[g]
	k, found := slices.BinarySearchFunc(b, j.evalIdx, func(x int32, idx uint64) int {
		switch e := jobs[x].evalIdx; {
		case e < idx:
			return -1
		case e > idx:
			return 1
		}
		return 0
	})
	if !found {
		return
	}
	lv.buckets[g] = slices.Delete(b, k, k+1)
	q.n--
	if len(lv.buckets[g]) == 0 {
		lv.asks &^= 1 << uint(g-1)
		if lv.asks == 0 {
			q.nonEmpty[j.prio/64] &^= 1 << uint(j.prio%64)
		}
	}
}

// below returns the highest non-empty priority strictly below p, or -1.
func (q *evalQueue) below(p int) int {
	for p--; p >= 0; {
		w := q.nonEmpty[p/64] & (^uint64(0) >> uint(63-p%64))
		if w != 0 {
			return p/64*64 + 63 - bits.LeadingZeros64(w)
		}
		p = p/64*64 - 1
	}
	return -1
}
