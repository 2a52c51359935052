package reconcile

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/nomad"
	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/state"
)

// bufSink is a raft.SnapshotSink in memory.
type bufSink struct{ bytes.Buffer }

func (*bufSink) ID() string    { return "buf" }
func (*bufSink) Cancel() error { return nil }
func (*bufSink) Close() error  { return nil }

// restarted is fsm as a server restarted from its snapshot has it.
func restarted(t *testing.T, fsm *state.FSM) *state.FSM {
	t.Helper()
	snap, err := fsm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink bufSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	out, err := state.NewFSM(state.FSMConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := out.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	return out
}

// opsOf runs a pass of r, records it in fsm, and returns its ops and its
// NextWake.
func opsOf(t *testing.T, r *Reconciler, fsm *state.FSM, st *nomad.State, now time.Time) ([]nomad.Op, time.Time) {
	t.Helper()
	var ops []nomad.Op
	out, next := r.pass(context.Background(), fsm.Read(), st, fsm, now, func(ctx context.Context, o []nomad.Op) []nomad.Outcome {
		ops = append(ops, o...)
		return acceptAll(ctx, o)
	})
	recordPass(t, fsm, out, now)
	return ops, next
}

// opsNamed lists the ops of kind k, by job.
func opsNamed(ops []nomad.Op, k nomad.OpKind) []string {
	var out []string
	for _, o := range ops {
		if o.Kind == k {
			out = append(out, o.Job.String())
		}
	}
	return out
}

// A checkpoint notice in flight survives a leader change (a new Reconciler,
// with no memory of its own) and a restart from a snapshot: the new leader
// sends no second signal, stops nothing before the deadline, keeps the
// beneficiary waiting for the notice, explains it as the first leader did,
// and issues the promised stop at the deadline, for the same job.
func TestNoticeSurvivesLeaderChange(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC)
	const notice = 2 * time.Minute
	for _, tc := range []struct {
		name    string
		changed time.Duration // after the signal, when the new leader's first pass runs
	}{
		{"new leader inside the notice", 30 * time.Second},
		{"new leader after the deadline", 5 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsm := budgetsFSM(t, []budgets.Spec{{Path: "lab"}, {Path: "lab/a", Share: 1}, {Path: "lab/b", Share: 1}})
			applyEntry(t, fsm, state.AllocUpsertType, state.AllocUpsertRequest{Allocs: []state.Alloc{{ID: "seed", Leaf: "lab/a", GPUs: 8,
				StartedAt: t0.Add(-3 * time.Hour), StoppedAt: t0.Add(-2 * time.Hour)}}})
			applyEntry(t, fsm, state.ChargeType, state.ChargeRequest{Charges: []state.Charge{{Alloc: "seed", Leaf: "lab/a", GPUs: 8,
				From: t0.Add(-3 * time.Hour), To: t0.Add(-2 * time.Hour)}}})
			saver := gpuJob("default", "saver", "default", 1, 8, map[string]string{"budget": "lab/a", "min_runtime": "10m",
				"checkpoint_signal": "SIGUSR1", "checkpoint_notice": notice.String()})
			pending := gpuJob("default", "pending", "default", 1, 8, map[string]string{"budget": "lab/b", "min_runtime": "30m"})
			alloc := runningAlloc("s1", "saver", 8, t0.Add(-time.Hour))
			st := stateOf([]nomad.Job{saver, pending}, []nomad.Alloc{alloc}, []nomad.Node{{ID: "n1", Pool: "default",
				Status: "ready", Eligible: true, GPUs: []nomad.GPUModel{{Model: "H100", Total: 8, Healthy: 8}}}})

			first := &Reconciler{cfg: Config{Policy: policy.DefaultConfig()}}
			ops, _ := opsOf(t, first, fsm, st, t0)
			if sig := opsNamed(ops, nomad.OpSignal); len(sig) != 1 || sig[0] != "default/saver" || len(opsNamed(ops, nomad.OpStop)) != 0 {
				t.Fatalf("first leader's ops %+v, want one signal to default/saver and no stop", ops)
			}
			stored := fsm.Read().Notices()
			if len(stored) != 1 || stored[0].JobID != "default/saver" || stored[0].For != "default/pending" ||
				!stored[0].SentAt.Equal(t0) || !stored[0].Deadline.Equal(t0.Add(notice)) || stored[0].Stop.Kind != "victim" {
				t.Fatalf("notices recorded %+v, want saver's, sent at %s, stop at %s, for default/pending", stored, t0, t0.Add(notice))
			}
			explained := fsm.Read().QueueEntry("default/saver").Explanation
			if !strings.Contains(explained, "notice sent at 2026-06-01T10:00:00Z; stop at 2026-06-01T10:02:00Z for job default/pending") {
				t.Fatalf("saver's explanation %q, want its notice", explained)
			}

			// The leader changes (or the server restarts from its snapshot).
			fsm = restarted(t, fsm)
			second := &Reconciler{cfg: Config{Policy: policy.DefaultConfig()}}
			at := t0.Add(tc.changed)
			ops, next := opsOf(t, second, fsm, st, at)
			if sig := opsNamed(ops, nomad.OpSignal); len(sig) != 0 {
				t.Fatalf("the new leader signalled %v again", sig)
			}
			stops := opsNamed(ops, nomad.OpStop)
			if at.Before(t0.Add(notice)) {
				if len(stops) != 0 {
					t.Fatalf("the new leader stopped %v at %s, before the notice's end %s", stops, at, t0.Add(notice))
				}
				if !next.Equal(t0.Add(notice)) {
					t.Fatalf("the new leader wakes at %s, want the notice's end %s", next, t0.Add(notice))
				}
				if q := fsm.Read().QueueEntry("default/saver"); q.Explanation != explained {
					t.Fatalf("saver's explanation after the change %q, before it %q", q.Explanation, explained)
				}
				if q := fsm.Read().QueueEntry("default/pending"); !strings.Contains(q.Explanation, "waiting for the checkpoint notice of the jobs stopped for it (default/saver)") {
					t.Fatalf("pending's explanation after the change %q, want it waiting for saver's notice", q.Explanation)
				}
				if n := fsm.Read().Notices(); len(n) != 1 || !n[0].Deadline.Equal(t0.Add(notice)) {
					t.Fatalf("notices after the change %+v, want the first leader's", n)
				}
				ops, _ = opsOf(t, second, fsm, st, t0.Add(notice))
				if sig := opsNamed(ops, nomad.OpSignal); len(sig) != 0 {
					t.Fatalf("the new leader signalled %v at the deadline", sig)
				}
				stops = opsNamed(ops, nomad.OpStop)
			}
			if len(stops) != 1 || stops[0] != "default/saver" {
				t.Fatalf("ops at the deadline %+v, want saver stopped", ops)
			}
			for _, o := range ops {
				if o.Kind == nomad.OpStop && !strings.Contains(o.Reason, "so that default/pending") {
					t.Fatalf("saver stopped for %q, want for default/pending", o.Reason)
				}
			}
			if n := fsm.Read().Notices(); len(n) != 0 {
				t.Fatalf("notices after the stop %+v, want none", n)
			}
		})
	}
}
