package policy

import (
	"slices"
	"strings"

	"github.com/allot-sched/allot/budgets"
)

// Incremental is the policy's incremental form, for callers that decide
// often on a cluster that changes a little between decisions (the
// simulator). It holds the cluster as a Snapshot would, absorbs deltas
// (PutJob, RemoveJob, PutAlloc, RemoveAlloc, PutNode, RemoveNode, and its
// Carry's Remember) and its Decide returns exactly the Plan that Decide
// returns on Snapshot() with the same arguments: time advances and usage
// charged come in as now and the FairShare, as for Decide.
//
// It keeps the waiting allocated jobs without allocations per leaf, in
// pending order, and reads only what a decision can depend on: jobs with
// allocations (running free work on plain nodes only as GPUs held per
// node), the first pending jobs in order, jobs whose priority is not where
// the policy keeps them, and jobs its memory names. The pending jobs
// deep in the order at the band's bottom are left out (tail.go); when the
// decision finds they might have mattered it decides again with more of
// them. It is a plain value the caller owns: no goroutines, no clock, not
// safe for concurrent use. Its zero value is ready.
type Incremental struct {
	// Explanations makes Decide fill Plan.Explanations for every managed
	// job, in Snapshot().Jobs order, as Decide does (it costs a pass over
	// every job); otherwise Plan.Explanations is nil.
	Explanations bool

	// Carry is the memory carried from one Plan to the next decision, as a
	// caller of Decide passes it in the Snapshot (Carry.Fill): Remember
	// sets it from a Plan, less what the caller did not carry out.
	Carry

	nodes   []Node
	nodeAt  map[string]int32
	jobs    []incJob // Snapshot order, with holes
	jobAt   map[string]int32
	holes   int
	allocs  []incAlloc // Snapshot order, with holes: what read scans at each decision
	recs    []Alloc    // by the same index: the allocations themselves
	allocAt map[string]int32
	aHoles  int
	// orphans counts the allocation records of job IDs that hold no slot
	// (an allocation put before its job, or left by a removed job); a
	// job's own are counted in its incJob.allocs.
	orphans map[string]int32

	// Classification, for one tree and configuration.
	tree    *budgets.Tree
	cfg     Config
	leaves  [][]int32 // by leaf index: queued jobs in pending order
	asks    askCounts // queued jobs by smallest ask
	active  slotSet   // jobs with allocations
	dirty   slotSet   // jobs never left out: priority not where the policy keeps idle jobs
	quick   slotSet   // queued debug-shaped jobs (quickJob), never left out: rule 5b may examine any
	head    int       // pending jobs read at the top of the order last time
	d       Decider
	view    Snapshot
	tl      tail
	mark    []uint32
	slotGen []uint32 // by job slot: bumped when its job is removed
	jobEra  uint32   // bumped when job slots are renumbered (compact)
	nodeEra uint32   // bumped when node indexes shift (RemoveNode)
	plain   []bool   // by node: healthy, no Nomad drain, in service (read)
	plainAt uint64   // tl.nodesGen+1 when plain was filled (0: never)
	// runs is by job slot: its allocation records counted as pinFreeWork
	// reads them, kept up to date by PutAlloc and RemoveAlloc while runsOK
	// (else counted again from every record at the next decision).
	runs   []jobRuns
	runsOK bool
	// runsDue lists the slots whose counts a removal left without their
	// latest start (jobRuns.count): counted again from their own records
	// at the next decision, while runsOK.
	runsDue []int32
	// lists, while lists.ok, holds the live allocation records by what
	// read takes of them (incremental_recs.go): each job slot's own, the
	// ones of no slot, and by node the GPUs of the running ones of a slot.
	// Any change that moves a record between slots or nodes by other than
	// its own PutAlloc or RemoveAlloc clears lists.ok; read lists them again.
	lists recLists
	// sums is by job slot: the runSum of its records, kept while nothing
	// of them or the job changed (staleSum; every one forgotten when slots
	// are renumbered or the settings classified again).
	sums     []keptSum
	now      int64 // of the decision being read, in Unix nanoseconds
	epoch    uint32
	viewAt   []int32 // by job slot: its index in view, when marked this epoch
	rankAt   []int32 // by job slot: its queued rank, when read in the top; else 0
	top      []int32 // slots of the top queued jobs read, in rank order
	extra    []int32 // view indexes of the other queued jobs read
	inc      []int32
	leafRank []int32  // by leaf: its rank in the fair-share order
	byRank   []int32  // by rank: the leaf
	prefix   []int32  // by rank: queued jobs of the leaves before
	askBuf   []int32  // asks.n, counted down by read
	inSet    []uint64 // by job slot: read this epoch (bits), to list them in slot order; zero between reads
	inWords  []uint64 // by word of inSet: it has a bit set (bits)
	explBuf  []Explanation
}

type jobKind uint8

const (
	kindActive jobKind = iota // has allocations: always read
	kindQueued                // allocated, managed, no allocation: in leaves
	kindIdle                  // no allocation, unallocated or unmanaged
)

type incJob struct {
	Job
	live    bool
	kind    jobKind
	managed bool
	leaf    int32 // managed and allocated to a leaf budget: its index; else -1
	ask     int32 // smallest GPUs of one allocation
	allocs  int32 // allocation records naming it (put and not removed)
	// wanted is the allocations its groups ask for (wantedAllocs), set by
	// classify next to leaf so that a decision does not walk the groups.
	wanted int32
}

// incAlloc is what a decision's read scans of every allocation record,
// kept apart from the Alloc (Incremental.recs) so that the scan touches
// a few bytes per allocation, not the whole record.
type incAlloc struct {
	live bool
	// running is Alloc.live(): placed and meant to keep running.
	running bool
	gpus    int32 // Alloc.GPUs
	// job and node cache the slot of its job and the index of its node,
	// valid while the slot's generation and the eras they were read in
	// last (either may come and go).
	job, node      int32
	jobGen, jobEra uint32
	nodeEra        uint32
	// start and waiting are what freeRun.add reads of the record: its
	// StartedAt in Unix nanoseconds, and whether it does not run yet.
	start   int64
	waiting bool
}

// jobRuns counts a job's allocation records by what pinFreeWork reads of
// them: the live ones on plain nodes (and their freeRun), and the records
// on nodes that are not plain or not known.
type jobRuns struct {
	plain   int32   // live allocations on plain nodes
	pinned  int32   // records on nodes that are not plain
	started int32   // of plain, those running (not waiting)
	atStart int32   // of started, those that started at free.start
	waiting int32   // of plain, those not running yet
	free    freeRun // of the plain ones
	// What leftOutRunning reads of the job itself, next to its counts
	// (classify and PutPriority set them): its priority, whether it is
	// managed and of no leaf (free work), and resumable.
	prio      int32
	freeWork  bool
	resumable bool
	// leftOutRunning's last answer for free work (out) holds from outFrom
	// to outUntil (Unix nanoseconds) while outOK: nothing it reads but the
	// time changed since, and its level does not change in between
	// (Config.freeUntil). Any count or field changed clears outOK.
	outOK, out        bool
	outFrom, outUntil int64
}

// recount empties the counts, keeping the job's own fields.
func (r *jobRuns) recount() {
	*r = jobRuns{prio: r.prio, freeWork: r.freeWork, resumable: r.resumable}
}

// count adds (d = 1) or takes away (d = -1) record a, of a job, on a plain
// node or not. It reports false when a removal leaves the latest start
// unknown (the record was the last that started then): the counts must be
// made again from the records.
func (r *jobRuns) count(a *incAlloc, plain bool, d int32) bool {
	r.outOK = false
	if !plain {
		r.pinned += d
		return true
	}
	if !a.running {
		return true
	}
	r.plain += d
	r.free.allocs += d
	if a.waiting {
		r.waiting += d
		r.free.waiting = r.waiting > 0
		return true
	}
	r.started += d
	switch {
	case d > 0 && a.start > r.free.start:
		r.free.start, r.atStart = a.start, 1
	case d > 0 && a.start == r.free.start:
		r.atStart++
	case d < 0 && a.start == r.free.start:
		if r.atStart--; r.atStart == 0 {
			if r.started > 0 {
				return false // the next latest start is not kept
			}
			r.free.start = 0
		}
	}
	return true
}

// slotSet is a set of job slots with O(1) add and remove.
type slotSet struct {
	items []int32
	at    []int32 // by slot: 1 + its index in items, 0 when absent
}

func (s *slotSet) add(x int32) {
	if n := int(x) + 1; n > len(s.at) {
		s.at = slices.Grow(s.at, n-len(s.at))[:n] // never shrunk: the rest is zero
	}
	if s.at[x] == 0 {
		s.items = append(s.items, x)
		s.at[x] = int32(len(s.items))
	}
}

func (s *slotSet) remove(x int32) {
	if int(x) >= len(s.at) || s.at[x] == 0 {
		return
	}
	i := s.at[x] - 1
	last := s.items[len(s.items)-1]
	s.items[i] = last
	s.at[last] = i + 1
	s.items = s.items[:len(s.items)-1]
	s.at[x] = 0
}

func (s *slotSet) reset() {
	for _, x := range s.items {
		s.at[x] = 0
	}
	s.items = s.items[:0]
}

// PutNode adds node n or replaces the node with its ID (keeping its place).
func (x *Incremental) PutNode(n Node) {
	if x.nodeAt == nil {
		x.nodeAt = make(map[string]int32)
	}
	x.tl.nodesGen++ // pinFreeWork sees whether plain nodes changed
	if i, ok := x.nodeAt[n.ID]; ok {
		x.nodes[i] = n
		return
	}
	x.nodeAt[n.ID] = int32(len(x.nodes))
	x.nodes = append(x.nodes, n)
	x.lists.ok = false // a record on a node not known until now has one
}

// RemoveNode removes a node.
func (x *Incremental) RemoveNode(id string) {
	i, ok := x.nodeAt[id]
	if !ok {
		return
	}
	x.nodes = slices.Delete(x.nodes, int(i), int(i)+1)
	x.nodeEra++
	x.tl.nodesGen++
	x.runsOK, x.lists.ok = false, false
	delete(x.nodeAt, id)
	for k := int(i); k < len(x.nodes); k++ {
		x.nodeAt[x.nodes[k].ID] = int32(k)
	}
}

// PutJob adds job j (submitted) or replaces the job with its ID, keeping its
// place (priority observed, written or changed by a user, contract changed).
func (x *Incremental) PutJob(j Job) {
	if x.jobAt == nil {
		x.jobAt = make(map[string]int32)
	}
	s, ok := x.jobAt[j.ID]
	if ok {
		x.unclassify(s)
		x.jobs[s].Job = j
		x.staleSum(s)
	} else {
		if len(x.jobs) == cap(x.jobs) && x.holes > 64 && x.holes > len(x.jobs)/4 {
			// Close the holes rather than grow: the slots' memory is the
			// largest the Incremental holds, and the collector scans it.
			x.compact()
		}
		s = int32(len(x.jobs))
		x.jobAt[j.ID] = s
		n := int32(0)
		if len(x.orphans) > 0 {
			if n = x.orphans[j.ID]; n != 0 {
				delete(x.orphans, j.ID) // its allocations came first
				x.runsOK = false        // and are counted for no job
			}
		}
		x.jobs = append(x.jobs, incJob{Job: j, live: true, allocs: n})
		x.staleSum(s)
		if n != 0 {
			x.adopt(s) // its records are of its slot now
		}
	}
	x.classify(s)
}

// PutPriority records job id's Nomad priority, the priority allot last
// wrote and its modify index, as PutJob with only those fields changed
// would; an unknown ID is ignored. The pending order does not read the Nomad
// priority, so the job keeps its place without being filed again.
func (x *Incremental) PutPriority(id string, priority, lastWritten int, modifyIndex uint64) {
	s, ok := x.jobAt[id]
	if !ok {
		return
	}
	j := &x.jobs[s]
	j.Priority, j.LastWrittenPriority, j.ModifyIndex = priority, lastWritten, modifyIndex
	if x.tree == nil {
		return // classified at the next decision
	}
	x.runs[s].prio, x.runs[s].outOK = int32(priority), false
	if x.offIdle(j) {
		x.dirty.add(s)
	} else {
		x.dirty.remove(s)
	}
}

// offIdle reports whether classified job j is never left out because its
// priority is not where the policy keeps idle jobs of its kind, or because
// rule 5e may hold it back wherever it sorts (requeuedLoser).
func (x *Incremental) offIdle(j *incJob) bool {
	switch j.kind {
	case kindQueued:
		return j.Priority != x.cfg.Pending.Low || requeuedLoser(&j.Job) // rule 5e may hold it anywhere in the order
	case kindIdle:
		return j.managed && !x.cfg.FreeLevels().contains(j.Priority)
	}
	return false
}

// RemoveJob removes a job (finished, or purged from Nomad). Its
// allocations stay until removed: they still hold GPUs.
func (x *Incremental) RemoveJob(id string) {
	s, ok := x.jobAt[id]
	if !ok {
		return
	}
	x.unclassify(s)
	x.staleSum(s)
	if n := x.jobs[s].allocs; n != 0 {
		x.orphan(id, n) // they stay until removed
		x.disown(s)     // of no slot now
	}
	x.jobs[s] = incJob{}
	if int(s) < len(x.runs) {
		x.runs[s] = jobRuns{} // its records now belong to no slot
	}
	if int(s) >= len(x.slotGen) {
		x.slotGen = slices.Grow(x.slotGen, int(s)+1-len(x.slotGen))[:s+1]
	}
	x.slotGen[s]++
	delete(x.jobAt, id)
	x.holes++
	if x.holes > 64 && x.holes > len(x.jobs)/2 {
		x.compact()
	}
}

// PutAlloc adds allocation a (placed) or replaces the allocation with its
// ID, keeping its place (started, stopping, completed, failed).
func (x *Incremental) PutAlloc(a Alloc) {
	if x.allocAt == nil {
		x.allocAt = make(map[string]int32)
	}
	if i, ok := x.allocAt[a.ID]; ok {
		x.staleSum(x.allocJobSlot(i))
		x.countRuns(i, -1)
		moved := x.recs[i].Job != a.Job
		if moved {
			x.track(i, -1)
			x.countAlloc(i, -1)
		} else if x.lists.ok && x.allocJobSlot(i) >= 0 {
			x.trackRun(i, -1)
		}
		if x.recs[i].Node != a.Node {
			x.allocs[i].node = -1
		}
		x.recs[i] = a
		r := &x.allocs[i]
		r.running, r.gpus = a.live(), int32(a.GPUs)
		r.start, r.waiting = runStart(&a)
		if moved {
			r.job = -1
			x.countAlloc(i, 1)
			x.track(i, 1)
		} else if x.lists.ok && x.allocJobSlot(i) >= 0 {
			x.trackRun(i, 1)
		}
		x.countRuns(i, 1)
		x.staleSum(x.allocJobSlot(i))
		return
	}
	i := int32(len(x.allocs))
	x.allocAt[a.ID] = i
	start, waiting := runStart(&a)
	x.allocs = append(x.allocs, incAlloc{live: true, running: a.live(), gpus: int32(a.GPUs), job: -1, node: -1,
		start: start, waiting: waiting})
	x.recs = append(x.recs, a)
	x.countAlloc(i, 1)
	x.countRuns(i, 1)
	x.track(i, 1)
	x.staleSum(x.allocJobSlot(i))
}

// growRuns makes runs n long, the new slots with nothing counted.
func (x *Incremental) growRuns(n int) {
	k := len(x.runs)
	x.runs = slices.Grow(x.runs, n-k)[:n]
	clear(x.runs[k:])
}

// runStart is what freeRun.add reads of allocation a: its start in Unix
// nanoseconds, and whether it does not run yet.
func runStart(a *Alloc) (int64, bool) {
	if a.ClientStatus != ClientRunning || a.StartedAt.IsZero() {
		return 0, true
	}
	return a.StartedAt.UnixNano(), false
}

// countRuns adds (d = 1) or takes away (d = -1) allocation record i in its
// job's runs, while they are kept (runsOK).
func (x *Incremental) countRuns(i int32, d int32) {
	if !x.runsOK {
		return
	}
	j := x.allocJobSlot(i)
	if j < 0 {
		return
	}
	if int(j) >= len(x.runs) {
		x.growRuns(int(j) + 1) // a new slot: nothing counted yet
	}
	n := x.allocNodeIndex(i)
	// plain is as of the last decision: when a node put since changed
	// it, pinFreeWork sees so and counts again.
	if !x.runs[j].count(&x.allocs[i], n >= 0 && int(n) < len(x.plain) && x.plain[n], d) {
		x.runsDue = append(x.runsDue, j)
	}
}

// RemoveAlloc removes an allocation (garbage-collected, or of an older
// version of its job).
func (x *Incremental) RemoveAlloc(id string) {
	i, ok := x.allocAt[id]
	if !ok {
		return
	}
	x.staleSum(x.allocJobSlot(i))
	x.countRuns(i, -1)
	x.track(i, -1)
	x.countAlloc(i, -1)
	x.allocs[i], x.recs[i] = incAlloc{}, Alloc{}
	delete(x.allocAt, id)
	x.aHoles++
	if x.aHoles > 64 && x.aHoles > len(x.allocs)/2 {
		k := 0
		for i, a := range x.allocs {
			if a.live {
				x.allocAt[x.recs[i].ID] = int32(k)
				x.allocs[k], x.recs[k] = a, x.recs[i]
				k++
			}
		}
		clear(x.allocs[k:])
		clear(x.recs[k:])
		x.allocs, x.recs, x.aHoles = x.allocs[:k], x.recs[:k], 0
		x.lists.ok = false // renumbered (in order: the run sums hold)
	}
}

// countAlloc counts d more allocation records of allocation record i's
// job, filing the job again when it gains its first or loses its last.
func (x *Incremental) countAlloc(i int32, d int32) {
	s := x.allocJobSlot(i)
	if s < 0 {
		x.orphan(x.recs[i].Job, d)
		return
	}
	j := &x.jobs[s]
	before := j.allocs
	if j.allocs += d; (before == 0) != (j.allocs == 0) {
		x.unclassify(s)
		x.classify(s)
	}
}

// orphan counts d more allocation records of job id, which holds no slot.
func (x *Incremental) orphan(id string, d int32) {
	if x.orphans == nil {
		x.orphans = make(map[string]int32)
	}
	if n := x.orphans[id] + d; n != 0 {
		x.orphans[id] = n
	} else {
		delete(x.orphans, id)
	}
}

// Snapshot returns the cluster as a Snapshot: the input on which Decide
// gives the Plan that the Incremental's Decide gives. It shares Job and
// Alloc contents (slices in them) with the Incremental.
func (x *Incremental) Snapshot() *Snapshot {
	s := &Snapshot{Nodes: slices.Clone(x.nodes), Reservations: slices.Clone(x.Reservations),
		Victims: slices.Clone(x.Victims), Issued: slices.Clone(x.Issued), Notices: slices.Clone(x.Notices), LastDecision: x.LastDecision}
	for i := range x.jobs {
		if x.jobs[i].live {
			s.Jobs = append(s.Jobs, x.jobs[i].Job)
		}
	}
	for i := range x.allocs {
		if x.allocs[i].live {
			s.Allocs = append(s.Allocs, x.recs[i])
		}
	}
	return s
}

// compact closes the holes left by removed jobs, renumbering the slots.
func (x *Incremental) compact() {
	k := 0
	head := x.lists.head
	for old := range x.jobs {
		if x.jobs[old].live {
			x.jobAt[x.jobs[old].ID] = int32(k)
			x.jobs[k] = x.jobs[old]
			if x.lists.ok && old < len(head) && old != k {
				head[k], head[old] = head[old], 0 // the record lists move with the jobs; a hole's is empty
			}
			k++
		}
	}
	if x.lists.ok && k < len(head) {
		x.lists.head = head[:k]
	}
	clear(x.jobs[k:])
	x.jobs, x.holes = x.jobs[:k], 0
	x.jobEra++ // every cached slot is stale
	clear(x.sums)
	x.tree = nil // slots moved: classify again at the next decision
	x.runsOK = false
}

// configure classifies every job again when the tree or the settings that
// classification reads changed since the last decision.
func (x *Incremental) configure(tree *budgets.Tree, cfg *Config) {
	if x.tree == tree && x.cfg.Pending == cfg.Pending && x.cfg.Unallocated == cfg.Unallocated &&
		x.cfg.QuickWindow == cfg.QuickWindow && x.cfg.QuickGPUs == cfg.QuickGPUs && x.cfg.RuntimeCap == cfg.RuntimeCap &&
		x.cfg.PreemptionGap == cfg.PreemptionGap && x.cfg.ResumeLoss == cfg.ResumeLoss && // free work's levels (leftOutRunning, offIdle)
		slices.Equal(x.cfg.Namespaces, cfg.Namespaces) && slices.Equal(x.cfg.NodePools, cfg.NodePools) {
		return
	}
	x.tree = nil
	clear(x.sums) // their windows read RuntimeCap
	x.leaves = x.leaves[:0]
	x.asks = askCounts{}
	x.active.reset()
	x.dirty.reset()
	x.quick.reset()
	x.cfg = *cfg
	x.cfg.Namespaces, x.cfg.NodePools = slices.Clone(cfg.Namespaces), slices.Clone(cfg.NodePools)
	x.tree = tree
	x.leaves = resize(x.leaves, len(tree.Leaves()))
	for i := range x.leaves {
		x.leaves[i] = x.leaves[i][:0]
	}
	for s := range x.jobs {
		if x.jobs[s].live {
			x.classify(int32(s))
		}
	}
}

// classify files job slot s by what a decision needs of it.
func (x *Incremental) classify(s int32) {
	if x.tree == nil {
		return // classified at the next decision
	}
	j := &x.jobs[s]
	j.managed, j.leaf, j.ask = x.cfg.Manages(&j.Job), -1, 0
	j.wanted = wantedAllocs(&j.Job)
	if j.managed && j.Contract.Allocated {
		if n, ok := x.tree.Lookup(j.Contract.Budget); ok && n.IsLeaf() {
			j.leaf = int32(n.LeafIndex)
		}
	}
	if int(s) >= len(x.runs) {
		x.growRuns(int(s) + 1)
	}
	r := &x.runs[s]
	r.prio, r.freeWork, r.resumable, r.outOK = int32(j.Priority), j.managed && j.leaf < 0, j.Contract.Resumable, false
	if j.allocs > 0 {
		j.kind = kindActive // its leaf goes to the Decider (tail.leaf)
		x.active.add(s)
		return
	}
	if j.leaf < 0 {
		j.kind = kindIdle
		if x.offIdle(j) {
			x.dirty.add(s)
		}
		return
	}
	j.kind = kindQueued
	j.ask = 1 << 30
	for _, g := range j.Groups {
		if g.GPUs > 0 && g.Count > 0 {
			j.ask = min(j.ask, int32(g.GPUs))
		}
	}
	l := x.leaves[j.leaf]
	i, _ := slices.BinarySearchFunc(l, s, x.compareQueued)
	x.leaves[j.leaf] = slices.Insert(l, i, s)
	x.asks.add(j.ask, 1)
	if x.offIdle(j) {
		x.dirty.add(s)
	}
	if quickJob(&j.Job, x.cfg) {
		x.quick.add(s)
	}
}

// unclassify takes job slot s out of the sets classify put it in.
func (x *Incremental) unclassify(s int32) {
	if x.tree == nil {
		return
	}
	j := &x.jobs[s]
	x.active.remove(s)
	x.dirty.remove(s)
	x.quick.remove(s)
	if j.kind == kindQueued {
		l := x.leaves[j.leaf]
		if i, ok := slices.BinarySearchFunc(l, s, x.compareQueued); ok {
			x.leaves[j.leaf] = slices.Delete(l, i, i+1)
		}
		x.asks.add(j.ask, -1)
	}
	j.kind = kindIdle
}

// askCounts counts jobs by ask, in ascending order of the asks that have
// some (a cluster has few distinct asks).
type askCounts struct {
	ask, n []int32
}

func (c *askCounts) add(a, d int32) {
	i, ok := slices.BinarySearch(c.ask, a)
	if !ok {
		c.ask, c.n = slices.Insert(c.ask, i, a), slices.Insert(c.n, i, 0)
	}
	if c.n[i] += d; c.n[i] == 0 {
		c.ask, c.n = slices.Delete(c.ask, i, i+1), slices.Delete(c.n, i, i+1)
	}
}

// compareQueued orders the queued jobs of one leaf as compareKeys does.
func (x *Incremental) compareQueued(a, b int32) int {
	return compareQueued(&x.jobs[a].Job, &x.jobs[b].Job)
}

// compareQueued orders two jobs of one leaf as compareKeys does.
func compareQueued(ja, jb *Job) int {
	pa, pb := queueRank(ja), queueRank(jb)
	if pa != pb {
		if pa < pb {
			return -1
		}
		return 1
	}
	if sa, sb := ja.SubmitTime.UnixNano(), jb.SubmitTime.UnixNano(); sa != sb {
		if sa < sb {
			return -1
		}
		return 1
	}
	return strings.Compare(ja.ID, jb.ID)
}
