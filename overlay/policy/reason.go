package policy

import (
	"fmt"
	"strconv"
	"time"
)

// ReasonCode names why the policy did something. Reasons are values: the
// plan carries the code and its operands, and the text is made only when a
// person reads it (String, Format), so a decision formats nothing.
type ReasonCode uint8

const (
	ReasonNone ReasonCode = iota
	// Bands (SetPriority and Explanation).
	ReasonProtected     // At: end of the protected window
	ReasonStarting      // placed, not all allocations running yet
	ReasonRunning       // At: end of the protected window
	ReasonPartial       // N: allocations still waiting
	ReasonPending       // N: 1-based place in the pending queue (the job's, not its budget's fair-share rank)
	ReasonUnallocated   // no budget or min_runtime 0
	ReasonUserPriority  // N: the priority someone else wrote
	ReasonVictimLowered // Job: the pending job the victim makes room for
	ReasonBudgetGone    // Detail: the budget no longer in the tree
	// Stops.
	ReasonVictim           // Job: beneficiary, Node: where GPUs free, N: GPUs asked
	ReasonDrainStop        // Node: unhealthy node, At: window end
	ReasonDrainUnallocated // Node: unhealthy node
	ReasonNomadDrain       // Node, At: Nomad's drain deadline (zero: none)
	ReasonReservationStop  // Job: the job the node is reserved for, Node
	// Node actions.
	ReasonNodeUnhealthy      // Detail: the fault
	ReasonNodeDrained        // the unhealthy node is empty
	ReasonNodeHealthy        // At: healthy since
	ReasonReserved           // Job, At: reservation expiry
	ReasonReservationReady   // Job
	ReasonReservationExpired // Job, At: since
	ReasonReservationDone    // Job: placed or gone
	// Evaluations.
	ReasonVictimsStopped // Node
	ReasonNodeRecovered  // Node
	// Node actions, continued.
	ReasonNodeReturned // At: healthy since; Detail: how, when not allot nodes return
	// Victims held (SetPriority, Explanation) and their evaluations.
	ReasonVictimHeld     // Job: the waiting job it made room for, At: since
	ReasonVictimReleased // Job: the job that never placed, At: since
	ReasonVictimReplaced // Job: the victim whose replacement took GPUs (an Evaluate)
	// Reservations, continued (rule 7).
	ReasonPendingReserved   // N: place in the pending queue, Job: the job holding a reservation above it
	ReasonReservationLanded // Job: the job its node was released for, At: since (SetPriority, Explanation)
	ReasonLanded            // Job: the job that landed on the released node first (an Evaluate)
	// The contract past the window, continued.
	ReasonProtectedRestart // At: end of the protected window; the job is not resumable
	ReasonRunningRestart   // At: end of the protected window; the job is not resumable
	ReasonVictimOwn        // Job: beneficiary of the same budget, Node, N: GPUs asked, Detail: "<its meta priority> over <the victim's>"
	ReasonVictimPartial    // Job: the beneficiary, also placed in part and before it in the order, Node, N: GPUs asked
	ReasonPartialRelease   // N: allocations still missing, Detail: the rule they wait for, Job: the job it keeps (or "")
	ReasonPendingRestart   // N: place in the pending queue; the job is not resumable
	// Checkpoint notices (notice.go).
	ReasonNoticeSent // At: the stop (deadline), N: the notice in seconds, Job: the job it makes room for, or Node: the draining node
	ReasonNoticeDone // Job: the job whose notice ended early (an Evaluate)

	ReasonPendingWhole         // N: place in the pending queue; a gang that cannot be placed whole now (rule 5d)
	ReasonReservationYielded   // Job: the job the node was reserved for, Detail: the less served job it gave way to
	ReasonVictimKept           // Job: the waiting job it was held below, At: since (its replacement outlasted that job's evaluation)
	ReasonPendingRestartHeld   // N: place in the pending queue, Job: the waiting job that would stop it again (restart.go)
	ReasonPendingRestartServed // N: place in the pending queue, Job: a job of the less served budget running where it would run (restart.go)
	ReasonPendingRestartRun    // N: place in the pending queue, Job: the waiting job that would stop it again within its last run, At: the hold's end, Detail: that run (restart.go)
	ReasonPendingFirst         // N: place in the pending queue, Detail: notResumable or ""; victims are stopped for it, or held below it (rule 5f, first.go)
	ReasonPendingStartServed   // N: place in the pending queue, Job: a job of the less served budget running where it would run (rule 5h, restart.go)
)

// Reason is a ReasonCode with its operands.
type Reason struct {
	Code   ReasonCode
	Job    string
	Node   string
	At     time.Time
	N      int
	Detail string
}

// String renders the reason with RFC 3339 times.
func (r Reason) String() string {
	return r.Format(func(t time.Time) string { return t.UTC().Format(time.RFC3339) })
}

// Format renders the reason with times written by at.
func (r Reason) Format(at func(time.Time) string) string {
	switch r.Code {
	case ReasonProtected:
		return "inside its protected window until " + at(r.At)
	case ReasonStarting:
		return "starting: protected until its window ends (the window opens when all allocations run)"
	case ReasonRunning:
		return "running past its protected window (ended " + at(r.At) + "); only allot may stop it"
	case ReasonPartial:
		return "placed in part: " + strconv.Itoa(r.N) + " allocation(s) still waiting, placed before any pending job"
	case ReasonPending:
		return "pending, " + Ordinal(r.N) + " in the pending queue"
	case ReasonUnallocated:
		return "unallocated (no budget leaf or min_runtime 0): free, preemptible by any allocated job"
	case ReasonUserPriority:
		return "priority " + strconv.Itoa(r.N) + " was set outside allot; allot owns job priority (meta priority orders jobs within a budget)"
	case ReasonVictimLowered:
		return "lowered a preemption gap below " + r.Job + " before it is stopped for it (its replacement must not take the GPUs back)"
	case ReasonBudgetGone:
		return fmt.Sprintf("budget %q is no longer a leaf of the budget tree: runs unallocated", r.Detail)
	case ReasonVictim:
		return fmt.Sprintf("time slicing: past its protected window, stopped (requeued) so that %s, from a less served budget, gets %d GPUs on %s", r.Job, r.N, r.Node)
	case ReasonDrainStop:
		if r.At.IsZero() {
			return "node " + r.Node + " is unhealthy and the job is not protected: moved elsewhere"
		}
		return "node " + r.Node + " is unhealthy and the protected window ended " + at(r.At) + ": moved elsewhere"
	case ReasonDrainUnallocated:
		return "node " + r.Node + " is unhealthy: unallocated work moves at once"
	case ReasonNomadDrain:
		if r.At.IsZero() {
			return "node " + r.Node + " is draining (nomad node drain): stopped at its window end and requeued"
		}
		return "node " + r.Node + " is draining (nomad node drain, deadline " + at(r.At) + "): stopped and requeued before Nomad kills it without a replacement"
	case ReasonReservationStop:
		return "node " + r.Node + " is reserved for " + r.Job + ": stopped (requeued) so it can start"
	case ReasonNodeUnhealthy:
		return "unhealthy: " + r.Detail
	case ReasonNodeDrained:
		return "unhealthy and empty: ready for repair"
	case ReasonNodeHealthy:
		return "healthy since " + at(r.At) + ": back in service"
	case ReasonReserved:
		return "reserved for " + r.Job + " until its GPUs are free (at most until " + at(r.At) + ")"
	case ReasonReservationReady:
		return "reservation for " + r.Job + " done: its GPUs are free"
	case ReasonReservationExpired:
		return "reservation for " + r.Job + " (since " + at(r.At) + ") expired before its GPUs were free"
	case ReasonReservationDone:
		return "reservation for " + r.Job + " released: the job no longer waits"
	case ReasonVictimsStopped:
		return "victims are stopped on " + r.Node + ": place it there"
	case ReasonNodeRecovered:
		return "GPUs became available on " + r.Node
	case ReasonVictimHeld:
		return "stopped for " + r.Job + " at " + at(r.At) + ": held a preemption gap below it until it places, so Nomad may preempt its replacement"
	case ReasonVictimReleased:
		return "no longer held below " + r.Job + " (stopped for it at " + at(r.At) + "): it did not place within the victim hold"
	case ReasonVictimKept:
		return "no longer held below " + r.Job + " (stopped for it at " + at(r.At) + "): its replacement started, and " + r.Job +
			"'s evaluation did not take its GPUs, so it is protected in its new window like any job that starts"
	case ReasonVictimReplaced:
		return "its victim " + r.Job + " holds GPUs again (Nomad placed its replacement first, or its stop was lost), a preemption gap below it: evaluate so Nomad preempts it"
	case ReasonPendingReserved:
		return "pending, " + Ordinal(r.N) + " in the pending queue; kept a preemption gap below " + r.Job +
			", which holds a reservation, so that Nomad preempts it if it takes " + r.Job + "'s GPUs first"
	case ReasonReservationLanded:
		return "landed at " + at(r.At) + " on a node just released for " + r.Job + ", which still waits: held a preemption gap below it, not protected, so that Nomad preempts it for " + r.Job
	case ReasonLanded:
		return r.Job + " took GPUs of the nodes released for it first, a preemption gap below it: evaluate so Nomad preempts it"
	case ReasonProtectedRestart:
		return "inside its protected window until " + at(r.At) + "; not resumable: after that it may be stopped for a less served budget's job or a higher-priority job of its own budget, and then restarts from zero"
	case ReasonRunningRestart:
		return "running past its protected window (ended " + at(r.At) + "); not resumable: it may be stopped at any time for a less served budget's job or a higher-priority job of its own budget, and then restarts from zero"
	case ReasonVictimOwn:
		return fmt.Sprintf("time slicing: past its protected window, stopped (requeued) so that %s, of the same budget with a higher meta priority (%s), gets %d GPUs on %s", r.Job, r.Detail, r.N, r.Node)
	case ReasonVictimPartial:
		return fmt.Sprintf("placed in part, like %s, which sorts before it: stopped (requeued, it never ran, so nothing is lost) so that %s completes with %d GPUs on %s", r.Job, r.Job, r.N, r.Node)
	case ReasonPendingRestart:
		return "pending, " + Ordinal(r.N) + " in the pending queue; not resumable: once it runs past its protected window it may be stopped for a less served budget's job or a higher-priority job of its own budget, and then restarts from zero"
	case ReasonReservationYielded:
		return "reservation for " + r.Job + " ended: " + r.Detail + ", of a budget served less by the fairness margin, waits too and may reserve instead"
	case ReasonPendingWhole:
		return "pending, " + Ordinal(r.N) + " in the pending queue; its allocations cannot all be placed now, and Nomad (which has no gang placement) would place them one at a time and hold the GPUs without running: kept at the bottom of the pending band until they can all be placed at once, so jobs that can run use the GPUs meanwhile"
	case ReasonPendingRestartHeld:
		return "pending, " + Ordinal(r.N) + " in the pending queue; not resumable and stopped before: restarted now, it would be stopped again when its window ends for " + r.Job +
			", which sorts before it and waits, and lose that run; so it waits below the pending band, where it evicts no running work, until no waiting job before it would"
	case ReasonPendingRestartServed:
		return "pending, " + Ordinal(r.N) + " in the pending queue; stopped before, and its budget is served at least its share and the fairness margin more than that of " + r.Job +
			", which runs where it would run: that budget's next job to find no room would stop it again when its window ends, so it evicts no running work to restart (it waits below the pending band and may start on GPUs nobody holds) until its budget is served less"
	case ReasonPendingRestartRun:
		return "pending, " + Ordinal(r.N) + " in the pending queue; not resumable, and its last run was stopped after " + r.Detail + ", so it needs a longer one to finish: restarted now, its own run would leave its budget served more than that of " + r.Job +
			", which sorts before it and waits, before it had run that long again, and it would be stopped and lose the run; so it waits below the pending band, where it evicts no running work (it may start on GPUs nobody holds), while such a job waits, at most until " + at(r.At)
	case ReasonPendingStartServed:
		return "pending, " + Ordinal(r.N) + " in the pending queue; its budget is served at least its share and the fairness margin more than that of " + r.Job +
			", which runs where it would run: started now by evicting work (free work, or its own budget's or another's jobs past their windows), it would begin a protected window on GPUs that budget's next job could take; so it waits below the pending band, where it evicts no running work (it may start on GPUs nobody holds), until its budget is served less"
	case ReasonPendingFirst:
		s := "pending, " + Ordinal(r.N) + " in the pending queue; jobs past their windows are stopped for it (or held below it): written at the top of the pending band so that Nomad places it first on the GPUs they free, before any other waiting job could take them"
		if r.Detail == notResumable {
			s += "; not resumable: once it runs past its protected window it may be stopped for a less served budget's job or a higher-priority job of its own budget, and then restarts from zero"
		}
		return s
	case ReasonPartialRelease:
		by := ""
		if r.Job != "" {
			by = " (" + r.Job + ")"
		}
		why := "which its own stall does not change"
		if r.Detail == WaitWindows.String() || r.Detail == WaitWork.String() || r.Detail == WaitRestFirst.String() {
			why = "which free up at no known time, or later than a reservation may hold nodes (reservation max_age)"
			if !r.At.IsZero() {
				why = "which free up at " + at(r.At) + ", later than a reservation may hold nodes (reservation max_age)"
			}
		}
		return fmt.Sprintf("placed in part, and its %d missing allocation(s) wait for %s%s, %s: its allocations are stopped (requeued; it never ran, so nothing is lost) so the GPUs work meanwhile; it waits in the pending queue, just below the pending band (any pending job above the band's bottom may take GPUs it is placed on again), then at its bottom until all its allocations can be placed at once", r.N, r.Detail, by, why)
	case ReasonNoticeSent:
		sent := "notice sent at " + at(r.At.Add(-time.Duration(r.N)*time.Second)) + "; stop at " + at(r.At)
		switch {
		case r.Job != "":
			return sent + " for job " + r.Job
		case r.Node != "":
			return sent + " (node " + r.Node + " is being drained)"
		}
		return sent
	case ReasonNoticeDone:
		return r.Job + " exited during its checkpoint notice: its GPUs are free"
	case ReasonNodeReturned:
		how := "allot nodes return"
		if r.Detail != "" {
			how = r.Detail
		}
		return "returned to service by an operator (" + how + "), healthy since " + at(r.At)
	}
	return "no reason"
}

// Ordinal writes n as 1st, 2nd, 3rd, 4th, 11th, 21st, ...: the places
// reasons name, and what `allot explain` prints beside them.
func Ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(n) + suffix
}
