package policy

import (
	bits64 "math/bits"
	"slices"
)

// recLists is what read takes of the allocation records, kept through
// PutAlloc and RemoveAlloc so that a decision reads the records of the
// jobs it reads instead of scanning every record (Incremental.lists).
type recLists struct {
	ok bool
	// of is by job slot: its live records, in index order.
	of [][]int32
	// none lists the live records of no job slot, in index order.
	none []int32
	// nodeRun is by node: the GPUs of the running live records of a job
	// slot there (those of the jobs read left out are tail.outFree).
	nodeRun []int32
	// bits and slot are takeRecs' scratch, by record: taken, and the
	// slot of its job (-1: none).
	bits []uint64
	slot []int32
}

// track adds (d = 1) or takes away (d = -1) live record i in the lists,
// while they are kept. A record's slot and node are as allocJobSlot and
// allocNodeIndex resolve them now; the callers keep them unchanged in
// between (or clear lists.ok).
func (x *Incremental) track(i int32, d int32) {
	if !x.lists.ok {
		return
	}
	l := &x.lists
	s := x.allocJobSlot(i)
	if s < 0 {
		l.none = editSorted(l.none, i, d)
		return
	}
	l.grow(s)
	l.of[s] = editSorted(l.of[s], i, d)
	x.trackRun(i, d)
}

// grow makes of hold job slot s.
func (l *recLists) grow(s int32) {
	if k := len(l.of); int(s) >= k {
		l.of = slices.Grow(l.of, int(s)+1-k)[:s+1]
		for ; k <= int(s); k++ {
			l.of[k] = l.of[k][:0] // a slot's list of an earlier listing, emptied
		}
	}
}

// trackRun adds or takes away record i's GPUs in nodeRun, when it runs, has
// a job slot and a known node.
func (x *Incremental) trackRun(i int32, d int32) {
	a := &x.allocs[i]
	if !a.running {
		return
	}
	if n := x.allocNodeIndex(i); n >= 0 {
		x.lists.nodeRun[n] += d * a.gpus
	}
}

// editSorted inserts (d = 1) or deletes (d = -1) i in the sorted list l.
func editSorted(l []int32, i int32, d int32) []int32 {
	k, found := slices.BinarySearch(l, i)
	switch {
	case d > 0 && !found:
		return slices.Insert(l, k, i)
	case d < 0 && found:
		return slices.Delete(l, k, k+1)
	}
	return l
}

// listed makes the lists again unless they are kept.
func (x *Incremental) listed() {
	if !x.lists.ok || len(x.lists.nodeRun) != len(x.nodes) {
		x.relist()
	}
}

// relist makes the lists again from every live record.
func (x *Incremental) relist() {
	l := &x.lists
	l.of = resize(l.of, len(x.jobs))
	for s := range l.of {
		l.of[s] = l.of[s][:0]
	}
	l.none = l.none[:0]
	l.nodeRun = resize(l.nodeRun, len(x.nodes))
	clear(l.nodeRun)
	l.ok = true
	for i := range x.allocs {
		if x.allocs[i].live {
			x.track(int32(i), 1)
		}
	}
}

// disown moves the records of job slot s, whose job is being removed,
// to the records of no slot (before the slot's generation moves on).
func (x *Incremental) disown(s int32) {
	l := &x.lists
	if !l.ok || int(s) >= len(l.of) {
		return
	}
	for _, i := range l.of[s] {
		x.trackRun(i, -1)
		l.none = editSorted(l.none, i, 1)
	}
	l.of[s] = l.of[s][:0]
}

// adopt moves the records of no slot that name job slot s's job, put
// after them, to the slot.
func (x *Incremental) adopt(s int32) {
	l := &x.lists
	if !l.ok {
		return
	}
	id := x.jobs[s].ID
	none := l.none[:0]
	for _, i := range l.none {
		if x.recs[i].Job != id {
			none = append(none, i)
			continue
		}
		l.grow(s)
		l.of[s] = append(l.of[s], i) // in index order, as none is
		x.trackRun(i, 1)
	}
	l.none = none
}

// takeRecs puts in tl the live records read takes, in index order: those
// of the job slots in inc (the jobs read) and those of no slot, with their
// jobs' indexes in the view (the slot's viewAt) and their nodes' indexes.
// It fills tl.outFree, by node, with the GPUs of the running records of
// the jobs left out: running free work (pinFreeWork), whose live
// allocations hold GPUs Nomad may preempt, on plain nodes.
func (x *Incremental) takeRecs(inc []int32) {
	x.listed()
	l := &x.lists
	l.bits = resize(l.bits, (len(x.allocs)+63)/64)
	clear(l.bits)
	l.slot = resize(l.slot, len(x.allocs))
	for _, s := range inc {
		if int(s) >= len(l.of) {
			continue
		}
		for _, i := range l.of[s] {
			l.bits[i>>6] |= 1 << (i & 63)
			l.slot[i] = s
		}
	}
	for _, i := range l.none {
		l.bits[i>>6] |= 1 << (i & 63)
		l.slot[i] = -1
	}
	t := &x.tl
	t.outFree = resize(t.outFree, len(x.nodes))
	copy(t.outFree, l.nodeRun)
	for w, bits := range l.bits {
		for bits != 0 {
			i := int32(w<<6 + bits64.TrailingZeros64(bits))
			bits &= bits - 1
			a := &x.allocs[i]
			n := a.node // allocNodeIndex's cached index, checked here without a call
			if n < 0 || a.nodeEra != x.nodeEra {
				n = x.allocNodeIndex(i)
			}
			j := l.slot[i]
			if j >= 0 {
				if a.running && n >= 0 {
					t.outFree[n] -= a.gpus // read: not left out
				}
				j = x.viewAt[j] // every job with records read is
			}
			t.ap = append(t.ap, &x.recs[i])
			t.allocJob = append(t.allocJob, j)
			t.allocNode = append(t.allocNode, n)
		}
	}
}
