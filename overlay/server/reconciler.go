package server

import (
	"context"
	"time"

	"github.com/allot-sched/allot/overlay/state"
)

// Reconciler observes the cluster allot schedules and acts on it for the
// leader.
//
// The server calls Reconcile only on the raft leader, from one goroutine,
// never concurrently with itself, every ReconcileInterval and after each
// gain of leadership. view is a consistent read of the replicated state
// (the reconciler must not modify its rows); now is the leader's clock,
// the only time the reconciler may use for what it records. The context is
// cancelled when leadership is lost or the server stops; a reconciler must
// then return promptly.
//
// Reconcile returns what it observed and did: the server commits it, with
// the drain transitions it works out from the observations and the charges
// and demand due up to now, as one raft entry (state.PassRequest; every
// timestamp already chosen), which the FSM applies all or nothing. A Reconcile that returns an error has its Outcome discarded;
// it must therefore be safe to repeat, because the next pass (on this
// leader or the next) sees the same state and tries again.
type Reconciler interface {
	Reconcile(ctx context.Context, view *state.View, now time.Time) (Outcome, error)
}

// Waker is implemented by a Reconciler that learns of changes between
// passes (Nomad's event stream, a planned wake-up time): each receive from
// Wake starts the next pass at once instead of after ReconcileInterval, so
// the interval only bounds how long the loop sleeps when nothing happens.
// The channel must never be closed; sends should not block (coalesce them).
type Waker interface {
	Wake() <-chan struct{}
}

// Outcome is what one reconcile pass wants recorded. Empty fields record
// nothing; a nil Queue keeps the last plan's queue.
type Outcome struct {
	Jobs        []state.Job
	DeletedJobs []string
	Allocs      []state.Alloc
	Nodes       []state.Node
	Priorities  []state.Priority
	Decisions   []state.Decision
	// Queue is the plan's queue with its explanations; non-nil replaces the
	// stored one (an empty, non-nil slice clears it).
	Queue []state.QueueEntry
	// Drains are the pass's observations of GPU nodes in a drain or
	// entering one; the leader works out the drain transitions from them
	// (state.DrainChanges) and records them with the pass.
	Drains []state.NodeObservation
	// Notices are the checkpoint notices in flight after the pass; non-nil
	// replaces the stored ones (an empty, non-nil slice clears them), nil
	// keeps them. A new leader starts from them.
	Notices []state.Notice
}
