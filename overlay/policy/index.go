package policy

import (
	"slices"
	"time"
)

// jobState is what a job is, as far as the bands go.
type jobState uint8

const (
	jsUnmanaged   jobState = iota // no GPUs, another namespace or pool, or finished: left alone (rule 11)
	jsUnallocated                 // managed free work, running or waiting
	jsPending                     // allocated, nothing placed
	jsPartial                     // allocated, placed in part
	jsStarting                    // allocated, all placed, not all running yet
	jsProtected                   // allocated, inside its protected window
	jsRunning                     // allocated, past its protected window
)

// jobInfo is the decision's working record of one job.
type jobInfo struct {
	state       jobState
	leaf        int32 // leaf index, -1 when unallocated
	gone        bool  // allocated by contract, but its budget left the tree
	missing     int32 // allocations still to place
	windowEnd   time.Time
	position    int32 // 1-based place in the pending order, 0 when not pending
	victimFor   int32 // the job it is stopped for in this plan, -1
	heldFor     int32 // the waiting job it was stopped for earlier and is held below, -1
	heldSince   time.Time
	released    int32      // the job it was held below until this plan (the hold ran out, or it was kept: keepVictims), -1
	releasedBy  ReasonCode // why, in this plan's explanation: ReasonVictimReleased, ReasonVictimKept; ReasonNone when kept earlier
	holding     int32      // victims held below it (as a beneficiary)
	victimNode  int32      // where its stop frees GPUs for victimFor
	victimGPUs  int32      // the ask it frees them for
	held        int32      // GPUs held by its live allocations
	expired     bool       // its reservation expired: no new one until placed
	landed      bool       // held below heldFor for landing on nodes just released for it (reserve.go)
	moving      bool       // a drain stops some of its allocations in this plan
	givenBack   bool       // placed in part, its allocations stopped in this plan (releasePartial)
	whole       bool       // a gang that cannot be placed whole: written at the bottom of the pending band (waitWhole)
	keptBack    bool       // placed in part again after a release still held (keepVictims): held low, not stopped again
	restartHeld bool       // held at restartLevel by rule 5e (a restart that would be stopped again) or 5h (a first start of a budget served too far above one running there) (restart.go)
	restartWhy  ReasonCode // which rule holds it (restartHeld)
	backHeld    bool       // a release of it (rule 5c) is held: Snapshot.Victims names it for itself
	movedOn     int32      // 1 + the last draining node that looked at it
	fits        bool       // the placement model places it without victims
	first       bool       // victims are stopped for it, or held below it: written at the pending band's top (rule 5f, first.go)
	reserved    int32      // index in plan.Reservations, -1
	evaluated   bool
	target      int
	level       int // pending: the level written or kept (tier.go levels)
	final       int // its priority once the plan is applied
	reason      Reason
	wait        Wait
	waitFor     int32 // the job it waits for (Explanation.WaitsFor), -1
	freeAt      time.Time
	freeGuess   bool  // freeAt is cheaperAt's window end, which new protected work there can move: explained as unknown
	lost        int64 // lostWork, once computed (lostSet)
	lostSet     bool
	free        freeRun // its live allocations, for free work's level (free.go)
}

// victimOf is the job j was stopped for, in this plan or held from an
// earlier one; -1 when it is no victim.
func (info *jobInfo) victimOf() int32 {
	if info.victimFor >= 0 {
		return info.victimFor
	}
	return info.heldFor
}

// nodeInfo is the decision's working record of one node.
type nodeInfo struct {
	class      int32 // index of (pool, model) in classes, -1 without GPUs
	held       int32 // GPUs held by allocations in pending/running
	heldFree   int32 // of which by unallocated jobs Nomad may preempt
	eligible   bool  // eligible once this plan's node actions apply
	draining   bool  // unhealthy or under a Nomad drain
	reservedBy int32 // job index, -1
	released   bool  // a reservation of it ends in this plan
}

// class is a (node pool, GPU model) pair: an allocation fits on one node of
// one model, in its job's pool.
type class struct{ pool, model string }

const defaultPool = "default"

func poolOf(p string) string {
	if p == "" {
		return defaultPool
	}
	return p
}

// index builds the lookups and each job's state.
func (d *Decider) index() {
	s := d.snap
	d.nodes = resize(d.nodes, len(s.Nodes))
	same := d.tl != nil && d.nodesKept && d.tl.nodesGen == d.nodesGen && len(d.nodeClass) == len(s.Nodes)
	if !same {
		d.indexClasses()
		d.nodeBase = resize(d.nodeBase, len(s.Nodes))
		d.nodeGPUs = resize(d.nodeGPUs, len(s.Nodes))
		d.drainNodes = d.drainNodes[:0]
		for i := range s.Nodes {
			n := &s.Nodes[i]
			d.nodeGPUs[i] = int32(n.GPUs)
			d.nodeBase[i] = nodeInfo{class: d.nodeClass[i], reservedBy: -1, eligible: n.Eligible,
				draining: !n.Healthy || n.Drain != nil}
			if d.nodeBase[i].draining || n.State == NodeDraining || n.State == NodeDrained || !n.HealthySince.IsZero() {
				d.drainNodes = append(d.drainNodes, int32(i)) // drain may act on it
			}
		}
	}
	d.capKept = same
	d.nodesKept, d.nodesGen = d.tl != nil, 0
	if d.tl != nil {
		d.nodesGen = d.tl.nodesGen
	}
	copy(d.nodes, d.nodeBase) // each node's record before the decision: of the nodes alone
	d.allocJob = resize(d.allocJob, len(d.ap))
	d.allocNode = resize(d.allocNode, len(d.ap))
	if d.tl != nil {
		copy(d.allocJob, d.tl.allocJob)
		copy(d.allocNode, d.tl.allocNode)
	} else {
		d.indexIDs()
	}
	if d.tl != nil {
		// As buildKeys builds it: takeRecs indexed the records by job.
		d.jobAllocs.start = append(d.jobAllocs.start[:0], d.tl.jobAllocs.start...)
		d.jobAllocs.items = append(d.jobAllocs.items[:0], d.tl.jobAllocs.items...)
	} else {
		d.jobAllocs.buildKeys(len(d.jp), d.allocJob)
	}
	d.nodeAlloc.buildKeys(len(s.Nodes), d.allocNode)

	d.alive = resize(d.alive, len(d.ap))
	d.allocGPUs = resize(d.allocGPUs, len(d.ap))
	if d.tl != nil {
		// The Incremental's records as read; settle took some as
		// stopping (live before, stopping now) in copies, GPUs unchanged.
		copy(d.alive, d.tl.alive)
		for _, i := range d.taken {
			d.alive[i] = false
		}
		copy(d.allocGPUs, d.tl.gpus)
	} else {
		for i, a := range d.ap {
			d.alive[i] = a.live() // settle is done: no allocation changes in this decision from here
			d.allocGPUs[i] = int32(a.GPUs)
		}
	}
	d.indexLeaves()
	d.jobs = resize(d.jobs, len(d.jp))
	clear(d.jobs) // at once, not record by record: jobState sets the fields that do not start at zero
	for j := range d.jp {
		d.jobState(int32(j), &d.jobs[j])
	}
	// Nomad counts a stopped or evicted allocation's GPUs free at once and
	// places new work there (it starts once the task has exited), so only
	// live allocations hold GPUs here; keepVictims adds back those of held
	// victims, which count for the job they made room for alone.
	nodes, jobs, alive, allocGPUs, allocNode := d.nodes, d.jobs, d.alive, d.allocGPUs, d.allocNode // locals, not reloaded
	for i, n := range allocNode {
		if n >= 0 && alive[i] {
			nodes[n].held += allocGPUs[i]
		}
	}
	for j := range jobs { // of which by unallocated jobs: by job, as they are few
		if jobs[j].state != jsUnallocated {
			continue
		}
		for _, i := range d.jobAllocs.row(int32(j)) {
			if n := allocNode[i]; n >= 0 && alive[i] {
				nodes[n].heldFree += allocGPUs[i]
			}
		}
	}
	if d.tl != nil {
		for n, g := range d.tl.outFree {
			nodes[n].held += g
			nodes[n].heldFree += g
		}
	}
}

// indexClasses numbers the (pool, model) classes of the nodes, lists each
// node's (nodeClass) and the nodes of each class (classNode), and the most
// GPUs of a node. An Incremental's decision keeps them while its nodes are
// unchanged (tail.nodesGen).
func (d *Decider) indexClasses() {
	s := d.snap
	d.classes = d.classes[:0]
	d.nodeClass = resize(d.nodeClass, len(s.Nodes))
	d.maxGPUs = 0
	last := int32(-1)
	for i := range s.Nodes {
		n := &s.Nodes[i]
		d.maxGPUs = max(d.maxGPUs, n.GPUs)
		d.nodeClass[i] = -1
		if n.GPUs > 0 || n.Model != "" {
			pool := poolOf(n.Pool)
			if last < 0 || d.classes[last].pool != pool || d.classes[last].model != n.Model {
				last = d.classOf(pool, n.Model)
			}
			d.nodeClass[i] = last
		}
	}
	d.classNode.build(len(d.classes), len(s.Nodes), func(i int) int32 { return d.nodeClass[i] })
}

// classOf is the index of class (pool, model), added when new: classes
// are numbered in the order their first node appears.
func (d *Decider) classOf(pool, model string) int32 {
	for c := range d.classes {
		if d.classes[c].pool == pool && d.classes[c].model == model {
			return int32(c)
		}
	}
	d.classes = append(d.classes, class{pool, model})
	return int32(len(d.classes) - 1)
}

// indexIDs maps job and node IDs to indexes and resolves each
// allocation's job and node (a full Decide; an Incremental hands them in).
func (d *Decider) indexIDs() {
	s := d.snap
	if d.jobIdx == nil {
		d.jobIdx = make(map[string]int32, len(d.jp))
		d.nodeIdx = make(map[string]int32, len(s.Nodes))
	}
	clear(d.jobIdx)
	clear(d.nodeIdx)
	for i, job := range d.jp {
		d.jobIdx[job.ID] = int32(i)
	}
	for i := range s.Nodes {
		d.nodeIdx[s.Nodes[i].ID] = int32(i)
	}
	for i, a := range d.ap {
		d.allocJob[i], d.allocNode[i] = -1, -1
		if j, ok := d.jobIdx[a.Job]; ok {
			d.allocJob[i] = j
		}
		if n, ok := d.nodeIdx[a.Node]; ok {
			d.allocNode[i] = n
		}
	}
}

// jobIndex is the index of job id in the snapshot.
func (d *Decider) jobIndex(id string) (int32, bool) {
	if d.tl != nil {
		return d.tl.job(id)
	}
	j, ok := d.jobIdx[id]
	return j, ok
}

// nodeIndex is the index of node id in the snapshot.
func (d *Decider) nodeIndex(id string) (int32, bool) {
	if d.tl != nil {
		return d.tl.node(id)
	}
	n, ok := d.nodeIdx[id]
	return n, ok
}

// indexLeaves caches each leaf's position and served ratio.
func (d *Decider) indexLeaves() {
	leaves := d.tree.Leaves()
	d.leafPos = resize(d.leafPos, len(leaves))
	d.served = resize(d.served, len(leaves))
	for i := range leaves {
		d.leafPos[i] = int32(d.fs.Position(i))
		d.served[i] = d.fs.Rank(i).ServedRatio()
	}
}

func (d *Decider) managed(job *Job) bool { return d.cfg.Manages(job) }

// Manages reports whether allot manages job (rule 11): it asks for GPUs and
// lives in a configured namespace and node pool (none configured: all).
// Everything else is left alone. It reads only the job's Namespace, Pool
// and Groups.
func (cfg *Config) Manages(job *Job) bool {
	gpus := false
	for _, g := range job.Groups {
		if g.GPUs > 0 && g.Count > 0 {
			gpus = true
		}
	}
	if !gpus {
		return false
	}
	if len(cfg.Namespaces) > 0 && !slices.Contains(cfg.Namespaces, job.Namespace) {
		return false
	}
	return len(cfg.NodePools) == 0 || slices.Contains(cfg.NodePools, poolOf(job.Pool))
}

// wantedAllocs is the allocations job's groups ask for (counts below 0 as 0).
func wantedAllocs(job *Job) int32 {
	var n int32
	for _, g := range job.Groups {
		n += int32(max(g.Count, 0))
	}
	return n
}

// jobState classifies one job from its allocations into info, a zero
// record (filled in place: the record is large, and this runs for every
// job read).
func (d *Decider) jobState(j int32, info *jobInfo) {
	info.leaf, info.victimFor, info.heldFor, info.released, info.reserved, info.waitFor = -1, -1, -1, -1, -1, -1
	var wanted int32
	var allocated bool
	if d.tl != nil {
		// The Incremental classified the job already: what is read of
		// it is in the tail, and the Job itself is not touched.
		if d.tl.rank[j] != 0 {
			// Queued (managed, allocated to a leaf, no allocation).
			info.missing = d.tl.wanted[j]
			info.state, info.leaf = jsPending, d.tl.leaf[j]
			return
		}
		if !d.tl.managed[j] {
			return
		}
		wanted, allocated = d.tl.wanted[j], d.tl.allocated[j]
	} else {
		job := d.jp[j]
		if !d.managed(job) {
			return
		}
		wanted, allocated = wantedAllocs(job), job.Contract.Allocated
	}
	sm := d.runSum(j)
	live, done, notStarted := sm.live, sm.done, sm.notStarted
	info.held = sm.held
	info.missing = max(wanted-live-done, 0)
	if live == 0 && info.missing == 0 {
		return // finished: Nomad will mark it dead
	}
	if allocated && d.tl != nil {
		info.leaf = d.tl.leaf[j] // the Incremental looked it up when the job came
		info.gone = info.leaf < 0
	} else if allocated {
		if n, ok := d.tree.Lookup(d.jp[j].Contract.Budget); ok && n.IsLeaf() {
			info.leaf = int32(n.LeafIndex)
		} else {
			info.gone = true
		}
	}
	switch {
	case info.leaf < 0:
		info.state = jsUnallocated
		for _, ai := range d.jobAllocs.row(j) {
			if d.alive[ai] {
				info.free.add(d.ap[ai])
			}
		}
	case live == 0:
		info.state = jsPending
	case info.missing > 0:
		info.state = jsPartial
	case notStarted:
		info.state = jsStarting
	default:
		info.windowEnd = sm.windowEnd
		if d.now.Before(info.windowEnd) {
			info.state = jsProtected
		} else {
			info.state = jsRunning
		}
	}
}

// runSum is what jobState counts of job j's allocations (live ones as
// settle left them): kept by an Incremental unless settle took some of
// them, else counted here.
func (d *Decider) runSum(j int32) *runSum {
	if d.tl != nil && !d.settled(j) {
		return d.tl.sums[j]
	}
	d.sum = runSum{}
	at := int32(-1)
	for _, ai := range d.jobAllocs.row(j) {
		d.sum.add(d.ap[ai], ai, &at)
	}
	d.sum.setWindow(d.jp[j].Contract.Protected, d.cfg.RuntimeCap)
	return &d.sum
}

// settled reports whether settle took an allocation of job j as stopping
// in this decision (its copy is read, not the record).
func (d *Decider) settled(j int32) bool {
	for _, ai := range d.taken {
		if d.allocJob[ai] == j {
			return true
		}
	}
	return false
}

// buildCapacity fills the placement model from usable nodes.
// What it reads of the nodes alone (each node's class, and each class's
// largest and total capacity) is kept while the nodes are (capKept).
func (d *Decider) buildCapacity() {
	d.cap.reset(len(d.snap.Nodes), len(d.classes), d.maxGPUs, !d.capKept)
	if !d.capKept {
		for i := range d.snap.Nodes {
			n, ni := &d.snap.Nodes[i], &d.nodes[i]
			if ni.class < 0 {
				continue
			}
			d.cap.model[i] = ni.class
			if !ni.draining && n.State != NodeDraining && n.State != NodeDrained {
				d.cap.maxCap[ni.class] = max(d.cap.maxCap[ni.class], int32(n.GPUs))
				d.cap.sumCap[ni.class] += int64(n.GPUs)
			}
		}
	}
	// capacity.add for each usable node (nodeUsable, nodeAvail), in one
	// loop over the decision's node records: a node's model is its class,
	// and every class has the buckets 0 to maxGPUs (reset).
	c := &d.cap
	nodes := d.nodes[:len(d.snap.Nodes)]
	gpus := d.nodeGPUs[:len(nodes)]
	usable, avail, slot := c.usable[:len(nodes)], c.avail[:len(nodes)], c.slot[:len(nodes)]
	hi := int32(d.maxGPUs)
	for i := range nodes {
		ni := &nodes[i]
		if ni.class < 0 || !ni.eligible || ni.draining || ni.reservedBy >= 0 {
			usable[i] = false
			continue
		}
		a := gpus[i] - ni.held + ni.heldFree
		usable[i], avail[i] = true, a
		k := max(0, min(a, hi))
		c.top[ni.class] = max(c.top[ni.class], k)
		b := &c.bucket[ni.class][k]
		slot[i] = int32(len(*b))
		*b = append(*b, int32(i))
	}
	c.undo = c.undo[:0]
}

func (d *Decider) nodeUsable(i int32) bool {
	ni := &d.nodes[i]
	return ni.class >= 0 && ni.eligible && !ni.draining && ni.reservedBy < 0
}

// nodeAvail is what a pending allocated job may use on a node now: free
// healthy GPUs plus those held by unallocated work.
func (d *Decider) nodeAvail(i int32) int32 {
	ni := &d.nodes[i]
	return int32(d.snap.Nodes[i].GPUs) - ni.held + ni.heldFree
}

// ask is one allocation still to place.
type ask struct {
	gpus  int32
	model string
	node  int32 // where the plan expects it, -1
}

// jobAsks lists job j's missing allocations, largest first.
func (d *Decider) jobAsks(j int32, dst []ask) []ask {
	dst = dst[:0]
	job := d.jp[j]
	for _, g := range job.Groups {
		if g.GPUs <= 0 {
			continue
		}
		have := 0
		for _, ai := range d.jobAllocs.row(j) {
			a := d.ap[ai]
			if (a.live() || a.done()) && (a.Group == g.Name || len(job.Groups) == 1) {
				have++
			}
		}
		for k := have; k < g.Count; k++ {
			dst = append(dst, ask{gpus: int32(g.GPUs), model: g.Model, node: -1})
		}
	}
	if len(dst) > 1 {
		slices.SortStableFunc(dst, func(a, b ask) int { return int(b.gpus - a.gpus) })
	}
	return dst
}

// classFits reports whether class c can host an ask of job j.
func (d *Decider) classFits(c int32, job *Job, a *ask) bool {
	cl := &d.classes[c]
	return cl.pool == poolOf(job.Pool) && (a.model == "" || a.model == cl.model)
}

// bestFit finds where the placement model would put ask a of job: the
// usable node of a matching class with the fewest available GPUs that fit.
func (d *Decider) bestFit(job *Job, a *ask) int32 {
	best, below := int32(-1), int32(1<<30)
	for c := range d.classes {
		if d.classFits(int32(c), job, a) {
			if n, av := d.cap.bestFit(int32(c), a.gpus, below); n >= 0 {
				best, below = n, av
			}
		}
	}
	return best
}

// poolless reports whether no node at all, usable or not, is of a class
// that can host ask a of job: the job names a node pool (or, naming none,
// Nomad's "default") or a GPU model that no node has, as when every GPU
// node is in pool "gpu" and the job left node_pool out.
func (d *Decider) poolless(job *Job, a *ask) bool {
	for c := range d.classes {
		if d.classFits(int32(c), job, a) {
			return false
		}
	}
	return true
}

// overCapacity reports whether job's asks, all of one model, need more
// GPUs than every node of their class that is not draining has in all: a
// gang wider than the cluster, which never places whatever stops.
func (d *Decider) overCapacity(job *Job, asks []ask) bool {
	if len(asks) < 2 {
		return false // one ask: tooLarge says it
	}
	var need, have int64
	for i := range asks {
		if asks[i].model != asks[0].model {
			return false
		}
		need += int64(asks[i].gpus)
	}
	for c := range d.classes {
		if d.classFits(int32(c), job, &asks[0]) {
			have += d.cap.sumCap[c]
		}
	}
	return need > have
}

// tooLarge reports whether no node that is not draining has enough healthy
// GPUs of a matching class for ask a.
func (d *Decider) tooLarge(job *Job, a *ask) bool {
	for c := range d.classes {
		if d.classFits(int32(c), job, a) && d.cap.maxCap[c] >= a.gpus {
			return false
		}
	}
	return true
}
