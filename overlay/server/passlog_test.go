package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/state"
	"github.com/hashicorp/raft"
)

// The fixture in testdata/passlog is a raft log written by the leader as it
// was before one pass became one entry (commit "server: fixture of a log
// written by the multi-entry record"): a state snapshot taken after the
// first pass (snapshot.bin), the command entries committed after it
// (log.jsonl), and the snapshot of the state they led to (want.bin).

var updatePassLog = flag.Bool("update-passlog", false, "rewrite testdata/passlog from the running code")

const passLogDir = "testdata/passlog"

// scriptReconciler returns its outcomes in turn, then empty ones.
type scriptReconciler struct {
	mu   sync.Mutex
	outs []Outcome
	n    int
}

func (r *scriptReconciler) push(o Outcome) { r.mu.Lock(); r.outs = append(r.outs, o); r.mu.Unlock() }

func (r *scriptReconciler) Reconcile(ctx context.Context, _ *state.View, _ time.Time) (Outcome, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	if len(r.outs) == 0 {
		return Outcome{}, ctx.Err()
	}
	o := r.outs[0]
	r.outs = r.outs[1:]
	return o, ctx.Err()
}

func (r *scriptReconciler) passes() int { r.mu.Lock(); defer r.mu.Unlock(); return r.n }

// logLine is one command entry of log.jsonl.
type logLine struct {
	Index uint64
	Type  string // the entry type's name, for a reader
	Data  string // base64 of the entry (type byte + JSON)
}

// passLogT0 is the fixture's start: fixed, so the fixture does not depend
// on when it was written.
var passLogT0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// passLogScript is the fixture's story, pass by pass: every kind of change
// a pass records, a drain from cordoned to returned, an operator's return
// request, a job deleted, and a gap the ledger catches up in two entries.
func passLogScript() []struct {
	at  time.Duration
	out Outcome
	ret string // node whose return an operator asks for before the pass
} {
	t0 := passLogT0
	train := state.Job{ID: "default/train", Namespace: "default", Name: "train", GPUs: 8,
		Contract: state.Contract{Budget: "ai2/nlp", MinRuntime: time.Hour, Priority: 50}, SubmittedAt: t0}
	free := state.Job{ID: "default/free", Namespace: "default", Name: "free", GPUs: 2,
		Contract: state.Contract{Reason: "no min_runtime: unallocated"}, SubmittedAt: t0}
	olmo := state.Job{ID: "default/olmo", Namespace: "default", Name: "olmo", GPUs: 4,
		Contract: state.Contract{Budget: "ai2/prior/olmo", MinRuntime: 2 * time.Hour, Resumable: true, Priority: 70}, SubmittedAt: t0.Add(9 * time.Minute)}
	a1 := state.Alloc{ID: "a1", JobID: train.ID, NodeID: "n1", Leaf: "ai2/nlp", GPUs: 8, StartedAt: t0, ProtectedUntil: t0.Add(time.Hour)}
	a2 := state.Alloc{ID: "a2", JobID: free.ID, NodeID: "n2", GPUs: 2, StartedAt: t0}
	a2stopped := a2
	a2stopped.StoppedAt, a2stopped.Preemptions = t0.Add(5*time.Minute), 1
	a3 := state.Alloc{ID: "a3", JobID: olmo.ID, NodeID: "n1", Leaf: "ai2/prior/olmo", GPUs: 4, StartedAt: t0.Add(10 * time.Minute),
		ProtectedUntil: t0.Add(130 * time.Minute)}
	n1 := state.Node{ID: "n1", Name: "gpu-1", Drain: state.NodeActive, Since: t0, TotalGPUs: 8, HealthyGPUs: 8}
	n2 := state.Node{ID: "n2", Name: "gpu-2", Drain: state.NodeDraining, Reason: "XID 79", Since: t0, TotalGPUs: 8, HealthyGPUs: 7}
	n2drained := n2
	n2drained.Drain, n2drained.Reason, n2drained.Since = state.NodeDrained, "unhealthy and empty", t0.Add(5*time.Minute)
	n2back := n2
	n2back.Drain, n2back.Reason, n2back.Since, n2back.HealthyGPUs = state.NodeActive, "healthy again", t0.Add(100*time.Minute), 8
	sick := state.NodeObservation{NodeID: "n2", Name: "gpu-2", Fault: "XID 79 on GPU-3", HealthyGPUs: 7,
		Allocs: []state.DrainAlloc{{ID: "a2", JobID: free.ID, GPUs: 2, LeavesAt: t0}}}
	moved := sick
	moved.Requeued, moved.Allocs = []string{"a2"}, nil
	queue := []state.QueueEntry{{JobID: train.ID, Leaf: "ai2/nlp", Band: "protected", Priority: 100, SortMetric: 1,
		Explanation: "running inside its protected window"}}
	queue2 := append(queue[:1:1], state.QueueEntry{JobID: olmo.ID, Leaf: "ai2/prior/olmo", Band: "protected", Priority: 100,
		SortMetric: budgets.Ratio(0.5), Explanation: "running inside its protected window"})
	return []struct {
		at  time.Duration
		out Outcome
		ret string
	}{
		{at: 0, out: Outcome{Jobs: []state.Job{free, train}, Allocs: []state.Alloc{a1, a2}, Nodes: []state.Node{n1, n2},
			Priorities: []state.Priority{{JobID: train.ID, Priority: 100, WrittenAt: t0, ModifyIndex: 7}},
			Queue:      queue, Decisions: []state.Decision{{At: t0, Kind: "priority", JobID: train.ID, Reason: "protected: 100"}},
			Drains:     []state.NodeObservation{sick}}},
		// The snapshot is taken here.
		{at: 5 * time.Minute, ret: "n2", out: Outcome{Allocs: []state.Alloc{a2stopped}, Nodes: []state.Node{n2drained},
			Decisions: []state.Decision{{At: t0.Add(5 * time.Minute), Kind: "drain", JobID: free.ID, AllocID: "a2", NodeID: "n2", Reason: "moved off the unhealthy node"}},
			Drains:    []state.NodeObservation{moved}}},
		{at: 10 * time.Minute, out: Outcome{Jobs: []state.Job{olmo}, DeletedJobs: []string{free.ID}, Allocs: []state.Alloc{a3},
			Priorities: []state.Priority{{JobID: olmo.ID, Priority: 100, WrittenAt: t0.Add(10 * time.Minute), ModifyIndex: 9}},
			Queue:      queue2, Drains: []state.NodeObservation{with(moved, func(o *state.NodeObservation) { o.Requeued = nil })}}},
		{at: 100 * time.Minute, out: Outcome{Nodes: []state.Node{n2back},
			Priorities: []state.Priority{{JobID: train.ID, Priority: 90, WrittenAt: t0.Add(100 * time.Minute), ModifyIndex: 8}},
			Queue:      []state.QueueEntry{}, Drains: []state.NodeObservation{{NodeID: "n2", Name: "gpu-2", Healthy: true, Eligible: true,
				HealthyGPUs: 8, ReturnedBy: state.ReturnedByOperator, ReturnReason: "returned by an operator (allot nodes return)"}}}},
		{at: 101 * time.Minute},
	}
}

// TestPassLogFixture writes testdata/passlog with -update-passlog (the
// leader of that time wrote a pass as many entries; the replay test below
// checks that today's FSM still reads them to the same state).
func TestPassLogFixture(t *testing.T) {
	if !*updatePassLog {
		t.Skip("writes the fixture only with -update-passlog")
	}
	d := &diskServer{t: t, dir: t.TempDir(), httpPort: freePort(t), raftPort: freePort(t), tune: fastRaft(),
		clock: &fakeClock{now: passLogT0}}
	d.tune.SnapshotInterval, d.tune.SnapshotThreshold = time.Hour, 1<<20
	rec := &scriptReconciler{}
	d.start(rec)
	t.Cleanup(func() { d.stop() })
	waitFor(t, 10*time.Second, "the leader's first pass", func() error {
		if rec.passes() == 0 {
			return errNotYet
		}
		return nil
	})
	if _, _, err := d.srv.Apply(state.BudgetsApplyType, state.BudgetsApplyRequest{Revision: "rev-1",
		Specs: toSpecs(testBudgets()), AppliedAt: passLogT0}); err != nil {
		t.Fatal(err)
	}
	var snapIndex uint64
	var snap []byte
	var prev time.Duration
	for i, p := range passLogScript() {
		d.clock.Advance(p.at - prev)
		prev = p.at
		if p.ret != "" {
			if _, _, err := d.srv.Apply(state.DrainReturnType, state.DrainReturnRequest{NodeID: p.ret, At: d.clock.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		rec.push(p.out)
		d.pass()
		if i == 0 {
			snapIndex, snap = fsmSnapshot(t, d.srv)
		}
	}
	_, want := fsmSnapshot(t, d.srv)
	var lines bytes.Buffer
	last := d.srv.raft.LastIndex()
	for i := snapIndex + 1; i <= last; i++ {
		var l raft.Log
		if err := d.srv.disk.logs.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		if l.Type != raft.LogCommand {
			continue
		}
		b, _ := json.Marshal(logLine{Index: l.Index, Type: state.MessageType(l.Data[0]).String(), Data: base64.StdEncoding.EncodeToString(l.Data)})
		lines.Write(append(b, '\n'))
	}
	if err := os.MkdirAll(passLogDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"snapshot.bin": snap, "log.jsonl": lines.Bytes(), "want.bin": want} {
		if err := os.WriteFile(filepath.Join(passLogDir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

var errNotYet = errorString("not yet")

type errorString string

func (e errorString) Error() string { return string(e) }

// memSink is a raft.SnapshotSink in memory.
type memSink struct{ bytes.Buffer }

func (*memSink) ID() string    { return "mem" }
func (*memSink) Cancel() error { return nil }
func (*memSink) Close() error  { return nil }

// fsmSnapshot waits until the FSM applied everything committed, then
// returns the index it applied and its snapshot's bytes.
func fsmSnapshot(t *testing.T, s *Server) (uint64, []byte) {
	t.Helper()
	if err := s.raft.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	idx := s.raft.AppliedIndex()
	return idx, persist(t, s.FSM())
}

func persist(t *testing.T, f *state.FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	return sink.Bytes()
}

// TestOldMultiEntryLogReplays restores the fixture's snapshot into a fresh
// FSM, applies the log written by the multi-entry leader, and checks that
// the state is exactly the one that leader's FSM reached.
func TestOldMultiEntryLogReplays(t *testing.T) {
	f, err := state.NewFSM(state.FSMConfig{})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := os.ReadFile(filepath.Join(passLogDir, "snapshot.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Restore(readCloser{bytes.NewReader(snap)}); err != nil {
		t.Fatal(err)
	}
	log, err := os.Open(filepath.Join(passLogDir, "log.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	kinds := map[string]int{}
	sc := bufio.NewScanner(log)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var l logLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		data, err := base64.StdEncoding.DecodeString(l.Data)
		if err != nil {
			t.Fatal(err)
		}
		res := f.Apply(&raft.Log{Index: l.Index, Type: raft.LogCommand, Data: data})
		if e, ok := res.(error); ok {
			t.Fatalf("entry %d (%s): %v", l.Index, l.Type, e)
		}
		kinds[l.Type]++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	// The fixture holds every kind of entry the old leader wrote for a pass.
	for _, k := range []state.MessageType{state.JobUpsertType, state.AllocUpsertType, state.JobDeleteType, state.NodeUpsertType,
		state.PrioritiesType, state.PlanRecordType, state.DecisionAppendType, state.DrainObserveType, state.ChargeType,
		state.DemandType, state.DrainReturnType} {
		if kinds[k.String()] == 0 {
			t.Errorf("the fixture has no %s entry", k)
		}
	}
	want, err := os.ReadFile(filepath.Join(passLogDir, "want.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if got := persist(t, f); !bytes.Equal(got, want) {
		t.Fatalf("the replayed state differs from the one the old leader reached:\n got %q\nwant %q", got, want)
	}
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }
