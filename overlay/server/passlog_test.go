package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/state"
	"github.com/hashicorp/raft"
)

// The fixture in testdata/passlog is a raft log written by the leader as it
// was before one pass became one entry: a state snapshot taken after its
// first pass (snapshot.bin), the 23 command entries committed after it
// (log.jsonl: four more passes of 2 to 8 entries each, every kind the old
// record and reconcile wrote, and an operator's return request), and the
// snapshot of the state they led to (want.bin). TestPassLogFixture wrote it
// with -update-passlog in the commit "server: fixture of a log written by
// the multi-entry record" (git log -S TestPassLogFixture finds it); it was
// removed once the leader wrote one entry per pass, since it would now
// write pass entries.

const passLogDir = "testdata/passlog"

// logLine is one command entry of log.jsonl.
type logLine struct {
	Index uint64
	Type  string // the entry type's name, for a reader
	Data  string // base64 of the entry (type byte + JSON)
}

// memSink is a raft.SnapshotSink in memory.
type memSink struct{ bytes.Buffer }

func (*memSink) ID() string    { return "mem" }
func (*memSink) Cancel() error { return nil }
func (*memSink) Close() error  { return nil }

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

// TestOneRaftEntryPerPass measures the raft entries a pass writes: one,
// whatever it records (rows, queue, decisions, a drain, charges, demand).
func TestOneRaftEntryPerPass(t *testing.T) {
	clock := &fakeClock{now: tBase}
	rec := NewInmemReconciler()
	s := devServer(t, Config{Token: testToken, Reconciler: rec, Clock: clock.Now})
	if _, _, err := s.Apply(state.BudgetsApplyType, state.BudgetsApplyRequest{Revision: "rev-1",
		Specs: toSpecs(testBudgets()), AppliedAt: tBase}); err != nil {
		t.Fatal(err)
	}
	job := state.Job{ID: "default/train", Namespace: "default", Name: "train", GPUs: 8,
		Contract: state.Contract{Budget: "ai2/nlp", MinRuntime: time.Hour}, SubmittedAt: tBase}
	rec.SetJob(job)
	rec.SetAlloc(state.Alloc{ID: "a1", JobID: job.ID, NodeID: "n1", Leaf: "ai2/nlp", GPUs: 8, StartedAt: tBase})
	rec.SetNode(state.Node{ID: "n1", Name: "gpu-1", Drain: policy.NodeNormal, TotalGPUs: 8, HealthyGPUs: 8, Since: tBase})
	rec.SetNode(state.Node{ID: "n2", Name: "gpu-2", Drain: policy.NodeDraining, TotalGPUs: 8, HealthyGPUs: 7, Since: tBase})
	rec.SetQueue([]state.QueueEntry{{JobID: job.ID, Leaf: "ai2/nlp", Band: "protected", Priority: 100}})
	rec.SetDrains([]state.NodeObservation{{NodeID: "n2", Name: "gpu-2", Fault: "XID 79", HealthyGPUs: 7}})
	rec.AddDecisions(state.Decision{At: tBase, Kind: "priority", JobID: job.ID, Reason: "protected: 100"})
	if err := s.raft.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	var perPass []uint64
	for k := range 3 {
		clock.Advance(time.Minute)
		before := s.raft.LastIndex()
		if err := s.ReconcileOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		perPass = append(perPass, s.raft.LastIndex()-before)
		if k == 0 {
			v := s.FSM().Read()
			if v.Job(job.ID) == nil || v.Node("n2") == nil || len(v.Queue()) != 1 || v.Drain("n2") == nil ||
				v.Alloc("a1").ChargedGPUSeconds != 8*60 || len(v.DemandMarks()) != 1 {
				t.Fatalf("the first pass did not record all of it: alloc %+v", v.Alloc("a1"))
			}
		}
	}
	t.Logf("raft entries per pass: %v", perPass)
	for k, n := range perPass {
		if n != 1 {
			t.Fatalf("pass %d wrote %d raft entries, want 1 (all passes: %v)", k, n, perPass)
		}
	}
}

// noticeReconciler is a Reconciler whose every pass records the notices
// the test set last (the leader loop runs passes of its own too).
type noticeReconciler struct {
	mu      sync.Mutex
	notices []state.Notice
	passes  int
}

func (r *noticeReconciler) set(ns []state.Notice) { r.mu.Lock(); r.notices = ns; r.mu.Unlock() }

func (r *noticeReconciler) Reconcile(context.Context, *state.View, time.Time) (Outcome, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.passes++
	return Outcome{Notices: r.notices}, nil
}

// A pass's notices go in its one raft entry: non-nil replaces the stored
// ones, nil keeps them, empty clears them.
func TestPassRecordsNoticesInItsEntry(t *testing.T) {
	clock := &fakeClock{now: tBase}
	n := state.Notice{JobID: "default/train", For: "default/olmo", Allocs: []string{"a1"}, SentAt: tBase, Deadline: tBase.Add(5 * time.Minute),
		Stop: state.NoticeStop{Kind: "victim", Job: "default/olmo", Node: "n1", N: 8}}
	rec := &noticeReconciler{}
	s := devServer(t, Config{Token: testToken, Reconciler: rec, Clock: clock.Now})
	// The leader loop's first pass, then none for the hour devServer waits.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		rec.mu.Lock()
		n := rec.passes
		rec.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the leader loop ran no pass")
		}
	}
	for k, tc := range []struct {
		set           []state.Notice
		stored, wrote int
	}{{[]state.Notice{n}, 1, 1}, {nil, 1, 0}, {[]state.Notice{}, 0, 1}} {
		rec.set(tc.set)
		clock.Advance(time.Second)
		before := s.raft.LastIndex()
		if err := s.ReconcileOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := len(s.FSM().Read().Notices()); got != tc.stored {
			t.Fatalf("pass %d: %d notices stored, want %d", k, got, tc.stored)
		}
		if got := s.raft.LastIndex() - before; got != uint64(tc.wrote) {
			t.Fatalf("pass %d wrote %d raft entries, want %d", k, got, tc.wrote)
		}
	}
}
