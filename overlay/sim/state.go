package sim

import (
	"cmp"
	"math/bits"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/allot-sched/allot/budgets"
)

// JobStatus is where a job is in its life.
type JobStatus uint8

// Job statuses.
const (
	StatusFuture  JobStatus = iota // not submitted yet
	StatusPending                  // submitted, no allocation placed
	StatusRunning                  // at least one allocation placed
	StatusDone                     // finished its work
	StatusDead                     // stopped without replacement (Nomad drain deadline)
)

var statusNames = [...]string{"future", "pending", "running", "done", "dead"}

func (s JobStatus) String() string { return statusNames[s] }

// StopReason says why allocations left their GPUs.
type StopReason uint8

// Stop reasons, reported as "preemptions by reason".
const (
	StopFinished  StopReason = iota // work done
	StopPreempted                   // Nomad's own preemption (priority gap)
	StopTimeSlice                   // the policy stopped it for a pending job
	StopDrain                       // the policy moved it off an unhealthy node
	StopReserve                     // the policy cleared a node reserved for a large job
	// StopRelease: the policy released a job placed in part (rule 5c): it
	// had not run and made room for no job in particular.
	StopRelease
	StopOther  // any other policy stop
	StopKilled // killed without replacement (Nomad drain deadline)
	StopEnd    // still running when the simulation ended
	// StopJobUpdate: Nomad replaced an allocation that was not running yet
	// for a job update (a priority write; Options.StartLatency).
	StopJobUpdate
	numStopReasons
)

var stopReasonNames = [numStopReasons]string{"finished", "nomad-preemption", "time-slice", "drain",
	"reservation", "release", "other", "drain-deadline-kill", "end", "job-update"}

func (r StopReason) String() string { return stopReasonNames[r] }

// PlacementMode selects the node-scoring model.
type PlacementMode uint8

// Placement modes.
const (
	// PlacementNomad draws two feasible nodes and keeps the fuller, as
	// Nomad's batch scheduler does (see the package doc).
	PlacementNomad PlacementMode = iota
	// PlacementBestFit picks the fullest feasible node of all (the largest
	// share of its GPUs held with the placement, ties to the first node),
	// with or without preemption: Nomad with a job affinity, which makes it
	// score every node (the fidelity harness's placement).
	PlacementBestFit
)

// job is the model's state of one submitted job.
type job struct {
	spec    *JobSpec
	leaf    int32 // budget leaf index, -1 when unallocated
	prio    int
	status  JobStatus
	slots   []int32 // allocation per slot, -1 while unplaced
	placed  int
	evalIdx uint64 // CreateIndex of its current eval
	inQueue bool
	ready   bool // an eval was created and waits to be processed
	// feas has bit c set when the job's pool and model admit the nodes of
	// placement class c (State.classes); 0: no node ever can.
	feas uint64
	// classBadGen is State.classGen when the job was last blocked as
	// "computed class ineligible", 0 otherwise: waking every class-ineligible
	// eval is then one increment of State.classGen, not a walk of the queue.
	classBadGen uint32

	done      int64 // seconds of work completed and kept
	runStart  int64 // when all allocations last became placed; -1 otherwise
	finishGen uint32

	startGen     uint32 // bumped each time the job is fully placed (StartLatency)
	firstStart   int64  // -1 until first fully placed
	requeuedAt   int64  // -1 unless waiting again after an interruption
	interrupts   int32
	lastRun      int64 // seconds its last interrupted run had lasted (policy.Job.LastRun), 0 after a stop of it placed in part
	lastRunEnd   int64 // when that run was interrupted
	preemptible  bool
	lastWritten  int // priority the policy last wrote (0: never)
	activeIdx    int32
	doneAt       int64
	modifyIndex  uint64
	lostWorkSec  int64 // work seconds discarded
	usefulGPUSec int64
	// signalled is 1 + when the policy last sent the job its checkpoint
	// signal; 0 when not since it last ran (notice.go).
	signalled int64
	stateLost bool // a session that lost work at a stop (counted once)
}

// alloc is one placed allocation.
type alloc struct {
	job         int32
	node        int32
	slot        int32
	gpus        int16
	mask        uint64
	start       int64
	end         int64 // -1 while running
	preemptAt   int64 // when it became preemptible; -1 never
	endReason   StopReason
	preemptedBy int32 // job that preempted it, -1 otherwise
	// runsAt is when its task runs: Options.StartLatency after the
	// placement or, when it was placed on GPUs of stopped tasks that had
	// not exited yet, StartLatency after the last of them exits (exitAt;
	// 0: placed on free GPUs). killtimeout.go.
	runsAt int64
	exitAt int64
	// heardAt is when the servers hear that those tasks exited (node.heard).
	heardAt int64
	// preempting: Nomad placed it by preempting the allocations on its
	// GPUs; until their tasks exit (exitAt) it waits for its victims
	// (policy.Alloc.WaitsForVictims, pendingstop.go).
	preempting bool
}

// Options are the engine's knobs (the policy has its own).
type Options struct {
	// Seed drives every random choice of the model.
	Seed uint64
	// ReactionDelay is how long after a change the policy reconciles (the
	// server's event-to-decision latency). Changes within it are coalesced.
	// A change is what the cluster does: a submission, a placement, a stop,
	// a finish, a health change. A policy's own writes (priorities,
	// eligibility) wake it only through what Nomad does with them: the
	// model applies them at once, so the policy has already seen them, and
	// a pass that would only read them back is left out. Wake-ups the policy
	// asks for (its NextWake) run at their exact time.
	ReactionDelay time.Duration
	// CheckpointLoss is the most work a resumable job loses when
	// interrupted: what it ran since it last started (it resumed from its
	// checkpoint then), up to CheckpointLoss.
	CheckpointLoss time.Duration
	// Placement selects the node-scoring model.
	Placement PlacementMode
	// Horizon ends the run; zero means the trace's end (its last submission
	// or health event).
	Horizon time.Duration
	// Warmup excludes the start of the run from the measurements: waits of
	// jobs submitted before it, GPU time held, stops and lost work before it,
	// unhealthy episodes that began before it. A generated trace starts on an
	// empty cluster that takes most of a day to fill, which is not the steady
	// state a policy is judged on. Zero measures from the start; it must be
	// shorter than the run. Job counts (submitted, finished, killed) and
	// budgets' owed and delivered time (BudgetResult: fair share's lookback
	// reaches into the warm-up) cover the whole run.
	Warmup time.Duration
	// Progress, when set, is called now and then with the fraction done.
	Progress func(done float64)
	// StartLatency is how long a placed allocation takes to run (the client
	// receives it, sets up and starts the task): the GPUs are held from the
	// placement, the job's work clock and protected window start when its
	// last allocation runs. Zero: at once.
	StartLatency time.Duration
	// StartSpacing is how long the clients take per task start when
	// starts come together: a task placed while others are starting begins
	// its StartLatency this long after the one before it began (the
	// harness's clients share one machine). Zero: starts never queue.
	StartSpacing time.Duration
	// EvalOrder processes the eval a lever (a stop, a priority write, an
	// evaluate) creates before the lever returns, as Nomad's eval broker
	// does with allot's one-after-another calls (State.runNew); off, the
	// evals a decision creates wait for the end of the instant and run by
	// priority with the blocked ones. On in the fidelity harness; off by
	// default, since it moves every published figure
	// (docs/simulator-fidelity.md, "Why -eval-order and -kill-timeout are
	// off by default").
	EvalOrder bool
	// KillTimeout models stopped tasks' exit (killtimeout.go): a task exits
	// StopLatency plus its kill_timeout after its stop, a task placed on
	// its GPUs starts only then, and a priority write replaces a pending
	// allocation only while such a task has not exited. Off, GPUs a stop
	// frees are free at once and a priority write replaces every
	// allocation within StartLatency of its placement. On in the fidelity
	// harness; off by default, as EvalOrder.
	KillTimeout bool
	// ExitHolds (with KillTimeout) keeps a stopped task's GPUs from every
	// other job's preemption until the task exits: Nomad's scheduler counts
	// an allocation's devices until its client reports it done (its
	// proposed allocations drop only client-terminal ones), so the victim's
	// replacement, placed on them in the stop's own plan, cannot be
	// preempted usefully before then, and the job the stop was for blocks;
	// the blocked evals are retried when the servers hear of the exit
	// (FinishLatency after it, the client's report, as of a finish), by
	// priority, and the first that fits takes the GPUs (killtimeout.go).
	// Off: the job a stop was for preempts the replacement at once.
	ExitHolds bool
	// StopLatency is how long a stopped allocation's client takes to signal
	// its task (it hears of the stop, and later reports the task done): the
	// task exits StopLatency plus its kill_timeout after the stop, and an
	// allocation placed on its GPUs starts only then (killtimeout.go). Zero:
	// the signal is sent at once.
	StopLatency time.Duration
	// FinishLatency is how long after a task finishes its work Nomad learns
	// of it (the client reports the task done): the job is done at once, but
	// the scheduler sees its GPUs free, and places on them, only then
	// (finishlatency.go); with ExitHolds, a stopped task's exit is heard
	// as late. Zero: at once.
	FinishLatency time.Duration
	// PassOnReport runs the policy on a task's end as a real allot does:
	// allot hears a client's report of a finished (FinishLatency) or
	// stopped (ExitHolds) task from Nomad's event stream as Nomad's
	// scheduler does, and its pass reads a view in which the task's GPUs
	// are free and the placements Nomad is making on them are not yet
	// there; its writes land after them. So at the report the policy
	// decides before the scheduler places and its plan is carried out after
	// (engine.go, reportPolicy), besides its reconcile ReactionDelay later.
	// Off: the policy runs only ReactionDelay after the report, on the
	// state with those placements made. On in the fidelity harness.
	PassOnReport bool
	// ReconcileInterval runs the policy at least this long after its last
	// pass, as allot's leader runs one every ReconcileInterval (the
	// server's; 5s by default) besides those events wake: fair-share
	// standings move with usage between events, and a real allot acts on a
	// crossing at its next pass, the model at its next event. 0 (default):
	// the policy runs on events and its own NextWake only.
	ReconcileInterval time.Duration
	// PendingStopLatency (with KillTimeout) is how long after Nomad
	// preempts an allocation whose task has not started its client reports
	// it done: the preemptor (and anything placed on its GPUs) starts only
	// then, and allot sees the preemptor waiting for its victims until
	// then (pendingstop.go). Zero: such a victim exits as a running one
	// does.
	PendingStopLatency time.Duration
	// HealthLatency is how long after a GPU's health changes (a trace's
	// health row) Nomad's servers, and so allot, hear of it: the node's
	// client re-registers a changed fingerprint 5-10 s after its device
	// plugin reports it (Nomad's client, nodeUpdateRetryIntv plus a random
	// stagger up to as long), which the fidelity harness's time compression
	// makes 10-20 trace minutes. The model applies the row, and writes its
	// event, that long after the row's time. Zero: at once.
	HealthLatency time.Duration
	// Events, when set, receives every event of the run's event log (see
	// Event); the event is the model's until the call returns.
	Events func(*Event)
}

// DefaultOptions are the defaults of `allot sim`.
func DefaultOptions() Options {
	return Options{Seed: 1, ReactionDelay: 30 * time.Second, CheckpointLoss: 15 * time.Minute}
}

// State is the simulated Nomad cluster. Policies read it through its
// exported methods and act on it through its lever methods (SetPriority,
// Evaluate, StopAllocs, KillJob, SetEligible, SetPreemptible), exactly the
// levers allot has on a real Nomad. It is not safe for concurrent use.
type State struct {
	opts   Options
	rng    *rand.Rand
	now    int64
	nodes  []node
	nodeBy map[string]int32
	jobs   []job
	allocs []alloc
	// ended lists the allocations in the order they ended (stopAlloc), so
	// that a policy finds those ended since it last looked without a scan;
	// kept only once a policy asks for it (keepEnded, in its Init).
	ended     []int32
	keepEnded bool
	active    []int32 // submitted jobs not done or dead

	queue   evalQueue // jobs with unplaced slots
	readyQ  []int32
	wakeAll bool
	nextIdx uint64
	// classGen is the current class-eligibility generation (starts at 1);
	// a job is class-ineligible while its classBadGen equals it.
	classGen uint32

	freeHist    [65]int32 // eligible nodes by free healthy GPUs
	healthyHist [65]int32 // eligible nodes by healthy GPUs
	// freeSet and healthySet have bit k-1 set while freeHist[k] (or
	// healthyHist[k]) is non-zero, and freeGPUs is the sum of freeHist:
	// the scheduler reads them about ten times per eval tried.
	freeSet, healthySet uint64
	freeGPUs            int
	// freeOn is by node: its free healthy GPUs when eligible, else 0. Node
	// choice scans it (a byte per node) instead of the nodes themselves.
	freeOn []uint8
	// lowOn is by node: the lowest job priority among its allocations
	// (noAllocPrio when none). Preemption passes over, without reading
	// them, the nodes where nothing is far enough below the placing job.
	lowOn    []int32
	prioGPUs [256]int64
	prioSet  [4]uint64 // bit p: prioGPUs[p] != 0
	maxPrio  int

	// classes are the (node pool, GPU model) pairs of the nodes, and
	// nodeClass is by node: its class. allFeas has a bit for every class: a
	// job with it may use every node, and the fast paths serve it.
	classes   []placeClass
	nodeClass []uint8
	allFeas   uint64

	tree       *budgets.Tree
	changed    bool
	nodeGen    uint64 // bumped when a node's health or eligibility changes
	m          *metrics
	heap       eventHeap
	seq        uint64
	events     int64
	reconciles int64
	// startNext is when the next task start may begin (Options.StartSpacing).
	startNext int64
	// reports are the finished tasks' GPUs Nomad has not heard are free
	// yet (Options.FinishLatency), in finish order (finishlatency.go).
	reports []report
	// stopFor is the job the stops being made are for (StopAllocsFor), -1
	// otherwise: the event log's By.
	stopFor int32

	buf struct {
		cand, victims, best, ready []int32
		feasible                   []int32
	}
}

func newState(c ClusterSpec, nLeaves int, leafShares []float64, opts Options) *State {
	s := &State{opts: opts, rng: rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
		nodeBy: make(map[string]int32), maxPrio: 255, classGen: 1, stopFor: -1}
	for _, p := range c.Pools {
		for i := 0; i < p.Nodes; i++ {
			id := p.Name + "-" + itoa(i)
			s.nodeBy[id] = int32(len(s.nodes))
			s.nodes = append(s.nodes, node{id: id, pool: p.Nomad(), model: p.Model, total: p.GPUsPerNode,
				eligible: true, sickSince: -1})
		}
	}
	s.nodeClass = make([]uint8, len(s.nodes))
	for n := range s.nodes {
		pc := placeClass{s.nodes[n].pool, s.nodes[n].model}
		c := slices.Index(s.classes, pc)
		if c < 0 {
			c = len(s.classes)
			s.classes = append(s.classes, pc)
		}
		s.nodeClass[n] = uint8(c)
	}
	s.allFeas = ^uint64(0) >> uint(64-len(s.classes))
	s.freeOn = make([]uint8, len(s.nodes))
	s.lowOn = make([]int32, len(s.nodes))
	for i := range s.lowOn {
		s.lowOn[i] = noAllocPrio
	}
	for i := range s.nodes {
		s.index(int32(i), 1)
	}
	s.m = newMetrics(c.GPUs(), nLeaves, leafShares, int64(opts.Warmup/time.Second))
	return s
}

// placeClass is a node pool and GPU model: Nomad places a job only on nodes
// of its pool, and a device constraint on the model narrows it further.
type placeClass struct{ pool, model string }

// feasOf is the set of placement classes job spec sp may use: those of its
// node pool ("default" when it names none) and, when it names a model, of
// that model.
func (s *State) feasOf(sp *JobSpec) uint64 {
	var m uint64
	pool := sp.NodePool()
	for c, pc := range s.classes {
		if pc.pool == pool && (sp.Model == "" || sp.Model == pc.model) {
			m |= 1 << uint(c)
		}
	}
	return m
}

// feasible reports whether node n is in one of job j's placement classes.
func (s *State) feasible(j *job, n int32) bool { return j.feas>>s.nodeClass[n]&1 != 0 }

// maxHealthyFor is the most healthy GPUs on one eligible node job j may use.
func (s *State) maxHealthyFor(j *job) int {
	if j.feas == s.allFeas {
		return s.maxHealthy()
	}
	best := 0
	for n := range s.nodes {
		if nd := &s.nodes[n]; nd.eligible && s.feasible(j, int32(n)) {
			best = max(best, nd.healthyTotal())
		}
	}
	return best
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b [20]byte
	n := len(b)
	for i > 0 {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
	}
	return string(b[n:])
}

// setHeld sets node i's held GPUs to held, keeping the free-GPU indexes.
func (s *State) setHeld(i int32, held uint64) {
	s.index(i, -1)
	s.nodes[i].held = held
	s.index(i, 1)
}

// index adds (d=1) or removes (d=-1) node i from the capacity histograms,
// and sets its freeOn entry to what the node has now.
func (s *State) index(i int32, d int32) {
	n := &s.nodes[i]
	if !n.eligible {
		s.freeOn[i] = 0
		return
	}
	f, h := n.free(), n.healthyTotal()
	s.freeOn[i] = uint8(f)
	s.freeHist[f] += d
	s.healthyHist[h] += d
	s.freeGPUs += int(d) * f
	s.freeSet = setBit(s.freeSet, f, s.freeHist[f] != 0)
	s.healthySet = setBit(s.healthySet, h, s.healthyHist[h] != 0)
}

// setBit sets (v) or clears bit k-1 of m; k = 0 has no bit.
func setBit(m uint64, k int, v bool) uint64 {
	if k == 0 {
		return m
	}
	if v {
		return m | 1<<uint(k-1)
	}
	return m &^ (1 << uint(k-1))
}

// maxFree is the most free healthy GPUs on one eligible node.
func (s *State) maxFree() int { return 64 - bits.LeadingZeros64(s.freeSet) }

func (s *State) maxHealthy() int { return 64 - bits.LeadingZeros64(s.healthySet) }

// lowPrio recomputes node n's lowest running priority.
func (s *State) lowPrio(n int32) {
	low := noAllocPrio
	for _, a := range s.nodes[n].allocs {
		low = min(low, s.jobs[s.allocs[a].job].prio)
	}
	s.lowOn[n] = int32(low)
}

// preemptibleBelow is the GPUs held by running allocations of priority <= p.
// It reads only the priorities that hold GPUs (a handful: the policy writes
// few distinct priorities), not every priority up to p.
func (s *State) preemptibleBelow(p int) int64 {
	var n int64
	if p < 0 {
		return 0
	}
	p = min(p, len(s.prioGPUs)-1)
	for w := 0; w <= p/64; w++ {
		m := s.prioSet[w]
		if w == p/64 {
			m &= ^uint64(0) >> uint(63-p%64)
		}
		for ; m != 0; m &= m - 1 {
			n += s.prioGPUs[w*64+bits.TrailingZeros64(m)]
		}
	}
	return n
}

// addPrioGPUs adds g GPUs held by running allocations of priority p.
func (s *State) addPrioGPUs(p int, g int64) {
	s.prioGPUs[p] += g
	if s.prioGPUs[p] != 0 {
		s.prioSet[p/64] |= 1 << uint(p%64)
	} else {
		s.prioSet[p/64] &^= 1 << uint(p%64)
	}
}

// Now is the simulated time since the start of the trace.
func (s *State) Now() time.Duration { return time.Duration(s.now) * time.Second }

// NumJobs is the number of jobs in the trace (submitted or not).
func (s *State) NumJobs() int { return len(s.jobs) }

// Active returns the submitted jobs that are neither done nor dead, in no
// particular order. The slice is the model's: do not modify or keep it.
func (s *State) Active() []int32 { return s.active }

// JobView is what a policy may read of a job.
type JobView struct {
	Spec        *JobSpec
	Status      JobStatus
	Priority    int
	LastWritten int
	ModifyIndex uint64
	Placed      int
	// RunningSince is when all its allocations last became placed (the start
	// of its protected window); negative when not fully placed.
	RunningSince time.Duration
	Preemptible  bool
	Blocked      bool
}

// Job returns a view of job i.
func (s *State) Job(i int32) JobView {
	j := &s.jobs[i]
	rs := time.Duration(-1)
	if j.runStart >= 0 {
		rs = time.Duration(j.runStart) * time.Second
	}
	return JobView{Spec: j.spec, Status: j.status, Priority: j.prio, LastWritten: j.lastWritten,
		ModifyIndex: j.modifyIndex, Placed: j.placed, RunningSince: rs, Preemptible: j.preemptible,
		Blocked: j.inQueue}
}

// AllocView is what a policy may read of an allocation.
type AllocView struct {
	ID    int32
	Job   int32
	Node  int32
	Slot  int
	GPUs  int
	Start time.Duration
}

// JobAllocs appends the running allocations of job i to dst.
func (s *State) JobAllocs(i int32, dst []AllocView) []AllocView {
	for _, a := range s.jobs[i].slots {
		if a >= 0 {
			al := &s.allocs[a]
			dst = append(dst, AllocView{ID: a, Job: al.job, Node: al.node, Slot: int(al.slot), GPUs: int(al.gpus),
				Start: time.Duration(al.start) * time.Second})
		}
	}
	return dst
}

// NodeView is what a policy may read of a node.
type NodeView struct {
	ID, Pool, Model string
	GPUs            int // instances in all
	HealthyGPUs     int
	FreeGPUs        int // healthy and not held
	Eligible        bool
	Healthy         bool
	Reason          string
	Allocs          []int32 // running allocations; the model's slice: do not modify
}

// NumNodes is the number of nodes.
func (s *State) NumNodes() int { return len(s.nodes) }

// Node returns a view of node i.
func (s *State) Node(i int32) NodeView {
	n := &s.nodes[i]
	return NodeView{ID: n.id, Pool: n.pool, Model: n.model, GPUs: n.total, HealthyGPUs: n.healthyTotal(),
		FreeGPUs: n.free(), Eligible: n.eligible, Healthy: n.healthy(), Reason: n.reason, Allocs: n.allocs}
}

// NodeIndex finds a node by ID.
func (s *State) NodeIndex(id string) (int32, bool) {
	i, ok := s.nodeBy[id]
	return i, ok
}

// Alloc returns a view of allocation a.
func (s *State) Alloc(a int32) AllocView {
	al := &s.allocs[a]
	return AllocView{ID: a, Job: al.job, Node: al.node, Slot: int(al.slot), GPUs: int(al.gpus),
		Start: time.Duration(al.start) * time.Second}
}

// SetPriority re-registers job i with priority p (docs/nomad-facts.md a and d): a
// running allocation is updated in place; unplaced slots get a new eval,
// processed at once, at the back of its new priority. As allot's adapter
// does (nomad.ErrWouldReplace), it refuses a write that Nomad would carry
// out by replacing an allocation (replaced: placed on GPUs a stopped task
// still holds) and reports false: nothing changes, and the policy runs
// again once that task has exited (its client's report is a change).
func (s *State) SetPriority(i int32, p int) bool { return s.writePriority(i, p, true) }

// writePriority is SetPriority; without check (the adapter does not check a
// write to a job it stops in the same batch) Nomad's replacement of the
// allocations placed on GPUs a stopped task still holds is carried out
// (StopJobUpdate) and the job placed again at its new priority.
func (s *State) writePriority(i int32, p int, check bool) bool {
	j := &s.jobs[i]
	p = min(max(p, 1), s.maxPrio)
	if p == j.prio || j.status >= StatusDone {
		j.lastWritten = p
		return true
	}
	if at := s.replacedUntil(i); at > 0 && check {
		if s.now >= s.m.from {
			s.m.refusedWrites++
		}
		s.pushEvent(at, evChanged, -1, 0)
		return false
	}
	j.lastWritten = p
	if s.now >= s.m.from {
		s.m.writes++
	}
	for _, a := range j.slots {
		if a >= 0 {
			g := int64(s.allocs[a].gpus)
			s.addPrioGPUs(j.prio, -g)
			s.addPrioGPUs(p, g)
		}
	}
	s.dequeue(i)
	old := j.prio
	j.prio = p
	for _, a := range j.slots {
		if a < 0 {
			continue
		}
		// lowOn[n] is the lowest priority on node n, this job's old one
		// included: a new one at or below it is the lowest now, and when
		// the lowest is another job's it stays; only a job that held the
		// lowest and moves up makes the node's allocations read again.
		switch n := s.allocs[a].node; {
		case int32(p) <= s.lowOn[n]:
			s.lowOn[n] = int32(p)
		case int32(old) > s.lowOn[n]:
		default:
			s.lowPrio(n)
		}
	}
	j.modifyIndex++
	replaced := false
	if !check {
		for _, a := range j.slots {
			if a >= 0 && s.replaced(a) {
				s.stopAlloc(a, StopJobUpdate, -1)
				replaced = true
			}
		}
	}
	if replaced || j.placed < len(j.slots) {
		s.enqueue(i)
		s.runNew()
	}
	return true
}

// replacedUntil is when a priority write to job i stops being one that a
// real Nomad carries out by replacing an allocation: the latest end of
// replaced over its allocations placed on GPUs a stopped task still holds
// ("alloc is being updated due to job update": Nomad's in-place update
// finds the allocation no longer fits its node, whose stopped task's
// devices it still counts; measured by the fidelity harness, 17 of 23
// replacements were of allocations placed on GPUs a stop had just freed,
// 5 of 189 pending placements on free GPUs were replaced); 0 when the
// write is made in place.
func (s *State) replacedUntil(i int32) int64 {
	var until int64
	for _, a := range s.jobs[i].slots {
		if a >= 0 && s.replaced(a) {
			until = max(until, s.replacedEnd(a))
		}
	}
	return until
}

// Evaluate creates a new eval for job i (POST /v1/job/<id>/evaluate): its
// unplaced allocations are tried at once, class ineligibility or not.
func (s *State) Evaluate(i int32) {
	j := &s.jobs[i]
	if j.status >= StatusDone || j.placed == len(j.slots) {
		return
	}
	s.dequeue(i)
	s.enqueue(i)
	s.runNew()
}

// SetPreemptible records whether job i may now be preempted under the
// policy (drawn hatched in the report); it changes nothing in Nomad.
func (s *State) SetPreemptible(i int32, v bool) {
	j := &s.jobs[i]
	if j.preemptible == v {
		return
	}
	j.preemptible = v
	if v {
		for _, a := range j.slots {
			if a >= 0 && s.allocs[a].preemptAt < 0 {
				s.allocs[a].preemptAt = s.now
			}
		}
	}
}

// StopAllocs stops the given running allocations of their jobs as
// migrations (docs/nomad-facts.md c): the GPUs are freed and each
// replacement's eval is processed at once, before the next allocation is
// stopped (runNew), never counted as a reschedule.
func (s *State) StopAllocs(ids []int32, why StopReason) {
	for _, a := range ids {
		if a >= 0 && int(a) < len(s.allocs) && s.allocs[a].end < 0 {
			s.stopAlloc(a, why, -1)
			s.requeue(s.allocs[a].job)
			s.runNew() // the replacement's eval (evalOrder)
		}
	}
}

// KillJob stops every allocation of job i without replacement: Nomad's
// drain deadline (docs/nomad-facts.md e). The job ends dead and its work is lost.
func (s *State) KillJob(i int32) {
	j := &s.jobs[i]
	if j.status >= StatusDone {
		return
	}
	for _, a := range j.slots {
		if a >= 0 {
			s.stopAlloc(a, StopKilled, -1)
		}
	}
	s.dequeue(i)
	lost := j.done
	j.done = 0
	j.lostWorkSec += lost
	s.m.lost(lost*int64(j.spec.TotalGPUs()), s.now)
	s.m.drainLost(lost*int64(j.spec.TotalGPUs()), s.now)
	s.m.lostBy(StopKilled, lost*int64(j.spec.TotalGPUs()), s.now)
	if s.now >= s.m.from {
		s.m.drain.killed++
	}
	s.finishJob(i, StatusDead)
}

// NoteOperator records that a person acted on node n's current unhealthy
// episode (started a drain, returned the node): the report counts the
// drains that needed no operator. It changes nothing in Nomad.
func (s *State) NoteOperator(n int32) { s.m.operator(n) }

// advance integrates the measurements up to t: GPU time held, and healthy
// GPUs left idle on cordoned nodes of open unhealthy episodes.
func (s *State) advance(t int64) {
	d := &s.m.drain
	if lo := max(d.last, s.m.from); t > lo {
		for _, e := range d.open {
			if nd := &s.nodes[e.node]; !nd.eligible {
				d.idleSec += int64(nd.free()) * (t - lo)
			}
		}
	}
	d.last = max(d.last, t)
	s.m.advance(t)
}

// SetEligible sets node n's scheduling eligibility (docs/nomad-facts.md e). Marking
// it eligible wakes blocked evals, including class-ineligible ones.
func (s *State) SetEligible(n int32, v bool) {
	nd := &s.nodes[n]
	if nd.eligible == v {
		return
	}
	s.index(n, -1)
	nd.eligible = v
	s.nodeGen++
	s.index(n, 1) // only freeOn when the node is now ineligible
	s.emitNode(n, v)
	if v {
		s.wakeClass()
	}
	s.checkDrained(n)
}

// wakeClass wakes every blocked eval, class-ineligible ones included.
func (s *State) wakeClass() {
	s.classGen++
	s.wakeAll = true
}

// classBad reports whether job j is blocked as class ineligible.
func (s *State) classBad(j *job) bool { return j.classBadGen == s.classGen }

// setHealth applies a health event to node n.
func (s *State) setHealth(n int32, gpu int, healthy bool, reason string) {
	nd := &s.nodes[n]
	mask := nd.all()
	if gpu >= 0 {
		if gpu >= nd.total {
			return
		}
		mask = 1 << uint(gpu)
	}
	s.index(n, -1)
	if healthy {
		nd.sick &^= mask
	} else {
		nd.sick |= mask
		nd.reason = reason
	}
	s.index(n, 1)
	s.nodeGen++
	s.emitHealth(n, gpu, healthy, reason)
	switch {
	case nd.sick != 0 && nd.sickSince < 0:
		nd.sickSince, nd.drained = s.now, false
		s.m.sickStart(n, s.now)
	case nd.sick == 0 && nd.sickSince >= 0:
		if !nd.drained {
			s.m.episodeEnd(n, s.now, false)
		}
		nd.sickSince = -1
		nd.reason = ""
	}
	if healthy {
		// Recovery wakes evals blocked for a shortage, not the class-ineligible ones (facts i).
		s.wakeAll = true
	}
	s.changed = true
	s.checkDrained(n)
}

// checkDrained records when an unhealthy node is first empty and ineligible.
func (s *State) checkDrained(n int32) {
	nd := &s.nodes[n]
	if nd.sickSince >= 0 && !nd.drained && !nd.eligible && len(nd.allocs) == 0 {
		nd.drained = true
		s.m.episodeEnd(n, s.now, true)
	}
}

// enqueue gives job i a new eval at the back of its priority.
func (s *State) enqueue(i int32) {
	j := &s.jobs[i]
	s.nextIdx++
	j.evalIdx = s.nextIdx
	j.inQueue = true
	j.classBadGen = 0
	s.queue.add(s.jobs, i)
	if !j.ready {
		j.ready = true
		s.readyQ = append(s.readyQ, i)
	}
}

func (s *State) queueCmp(a, b int32) int {
	ja, jb := &s.jobs[a], &s.jobs[b]
	if ja.prio != jb.prio {
		return jb.prio - ja.prio
	}
	return cmp.Compare(ja.evalIdx, jb.evalIdx)
}

// dequeue removes job i's eval from the blocked queue.
func (s *State) dequeue(i int32) {
	j := &s.jobs[i]
	if !j.inQueue {
		return
	}
	s.queue.remove(s.jobs, i)
	j.inQueue = false
}

// requeue gives job i (which lost an allocation) a new eval.
func (s *State) requeue(i int32) {
	j := &s.jobs[i]
	if j.status >= StatusDone {
		return
	}
	if j.requeuedAt < 0 && j.firstStart >= 0 {
		j.requeuedAt = s.now
	}
	s.dequeue(i)
	s.enqueue(i)
}

// startAlloc places slot of job i on node n using GPU instances mask.
func (s *State) startAlloc(i int32, slot int, n int32, mask uint64) {
	j := &s.jobs[i]
	nd := &s.nodes[n]
	a := int32(len(s.allocs))
	g := bits.OnesCount64(mask)
	pa := int64(-1)
	if j.preemptible {
		pa = s.now
	}
	exit := s.onExiting(n, mask)
	s.allocs = append(s.allocs, alloc{job: i, node: n, slot: int32(slot), gpus: int16(g), mask: mask,
		start: s.now, end: -1, preemptAt: pa, preemptedBy: -1, exitAt: exit, runsAt: s.startsAt(exit), heardAt: nd.heard.until(s.now, mask)})
	s.setHeld(n, nd.held|mask)
	nd.allocs = append(nd.allocs, a)
	s.emitPlace(j, a)
	s.lowOn[n] = min(s.lowOn[n], int32(j.prio))
	s.addPrioGPUs(j.prio, int64(g))
	j.slots[slot] = a
	j.placed++
	if j.status == StatusPending {
		j.status = StatusRunning
	}
	s.m.held(j, s.now, g)
	s.changed = true
	if j.placed == len(j.slots) {
		s.placedAll(i)
	}
}

// stopAlloc frees allocation a. by is the preempting job or -1.
func (s *State) stopAlloc(a int32, why StopReason, by int32) {
	al := &s.allocs[a]
	j := &s.jobs[al.job]
	nd := &s.nodes[al.node]
	var ran, lost int64 // the run this stop interrupts, for the event log
	if j.placed == len(j.slots) {
		ran, lost = s.interrupt(al.job, why)
	} else if s.now != j.lastRunEnd {
		j.lastRun = 0 // placed in part: this stop ends no run (as the reconcile pass reads Job.LastRun)
	}
	if why != StopFinished && why != StopEnd {
		s.exiting(a, why) // with Options.KillTimeout
	}
	al.end, al.endReason, al.preemptedBy = s.now, why, by
	if s.keepEnded {
		s.ended = append(s.ended, a)
	}
	s.emitStop(a, ran, lost)
	s.setHeld(al.node, nd.held&^al.mask)
	if k := slices.Index(nd.allocs, a); k >= 0 {
		nd.allocs = slices.Delete(nd.allocs, k, k+1)
	}
	s.lowPrio(al.node)
	s.addPrioGPUs(j.prio, -int64(al.gpus))
	j.slots[al.slot] = -1
	j.placed--
	if j.placed == 0 && j.status == StatusRunning {
		j.status = StatusPending
	}
	s.m.held(j, s.now, -int(al.gpus))
	if why != StopFinished && why != StopEnd {
		s.m.stopped(j, why, s.now)
	}
	s.wakeAll = true
	s.changed = true
	s.checkDrained(al.node)
}

// jobRuns starts the job's work clock: all its allocations are placed.
func (s *State) jobRuns(i int32) {
	j := &s.jobs[i]
	j.runStart = s.now
	if j.firstStart < 0 {
		j.firstStart = s.now
		s.m.firstWait(j, int64(j.spec.Submit/time.Second), s.now)
	} else if j.requeuedAt >= 0 {
		s.m.requeueWait(j, j.requeuedAt, s.now)
	}
	j.requeuedAt = -1
	s.emitStart(j)
	j.finishGen++
	left := int64(j.spec.Work/time.Second) - j.done
	s.pushEvent(s.now+max(left, 0), evFinish, i, j.finishGen)
}

// interrupt stops the work clock of a fully placed job and applies the
// checkpoint loss (resumable) or the restart (not resumable). It returns
// how long the run ran (seconds) and the work thrown away (GPU-seconds).
func (s *State) interrupt(i int32, why StopReason) (ran, lostGPUSec int64) {
	j := &s.jobs[i]
	if j.runStart < 0 {
		return 0, 0
	}
	ran = s.now - j.runStart
	j.usefulGPUSec += ran * int64(j.spec.TotalGPUs())
	s.m.ran(j, j.runStart, s.now)
	j.done += ran
	var lost int64
	if j.spec.Resumable {
		// It resumed from a checkpoint when this run started, so it
		// loses at most this run, and at most CheckpointLoss of it.
		lost = min(ran, int64(s.opts.CheckpointLoss/time.Second))
	} else {
		lost = j.done
	}
	if why == StopEnd || s.savedAtStop(j, why) {
		lost = 0
	} else if j.spec.Resumable {
		lost -= killSaved(j, lost)
	}
	s.sessionStopped(j, why, lost)
	j.done -= lost
	gpuLost := lost * int64(j.spec.TotalGPUs())
	if lost > 0 && !j.spec.Resumable {
		s.m.lostRun(gpuLost, j.lostWorkSec > 0, s.now)
	}
	j.lostWorkSec += lost
	s.m.lost(gpuLost, s.now)
	s.m.lostBy(why, gpuLost, s.now)
	if why == StopDrain || why == StopKilled {
		s.m.drainLost(gpuLost, s.now)
	}
	j.runStart = -1
	j.finishGen++
	if why != StopEnd {
		j.interrupts++
		j.lastRun, j.lastRunEnd = ran, s.now
	}
	return ran, gpuLost
}

// finishJob retires job i.
func (s *State) finishJob(i int32, st JobStatus) {
	j := &s.jobs[i]
	j.status = st
	j.doneAt = s.now
	k := j.activeIdx
	last := s.active[len(s.active)-1]
	s.active[k] = last
	s.jobs[last].activeIdx = k
	s.active = s.active[:len(s.active)-1]
	s.m.jobEnded(j, st)
	s.emitDone(j, st)
	s.changed = true
}

// placedAll starts job i's run now that all its allocations are placed: at
// once, or when the last of its tasks runs (alloc.runsAt: Options.StartLatency,
// or the exit of a stopped task on its GPUs) if it is still fully placed then.
func (s *State) placedAll(i int32) {
	j := &s.jobs[i]
	at := s.now
	for _, a := range j.slots {
		at = max(at, s.allocs[a].runsAt)
	}
	if at <= s.now {
		s.jobRuns(i)
		return
	}
	j.startGen++
	s.pushEvent(at, evRunning, i, j.startGen)
}

// running is the StartLatency event of job i: it runs if nothing of it was
// stopped since it was fully placed.
func (s *State) running(i int32, gen uint32) {
	j := &s.jobs[i]
	if j.startGen != gen || j.placed != len(j.slots) || j.runStart >= 0 || j.status >= StatusDone {
		return
	}
	s.jobRuns(i)
	s.changed = true
}
