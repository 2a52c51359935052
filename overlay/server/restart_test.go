package server

import (
	"context"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/overlay/state"
	"github.com/hashicorp/go-hclog"
)

// diskServer is one server with its state on disk (not -dev) that keeps its
// directory and ports across restarts.
type diskServer struct {
	t                  *testing.T
	dir                string
	httpPort, raftPort int
	tune               RaftTuning
	clock              *fakeClock
	srv                *Server
}

func (d *diskServer) start(rec Reconciler) {
	d.t.Helper()
	srv, err := New(Config{DataDir: d.dir, BootstrapExpect: 1, Token: testToken, Raft: d.tune,
		ReconcileInterval: time.Hour, Reconciler: rec, Clock: d.clock.Now,
		HTTPListener: listenOn(d.t, d.httpPort), RaftListener: listenOn(d.t, d.raftPort),
		Logger: hclog.New(&hclog.LoggerOptions{Name: "disk", Level: hclog.Off})})
	if err != nil {
		d.t.Fatalf("start server: %v", err)
	}
	d.srv = srv
	waitFor(d.t, 20*time.Second, "the server to lead and register", func() error {
		_, err := srv.leaderHTTP()
		return err
	})
}

func (d *diskServer) stop() { d.srv.Shutdown(); d.srv = nil }

func (d *diskServer) pass() {
	d.t.Helper()
	if err := d.srv.ReconcileOnce(context.Background()); err != nil {
		d.t.Fatalf("reconcile: %v", err)
	}
}

// TestRestartChargesNeitherLostNorDoubled runs the leader's charging loop on
// a server with its state on disk, stops it while an allocation keeps
// running (and then finishes), and starts it again on the same directory:
// the ledger must hold exactly the allocation's GPU time, whether the state
// comes back from the raft log alone, from a snapshot alone, or from a
// snapshot plus the log after it.
func TestRestartChargesNeitherLostNorDoubled(t *testing.T) {
	for _, tc := range []struct {
		name          string
		snapshotAfter int // snapshot after this many passes before the stop (0: none)
	}{
		{name: "log replay only"},
		{name: "snapshot then more log", snapshotAfter: 1},
		{name: "snapshot of everything", snapshotAfter: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &diskServer{t: t, dir: t.TempDir(), httpPort: freePort(t), raftPort: freePort(t), tune: fastRaft(),
				clock: &fakeClock{now: tBase}}
			d.tune.SnapshotInterval, d.tune.SnapshotThreshold = time.Hour, 1<<20 // snapshots only when asked
			job := state.Job{ID: "default/train", Namespace: "default", Name: "train", GPUs: 8,
				Contract: state.Contract{Budget: "ai2/nlp", MinRuntime: time.Hour}, SubmittedAt: tBase}
			alloc := state.Alloc{ID: "a1", JobID: job.ID, NodeID: "n1", Leaf: "ai2/nlp", GPUs: 8, StartedAt: tBase,
				ProtectedUntil: tBase.Add(time.Hour)}
			rec := NewInmemReconciler()
			rec.SetJob(job)
			rec.SetAlloc(alloc)
			d.start(rec)
			t.Cleanup(func() {
				if d.srv != nil {
					d.stop()
				}
			})
			cl, err := client.New(d.srv.HTTPAddr(), testToken, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cl.ApplyBudgets(context.Background(), testBudgets()); err != nil {
				t.Fatal(err)
			}
			for k := 1; k <= 2; k++ {
				d.clock.Advance(5 * time.Minute)
				d.pass()
				if k == tc.snapshotAfter {
					if err := d.srv.Raft().Snapshot().Error(); err != nil {
						t.Fatalf("snapshot: %v", err)
					}
				}
			}
			if got, want := usage(d.srv, "ai2/nlp"), int64(8*10*60); got != want {
				t.Fatalf("before the stop: ledger %d GPU-s, want %d", got, want)
			}
			d.stop()

			// While allot is down the allocation runs on and finishes at +25m.
			d.clock.Advance(30 * time.Minute)
			alloc.StoppedAt = tBase.Add(25 * time.Minute)
			rec2 := NewInmemReconciler() // a new process knows the cluster only from Nomad
			rec2.SetJob(job)
			rec2.SetAlloc(alloc)
			d.start(rec2)
			if b := d.srv.FSM().Read().Budgets(); b == nil || b.Revision != "rev-1" {
				t.Fatalf("budgets after the restart: %+v", b)
			}
			d.pass()
			d.clock.Advance(time.Minute)
			d.pass() // a pass after the stop is charged adds nothing
			want := int64(8 * 25 * 60)
			if got := usage(d.srv, "ai2/nlp"); got != want {
				t.Fatalf("after the restart: ledger %d GPU-s, want %d (8 GPUs x 25 min)", got, want)
			}
			a := d.srv.FSM().Read().Alloc("a1")
			if a == nil || a.ChargedGPUSeconds != want || !a.ChargedThrough.Equal(alloc.StoppedAt) {
				t.Fatalf("alloc row after the restart: %+v, want %d GPU-s charged through %s", a, want, alloc.StoppedAt)
			}
			var perMinute [25]int64
			d.srv.FSM().WithLedger(func(l *budgets.Ledger) {
				for m := range perMinute {
					at := tBase.Add(time.Duration(m) * time.Minute)
					perMinute[m] = l.Usage("ai2/nlp", at, at.Add(time.Minute))
				}
			})
			for m, n := range perMinute {
				if n != 8*60 {
					t.Fatalf("minute %d holds %d GPU-s, want 480 (each minute charged once): %v", m, n, perMinute)
				}
			}
		})
	}
}
