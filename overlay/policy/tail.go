package policy

// tail is what an Incremental left out of the snapshot a Decider reads: the
// pending jobs deep in the order that sit at the band's bottom, targeted
// there, and are referenced by no memory (incremental.go). A Decider with a
// tail numbers the jobs it reads by their true positions, steps over the
// left-out jobs as runs in levels, and checks in place that leaving them
// out changed nothing: by the time the walk passes the first of them no
// more jobs may be examined for time slicing, and no usable node ever has
// room for the smallest ask among them after that. If the check fails the
// plan is thrown away and the Incremental decides again with more jobs.
type tail struct {
	// rank is by job index of the snapshot read: for a queued job (no
	// allocation, allocated, managed) its 1-based rank among all queued
	// jobs, 0 for the others.
	rank []int32
	// leaf is by job of the snapshot read: for a managed job allocated to
	// a budget that is a leaf of the tree, its leaf index; else -1.
	leaf []int32
	// managed is by job of the snapshot read: whether the configuration
	// manages it (Config.Manages, as the Incremental classified it).
	managed []bool
	// wanted and allocated are by job of the snapshot read: the
	// allocations its groups ask for (wantedAllocs, kept by the
	// Incremental) and its Contract.Allocated.
	wanted    []int32
	allocated []bool
	// queuedOrder lists the queued jobs of the snapshot read by rank: in
	// pending order already, so orderPending merges rather than sorts.
	queuedOrder []int32
	// before counts the queued jobs sorting before job j of the snapshot
	// read, for a pending job that is not queued (its allocations all
	// stopped or failed).
	before func(j int32) int32
	// allocJob and allocNode are by allocation of the snapshot read: the
	// index of its job and of its node there, -1 when absent (the
	// Incremental resolves them from its own slots, so index builds no
	// maps); job and node look an ID up in the snapshot read.
	allocJob, allocNode []int32
	// jobAllocs is the index of the allocations read by job, as
	// Decider.index would build it from allocJob (takeRecs builds it as
	// it lists them); fill is its scratch.
	jobAllocs csr
	fill      []int32
	// jp and ap are the jobs and allocations read, as the Decider reads
	// them (pointers into the Incremental's records).
	jp []*Job
	ap []*Alloc
	// alive and gpus are by allocation of the snapshot read: Alloc.live()
	// of its record before settle, and its GPUs (incAlloc.running and
	// gpus).
	alive []bool
	gpus  []int32
	// sums is by job of the snapshot read: what jobState counts of its
	// allocations (the Incremental keeps them across decisions), valid
	// for the decision.
	sums []*runSum
	// outFree is by node: the GPUs held by the live allocations of the
	// running free work left out (Incremental.leftOutRunning), which the
	// decision counts as held and as preemptible by Nomad.
	outFree []int32
	// nodesGen changes whenever a node is put or removed: the Decider keeps
	// what it derives from the nodes alone while it does not.
	nodesGen  uint64
	job, node func(id string) (int32, bool)
	queued    int32 // queued jobs in all, left out or not
	first     int32 // rank of the first queued job left out; 0 when none is
	minAsk    int32 // smallest per-allocation GPU ask of the jobs left out
	// Set by orderPending: by job index, the queued jobs sorting before a
	// pending job; the pending jobs in all.
	qb      []int32
	total   int32
	explain bool // fill Plan.Explanations for the jobs read
	crossed bool // the walk in place passed first
	unsound bool // leaving the jobs out may have changed the plan
}

// crossTail is called once place passes the first left-out position.
func (d *Decider) crossTail(examined int) {
	t := d.tl
	t.crossed = true
	if examined < d.cfg.MaxEvaluations && d.evals < d.cfg.MaxEvaluations {
		t.unsound = true // a left-out job might have been examined
	}
	d.checkTailRoom()
}

// checkTailRoom marks the tail unsound when some usable node has room for
// the smallest left-out ask: that job might fit.
func (d *Decider) checkTailRoom() {
	if d.tl.crossed && d.cap.maxAvail() >= d.tl.minAsk {
		d.tl.unsound = true
	}
}

// pastTail reports whether pending job k sorts after the first job left
// out of the read (none is, without a tail).
func (d *Decider) pastTail(k pendingKey) bool {
	return d.tl != nil && d.tl.first > 0 && !k.partial() && d.tl.qb[k.job] >= d.tl.first
}
