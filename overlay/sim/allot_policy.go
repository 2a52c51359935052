package sim

import (
	"fmt"
	"strconv"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/contract"
	"github.com/allot-sched/allot/overlay/policy"
)

// Epoch is the wall-clock time of a trace's zero, handed to the policy
// (which reasons in time.Time).
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// nomadDefaultPriority is the priority `nomad job run` gives a job that
// names none: what a job has before allot first reconciles it.
const nomadDefaultPriority = 50

// Allot drives the model with the real overlay/policy code, unchanged: at
// each reconcile it builds a policy.Snapshot from the model (as the
// server's reconcile pass, overlay/reconcile, builds one from Nomad),
// charges the usage ledger, computes fair share over the lookback window,
// calls Decide and applies the Plan through the model's levers. The
// policy's memory between decisions is its Incremental's policy.Carry, as
// in the server.
type Allot struct {
	cfg    policy.Config
	tree   *budgets.Tree
	ledger *budgets.Ledger
	fs     *budgets.FairShare
	usage  []int64
	// inc holds the model as the policy sees it, fed with deltas between
	// decisions (allot_sync.go) instead of a snapshot rebuilt each time.
	inc policy.Incremental

	contracts []contract.Contract
	groups    []policy.TaskGroup // by job: its one task group, shared by every PutJob of it
	jobIndex  map[string]int32
	allocIDs  []string
	nodeState []policy.NodeState
	charged   int64 // time the ledger is charged up to
	spans     []budgets.Span
	err       error // the first charge the ledger refused
	sync      syncState
	// Decisions counts Decide calls.
	Decisions int64
	// verify, set by tests, sees each plan before it is applied.
	verify func(plan *policy.Plan, now time.Time)
}

// NewAllot returns the allot policy with cfg (policy.DefaultConfig() for
// docs/design.md's defaults).
func NewAllot(cfg policy.Config) (*Allot, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Allot{cfg: cfg}, nil
}

// Name implements Policy.
func (a *Allot) Name() string { return "allot" }

// Init implements Policy.
func (a *Allot) Init(s *State, tree *budgets.Tree) error {
	if tree == nil {
		specs := []budgets.Spec{{Path: "cluster"}}
		t, err := budgets.NewTree(specs)
		if err != nil {
			return err
		}
		tree = t
	}
	a.tree = tree
	a.ledger = budgets.NewLedger(budgets.LedgerConfig{Bucket: time.Minute, Retention: 2 * a.cfg.Lookback})
	a.fs = budgets.ComputeFairShare(tree, nil)
	a.jobIndex = make(map[string]int32, s.NumJobs())
	a.contracts = make([]contract.Contract, s.NumJobs())
	a.groups = make([]policy.TaskGroup, s.NumJobs())
	ccfg := a.cfg.Config
	leaf := func(p string) (bool, bool) {
		n, ok := tree.Lookup(p)
		return ok, ok && n.IsLeaf()
	}
	// contract.Parse is pure and names the job only in warnings, so jobs
	// with the same meta share one parse unless it warned.
	type metaKey struct {
		minRuntime time.Duration
		resumable  bool
		priority   int
		budget     string
		signal     string
		notice     time.Duration
		session    bool
	}
	parsed := make(map[metaKey]contract.Contract)
	for i := range s.jobs {
		sp := s.jobs[i].spec
		a.jobIndex[sp.ID] = int32(i)
		a.groups[i] = policy.TaskGroup{Name: "main", Count: sp.Count, GPUs: sp.GPUs, Model: sp.Model}
		k := metaKey{sp.MinRuntime, sp.Resumable, sp.Priority, sp.Budget, sp.Signal, sp.Notice, sp.Class == ClassInteractive}
		if c, ok := parsed[k]; ok {
			a.contracts[i] = c
			continue
		}
		a.contracts[i] = contract.Parse(sp.ID, jobMeta(sp), ccfg, leaf)
		if len(a.contracts[i].Warnings) == 0 {
			parsed[k] = a.contracts[i]
		}
	}
	a.allocIDs = make([]string, 0, cap(s.allocs))
	a.nodeState = make([]policy.NodeState, len(s.nodes))
	s.keepEnded = true // syncModel reads the allocations that ended from State.ended
	return nil
}

// SubmitPriority implements Policy: jobs arrive at Nomad's default.
func (a *Allot) SubmitPriority(*State, int32) int { return nomadDefaultPriority }

func at(sec int64) time.Time { return Epoch.Add(time.Duration(sec) * time.Second) }

// charge books the GPU time of every leaf since the last reconcile, spread
// over the ledger's buckets as the server's ledger is charged, in one
// WriteSpans (all or nothing). A refused charge stops the run with an error
// (Err): a run whose ledger lost usage would report wrong figures.
func (a *Allot) charge(s *State) {
	if s.now <= a.charged || a.err != nil {
		return
	}
	a.spans = a.spans[:0]
	from, to := at(a.charged), at(s.now)
	for l, g := range s.m.leafRun {
		if g > 0 && l < len(a.tree.Leaves()) {
			a.spans = append(a.spans, budgets.Span{Leaf: a.tree.Leaves()[l].Path, Start: from, End: to, GPUs: g})
		}
	}
	if err := a.ledger.WriteSpans(a.spans); err != nil {
		a.err = fmt.Errorf("charge the ledger at %s: %w", time.Duration(s.now)*time.Second, err)
		return
	}
	a.charged = s.now
}

// Err returns why the run cannot be trusted: a charge the ledger refused.
func (a *Allot) Err() error { return a.err }

// Reconcile implements Policy.
func (a *Allot) Reconcile(s *State) time.Duration {
	return a.Commit(s, a.Prepare(s))
}

// Prepare decides on the state as it is now (Reconcile's first half).
func (a *Allot) Prepare(s *State) *policy.Plan {
	now := at(s.now)
	a.charge(s)
	a.usage = a.ledger.UsageByLeaf(a.tree, now.Add(-a.cfg.Lookback), now, a.usage)
	a.fs.Recompute(a.tree, a.usage)
	a.syncModel(s, now)
	a.Decisions++
	plan := a.inc.Decide(a.tree, a.fs, now, a.cfg)
	if a.verify != nil {
		a.verify(plan, now)
	}
	return plan
}

// Commit carries a plan from Prepare out on the state as it is now.
func (a *Allot) Commit(s *State, plan *policy.Plan) time.Duration {
	failed := a.apply(s, plan)
	// Reservations, held victims and issued actions travel to the next
	// decision, as the server's reconcile pass carries them, less what was
	// not carried out (a refused write's job's stops and evaluations).
	a.inc.Remember(plan, failed)
	if plan.NextWake.IsZero() {
		return 0
	}
	return plan.NextWake.Sub(Epoch)
}

// allocIDChunk is how many allocation IDs allocID makes at once.
const allocIDChunk = 1024

// allocID is allocation id's ID for the policy: "a" and its index. IDs are
// made a chunk at a time as substrings of one string, one allocation per
// chunk instead of two per ID.
func (a *Allot) allocID(id int32) string {
	for int(id) >= len(a.allocIDs) {
		first := len(a.allocIDs)
		buf := make([]byte, 0, allocIDChunk*8)
		ends := make([]int, 0, allocIDChunk)
		for k := first; k < first+allocIDChunk; k++ {
			buf = strconv.AppendInt(append(buf, 'a'), int64(k), 10)
			ends = append(ends, len(buf))
		}
		all, start := string(buf), 0
		for _, e := range ends {
			a.allocIDs = append(a.allocIDs, all[start:e])
			start = e
		}
	}
	return a.allocIDs[id]
}

// stopReason maps a plan's stop reason onto the report's reasons.
func stopReason(c policy.ReasonCode) StopReason {
	switch c {
	case policy.ReasonVictim, policy.ReasonVictimOwn, policy.ReasonVictimPartial:
		return StopTimeSlice
	case policy.ReasonPartialRelease:
		return StopRelease // for no job: Reason.Job names the job it waits for
	case policy.ReasonDrainStop, policy.ReasonDrainUnallocated, policy.ReasonNomadDrain:
		return StopDrain
	case policy.ReasonReservationStop:
		return StopReserve
	}
	return StopOther
}

// apply carries the plan out in the adapter's order: priorities (in the
// plan's order, its policy.WriteStep steps: with Options.EvalOrder each
// write's eval is processed before the next write), stops, node actions,
// evaluations. A write refused (SetPriority: Nomad would replace an
// allocation to make it; the adapter's nomad.ErrWouldReplace; not checked
// for a job the plan also stops, as the adapter does not) skips the
// job's stops and evaluations in this plan, as the adapter skips a job's
// ops after a failed one (nomad.ErrSkipped), and they are reported failed.
func (a *Allot) apply(s *State, p *policy.Plan) policy.Failed {
	var refused, stopping map[string]bool
	for _, st := range p.Stops {
		if stopping == nil {
			stopping = map[string]bool{}
		}
		stopping[st.Job] = true
	}
	for _, sp := range p.SetPriorities {
		i, ok := a.jobIndex[sp.Job]
		if !ok {
			continue
		}
		if fl := a.cfg.FreeLevels(); s.now >= s.m.from && s.jobs[i].prio != sp.To &&
			fl.Low <= sp.From && sp.From <= fl.High && fl.Low <= sp.To && sp.To <= fl.High {
			s.m.freeWrites++
		}
		if !s.writePriority(i, sp.To, !stopping[sp.Job]) { // the adapter checks no write to a job it stops too
			if refused == nil {
				refused = map[string]bool{}
			}
			refused[sp.Job] = true
			continue
		}
		s.SetPreemptible(i, sp.To == a.cfg.Running || sp.To <= a.cfg.Unallocated.High)
		if j := &s.jobs[i]; j.status < StatusDone {
			a.inc.PutPriority(sp.Job, j.prio, j.lastWritten, j.modifyIndex)
		}
	}
	var ids []int32
	for _, sg := range p.Signals {
		ids = allocIndexes(ids[:0], sg.Allocs)
		s.Signal(ids)
	}
	var failed policy.Failed
	for k, st := range p.Stops {
		if refused[st.Job] {
			failed.Stops = append(failed.Stops, k)
			continue
		}
		ids = allocIndexes(ids[:0], st.Allocs)
		why := stopReason(st.Reason.Code)
		forJob, ok := a.jobIndex[st.Reason.Job]
		if !ok || why != StopTimeSlice && why != StopReserve {
			forJob = -1
		}
		s.StopAllocsFor(ids, why, forJob)
	}
	for _, na := range p.NodeActions {
		n, ok := s.NodeIndex(na.Node)
		if !ok {
			continue
		}
		s.SetEligible(n, na.Kind.Eligible())
		if st := na.State(); st != a.nodeState[n] {
			a.nodeState[n] = st
			a.sync.nodesDue = true
		}
	}
	for k, ev := range p.Evaluations {
		if refused[ev.Job] {
			failed.Evaluations = append(failed.Evaluations, k)
			continue
		}
		if i, ok := a.jobIndex[ev.Job]; ok {
			s.Evaluate(i)
		}
	}
	return failed
}
