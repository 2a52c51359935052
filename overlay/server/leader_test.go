package server

import (
	"context"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/state"
)

// heldReconciler is a Reconciler and Waker whose passes the test holds:
// each pass says it started and returns when the test releases it.
type heldReconciler struct {
	wake    chan struct{}
	started chan struct{}
	release chan struct{}
}

func newHeldReconciler() *heldReconciler {
	return &heldReconciler{wake: make(chan struct{}, 1), started: make(chan struct{}, 16), release: make(chan struct{})}
}

func (r *heldReconciler) Wake() <-chan struct{} { return r.wake }

// poke is what a reconciler does on news: a send that never blocks.
func (r *heldReconciler) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *heldReconciler) Reconcile(ctx context.Context, _ *state.View, _ time.Time) (Outcome, error) {
	r.started <- struct{}{}
	select {
	case <-r.release:
	case <-ctx.Done():
	}
	return Outcome{}, ctx.Err()
}

func (r *heldReconciler) waitPass(t *testing.T, what string) {
	t.Helper()
	select {
	case <-r.started:
	case <-time.After(10 * time.Second):
		t.Fatalf("no pass %s within 10 s (the reconcile interval is an hour)", what)
	}
}

func (r *heldReconciler) noPass(t *testing.T, what string) {
	t.Helper()
	select {
	case <-r.started:
		t.Fatalf("a pass started %s", what)
	case <-time.After(200 * time.Millisecond):
	}
}

// Every wake leads to a pass that starts after it, whenever it comes:
// news during a pass (after the pass read its view) starts another pass as
// soon as it ends, several wakes during one pass start one more, and news
// while idle starts one at once. Nothing waits for the reconcile interval.
func TestLeaderLoopPassAfterEveryWake(t *testing.T) {
	r := newHeldReconciler()
	devServer(t, Config{Reconciler: r, ReconcileInterval: time.Hour})
	r.waitPass(t, "at the start of leadership")

	r.poke() // news while the pass runs
	r.release <- struct{}{}
	r.waitPass(t, "after a wake during the pass")

	r.poke()
	r.poke()
	r.poke()
	r.release <- struct{}{}
	r.waitPass(t, "after three wakes during the pass")
	r.release <- struct{}{}
	r.noPass(t, "again after three wakes that one pass followed: they coalesce")

	r.poke() // news while idle
	r.waitPass(t, "after a wake while idle")
	r.release <- struct{}{}
	r.noPass(t, "with no wake")
}
