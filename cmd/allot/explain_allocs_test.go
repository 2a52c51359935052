package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/server"
	"github.com/allot-sched/allot/overlay/state"
)

// `allot explain` says what happened to each allocation: an evicted one is
// not shown as live, and no zero time is ever printed (unallocated work has
// no protected window).
func TestExplainSaysWhatHappenedToAllocs(t *testing.T) {
	rec := server.NewInmemReconciler()
	s := devServer(t, server.Config{Reconciler: rec})
	now := time.Now().UTC().Truncate(time.Second)
	rfc := func(t time.Time) string { return t.Format(time.RFC3339) }
	start, stop := now.Add(-2*time.Hour), now.Add(-30*time.Minute)

	rec.SetJob(state.Job{ID: "default/sweep", Namespace: "default", Name: "sweep", GPUs: 1, SubmittedAt: start,
		Contract: state.Contract{Priority: 50, Reason: "no positive min_runtime in the job's meta"}})
	rec.SetAlloc(state.Alloc{ID: "a-evicted", JobID: "default/sweep", NodeID: "n1", GPUs: 1, StartedAt: start, StoppedAt: stop, Preemptions: 1})
	rec.SetAlloc(state.Alloc{ID: "a-again", JobID: "default/sweep", NodeID: "n2", GPUs: 1, StartedAt: stop})

	rec.SetJob(state.Job{ID: "default/train", Namespace: "default", Name: "train", GPUs: 8, SubmittedAt: start,
		Contract: state.Contract{Budget: "lab/a", MinRuntime: time.Hour, Priority: 50}})
	rec.SetAlloc(state.Alloc{ID: "t-sliced", JobID: "default/train", NodeID: "n1", Leaf: "lab/a", GPUs: 8, StartedAt: start,
		ProtectedUntil: start.Add(time.Hour), StoppedAt: stop, Preemptions: 1})
	rec.SetAlloc(state.Alloc{ID: "t-running", JobID: "default/train", NodeID: "n3", Leaf: "lab/a", GPUs: 8, StartedAt: stop,
		ProtectedUntil: stop.Add(time.Hour)})
	rec.SetAlloc(state.Alloc{ID: "t-done", JobID: "default/train", NodeID: "n4", Leaf: "lab/a", GPUs: 8, StartedAt: start,
		ProtectedUntil: start.Add(time.Hour), StoppedAt: start.Add(10 * time.Minute)})
	rec.AddDecisions(state.Decision{At: stop, Kind: "preempt", JobID: "default/train", AllocID: "t-sliced",
		Reason: "time slicing: past its protected window, stopped (requeued) so that default/x, from a less served budget, gets 8 GPUs on n1"})
	waitUntil(t, "a reconcile pass", func() bool { return s.ReconcileOnce(context.Background()) == nil })
	t.Setenv("ALLOT_ADDR", s.HTTPAddr())

	code, out, errOut := runCLI(t, "explain", "job", "default/sweep")
	if code != exitOK {
		t.Fatalf("explain sweep: %d %q", code, errOut)
	}
	for _, want := range []string{
		"Alloc a-evicted on n1: 1 GPU, ran " + rfc(start) + " to " + rfc(stop) + ", never protected (unallocated work: any allocated job may preempt it); " +
			"evicted: preempted by Nomad for a higher-priority job (Nomad requeues it); charged 0.00 GPU-h\n",
		"Alloc a-again on n2: 1 GPU, running since " + rfc(stop) + ", never protected (unallocated work: any allocated job may preempt it); charged 0.00 GPU-h\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain sweep lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "0001-01-01") {
		t.Errorf("explain sweep prints a zero time:\n%s", out)
	}

	code, out, errOut = runCLI(t, "explain", "job", "default/train")
	if code != exitOK {
		t.Fatalf("explain train: %d %q", code, errOut)
	}
	for _, want := range []string{
		"Alloc t-sliced on n1: 8 GPUs, ran " + rfc(start) + " to " + rfc(stop) + ", its protected window ended " + rfc(start.Add(time.Hour)) +
			"; stopped by allot (preempt): time slicing: past its protected window, stopped (requeued) so that default/x",
		"Alloc t-running on n3: 8 GPUs, running since " + rfc(stop) + ", protected until " + rfc(stop.Add(time.Hour)) + "; charged",
		"Alloc t-done on n4: 8 GPUs, ran " + rfc(start) + " to " + rfc(start.Add(10*time.Minute)) + ", its protected window would have ended " +
			rfc(start.Add(time.Hour)) + "; stopped: it finished, or was stopped outside allot; charged",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain train lacks %q:\n%s", want, out)
		}
	}
	// A misspelt job ID gets the managed job it likely meant.
	code, _, errOut = runCLI(t, "explain", "job", "swep")
	if want := `Error: server answered 404 Not Found: job "swep" is not managed by allot (did you mean "default/sweep"?): it is unknown,`; code != exitInvalid || !strings.HasPrefix(errOut, want) {
		t.Errorf("explain swep: %d %q, want %q", code, errOut, want)
	}
	if code, _, errOut = runCLI(t, "explain", "job", "default/ghost"); code != exitInvalid || strings.Contains(errOut, "did you mean") {
		t.Errorf("explain ghost: %d %q, want no suggestion", code, errOut)
	}
	code, out, _ = runCLI(t, "explain", "job", "-json", "default/sweep")
	if code != exitOK || strings.Contains(out, "0001-01-01") || strings.Contains(out, "protected_until") || !strings.Contains(out, `"stopped_at": "`+rfc(stop)) {
		t.Errorf("explain -json sweep: want stopped_at and no zero or absent protected_until:\n%s", out)
	}
}

// The Why line leaves out contract warnings the Unallocated line shows.
func TestWithoutShownWarnings(t *testing.T) {
	const msg = `no such budget (did you mean "lab/b"?); the job runs unallocated. Name a leaf of the budget tree (` + "`allot budgets list`" + ` lists them)`
	why := `unallocated (no budget leaf or min_runtime 0): free, preemptible by any allocated job; warning: job "default/typo": meta budget = "lab/bb": ` + msg +
		`; warning: job "default/typo": meta priority = "x": not an integer from 0 to 100; using 50`
	for _, tc := range []struct{ name, why, unallocated, want string }{
		{"a shown warning goes, another stays", why, msg,
			`unallocated (no budget leaf or min_runtime 0): free, preemptible by any allocated job; warning: job "default/typo": meta priority = "x": not an integer from 0 to 100; using 50`},
		{"nothing shown: all stay", why, "", why},
		{"no warnings", "pending, 1st in the pending queue", msg, "pending, 1st in the pending queue"},
	} {
		if got := withoutShownWarnings(tc.why, tc.unallocated); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}
