package policy

import "slices"

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
	// gather is read's scratch: the records it takes.
	gather []int32
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
	if k := len(l.of); int(s) >= k {
		l.of = slices.Grow(l.of, int(s)+1-k)[:s+1]
		for ; k <= int(s); k++ {
			l.of[k] = l.of[k][:0] // a slot's list of an earlier listing, emptied
		}
	}
	l.of[s] = editSorted(l.of[s], i, d)
	x.trackRun(i, d)
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

// takeRecs lists the live records read takes, in index order: those of the
// job slots in inc (the jobs read, in slot order) and those of no slot.
// It fills tl.outFree, by node, with the GPUs of the running records of
// the jobs left out.
func (x *Incremental) takeRecs(inc []int32) []int32 {
	if !x.lists.ok || len(x.lists.nodeRun) != len(x.nodes) {
		x.relist()
	}
	l := &x.lists
	g := l.gather[:0]
	for _, s := range inc {
		if int(s) < len(l.of) {
			g = append(g, l.of[s]...)
		}
	}
	g = append(g, l.none...)
	slices.Sort(g)
	l.gather = g
	x.tl.outFree = resize(x.tl.outFree, len(x.nodes))
	copy(x.tl.outFree, l.nodeRun)
	for _, i := range g {
		if a := &x.allocs[i]; a.running && x.allocJobSlot(i) >= 0 {
			if n := x.allocNodeIndex(i); n >= 0 {
				x.tl.outFree[n] -= a.gpus // read: not left out
			}
		}
	}
	return g
}
