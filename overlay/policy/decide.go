package policy

import (
	"time"

	"github.com/allot-sched/allot/budgets"
)

// Decide computes the plan for snap at now. fs is the fair-share order of
// tree's leaves over the lookback window ending at now (budgets.ComputeFairShare
// on the ledger's window usage); nil means no usage yet. cfg must be valid
// (Config.Validate). Decide is pure: it reads its arguments, modifies none of
// them, and returns the same Plan for the same inputs.
func Decide(snap *Snapshot, tree *budgets.Tree, fs *budgets.FairShare, now time.Time, cfg Config) *Plan {
	var d Decider
	return d.Decide(snap, tree, fs, now, cfg)
}

// Decider is Decide with scratch memory kept between calls, for callers that
// decide often (the simulator, the server's reconcile loop). The Plan it
// returns is valid until its next call. A Decider is not safe for concurrent
// use; its zero value is ready.
type Decider struct {
	snap *Snapshot // nodes and memory; jobs and allocations through jp and ap
	// jp and ap are the jobs and allocations read, by index: pointers into
	// the snapshot (a full Decide) or into an Incremental's own records,
	// so that a decision copies no Job or Alloc. An allocation settle
	// takes as stopping points at a changed copy in allocBuf.
	jp   []*Job
	ap   []*Alloc
	tree *budgets.Tree
	fs   *budgets.FairShare
	now  time.Time
	cfg  Config
	plan Plan

	jobs        []jobInfo
	nodes       []nodeInfo
	jobIdx      map[string]int32
	nodeIdx     map[string]int32
	classes     []class
	jobAllocs   csr            // allocation indexes by job
	nodeAlloc   csr            // allocation indexes by node
	vAlloc      csr            // by node: allocations of jobs time slicing may stop (indexVictims)
	vGPUs       []int32        // by node: GPUs of those allocations
	vServed     float64        // the most served leaf among those jobs, -1
	vMost       []float64      // by node: the same on that node
	vLeaves     []uint64       // by node: the leaves of those jobs there (leafBit)
	vAnyLeaf    uint64         // the leaves of those jobs anywhere (leafBit)
	pAlloc      csr            // by node: live allocations of protected jobs (indexProtected)
	pGPUs       []int32        // by node: their GPUs
	pBuilt      bool           // pAlloc and pGPUs hold for this decision
	runLeast    []leastRunning // by class: jobs of the least served leaves running there (restart.go)
	runBuilt    bool           // runLeast holds for this decision
	runGPUs     int64          // GPUs of allocated jobs running or starting (indexRunningLeaves)
	waitFirst   []waitingFirst // by class: the first jobs left waiting there (restart.go firstWaiting)
	waitScanned int            // how far firstWaiting has scanned the order
	waitBuilt   bool           // waitFirst is begun for this decision
	alive       []bool         // by allocation: live(), read once settle is done (index)
	allocGPUs   []int32        // by allocation: its GPUs (index)
	sum         runSum         // jobState's counts of a job's allocations, when not kept (runSum)
	allocJob    []int32
	allocNode   []int32
	classNode   csr        // nodes by class
	nodeClass   []int32    // by node: its class, -1 without GPUs
	maxGPUs     int        // the most GPUs of a node
	nodesKept   bool       // classes, nodeClass, classNode, maxGPUs, nodeBase and nodeGPUs hold for nodesGen
	nodeBase    []nodeInfo // by node: its record at the start of a decision, from the node alone
	nodeGPUs    []int32    // by node: its GPUs (Node.GPUs), kept with nodeBase
	capKept     bool       // this decision's nodes are those of the last: cap's per-node parts hold
	drainNodes  []int32    // nodes drain may act on, in order: draining, in a drain state, or healthy since a time
	nodesGen    uint64     // tail.nodesGen they were built for
	ready       []int32    // jobs whose reservation is released for them in this plan
	gaps        []int32    // positions of the pending jobs holding a reservation (reserve.go)
	room        []int32
	usable      []int32
	explBuf     []Explanation
	events      []event
	freeTaken   []undoStep // freeAt: GPUs its asks took, by node
	reserveFor  []orderRef // examined jobs without victims, in order: reservation candidates
	minAskBelow []int32    // by order index: smallest ask from there down
	active      int        // reservations held
	noMargin    bool       // rule 5 stops without FairnessMargin: a gathering reservation past RuntimeCap (hold)
	recovered   int32      // a node that recovered or returned to service, -1
	leafPos     []int32    // by leaf index: position in the fair-share order
	served      []float64  // by leaf index: usage share / effective share
	// starved: the missing allocations of jobs placed in part that found
	// no victims in this plan (place, rule 5); Nomad places their rest
	// before any pending job (starvedBy).
	starved     []starvedAsk
	cap         capacity
	order       []pendingKey // pending allocated jobs, best first
	merge       []pendingKey // scratch of mergePending
	asks        []ask
	restartAsks []ask // a waiting job's asks (restart.go)
	scratch     victimScratch
	sliceFailed []sliceFailure // rule 5 and 5b's failures in this decision (quick.go)
	evals       int            // evaluations planned so far
	wake        time.Time
	// Memory (memory.go) and pending levels (tier.go).
	stopping   map[string]int32 // allocation ID -> Issued stop taking it
	unobserved []bool           // by Snapshot.Issued: a stop the snapshot does not show yet
	taken      []int32          // allocations settle takes as stopping
	allocBuf   []Alloc          // their copies, read as stopping
	// Notices (notice.go): by job, its Snapshot.Notices entry in force and
	// its Plan.Notices entry (-1 when none); jobs notices were sent for.
	noticeOf, inNotice []int32
	awaiting           []int32
	stopAt             []time.Time // by job: a drain stop's known time, when noticeAhead plans it early
	lv                 levelScratch
	// tl is what an Incremental left out of snap (nil for a full Decide).
	tl *tail
	// bufs keeps the plan's slices from one Incremental decision to the
	// next (its Plan is valid until the next call), so they do not grow
	// again each time.
	bufs Plan
}

// Decide is the pipeline; each step is in its own file.
func (d *Decider) Decide(snap *Snapshot, tree *budgets.Tree, fs *budgets.FairShare, now time.Time, cfg Config) *Plan {
	if fs == nil {
		fs = budgets.ComputeFairShare(tree, nil)
	}
	d.tree, d.fs, d.now, d.cfg = tree, fs, now, cfg
	d.plan = Plan{Now: now}
	if d.tl != nil {
		d.plan.reuse(&d.bufs)
	}
	d.evals, d.wake, d.pBuilt, d.runBuilt, d.waitBuilt = 0, time.Time{}, false, false, false
	d.snap = snap
	if d.tl == nil {
		d.pointAt(snap)
	} else {
		d.jp, d.ap = d.tl.jp, d.tl.ap
	}
	d.settle() // memory.go: issued stops not seen yet count as stopping

	d.index()             // index.go: who runs where, each job's state
	d.keepVictims()       // memory.go: victims held below the job they made room for
	d.keepNotices()       // notice.go: checkpoint notices in force, or done early
	d.drain()             // drain.go: unhealthy nodes, Nomad drains, returns (rules 9, 10)
	d.indexVictims()      // victims.go: who time slicing may stop, by node
	d.keepReservations()  // reserve.go: hold, release or finish reservations (rule 7)
	d.buildCapacity()     // index.go: usable nodes and what is available on them
	d.placeReady()        // reserve.go: jobs whose reservation is done go first
	d.orderPending()      // order.go: fair-share order of pending jobs (rules 3, 8)
	d.place()             // victims.go: fit, time slicing, new reservations (rules 5-7)
	d.notify()            // notice.go: stops of jobs with a notice wait for it
	d.evaluateHeld()      // memory.go: rule 6 when a victim's replacement took GPUs
	d.evaluateRecovered() // explain.go: rule 6 after recoveries
	d.tier()              // tier.go: bands and priorities (rules 1-4), hysteresis
	d.orderStops()        // stoporder.go: stops lowest level first
	d.recordVictims()     // memory.go: this plan's victims, held from now on
	d.recordIssued()      // memory.go: this plan's stops and evaluations, settling
	if d.tl == nil || d.tl.explain {
		d.explain() // explain.go: explanations and NextWake (rule 12)
	}
	d.plan.NextWake = d.wake
	if d.tl != nil {
		// An Incremental's plan is valid until its next decision (its
		// lists are kept in bufs for the next one): the Decider's own.
		d.plan.keep(&d.bufs)
		return &d.plan
	}
	p := d.plan
	return &p
}

// pointAt points jp and ap at the jobs and allocations of snap.
func (d *Decider) pointAt(snap *Snapshot) {
	d.jp = resize(d.jp, len(snap.Jobs))
	for i := range snap.Jobs {
		d.jp[i] = &snap.Jobs[i]
	}
	d.ap = resize(d.ap, len(snap.Allocs))
	for i := range snap.Allocs {
		d.ap[i] = &snap.Allocs[i]
	}
}

// reuse starts the plan's lists empty in the backing arrays of b.
func (p *Plan) reuse(b *Plan) {
	p.SetPriorities, p.Stops, p.NodeActions = b.SetPriorities[:0], b.Stops[:0], b.NodeActions[:0]
	p.Evaluations, p.Reservations, p.Victims, p.Issued = b.Evaluations[:0], b.Reservations[:0], b.Victims[:0], b.Issued[:0]
	p.Signals, p.Notices = b.Signals[:0], b.Notices[:0]
}

// keep stores the plan's lists in b for the next reuse and sets the empty
// ones to nil, as a plan built from nothing has them.
func (p *Plan) keep(b *Plan) {
	*b = Plan{SetPriorities: p.SetPriorities, Stops: p.Stops, NodeActions: p.NodeActions, Evaluations: p.Evaluations,
		Reservations: p.Reservations, Victims: p.Victims, Issued: p.Issued, Signals: p.Signals, Notices: p.Notices}
	p.Signals = nilIfEmpty(p.Signals)
	p.Notices = nilIfEmpty(p.Notices)
	p.SetPriorities = nilIfEmpty(p.SetPriorities)
	p.Stops = nilIfEmpty(p.Stops)
	p.NodeActions = nilIfEmpty(p.NodeActions)
	p.Evaluations = nilIfEmpty(p.Evaluations)
	p.Reservations = nilIfEmpty(p.Reservations)
	p.Victims = nilIfEmpty(p.Victims)
	p.Issued = nilIfEmpty(p.Issued)
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

// wakeAt records a future time at which the plan will change.
func (d *Decider) wakeAt(t time.Time) {
	if t.After(d.now) && (d.wake.IsZero() || t.Before(d.wake)) {
		d.wake = t
	}
}

// csr is a compressed sparse row index: the items of row r are
// items[start[r]:start[r+1]].
type csr struct {
	start, items []int32
	keys         []int32 // build's scratch: each item's row
}

func (c *csr) row(r int32) []int32 { return c.items[c.start[r]:c.start[r+1]] }

// build fills the index from key(i) for i in [0, n): the row of item i, or -1.
// Items keep their order within a row. key is called once per item.
func (c *csr) build(rows, n int, key func(i int) int32) {
	c.keys = resize(c.keys, n)
	for i := range c.keys {
		c.keys[i] = key(i)
	}
	c.buildKeys(rows, c.keys)
}

// setItems makes items, already in row order (a subset of another index's
// items, in its order), the index's items, item i in row keys[i]: the
// index buildKeys builds from those items' rows alone.
func (c *csr) setItems(rows int, items, keys []int32) {
	c.items = items
	start := resize(c.start, rows+1) // a local: stores through it do not reload c.start
	clear(start)
	for _, i := range items {
		start[keys[i]+1]++
	}
	sum := int32(0) // the running sum in a register, not read back from start
	for r := 1; r <= rows; r++ {
		sum += start[r]
		start[r] = sum
	}
	c.start = start
}

// buildKeys fills the index with item i in row keys[i] (none when -1), as
// build does with key(i) = keys[i].
func (c *csr) buildKeys(rows int, keys []int32) {
	start := resize(c.start, rows+1) // locals: stores through them do not reload c's slices
	clear(start)
	for _, r := range keys {
		if r >= 0 {
			start[r]++
		}
	}
	sum := int32(0)
	for r := 0; r < rows; r++ {
		sum += start[r]
		start[r] = sum // the end of row r, moved to its start as its items are placed
	}
	start[rows] = sum
	items := resize(c.items, int(sum))
	for i := len(keys) - 1; i >= 0; i-- { // backwards: items keep their order within a row
		if r := keys[i]; r >= 0 {
			start[r]--
			items[start[r]] = int32(i)
		}
	}
	c.start, c.items = start, items
}
