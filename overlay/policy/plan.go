package policy

import (
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/contract"
)

// Plan is one decision: what to write to Nomad and why. The Nomad adapter
// applies it in order: SetPriorities (check-and-set on ModifyIndex, step by
// step: WriteStep), Stops (migrations: requeued, never rescheduled),
// NodeActions, then Evaluations.
type Plan struct {
	Now           time.Time
	SetPriorities []SetPriority
	Stops         []StopJob
	// Signals are checkpoint notices sent before stops (notice.go); the
	// adapter applies them with the stops.
	Signals     []SignalJob
	NodeActions []NodeAction
	Evaluations []Evaluate
	// Reservations are the reservations in force after this plan, including
	// expired ones remembered; the caller passes them back in the next
	// Snapshot.Reservations.
	Reservations []Reservation
	// Victims are the victims held after this plan (chosen by it or held
	// from before); the caller passes them back in Snapshot.Victims.
	Victims []Victim
	// Issued are this plan's stops and evaluations, with the earlier ones
	// still settling; the caller passes them back in Snapshot.Issued, less
	// any it failed to apply.
	Issued []Issued
	// Notices are the checkpoint notices running after this plan; the
	// caller passes them back in Snapshot.Notices (notice.go).
	Notices []Notice
	// Explanations has one entry per managed job, in Snapshot.Jobs order.
	Explanations []Explanation
	// NextWake is the earliest time after Now at which the plan would change
	// with no new event; zero when nothing is scheduled.
	NextWake time.Time
}

// Explain returns the explanation of a job, if it is managed.
func (p *Plan) Explain(job string) (*Explanation, bool) {
	for i := range p.Explanations {
		if p.Explanations[i].Job == job {
			return &p.Explanations[i], true
		}
	}
	return nil, false
}

// SetPriority rewrites a job's Nomad priority (the only job field allot writes).
type SetPriority struct {
	Job, Namespace string
	From, To       int
	// ModifyIndex is the JobModifyIndex the decision saw: write with
	// check-and-set so a user's concurrent `nomad job run` wins.
	ModifyIndex uint64
	Reason      Reason
	// Step is when the write goes (the plan lists its writes in step
	// order; the adapter finishes a step before it starts the next).
	Step WriteStep
}

// WriteStep orders a plan's priority writes by what Nomad does with each.
// A write re-registers the job, and Nomad processes the evaluation that
// creates before allot's next call (the fidelity harness measured it: the
// simulator's -eval-order): a job with allocations still to place is
// placed at once, at its new priority, preempting what it may (anything a
// preemption gap below it). So the writes that lift placed jobs out of
// reach go before any write that makes Nomad place, and the victims a plan
// lowers go after them: a job placed since the last decision still sits at
// its pending level (within reach of every pending job a gap above) until
// its write to Protected lands, and a job written to Protected after
// another write's evaluation preempted it would be placed again at
// Protected, a preemption gap above Running.
type WriteStep uint8

const (
	// StepShield: the job has every allocation placed; its write makes
	// Nomad place nothing (running allocations are updated in place).
	StepShield WriteStep = iota
	// StepPlace: the job has allocations to place; Nomad places them at
	// the new priority as soon as the write lands.
	StepPlace
	// StepLower: a victim lowered below the job it makes room for; it is in
	// reach from the write until its stop, which follows the writes.
	StepLower
)

// Evaluate asks Nomad to re-evaluate a pending job now (POST /v1/job/<id>/evaluate).
type Evaluate struct {
	Job, Namespace string
	Reason         Reason
}

// StopJob stops allocations of a job as migrations (no reschedule flag), so
// Nomad places replacements. Victims of time slicing lose all their
// allocations; a drain stops only those on the draining node.
type StopJob struct {
	Job, Namespace string
	Allocs         []string
	Reason         Reason
	// Level is the priority the job is at when the stop lands (its write in
	// this plan, else its priority now): the plan lists its stops lowest
	// level first, and the adapter finishes the stops of one level before
	// it starts the next (stoporder.go).
	Level int
}

// NodeActionKind is what to do to a node.
type NodeActionKind uint8

const (
	NodeIneligible  NodeActionKind = iota // a fault: no new work
	NodeEligible                          // back in service after repair
	NodeMarkDrained                       // empty and ready for repair (stays ineligible)
	NodeReserve                           // ineligible, held for a large job
	NodeRelease                           // eligible again after a reservation
)

var nodeActionNames = [...]string{"ineligible", "eligible", "drained", "reserved", "released"}

func (k NodeActionKind) String() string {
	if int(k) < len(nodeActionNames) {
		return nodeActionNames[k]
	}
	return "unknown"
}

// Eligible reports the Nomad eligibility the action sets.
func (k NodeActionKind) Eligible() bool { return k == NodeEligible || k == NodeRelease }

// NodeAction changes a node's eligibility and allot's memory of it.
type NodeAction struct {
	Node   string
	Kind   NodeActionKind
	Reason Reason
}

// State is the NodeState the caller records for the node once the action is
// applied, to pass back in the next Snapshot.
func (a NodeAction) State() NodeState {
	switch a.Kind {
	case NodeIneligible:
		return NodeDraining
	case NodeMarkDrained:
		return NodeDrained
	case NodeReserve:
		return NodeReserved
	}
	return NodeNormal
}

// Band is the priority band a job is placed in.
type Band uint8

const (
	BandProtected Band = iota
	BandRunning
	BandPending
	BandUnallocated
)

var bandNames = [...]string{"protected", "running", "pending", "unallocated"}

func (b Band) String() string {
	if int(b) < len(bandNames) {
		return bandNames[b]
	}
	return "unknown"
}

// Wait says what a job is waiting for, or that it is not waiting.
type Wait uint8

const (
	WaitNone      Wait = iota // running
	WaitPlacement             // GPUs are free for it: Nomad places it
	WaitQueue                 // behind jobs higher in the order
	WaitVictims               // allot is stopping victims for it
	WaitWindows               // the GPUs it needs are in protected windows until FreeAt
	WaitReserved              // nodes are reserved for it; they free up at FreeAt
	WaitFairShare             // the GPUs are held by budgets within the fairness margin of its own
	WaitTooLarge              // no node has enough healthy GPUs of its model
	WaitPartial               // placed in part: the rest comes before any pending job
	WaitHeld                  // a victim: held below the job it made room for until that one places
	WaitWork                  // its only victims would throw away more work than Config.MaxSliceLoss allows: until the bound lapses (FreeAt), or a cheaper stop at a window end (FreeAt zero: new protected work there moves that time)
	WaitOrder                 // the GPUs are held past their windows by its own budget's jobs of the same or a higher meta priority
	WaitPool                  // no node at all is in its node pool with its GPU model: it never places until one joins (or its node_pool changes)
	WaitNotice                // the jobs stopped for it were sent their checkpoint notice; they stop at FreeAt (or when they exit)
	WaitRestart               // stopped before: its budget stands where it would be stopped again and lose the run (restart.go)
	WaitRestFirst             // the only victims it may take free GPUs that the rest of a job placed in part (WaitsFor) would take first (rule 5g)
	WaitStanding              // its budget is served more than one running where it would run: it evicts no running work to start (rule 5h, restart.go)
)

var waitNames = [...]string{"nothing", "placement", "queue", "victims", "protected windows",
	"reservation", "fair share", "a node with enough healthy GPUs", "rest of its allocations",
	"the job it made room for", "running jobs that would lose too much work",
	"its own budget's jobs of the same or a higher meta priority",
	"a node of its node pool and GPU model, and there is none: no node of the job's node pool (\"default\" when the job names none) has GPUs of the model it asks; check the job's node_pool and device constraint",
	"the checkpoint notice of the jobs stopped for it",
	"its budget's standing: restarted now, it would be stopped again and lose the run",
	"the rest of a job placed in part, which Nomad places first on the GPUs its victims would free",
	"its budget's standing: served more than a budget running where it would run, it starts only on GPUs nobody holds"}

// Timed reports whether the wait ends when GPUs free up at a time the
// policy may know (Explanation.FreeAt): protected windows, a reservation,
// the loss bound, a checkpoint notice. Where FreeAt is zero that time is
// not known, and explanations say so.
func (w Wait) Timed() bool {
	return w == WaitWindows || w == WaitReserved || w == WaitWork || w == WaitNotice
}

func (w Wait) String() string {
	if int(w) < len(waitNames) {
		return waitNames[w]
	}
	return "unknown"
}

// Explanation is why a managed job sits where it does (`allot explain`).
type Explanation struct {
	Job, Namespace string
	Band           Band
	// Priority is the job's Nomad priority once the plan is applied.
	Priority int
	// Target is the level the policy computed (equal to Priority unless
	// hysteresis kept the current one or moved it to keep the order).
	Target int
	// VictimOf is the job this one was stopped to make room for, while it
	// is held below it ("" when it is no victim).
	VictimOf string
	// Budget is the leaf the job is charged to ("" when unallocated).
	Budget string
	// Position is the 1-based place in the pending order (0: not pending).
	Position int
	// Rank is the job's leaf's fair-share standing: the sort metric and its
	// parts (nil when unallocated). Shared with the FairShare passed in.
	Rank *budgets.LeafRank
	// ProtectedUntil ends the protected window (zero when unknown or none).
	ProtectedUntil time.Time
	Wait           Wait
	// ReservedNodes hold GPUs for the job (rule 7).
	ReservedNodes []string
	// FreeAt is when the GPUs it needs free up, when known.
	FreeAt time.Time
	// WaitsFor is a job the Wait rule keeps the GPUs with ("" when none
	// is named): the first job its budget's order or the fairness margin
	// protects, or the first victim of the cheapest set the loss bound
	// refused.
	WaitsFor string
	// Reason is a short account of the job's state.
	Reason   Reason
	Warnings []contract.Warning
}
