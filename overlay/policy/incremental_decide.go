package policy

import (
	"math"
	bits64 "math/bits"
	"slices"
	"time"

	"github.com/allot-sched/allot/budgets"
)

// Decide returns the Plan that Decide(x.Snapshot(), tree, fs, now, cfg)
// returns (with Explanations only when x.Explanations is set). The Plan is
// valid until the next call; the caller applies it and passes it to
// Remember, as a caller of Decide passes its memory in the next Snapshot.
func (x *Incremental) Decide(tree *budgets.Tree, fs *budgets.FairShare, now time.Time, cfg Config) *Plan {
	if fs == nil {
		fs = budgets.ComputeFairShare(tree, nil)
	}
	x.configure(tree, &cfg)
	x.now = now.UnixNano()
	x.orderLeaves(fs)
	// Every job left out must sit at the band's bottom (tail.go): so the
	// queued jobs of every leaf whose tier is above it are read
	// (pendingLevel), whatever their depth.
	base := max(cfg.Pending.Levels()+2*cfg.MaxEvaluations, int(x.prefix[x.firstBottomRank(cfg.Pending)]))
	h := max(x.head, base)
	for tries := 0; ; tries++ {
		h = min(h, int(x.tl.queued))
		x.read(h)
		x.tl.explain = x.Explanations
		p := x.d.decideWith(&x.tl, &x.view, tree, fs, now, cfg)
		if !x.tl.unsound || h == int(x.tl.queued) {
			if tries == 0 {
				h = max(base, h/2) // shrink back once fewer jobs do
			}
			x.head = h
			if x.Explanations {
				x.explainAll(p, fs)
			}
			return p
		}
		h *= 4
	}
}

// decideWith decides on a snapshot from which an Incremental left out the
// jobs tl describes.
func (d *Decider) decideWith(tl *tail, snap *Snapshot, tree *budgets.Tree, fs *budgets.FairShare, now time.Time, cfg Config) *Plan {
	tl.crossed, tl.unsound = false, false
	d.tl = tl
	p := d.Decide(snap, tree, fs, now, cfg)
	d.tl = nil
	return p
}

// orderLeaves ranks the leaves in fair-share order and counts the queued
// jobs of the leaves before each.
func (x *Incremental) orderLeaves(fs *budgets.FairShare) {
	n := len(x.leaves)
	x.leafRank = resize(x.leafRank, n)
	x.byRank = resize(x.byRank, n)
	if !x.byPosition(fs) {
		for i := range x.byRank {
			x.byRank[i] = int32(i)
		}
		slices.SortFunc(x.byRank, func(a, b int32) int { return fs.Position(int(a)) - fs.Position(int(b)) })
	}
	x.prefix = resize(x.prefix, n+1)
	x.prefix[0] = 0
	for r, l := range x.byRank {
		x.leafRank[l] = int32(r)
		x.prefix[r+1] = x.prefix[r] + int32(len(x.leaves[l]))
	}
	x.tl.queued = x.prefix[n]
}

// byPosition puts each leaf at its fair-share position in byRank, the
// order sorting by position gives, when the positions are 0 to n-1 once
// each (as ComputeFairShare numbers a tree's leaves); it reports false,
// byRank undone, when they are not.
func (x *Incremental) byPosition(fs *budgets.FairShare) bool {
	byRank := x.byRank
	for r := range byRank {
		byRank[r] = -1
	}
	for l := range byRank {
		p := fs.Position(l)
		if p < 0 || p >= len(byRank) || byRank[p] >= 0 {
			return false
		}
		byRank[p] = int32(l)
	}
	return true
}

// firstBottomRank is the rank of the first leaf whose deep queued jobs sit
// at the band's bottom (pendingTier 0); len(x.byRank) when there is none.
func (x *Incremental) firstBottomRank(band Range) int {
	n := len(x.byRank)
	k := pendingTiers(band, n)
	r := 0
	for r < n && pendingTier(r, n, k) > 0 {
		r++
	}
	return r
}

// queuedRank is the 1-based rank of queued job slot s among all queued jobs.
func (x *Incremental) queuedRank(s int32) int32 {
	j := &x.jobs[s]
	i, _ := slices.BinarySearchFunc(x.leaves[j.leaf], s, x.compareQueued)
	return x.prefix[x.leafRank[j.leaf]] + int32(i) + 1
}

// read builds the snapshot a decision reads: every job with allocations
// but the running free work leftOutRunning leaves out (counted per node),
// the first h queued jobs in pending order, the jobs whose priority is not
// where an idle job stays, and the jobs the memory names; every node, and
// the allocations of the jobs read and of none. The other jobs are
// described by x.tl.
func (x *Incremental) read(h int) {
	x.epoch++
	x.mark = resize(x.mark, len(x.jobs))
	x.rankAt = resize(x.rankAt, len(x.jobs))
	inc := x.inc[:0]
	x.inSet = resize(x.inSet, (len(x.jobs)+63)/64) // all zero: each read clears the words it set
	x.inWords = resize(x.inWords, (len(x.inSet)+63)/64)
	clear(x.inWords)
	add := func(s int32) {
		if x.mark[s] != x.epoch {
			x.mark[s] = x.epoch
			x.inSet[s>>6] |= 1 << (s & 63)
			x.inWords[s>>12] |= 1 << ((s >> 6) & 63)
		}
	}
	addID := func(id string) {
		if s, ok := x.jobAt[id]; ok {
			add(s)
		}
	}
	x.pinFreeWork()
	for _, s := range x.active.items {
		// leftOutRunning, its kept answer read without a call
		r := &x.runs[s]
		out := r.out
		if !r.kept(x.now) {
			out = x.leftOutAfresh(r)
		}
		if !out {
			add(s)
		}
	}
	for _, s := range x.dirty.items {
		add(s)
	}
	for _, r := range x.Reservations {
		addID(r.Job)
	}
	for _, v := range x.Victims {
		addID(v.Job)
		addID(v.For)
	}
	for _, is := range x.Issued {
		addID(is.Job)
	}
	for _, n := range x.Notices {
		addID(n.Job)
		addID(n.For)
	}
	asks := x.askScratch()
	n := 0
	top := x.top[:0]
	for r := 0; r < len(x.leafRank) && n < h; r++ {
		l := x.leafOfRank(r)
		for _, s := range x.leaves[l] {
			if n == h {
				break
			}
			add(s)
			if a := x.jobs[s].ask; x.asks.ask[0] == a {
				asks[0]-- // the common case: the smallest ask
			} else {
				i, _ := slices.BinarySearch(x.asks.ask, a)
				asks[i]--
			}
			n++
			x.rankAt[s] = int32(n)
			top = append(top, s)
		}
	}
	x.top = top
	for _, s := range x.quick.items {
		if x.rankAt[s] != 0 {
			continue // read among the top
		}
		add(s)
		i, _ := slices.BinarySearch(x.asks.ask, x.jobs[s].ask)
		asks[i]-- // read, so not among the jobs left out
	}
	x.tl.first, x.tl.minAsk = 0, 1<<30
	if h < int(x.tl.queued) {
		x.tl.first = x.firstLeftOut(h)
		for i, c := range asks {
			if c > 0 {
				x.tl.minAsk = x.asks.ask[i]
				break
			}
		}
	}
	for v, words := range x.inWords {
		for words != 0 {
			w := v<<6 + bits64.TrailingZeros64(words)
			words &= words - 1
			bits := x.inSet[w]
			x.inSet[w] = 0
			for bits != 0 {
				inc = append(inc, int32(w<<6+bits64.TrailingZeros64(bits)))
				bits &= bits - 1
			}
		}
	}
	x.inc = inc
	x.viewAt = resize(x.viewAt, len(x.jobs))
	v := &x.view
	v.Nodes = x.nodes
	x.Fill(v)
	// What the Decider reads of each job read, by view index (filled
	// through locals: appends to the tail's fields would store each
	// length back).
	t := &x.tl
	jp, leaf, managed := resize(t.jp, len(inc)), resize(t.leaf, len(inc)), resize(t.managed, len(inc))
	wanted, allocated, rank := resize(t.wanted, len(inc)), resize(t.allocated, len(inc)), resize(t.rank, len(inc))
	extra := x.extra[:0]
	for k, s := range inc {
		x.viewAt[s] = int32(k)
		j := &x.jobs[s]
		jp[k], leaf[k], managed[k] = &j.Job, j.leaf, j.managed
		wanted[k], allocated[k] = j.wanted, j.Contract.Allocated
		r := int32(0)
		if j.kind == kindQueued {
			r = x.rankAt[s]
			if r == 0 {
				r = x.queuedRank(s) // read for a reason other than its rank
				extra = append(extra, int32(k))
			}
		}
		x.rankAt[s] = 0
		rank[k] = r
	}
	t.jp, t.leaf, t.managed, t.wanted, t.allocated, t.rank = jp, leaf, managed, wanted, allocated, rank
	// The queued jobs read, in rank order: the top ones, then the others
	// (all ranked below them).
	slices.SortFunc(extra, func(a, b int32) int { return int(x.tl.rank[a] - x.tl.rank[b]) })
	x.extra = extra
	x.tl.queuedOrder = x.tl.queuedOrder[:0]
	for _, s := range top {
		x.tl.queuedOrder = append(x.tl.queuedOrder, x.viewAt[s])
	}
	x.tl.queuedOrder = append(x.tl.queuedOrder, extra...)
	x.takeRecs(inc) // the records of the jobs read and of none; tl.outFree

	if x.tl.job == nil { // bound once: a method value is an allocation
		x.tl.job, x.tl.node, x.tl.before = x.viewJob, x.viewNode, x.queuedBefore
	}
}

// pinFreeWork counts, by job, the allocations on nodes that are not plain:
// unknown, unhealthy, under a Nomad drain, or in a drain or reservation
// state (jobRuns.pinned). Jobs with one are always read (drains and
// reservations stop or count allocations one by one); see leftOutRunning.
// It counts too the live allocations on plain nodes (jobRuns.plain and
// free). PutAlloc and RemoveAlloc keep the counts from one decision to
// the next; they are made again from every record only when nodes, job
// slots or an orphan's job changed since (runsOK false).
func (x *Incremental) pinFreeWork() {
	if x.plainAt != x.tl.nodesGen+1 { // nodes put or removed since
		if len(x.plain) != len(x.nodes) {
			x.runsOK = false
		}
		x.plain = resize(x.plain, len(x.nodes))
		for n := range x.nodes {
			nd := &x.nodes[n]
			p := nd.Healthy && nd.Drain == nil && nd.State == NodeNormal
			if x.plain[n] != p {
				x.plain[n], x.runsOK = p, false // runs counted on the node as it was
			}
		}
		x.plainAt = x.tl.nodesGen + 1
	}
	if len(x.runs) > len(x.jobs) {
		x.runs, x.runsOK = x.runs[:len(x.jobs)], false // compacted
	} else if len(x.runs) < len(x.jobs) {
		x.growRuns(len(x.jobs)) // jobs put since: none has a record counted
	}
	if x.runsOK {
		if len(x.runsDue) > 0 {
			x.listed()
			for _, s := range x.runsDue {
				x.recountSlot(s)
			}
			x.runsDue = x.runsDue[:0]
		}
		return
	}
	x.runsDue = x.runsDue[:0]
	for s := range x.runs {
		x.runs[s].recount()
	}
	for i := range x.allocs {
		a := &x.allocs[i]
		if !a.live {
			continue
		}
		if j, n := x.allocJobSlot(int32(i)), x.allocNodeIndex(int32(i)); j >= 0 {
			x.runs[j].count(a, n >= 0 && x.plain[n], 1)
		}
	}
	x.runsOK = true
}

// recountSlot counts job slot s's runs again from its own records (the
// record lists are kept: listed).
func (x *Incremental) recountSlot(s int32) {
	r := &x.runs[s]
	r.recount()
	for i := x.lists.first(s); i >= 0; i = x.lists.next(i) {
		n := x.allocNodeIndex(i)
		r.count(&x.allocs[i], n >= 0 && x.plain[n], 1)
	}
}

// leftOutRunning reports whether job slot s, which has allocations, is
// running free work a decision need not read: managed, of no leaf
// (unallocated, or its budget left the tree), its priority inside the
// levels, at its level (free.go: nothing to write), a live allocation (not finished)
// and no allocation on a node that is not plain. All a decision does with such a job is count its live
// allocations' GPUs as held and preemptible by Nomad on their nodes
// (tail.outFree); it is never a victim, never moved, never written, and
// its explanation is that of an idle unallocated job.
//
// The answer is kept in the job's runs (outOK) until its level can change
// or anything it reads but the time does (every change clears outOK).
func (x *Incremental) leftOutRunning(s int32) bool {
	r := &x.runs[s]
	if r.kept(x.now) {
		return r.out // nothing it reads changed since, and its level has not
	}
	return x.leftOutAfresh(r)
}

// kept reports whether leftOutRunning's kept answer holds at now.
func (r *jobRuns) kept(now int64) bool { return r.outOK && r.outFrom <= now && now < r.outUntil }

// leftOutAfresh is leftOutRunning's answer for runs r afresh, kept in r.
func (x *Incremental) leftOutAfresh(r *jobRuns) bool {
	if !r.freeWork || r.plain == 0 || r.pinned != 0 {
		r.out, r.outOK, r.outFrom, r.outUntil = false, true, x.now, math.MaxInt64 // until a count or field changes
		return false
	}
	p, until := x.cfg.freeUntil(int(r.prio), r.free, r.resumable, x.now)
	r.out, r.outOK, r.outFrom, r.outUntil = p == int(r.prio), true, x.now, until
	return r.out
}

// allocJobSlot is the slot of allocation record i's job, -1 when it has
// none. The slot cached in its incAlloc holds while no compaction
// renumbered the slots (jobEra) and the job in it was not removed
// (slotGen) and its job ID did not change (PutAlloc clears it then).
func (x *Incremental) allocJobSlot(i int32) int32 {
	a := &x.allocs[i]
	if s := a.job; s >= 0 && a.jobEra == x.jobEra && a.jobGen == x.gen(s) {
		return s
	}
	s, ok := x.jobAt[x.recs[i].Job]
	if !ok {
		a.job = -1
		return -1
	}
	a.job, a.jobEra, a.jobGen = s, x.jobEra, x.gen(s)
	return s
}

// gen is job slot s's generation.
func (x *Incremental) gen(s int32) uint32 {
	if int(s) < len(x.slotGen) {
		return x.slotGen[s]
	}
	return 0
}

// allocNodeIndex is the index of allocation record i's node, -1 when it
// is not known. The index cached in its incAlloc holds while no node was
// removed (nodeEra) and its node ID did not change (PutAlloc clears it
// then).
func (x *Incremental) allocNodeIndex(i int32) int32 {
	a := &x.allocs[i]
	if n := a.node; n >= 0 && a.nodeEra == x.nodeEra {
		return n
	}
	n, ok := x.nodeAt[x.recs[i].Node]
	if !ok {
		n = -1
	}
	a.node, a.nodeEra = n, x.nodeEra
	return n
}

// viewJob is the index of job id in the snapshot read.
func (x *Incremental) viewJob(id string) (int32, bool) {
	s, ok := x.jobAt[id]
	if !ok || x.mark[s] != x.epoch {
		return 0, false
	}
	return x.viewAt[s], true
}

// viewNode is the index of node id in the snapshot read.
func (x *Incremental) viewNode(id string) (int32, bool) {
	n, ok := x.nodeAt[id]
	return n, ok
}

// leafOfRank is the leaf at rank r of the fair-share order.
func (x *Incremental) leafOfRank(r int) int32 { return x.byRank[r] }

// askScratch copies the count of queued jobs by smallest ask.
func (x *Incremental) askScratch() []int32 {
	x.askBuf = append(x.askBuf[:0], x.asks.n...)
	return x.askBuf
}

// firstLeftOut is the rank of the first queued job after the first h that
// read did not take; 0 when it took them all.
func (x *Incremental) firstLeftOut(h int) int32 {
	r := int32(h) // 0-based rank
	lr, _ := slices.BinarySearch(x.prefix, r+1)
	lr-- // the leaf rank whose range holds r
	for ; lr < len(x.byRank); lr++ {
		l := x.leaves[x.byRank[lr]]
		for i := r - x.prefix[lr]; i < int32(len(l)); i++ {
			if x.mark[l[i]] != x.epoch {
				return x.prefix[lr] + i + 1
			}
		}
		r = x.prefix[lr+1]
	}
	return 0
}

// queuedBefore counts the queued jobs sorting before job v of the snapshot
// read, a pending job that is not queued.
func (x *Incremental) queuedBefore(v int32) int32 {
	job := x.tl.jp[v]
	n, _ := x.tree.Lookup(job.Contract.Budget)
	leaf := n.LeafIndex
	i, _ := slices.BinarySearchFunc(x.leaves[leaf], job, func(s int32, j *Job) int { return compareQueued(&x.jobs[s].Job, j) })
	return x.prefix[x.leafRank[leaf]] + int32(i)
}

// explainAll gives p an Explanation for every managed job in Snapshot
// order: the decision's for the jobs it read, and for the others what it
// would have said (a queued job waits in the queue or is too large, an
// idle unallocated job sits in its band).
func (x *Incremental) explainAll(p *Plan, fs *budgets.FairShare) {
	d := &x.d
	read := p.Explanations
	ex := x.explBuf[:0]
	k, e := 0, 0
	for s := range x.jobs {
		j := &x.jobs[s]
		if !j.live {
			continue
		}
		if k < len(x.inc) && x.inc[k] == int32(s) {
			if d.jobs[k].state != jsUnmanaged {
				ex = append(ex, read[e])
				e++
			}
			k++
			continue
		}
		if !j.managed {
			continue
		}
		ex = append(ex, x.explainLeftOut(int32(s), fs))
	}
	x.explBuf = ex
	p.Explanations = ex
}

// explainLeftOut explains a job read did not take.
func (x *Incremental) explainLeftOut(s int32, fs *budgets.FairShare) Explanation {
	j := &x.jobs[s]
	e := Explanation{Job: j.ID, Namespace: j.Namespace, Priority: j.Priority, Warnings: j.Contract.Warnings}
	if j.kind != kindQueued {
		// Left out, so at its level already (leftOutRunning, offIdle).
		e.Band, e.Target, e.Reason = BandUnallocated, j.Priority, Reason{Code: ReasonUnallocated}
		if j.Contract.Allocated {
			e.Reason = Reason{Code: ReasonBudgetGone, Detail: j.Contract.Budget}
		}
		return e
	}
	pos := int(x.queuedRank(s)) + x.othersBefore(s)
	e.Band, e.Target, e.Position = BandPending, x.cfg.Pending.Low, pos
	e.Reason, e.Wait = Reason{Code: ReasonPending, N: pos}, WaitQueue
	if !j.Contract.Resumable {
		e.Reason.Code = ReasonPendingRestart
	}
	e.Budget, e.Rank = j.Contract.Budget, fs.Rank(int(j.leaf))
	asks := x.d.asks[:0]
	for _, g := range j.Groups {
		a := ask{gpus: int32(g.GPUs), model: g.Model, node: -1}
		if g.GPUs > 0 && g.Count > 0 && x.d.tooLarge(&j.Job, &a) {
			e.Wait = x.d.tooLargeWait(&j.Job, []ask{a})
			if e.Wait == WaitPool {
				break
			}
		}
		for k := 0; g.GPUs > 0 && k < g.Count; k++ {
			asks = append(asks, a)
		}
	}
	if e.Wait == WaitQueue && x.d.overCapacity(&j.Job, asks) {
		e.Wait = WaitTooLarge
	}
	x.d.asks = asks
	return e
}

// othersBefore counts the pending jobs that are not queued (all read) and
// sort before queued job slot s.
func (x *Incremental) othersBefore(s int32) int {
	d := &x.d
	j := &x.jobs[s]
	n := 0
	for _, k := range d.order {
		if k.partial() || x.tl.rank[k.job] != 0 {
			continue
		}
		lr, ls := x.leafRank[d.jobs[k.job].leaf], x.leafRank[j.leaf]
		if lr < ls || lr == ls && compareQueued(d.jp[k.job], &j.Job) < 0 {
			n++
		}
	}
	return n
}
