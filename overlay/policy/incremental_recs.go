package policy

import (
	bits64 "math/bits"
	"slices"
	"time"
)

// recLists is what read takes of the allocation records, kept through
// PutAlloc and RemoveAlloc so that a decision reads the records of the
// jobs it reads instead of scanning every record (Incremental.lists).
// Each job slot's live records, and the live records of no slot, are a
// list linked through the records (in no order: takeRecs marks them by
// record), so that the lists allocate nothing per job and the collector
// has no pointers to follow in them.
type recLists struct {
	ok bool
	// head is by job slot: 1 + the first of its live records, 0 when it
	// has none; none is the same for the live records of no slot.
	head []int32
	none int32
	// nextOf and prev are by record: 1 + the next (previous) record of
	// its list, 0 at its end.
	nextOf, prev []int32
	// nodeRun is by node: the GPUs of the running live records of a job
	// slot there (those of the jobs read left out are tail.outFree).
	nodeRun []int32
	// bits and slot are takeRecs' scratch, by record: taken, and the
	// slot of its job (-1: none).
	bits []uint64
	slot []int32
}

// first is the first record of job slot s's list, -1 when empty.
func (l *recLists) first(s int32) int32 {
	if int(s) >= len(l.head) {
		return -1
	}
	return l.head[s] - 1
}

// next is the record after record i in its list, -1 at the end.
func (l *recLists) next(i int32) int32 { return l.nextOf[i] - 1 }

// listOf is the head of job slot s's list (s >= 0) or of the records of no
// slot (s < 0), grown to hold s.
func (l *recLists) listOf(s int32) *int32 {
	if s < 0 {
		return &l.none
	}
	if k := len(l.head); int(s) >= k {
		l.head = slices.Grow(l.head, int(s)+1-k)[:s+1]
		clear(l.head[k:])
	}
	return &l.head[s]
}

// link puts record i at the front of the list whose head is h.
func (l *recLists) link(h *int32, i int32) {
	if n := int(i) + 1; n > len(l.nextOf) {
		l.nextOf = slices.Grow(l.nextOf, n-len(l.nextOf))[:n]
		l.prev = slices.Grow(l.prev, n-len(l.prev))[:n]
	}
	l.nextOf[i], l.prev[i] = *h, 0
	if *h != 0 {
		l.prev[*h-1] = i + 1
	}
	*h = i + 1
}

// unlink takes record i out of the list whose head is h.
func (l *recLists) unlink(h *int32, i int32) {
	p, n := l.prev[i], l.nextOf[i]
	if p != 0 {
		l.nextOf[p-1] = n
	} else {
		*h = n
	}
	if n != 0 {
		l.prev[n-1] = p
	}
	l.nextOf[i], l.prev[i] = 0, 0
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
	if d > 0 {
		l.link(l.listOf(s), i)
	} else {
		l.unlink(l.listOf(s), i)
	}
	if s >= 0 {
		x.trackRun(i, d)
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

// listed makes the lists again unless they are kept.
func (x *Incremental) listed() {
	if !x.lists.ok || len(x.lists.nodeRun) != len(x.nodes) {
		x.relist()
	}
}

// relist makes the lists again from every live record.
func (x *Incremental) relist() {
	l := &x.lists
	l.head = resize(l.head, len(x.jobs))
	clear(l.head)
	l.none = 0
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
	if !l.ok {
		return
	}
	for i := l.first(s); i >= 0; i = l.first(s) {
		x.trackRun(i, -1)
		l.unlink(&l.head[s], i)
		l.link(&l.none, i)
	}
}

// adopt moves the records of no slot that name job slot s's job, put
// after them, to the slot.
func (x *Incremental) adopt(s int32) {
	l := &x.lists
	if !l.ok {
		return
	}
	id := x.jobs[s].ID
	for i := l.none - 1; i >= 0; {
		n := l.nextOf[i] - 1
		if x.recs[i].Job == id {
			l.unlink(&l.none, i)
			l.link(l.listOf(s), i)
			x.trackRun(i, 1)
		}
		i = n
	}
}

// takeRecs puts in tl the live records read takes, in index order: those
// of the job slots in inc (the jobs read) and those of no slot, with their
// jobs' indexes in the view (the slot's viewAt) and their nodes' indexes,
// and indexes them by job (tl.jobAllocs).
// It fills tl.outFree, by node, with the GPUs of the running records of
// the jobs left out: running free work (pinFreeWork), whose live
// allocations hold GPUs Nomad may preempt, on plain nodes.
func (x *Incremental) takeRecs(inc []int32) {
	x.listed()
	l := &x.lists
	l.bits = resize(l.bits, (len(x.allocs)+63)/64)
	clear(l.bits)
	l.slot = resize(l.slot, len(x.allocs))
	t := &x.tl
	n := 0                                           // records taken
	marked, slot, nextOf := l.bits, l.slot, l.nextOf // locals: stores through them do not reload l's slices
	start := resize(t.jobAllocs.start, len(inc)+1)   // jobAllocs' rows: job k of inc's records
	for k, s := range inc {
		start[k] = int32(n)
		for i := l.first(s); i >= 0; i = nextOf[i] - 1 {
			marked[i>>6] |= 1 << (i & 63)
			slot[i] = s
			n++
		}
	}
	start[len(inc)] = int32(n)
	items := resize(t.jobAllocs.items, n)
	fill := resize(t.fill, len(inc)) // where each row's next item goes
	copy(fill, start)
	t.jobAllocs.start, t.jobAllocs.items, t.fill = start, items, fill
	for i := l.none - 1; i >= 0; i = nextOf[i] - 1 {
		marked[i>>6] |= 1 << (i & 63)
		slot[i] = -1
		n++
	}
	if len(x.sums) < len(x.jobs) {
		x.sums = slices.Grow(x.sums, len(x.jobs)-len(x.sums))[:len(x.jobs)] // new slots: not kept
	}
	sums := resize(t.sums, len(inc))
	for k, s := range inc {
		ks := &x.sums[s] // x.sums does not grow in a decision: the pointers hold
		if !ks.ok {
			x.countSum(s)
		}
		sums[k] = &ks.runSum
	}
	t.sums = sums
	outFree := resize(t.outFree, len(x.nodes))
	copy(outFree, l.nodeRun)
	t.outFree = outFree
	// Filled through locals: appends to the tail's fields would store
	// each length back.
	ap, alive, gpus := resize(t.ap, n), resize(t.alive, n), resize(t.gpus, n)
	allocJob, allocNode := resize(t.allocJob, n), resize(t.allocNode, n)
	k := 0
	allocs, recs, viewAt, era := x.allocs, x.recs, x.viewAt, x.nodeEra
	for w, bits := range marked {
		for bits != 0 {
			i := int32(w<<6 + bits64.TrailingZeros64(bits))
			bits &= bits - 1
			a := &allocs[i]
			n := a.node // allocNodeIndex's cached index, checked here without a call
			if n < 0 || a.nodeEra != era {
				n = x.allocNodeIndex(i)
			}
			j := slot[i]
			if j >= 0 {
				if a.running && n >= 0 {
					outFree[n] -= a.gpus // read: not left out
				}
				j = viewAt[j] // every job with records read is
				items[fill[j]] = int32(k)
				fill[j]++
			}
			ap[k], alive[k], gpus[k], allocJob[k], allocNode[k] = &recs[i], a.running, a.gpus, j, n
			k++
		}
	}
	t.ap, t.alive, t.gpus, t.allocJob, t.allocNode = ap, alive, gpus, allocJob, allocNode
}

// runSum is what Decider.jobState reads of a job's allocation records, as
// it would count them from its rows (settle aside): its live allocations
// (Alloc.live) and their GPUs, whether one of them has not started, the
// latest start of the started ones, and its records done (Alloc.done);
// and the end of its protected window were it running from lastStart
// (setWindow).
type runSum struct {
	live, done, held int32
	notStarted       bool
	lastStart        time.Time
	windowEnd        time.Time
}

// add counts allocation a, at index i, in the sum: at is the index of the
// allocation lastStart is from (-1: none). Of the allocations started at
// the latest start, the one at the lowest index gives lastStart, whatever
// the order they are added in.
func (sum *runSum) add(a *Alloc, i int32, at *int32) {
	switch {
	case a.live():
		sum.live++
		sum.held += int32(a.GPUs)
		if a.StartedAt.IsZero() || a.ClientStatus != ClientRunning {
			sum.notStarted = true
		} else if a.StartedAt.After(sum.lastStart) || *at >= 0 && i < *at && a.StartedAt.Equal(sum.lastStart) {
			sum.lastStart, *at = a.StartedAt, i
		}
	case a.done():
		sum.done++
	}
}

// setWindow sets windowEnd: lastStart plus the job's protected window
// (protected, bounded by runtimeCap).
func (sum *runSum) setWindow(protected, runtimeCap time.Duration) {
	sum.windowEnd = sum.lastStart.Add(min(protected, runtimeCap))
}

// keptSum is a job slot's runSum, kept from one decision to the next
// while none of its records and nothing of the job changed (ok).
type keptSum struct {
	runSum
	ok bool
}

// countSum counts job slot s's runSum afresh from its record list (in no
// order; runSum.add keeps the first latest start in index order, as
// jobState's walk over the job's allocations does) and keeps it.
func (x *Incremental) countSum(s int32) {
	var sum runSum
	at := int32(-1)
	for i := x.lists.first(s); i >= 0; i = x.lists.next(i) {
		sum.add(&x.recs[i], i, &at)
	}
	sum.setWindow(x.jobs[s].Contract.Protected, x.cfg.RuntimeCap)
	x.sums[s] = keptSum{runSum: sum, ok: true}
}

// staleSum forgets job slot s's kept runSum (a record of it or the job
// changed).
func (x *Incremental) staleSum(s int32) {
	if s >= 0 && int(s) < len(x.sums) {
		x.sums[s].ok = false
	}
}
