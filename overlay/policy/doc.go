// Package policy is allot's decision core: Decide(snapshot, budgets,
// fair share, now, config) returns a Plan of Nomad priority writes, migrate
// stops, evaluations and node eligibility changes, each with a Reason, plus
// an Explanation per managed job and the next time the plan would change.
//
// It is pure: it imports only budgets and overlay/contract, does no I/O,
// reads no clock (time comes in as now), starts no goroutines and keeps no
// globals. Its memory across decisions (node drain states, reservations, the
// previous decision's time) travels in the Snapshot, filled by the caller
// from the previous Plan, so every decision replays from its inputs.
//
// # Rules and formulas
//
// A job is managed when it asks for GPUs, is in a configured namespace and
// node pool, and is not finished (rule 11); everything else is left alone
// but its allocations still count against node capacity. served(leaf) =
// usage share / effective share over the lookback window (1 = exactly its
// share). Bands, with the defaults for job_max_priority 100:
//
//	protected    Protected (100)     allocated, running, now < start + min(Protected, RuntimeCap)  (rule 1)
//	                                 start = the last allocation's start; a job still starting is protected
//	running      Running (90)        allocated, running past its window; or placed in part     (rule 2)
//	pending      Pending (40-89)     allocated, nothing placed: level(p) = High - min(p-1, Levels-1)  (rule 3)
//	unallocated  Unallocated (10-29) everything else managed, at High; jobs inside the band stay  (rule 4)
//
// Pending order (rules 3, 8): by the leaf's fair-share position, then meta
// priority (higher first), then submit time, then job ID; meta priority is
// compared only within a leaf. Hysteresis: a pending job already inside the
// pending band is rewritten only when |level(p) - priority| >= Hysteresis,
// so equal inputs give equal plans and one-position shifts cause no writes.
// A priority that differs from LastWrittenPriority was set by someone else:
// it is rewritten once with ReasonUserPriority, then stays put.
//
// Placement model: avail(n) = healthy GPUs - GPUs held + GPUs held by
// unallocated jobs, on eligible healthy undrained unreserved nodes. Waiting
// jobs (placed in part first, then pending in order) take their asks
// best-fit, one node per allocation, so lower jobs see what is left.
//
// Time slicing (rule 5): for each of the first MaxEvaluations jobs that do
// not fit, each ask that does not fit gets victims on one node n of the
// right pool and model with healthy GPUs >= ask, among running jobs past
// their window whose leaf v satisfies served(v) >= served(job) +
// FairnessMargin. On each node candidates are taken resumable first, most
// over-served first, largest first, until avail(n) + taken >= ask, then any
// the rest can spare are dropped; the node whose set is smallest by
// (non-resumable jobs, jobs, GPUs of the whole jobs, -min served) wins.
// Victims lose all their allocations (migrate stops) after being lowered to
// min(level(their position), priority(job) - 1); the job is evaluated.
//
// Reservations (rule 7): an examined job without victims that has a job
// with a smaller ask below it in the order (Nomad would give that one the
// GPUs as they free up), with at
// most ReservationNodes asks, gets for each ask the usable node whose GPUs
// free up soonest (now for free and unallocated GPUs, window end for jobs
// rule 5 will allow, never for the rest), if all are free within
// ReservationMaxAge; at most MaxReservations at once. Reserved nodes are
// ineligible; rule 5 stops on them happen once they would free enough; when
// every ask fits on them the nodes are released and the job evaluated. An
// expired reservation is released and the job gets no new one until placed.
//
// Drains (rules 9, 10): an unhealthy node is made ineligible at once; each
// managed job's allocations on it stop at now (unallocated, placed in part,
// past the window) or at the window end; under a Nomad drain (batch jobs
// only) also never later than deadline - DrainLead. An empty unhealthy node
// is marked drained; a healthy drained node returns after DrainReturnAfter
// (0: only an operator returns it). Evaluations (rule 6) follow victims,
// released reservations and recovered nodes, at most MaxEvaluations.
//
// NextWake (rule 12) is the earliest of: protected windows ending, planned
// drain stops, reservations expiring or freeing, and drained nodes returning.
package policy
