package state

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/policy"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func newFSM(t testing.TB, cfg FSMConfig) *FSM {
	t.Helper()
	f, err := NewFSM(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func mustApply(t testing.TB, f *FSM, typ MessageType, req any) any {
	t.Helper()
	data, err := Encode(typ, req)
	if err != nil {
		t.Fatal(err)
	}
	res := f.ApplyEntry(data)
	if err, ok := res.(error); ok {
		t.Fatalf("apply %s: %v", typ, err)
	}
	if cr, ok := res.(ChargeResult); ok && cr.Err != nil {
		t.Fatalf("apply %s: %v", typ, cr.Err)
	}
	return res
}

func sampleSpecs() []budgets.Spec {
	return []budgets.Spec{
		{Path: "ai2", Share: 1},
		{Path: "ai2/prior", Share: 3},
		{Path: "ai2/prior/olmo", Share: 1},
		{Path: "ai2/prior/molmo", Share: 1},
		{Path: "ai2/nlp", Share: 1},
	}
}

// memSink is an in-memory raft.SnapshotSink.
type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { return nil }

func snapshotBytes(t testing.TB, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	return sink.Bytes()
}

func TestBudgetsApplyBuildsTreeAndLogsDecision(t *testing.T) {
	f := newFSM(t, FSMConfig{})
	mustApply(t, f, BudgetsApplyType, BudgetsApplyRequest{Revision: "abc123",
		Digests: map[string]string{"a.hcl": "sha256:00"}, Specs: sampleSpecs(), AppliedAt: t0})
	v := f.Read()
	b := v.Budgets()
	if b == nil || b.Revision != "abc123" || b.Tree() == nil || len(b.Tree().Leaves()) != 3 {
		t.Fatalf("budgets = %+v", b)
	}
	if ds := v.Decisions(0); len(ds) != 1 || ds[0].Kind != "budgets" || !strings.Contains(ds[0].Reason, "abc123") {
		t.Fatalf("decisions = %+v", ds)
	}
	// An invalid tree changes nothing.
	data, _ := Encode(BudgetsApplyType, BudgetsApplyRequest{Revision: "bad", Specs: []budgets.Spec{{Path: "a"}, {Path: "b"}}})
	if err, ok := f.ApplyEntry(data).(error); !ok || !errors.Is(err, budgets.ErrInvalidTree) {
		t.Fatalf("invalid tree: got %v", err)
	}
	if f.Read().Budgets().Revision != "abc123" {
		t.Fatal("invalid tree replaced the budgets")
	}
}

func TestChargeIsIdempotentPerInterval(t *testing.T) {
	f := newFSM(t, FSMConfig{})
	mustApply(t, f, AllocUpsertType, AllocUpsertRequest{Allocs: []Alloc{{ID: "a1", JobID: "default/j",
		Leaf: "ai2/nlp", GPUs: 8, StartedAt: t0}}})
	charge := func(from, to time.Duration) ChargeResult {
		return mustApply(t, f, ChargeType, ChargeRequest{Charges: []Charge{{Alloc: "a1", GPUs: 8,
			From: t0.Add(from), To: t0.Add(to)}}}).(ChargeResult)
	}
	if r := charge(0, 90*time.Second); r.GPUSeconds != 8*90 {
		t.Fatalf("first charge: %+v", r)
	}
	// The same interval again (a new leader resending) adds nothing.
	if r := charge(0, 90*time.Second); r.GPUSeconds != 0 || r.Skipped != 1 {
		t.Fatalf("repeat: %+v", r)
	}
	// An overlapping interval counts only its new part.
	if r := charge(60*time.Second, 5*time.Minute); r.GPUSeconds != 8*(300-90) {
		t.Fatalf("overlap: %+v", r)
	}
	a := f.Read().Alloc("a1")
	if !a.ChargedThrough.Equal(t0.Add(5*time.Minute)) || a.ChargedGPUSeconds != 8*300 {
		t.Fatalf("alloc after charges: %+v", a)
	}
	var got int64
	f.WithLedger(func(l *budgets.Ledger) { got = l.Usage("ai2/nlp", t0, t0.Add(time.Hour)) })
	if got != 8*300 {
		t.Fatalf("ledger usage %d, want %d", got, 8*300)
	}
}

func TestChargeRejectsUnallocatedAndMismatchedBudget(t *testing.T) {
	f := newFSM(t, FSMConfig{})
	mustApply(t, f, AllocUpsertType, AllocUpsertRequest{Allocs: []Alloc{
		{ID: "free", JobID: "j", GPUs: 1, StartedAt: t0},
		{ID: "paid", JobID: "j", Leaf: "x", GPUs: 1, StartedAt: t0},
	}})
	data, _ := Encode(ChargeType, ChargeRequest{Charges: []Charge{
		{Alloc: "free", GPUs: 1, From: t0, To: t0.Add(time.Minute)},
		{Alloc: "paid", Leaf: "y", GPUs: 1, From: t0, To: t0.Add(time.Minute)},
		{Alloc: "paid", GPUs: 1, From: t0, To: t0.Add(time.Minute)},
	}})
	r := f.ApplyEntry(data).(ChargeResult)
	if r.GPUSeconds != 60 || r.Skipped != 2 || r.Err == nil ||
		!strings.Contains(r.Err.Error(), "unallocated") || !strings.Contains(r.Err.Error(), `"y"`) {
		t.Fatalf("result %+v", r)
	}
}

func TestDemandIsIdempotentPerLeaf(t *testing.T) {
	f := newFSM(t, FSMConfig{})
	s := DemandRequest{Samples: []DemandSample{{Leaf: "ai2/nlp", GPUs: 4, From: t0, To: t0.Add(2 * time.Minute)}}}
	if r := mustApply(t, f, DemandType, s).(ChargeResult); r.GPUSeconds != 480 {
		t.Fatalf("first: %+v", r)
	}
	if r := mustApply(t, f, DemandType, s).(ChargeResult); r.GPUSeconds != 0 {
		t.Fatalf("repeat: %+v", r)
	}
}

func TestDecisionLogIsBounded(t *testing.T) {
	f := newFSM(t, FSMConfig{DecisionLogSize: 5})
	for i := 0; i < 4; i++ {
		mustApply(t, f, DecisionAppendType, DecisionAppendRequest{Decisions: []Decision{
			{At: t0, Kind: "priority", Reason: "a"}, {At: t0, Kind: "priority", Reason: "b"}}})
	}
	ds := f.Read().Decisions(0)
	if len(ds) != 5 || ds[0].Seq != 4 || ds[4].Seq != 8 {
		t.Fatalf("decisions: %d, first %d", len(ds), ds[0].Seq)
	}
	if last := f.Read().Decisions(2); len(last) != 2 || last[1].Seq != 8 {
		t.Fatalf("limit 2: %+v", last)
	}
}

func TestJobDeleteRemovesDependents(t *testing.T) {
	f := newFSM(t, FSMConfig{})
	mustApply(t, f, JobUpsertType, JobUpsertRequest{Jobs: []Job{{ID: "default/a"}, {ID: "default/b"}}})
	mustApply(t, f, AllocUpsertType, AllocUpsertRequest{Allocs: []Alloc{{ID: "x", JobID: "default/a"}, {ID: "y", JobID: "default/b"}}})
	mustApply(t, f, PrioritiesType, PrioritiesRequest{Priorities: []Priority{{JobID: "default/a", Priority: 90}}})
	mustApply(t, f, PlanRecordType, PlanRecordRequest{At: t0, Queue: []QueueEntry{{JobID: "default/a", Position: 1}}})
	mustApply(t, f, JobDeleteType, JobDeleteRequest{JobIDs: []string{"default/a"}})
	v := f.Read()
	if v.Job("default/a") != nil || v.Alloc("x") != nil || v.Priority("default/a") != nil || v.QueueEntry("default/a") != nil {
		t.Fatal("job a's rows survived its deletion")
	}
	if v.Job("default/b") == nil || v.Alloc("y") == nil {
		t.Fatal("job b's rows were deleted")
	}
}

func TestAllocUpsertKeepsChargingState(t *testing.T) {
	f := newFSM(t, FSMConfig{})
	a := Alloc{ID: "a", JobID: "j", Leaf: "l", GPUs: 2, StartedAt: t0}
	mustApply(t, f, AllocUpsertType, AllocUpsertRequest{Allocs: []Alloc{a}})
	mustApply(t, f, ChargeType, ChargeRequest{Charges: []Charge{{Alloc: "a", GPUs: 2, From: t0, To: t0.Add(time.Hour)}}})
	// A later row naming another budget does not move the charged allocation:
	// its 7200 GPU-seconds are in l's ledger.
	a.StoppedAt, a.ChargedThrough, a.ChargedGPUSeconds, a.Leaf = t0.Add(2*time.Hour), time.Time{}, 0, "m"
	mustApply(t, f, AllocUpsertType, AllocUpsertRequest{Allocs: []Alloc{a}})
	got := f.Read().Alloc("a")
	if got.ChargedGPUSeconds != 7200 || !got.ChargedThrough.Equal(t0.Add(time.Hour)) || got.Running() || got.Leaf != "l" {
		t.Fatalf("alloc %+v", got)
	}
	// An allocation not charged yet takes the new budget.
	b := Alloc{ID: "b", JobID: "j", Leaf: "l", GPUs: 2, StartedAt: t0}
	mustApply(t, f, AllocUpsertType, AllocUpsertRequest{Allocs: []Alloc{b}})
	b.Leaf = "m"
	mustApply(t, f, AllocUpsertType, AllocUpsertRequest{Allocs: []Alloc{b}})
	if got := f.Read().Alloc("b"); got.Leaf != "m" {
		t.Fatalf("uncharged alloc kept budget %q, want m", got.Leaf)
	}
}

func TestApplyRejectsMalformedEntries(t *testing.T) {
	f := newFSM(t, FSMConfig{})
	for _, data := range [][]byte{nil, {0}, {99, '{', '}'}, {byte(JobUpsertType), 'x'}} {
		if err, ok := f.ApplyEntry(data).(error); !ok || !errors.Is(err, ErrBadEntry) {
			t.Errorf("%q: got %v, want ErrBadEntry", data, err)
		}
	}
	bad := append([]byte{byte(NodeUpsertType)}, `{"Nodes":[{"ID":"n","Drain":"sleeping"}]}`...)
	if err, ok := f.ApplyEntry(bad).(error); !ok || !errors.Is(err, ErrBadEntry) || !strings.Contains(err.Error(), "want one of") {
		t.Errorf("bad drain state: %v", err)
	}
	// A lifecycle phase is not a node row's state.
	bad, _ = Encode(NodeUpsertType, NodeUpsertRequest{Nodes: []Node{{ID: "n", Drain: policy.NodeCordoned}}})
	if err, ok := f.ApplyEntry(bad).(error); !ok || !strings.Contains(err.Error(), `drain state "cordoned", want one of active, draining, drained, reserved`) {
		t.Errorf("a node row cordoned: %v", err)
	}
}

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	f := newFSM(t, FSMConfig{})
	mustApply(t, f, BudgetsApplyType, BudgetsApplyRequest{Revision: "r1", Specs: sampleSpecs(), AppliedAt: t0})
	mustApply(t, f, JobUpsertType, JobUpsertRequest{Jobs: []Job{{ID: "default/train", GPUs: 8,
		Contract: Contract{Budget: "ai2/nlp", MinRuntime: 4 * time.Hour}, SubmittedAt: t0}}})
	mustApply(t, f, AllocUpsertType, AllocUpsertRequest{Allocs: []Alloc{{ID: "a", JobID: "default/train", Leaf: "ai2/nlp", GPUs: 8, StartedAt: t0}}})
	mustApply(t, f, ChargeType, ChargeRequest{Charges: []Charge{{Alloc: "a", GPUs: 8, From: t0, To: t0.Add(3 * time.Hour)}}})
	mustApply(t, f, NodeUpsertType, NodeUpsertRequest{Nodes: []Node{{ID: "n1", Drain: policy.NodeDraining, Reason: "xid 79", Since: t0}}})
	mustApply(t, f, ServerUpsertType, ServerUpsertRequest{Server: Server{ID: "s1", RaftAddr: "127.0.0.1:4651", HTTPAddr: "127.0.0.1:4650"}})
	want := snapshotBytes(t, f)

	g := newFSM(t, FSMConfig{})
	if err := g.Restore(io.NopCloser(bytes.NewReader(want))); err != nil {
		t.Fatal(err)
	}
	if got := snapshotBytes(t, g); !bytes.Equal(got, want) {
		t.Fatalf("restored state differs:\n got %q\nwant %q", got[:min(200, len(got))], want[:min(200, len(want))])
	}
	if g.Read().Budgets().Tree() == nil {
		t.Fatal("restore did not rebuild the budget tree")
	}
	var u int64
	g.WithLedger(func(l *budgets.Ledger) { u = l.Usage("ai2/nlp", t0, t0.Add(4*time.Hour)) })
	if u != 8*3*3600 {
		t.Fatalf("restored usage %d", u)
	}
	// Charging continues from the restored ChargedThrough.
	r := mustApply(t, g, ChargeType, ChargeRequest{Charges: []Charge{{Alloc: "a", GPUs: 8, From: t0, To: t0.Add(4 * time.Hour)}}}).(ChargeResult)
	if r.GPUSeconds != 8*3600 {
		t.Fatalf("charge after restore: %+v", r)
	}
}

func TestRestoreRejectsGarbage(t *testing.T) {
	f := newFSM(t, FSMConfig{})
	good := snapshotBytes(t, f)
	for name, data := range map[string][]byte{
		"empty":     nil,
		"magic":     []byte("not a snapshot at all"),
		"truncated": good[:len(good)-3],
	} {
		if err := f.Restore(io.NopCloser(bytes.NewReader(data))); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: got %v, want ErrBadSnapshot", name, err)
		}
	}
}
