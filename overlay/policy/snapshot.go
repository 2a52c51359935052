package policy

import (
	"fmt"
	"strings"
	"time"

	"github.com/allot-sched/allot/overlay/contract"
)

// Snapshot is everything Decide knows about the cluster at one moment. The
// caller builds it from Nomad (or the simulator's model) and carries the
// policy's own memory across decisions in it: Node.State, Node.HealthySince,
// Reservations, Victims, Issued and LastDecision come from the previous
// Plan, so that Decide stays a pure function of its arguments. Decide never
// modifies a Snapshot.
type Snapshot struct {
	Nodes []Node
	// Jobs are the jobs Nomad has not finished (status pending or running).
	Jobs []Job
	// Allocs are the allocations of those jobs, including terminal ones of
	// the current version (a completed alloc counts as done, not missing).
	Allocs []Alloc
	// Reservations are Plan.Reservations of the previous decision.
	Reservations []Reservation
	// Victims are Plan.Victims of the previous decision: jobs stopped to
	// make room for another job, held a preemption gap below it while it
	// waits (nil: none held; a caller that drops them loses the hold).
	// A Victim whose For is its own Job is a job placed in part and
	// released (rule 5c), held at releasedLevel and not released again.
	Victims []Victim
	// Issued are Plan.Issued of the previous decision, less any action the
	// caller failed to apply (so that it is issued again at once): stops
	// and evaluations the view may not show yet.
	Issued []Issued
	// Notices are Plan.Notices of the previous decision: checkpoint
	// notices sent, whose stops wait for their deadlines (notice.go).
	Notices []Notice
	// LastDecision is the now of the previous decision (zero for the first).
	// A node that turned healthy after it is news: pending jobs are evaluated.
	LastDecision time.Time
}

// Node is one Nomad client. allot assumes one GPU model per node, as GPU
// hosts are built; a node without GPUs is ignored.
type Node struct {
	ID    string
	Pool  string // Nomad node pool
	Model string // GPU model, e.g. "h100"
	// GPUs counts healthy GPU instances only: Nomad places nothing on an
	// unhealthy instance, so it is not capacity.
	GPUs     int
	Eligible bool // Nomad scheduling eligibility as observed
	// Healthy is false when the node reports a faulty GPU; HealthReason says
	// which fault ("XID 79 on GPU 3").
	Healthy      bool
	HealthReason string
	// HealthySince is when the node last turned healthy (carried by the
	// caller); zero when it has always been healthy.
	HealthySince time.Time
	// Drain is Nomad's own drain on the node (`nomad node drain`), or nil.
	Drain *Drain
	// State is what allot last did to the node: the caller applies
	// NodeAction.State() of each planned action and passes it back.
	State NodeState
	// ReturnRequested: an operator asked allot to put this draining or
	// drained node back in service (`allot nodes return`). Honoured once
	// the node is healthy, whatever DrainReturnAfter says; the caller
	// clears it when the node has returned.
	ReturnRequested bool
}

// Drain is a Nomad node drain. A zero Deadline means no deadline.
type Drain struct {
	Deadline time.Time
}

// NodeState is a GPU node's state as allot sees it: what allot last did to
// it (the policy's memory, which the caller records and passes back) and,
// for a node in a drain, the phase of the drain's lifecycle. It is the one
// vocabulary of the policy, the replicated state (a node row's state, a
// drain record's phase) and the API, which carries its text.
type NodeState uint8

const (
	NodeNormal   NodeState = iota // in service: "active" (a drain lifecycle's "in-service", see Phase)
	NodeReserved                  // "reserved": ineligible, held for a large job
	NodeDraining                  // "draining": ineligible for a fault or a Nomad drain; jobs leave as windows end
	NodeDrained                   // "drained": empty and ready for repair
	// The drain lifecycle's other phases (a node row is never in them:
	// the policy's memory of a cordoned node is NodeDraining, of a
	// returned one NodeNormal).
	NodeCordoned // "cordoned": ineligible at once, every allocation on it still protected
	NodeReturned // "returned": back in service after a drain
)

var nodeStateNames = [...]string{"active", "reserved", "draining", "drained", "cordoned", "returned"}

// String returns the state's text, "unknown(N)" for a value out of range.
func (s NodeState) String() string {
	if int(s) < len(nodeStateNames) {
		return nodeStateNames[s]
	}
	return fmt.Sprintf("unknown(%d)", uint8(s))
}

// Phase names the state as a phase of a drain lifecycle: "in-service" for
// NodeNormal, its text otherwise.
func (s NodeState) Phase() string {
	if s == NodeNormal {
		return "in-service"
	}
	return s.String()
}

// MarshalText writes the state's text, so that JSON (the raft log, state
// snapshots, the API) carries the names.
func (s NodeState) MarshalText() ([]byte, error) {
	if int(s) >= len(nodeStateNames) {
		return nil, fmt.Errorf("node state %d: want one of %s", uint8(s), strings.Join(nodeStateNames[:], ", "))
	}
	return []byte(nodeStateNames[s]), nil
}

// UnmarshalText reads a state's text; "in-service" (Phase's name) and
// "normal" (the policy's old name) read as NodeNormal.
func (s *NodeState) UnmarshalText(b []byte) error {
	switch t := string(b); t {
	case "in-service", "normal":
		*s = NodeNormal
		return nil
	default:
		for i, n := range nodeStateNames {
			if n == t {
				*s = NodeState(i)
				return nil
			}
		}
		return fmt.Errorf("node state %q: want one of %s", t, strings.Join(nodeStateNames[:], ", "))
	}
}

// Job is a Nomad job as the policy sees it.
type Job struct {
	ID        string
	Namespace string
	Pool      string // Nomad node pool the job runs in
	Type      string // "batch", "service", ...
	Contract  contract.Contract
	// SubmitTime orders jobs of the same leaf and meta priority.
	SubmitTime time.Time
	// QueuedSince is when the job last began to wait: when allocations of
	// it that ran were stopped (requeued); zero for its submission. Time
	// slicing's loss bound lasts SliceLossMaxWait from then (Config).
	QueuedSince time.Time
	// LastRun is how long the job had run (all its allocations running)
	// when the stop QueuedSince dates ended that run; zero when unknown or
	// never stopped. A job that is not resumable and was stopped needs
	// more than that run to finish: it did not finish in it (rule 5e (c)).
	LastRun time.Duration
	// Priority is the job's Nomad priority now.
	Priority int
	// LastWrittenPriority is the priority allot last wrote (0: never). When
	// Priority differs from it, someone else changed the job.
	LastWrittenPriority int
	// ModifyIndex is the JobModifyIndex read with Priority, for check-and-set.
	ModifyIndex uint64
	// EvaluatingSince is when Nomad's oldest evaluation of the job still in
	// flight (pending: queued or being scheduled) was created; zero when
	// none is. A priority write then waits (tier.go, placing).
	EvaluatingSince time.Time
	Groups          []TaskGroup
}

// TaskGroup asks for Count allocations of GPUs devices each, all on one node
// and one model per allocation. Model "" accepts any model.
type TaskGroup struct {
	Name  string
	Count int
	GPUs  int
	Model string
}

// Nomad allocation statuses the policy reads.
const (
	ClientPending  = "pending"
	ClientRunning  = "running"
	ClientComplete = "complete"
	ClientFailed   = "failed"
	ClientLost     = "lost"
	DesiredRun     = "run"
	DesiredStop    = "stop"
	DesiredEvict   = "evict"
)

// Alloc is one Nomad allocation.
type Alloc struct {
	ID    string
	Job   string
	Node  string
	Group string
	GPUs  int
	// StartedAt is when its tasks started running (zero while pending).
	StartedAt time.Time
	// PlacedAt is when Nomad placed it (zero when unknown).
	PlacedAt time.Time
	// WaitsForVictims: Nomad placed it by preempting allocations that have
	// not stopped yet; it starts once they have. A priority write waits
	// meanwhile, at most Config.Settle from PlacedAt (tier.go, placing).
	WaitsForVictims bool
	ClientStatus    string
	DesiredStatus   string
}

// holds reports whether the allocation occupies its GPUs now.
func (a *Alloc) holds() bool {
	return a.ClientStatus == ClientPending || a.ClientStatus == ClientRunning
}

// live reports whether the allocation is placed and meant to keep running.
func (a *Alloc) live() bool { return a.holds() && a.DesiredStatus == DesiredRun }

// done reports whether the allocation finished its work (not stopped).
func (a *Alloc) done() bool {
	return a.ClientStatus == ClientComplete && a.DesiredStatus == DesiredRun
}

// Reservation holds nodes ineligible for one large pending job (rule 7).
type Reservation struct {
	Job   string
	Nodes []string
	Since time.Time
	// Expired marks a reservation that ran out of time before the job could
	// be placed: its nodes were released and the job gets no new reservation
	// until it is placed. Kept so that the next decision remembers.
	Expired bool
	// Released is when the nodes were released for the job, its GPUs free
	// there (zero while they are held). The record is kept while the job
	// waits to be placed, at most Config.VictimHold after Released: the
	// jobs sorting after it stay a preemption gap below it, and a job that
	// lands on the nodes first is held below it like a victim (rule 7).
	Released time.Time
}

// Victim is a job stopped (migrated) to make room for another job, For: by
// time slicing (rule 5) or on a node reserved for For (rule 7). Nomad places
// a migrated allocation's replacement at once, on the GPUs its own stop just
// freed, before For is retried (observed with Nomad 2.0.6), so the victim is
// held at least PreemptionGap below For while For waits: its replacement,
// if placed, is not protected and Nomad preempts it when For is evaluated.
type Victim struct {
	Job, For string
	// Since is when the victim was chosen; the hold ends at Since +
	// Config.VictimHold even if For never places.
	Since time.Time
	// Replaced is when For was first evaluated while the victim held a
	// live allocation again (a replacement Nomad placed before For, or the
	// job itself when it landed on nodes released for For): that
	// evaluation is where Nomad preempts it for For. Zero until then, and
	// again once it holds none.
	Replaced time.Time
	// Kept: the hold has ended early. The victim's live allocation
	// outlasted For's evaluation (a decision Config.Settle or more after
	// Replaced still found it live), so For did not need its GPUs, and the victim is an ordinary
	// job again, protected in its new window like any job that starts. The
	// record stays while For waits, until Since + Config.VictimHold, only so
	// that the victim is not held again (as a job that landed).
	Kept bool
}

// IssuedKind is the kind of an Issued action.
type IssuedKind uint8

const (
	IssuedStop     IssuedKind = iota // a StopJob
	IssuedEvaluate                   // an Evaluate
)

var issuedKindNames = [...]string{"stop", "evaluate"}

func (k IssuedKind) String() string {
	if int(k) < len(issuedKindNames) {
		return issuedKindNames[k]
	}
	return "unknown"
}

// Issued is an action a plan issued at At, remembered for Config.Settle so
// that a decision made before the caller's view shows its effect does not
// issue it again.
type Issued struct {
	Kind IssuedKind
	Job  string
	// Allocs are the allocations a stop stopped.
	Allocs []string
	// Reason is an evaluation's reason: an evaluation of the same job for
	// the same reason (code, job and node) is not repeated within Settle.
	Reason Reason
	At     time.Time
}
