package sim

import (
	"time"

	"github.com/allot-sched/allot/budgets"
)

// Policy decides which of Nomad's levers to pull. The engine calls it from
// one goroutine, in simulated time; it must not keep the State beyond a call
// except to read it in the next one, and must be deterministic for the same
// inputs (any randomness seeded by the caller), so runs are reproducible.
type Policy interface {
	// Name is the policy's name in reports ("allot", "baseline").
	Name() string
	// Init is called once before the first event.
	Init(s *State, tree *budgets.Tree) error
	// SubmitPriority is the Nomad priority job i is registered with, at its
	// submission, before the policy has reconciled.
	SubmitPriority(s *State, i int32) int
	// Reconcile runs after changes, coalesced by Options.ReactionDelay, and
	// at the wake time it asked for last. It reads s and pulls levers on s.
	// It returns the next time it wants to run with no new event; a value
	// not after s.Now() means none.
	Reconcile(s *State) (next time.Duration)
}

// A Policy may also have an Err() error method: a non-nil Err after the
// last event fails the run with it (the allot policy's ledger refused a
// charge, say), instead of reporting figures that cannot be trusted.
