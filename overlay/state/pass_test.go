package state

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/policy"
	"github.com/hashicorp/raft"
)

// passFixture is a pass of every kind: a state with budgets, a job with a
// running allocation and a node being drained, and the pass that follows.
func passFixture(t *testing.T) (*FSM, PassRequest) {
	t.Helper()
	f := newFSM(t, FSMConfig{})
	mustApply(t, f, BudgetsApplyType, BudgetsApplyRequest{Revision: "r1", Specs: sampleSpecs(), AppliedAt: t0})
	job := Job{ID: "default/train", Namespace: "default", Name: "train", GPUs: 8,
		Contract: Contract{Budget: "ai2/nlp", MinRuntime: time.Hour}, SubmittedAt: t0}
	mustApply(t, f, JobUpsertType, JobUpsertRequest{Jobs: []Job{job, {ID: "default/old", GPUs: 1}}})
	mustApply(t, f, AllocUpsertType, AllocUpsertRequest{Allocs: []Alloc{{ID: "a1", JobID: job.ID, NodeID: "n1",
		Leaf: "ai2/nlp", GPUs: 8, StartedAt: t0}}})
	at := t0.Add(10 * time.Minute)
	sick := NodeObservation{NodeID: "n2", Name: "gpu-2", Fault: fault, HealthyGPUs: 7}
	changes, err := DrainChanges(f.Read(), []NodeObservation{sick}, at)
	if err != nil {
		t.Fatal(err)
	}
	olmo := Job{ID: "default/olmo", Namespace: "default", Name: "olmo", GPUs: 4,
		Contract: Contract{Budget: "ai2/prior/olmo", MinRuntime: time.Hour}, SubmittedAt: at}
	return f, PassRequest{At: at, Jobs: []Job{olmo}, DeletedJobs: []string{"default/old"},
		Allocs:     []Alloc{{ID: "a2", JobID: olmo.ID, NodeID: "n1", Leaf: "ai2/prior/olmo", GPUs: 4, StartedAt: t0.Add(5 * time.Minute)}},
		Nodes:      []Node{{ID: "n2", Name: "gpu-2", Drain: policy.NodeDraining, Since: at, TotalGPUs: 8, HealthyGPUs: 7}},
		Priorities: []Priority{{JobID: olmo.ID, Priority: 100, WrittenAt: at}}, ReplaceQueue: true,
		Queue: []QueueEntry{{JobID: olmo.ID, Leaf: "ai2/prior/olmo", Band: "protected", Priority: 100}},
		Charges: []Charge{{Alloc: "a1", Leaf: "ai2/nlp", GPUs: 8, From: t0, To: at},
			{Alloc: "a2", Leaf: "ai2/prior/olmo", GPUs: 4, From: t0.Add(5 * time.Minute), To: at}},
		Demand:    []DemandSample{{Leaf: "ai2/nlp", GPUs: 8, From: at, To: at}},
		Decisions: []Decision{{At: at, Kind: "priority", JobID: olmo.ID, Reason: "protected: 100"}},
		Drains:    changes}
}

// TestPassIsTheOldEntriesInOne: a pass entry leaves exactly the state the
// entries a leader wrote for the same pass before it (rows, queue,
// decisions, drain observation, then charges and demand) left.
func TestPassIsTheOldEntriesInOne(t *testing.T) {
	f, req := passFixture(t)
	old, _ := passFixture(t)
	res := mustApply(t, f, PassType, req).(PassResult)
	if res.GPUSeconds != 8*600+4*300 || res.Notes != nil {
		t.Fatalf("pass result %+v", res)
	}
	obs := []NodeObservation{{NodeID: "n2", Name: "gpu-2", Fault: fault, HealthyGPUs: 7}}
	for _, e := range []struct {
		t   MessageType
		req any
	}{
		{JobUpsertType, JobUpsertRequest{Jobs: req.Jobs}},
		{AllocUpsertType, AllocUpsertRequest{Allocs: req.Allocs}},
		{JobDeleteType, JobDeleteRequest{JobIDs: req.DeletedJobs}},
		{NodeUpsertType, NodeUpsertRequest{Nodes: req.Nodes}},
		{PrioritiesType, PrioritiesRequest{Priorities: req.Priorities}},
		{PlanRecordType, PlanRecordRequest{At: req.At, Queue: req.Queue}},
		{DecisionAppendType, DecisionAppendRequest{Decisions: req.Decisions}},
		{DrainObserveType, DrainObserveRequest{At: req.At, Nodes: obs}},
		{ChargeType, ChargeRequest{Charges: req.Charges, Now: req.At}},
		{DemandType, DemandRequest{Samples: req.Demand, Now: req.At}},
	} {
		mustApply(t, old, e.t, e.req)
	}
	if got, want := snapshotBytes(t, f), snapshotBytes(t, old); !bytes.Equal(got, want) {
		t.Fatalf("one pass entry and the old entries differ:\n pass %q\n  old %q", got, want)
	}
}

// passSpoil spoils a pass at one step; want is what the error names.
type passSpoil struct {
	name  string
	spoil func(*PassRequest)
	want  string
}

// TestPassAllOrNothing fails a pass at each of its steps, in turn: nothing
// of it may land, neither in the tables nor in the ledger.
func TestPassAllOrNothing(t *testing.T) {
	for _, tc := range append([]passSpoil{
		{name: "an invalid row (first step)", spoil: func(r *PassRequest) { r.Priorities = append(r.Priorities, Priority{}) },
			want: "priority 1 has no job ID"},
		{name: "a charge to the wrong budget", spoil: func(r *PassRequest) { r.Charges[1].Leaf = "ai2/nlp" },
			want: "charged to budget"},
		{name: "a charge outside the ledger window", spoil: func(r *PassRequest) { r.Charges[0].From = t0.Add(-30 * 24 * time.Hour) },
			want: "charge.from"},
		{name: "a drain change worked out from another phase", spoil: func(r *PassRequest) { r.Drains[0].FromPhase = policy.NodeDrained },
			want: "worked out from phase drained"},
		{name: "a drain change without its count", spoil: func(r *PassRequest) { r.Drains[0].Stats.Transitions = nil },
			want: "0 phase(s) entered for 2 transition(s)"},
		{name: "a bucket overflow in the ledger (last step)", spoil: overflow, want: "bucket overflow"},
	}, badNotices()...) { // notice_test.go
		t.Run(tc.name, func(t *testing.T) {
			f, req := passFixture(t)
			before := snapshotBytes(t, f)
			var head time.Time
			f.WithLedger(func(l *budgets.Ledger) { head, _ = l.Head() })
			tc.spoil(&req)
			data, err := Encode(PassType, req)
			if err != nil {
				t.Fatal(err)
			}
			res := f.Apply(&raft.Log{Type: raft.LogCommand, Data: data})
			if err, ok := res.(error); !ok || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("apply: %v, want an error naming %q", res, tc.want)
			}
			if after := snapshotBytes(t, f); !bytes.Equal(before, after) {
				t.Fatalf("a refused pass changed the state:\nbefore %q\n after %q", before, after)
			}
			f.WithLedger(func(l *budgets.Ledger) {
				if h, _ := l.Head(); !h.Equal(head) {
					t.Fatalf("a refused pass moved the ledger's newest bucket from %s to %s", head, h)
				}
			})
		})
	}
}

// overflow adds 70 one-minute charges of MaxGPUs GPUs each to one leaf and
// minute: every one is valid alone, together they overflow the bucket.
func overflow(r *PassRequest) {
	from := r.At.Add(-time.Minute)
	for i := range 70 {
		id := fmt.Sprintf("big-%d", i)
		r.Allocs = append(r.Allocs, Alloc{ID: id, JobID: "default/train", Leaf: "ai2/nlp", GPUs: MaxGPUs, StartedAt: from})
		r.Charges = append(r.Charges, Charge{Alloc: id, Leaf: "ai2/nlp", GPUs: MaxGPUs, From: from, To: r.At})
	}
}

// TestFailedChargeNotMarkedCharged: in a charge entry (which applies its
// items one by one), an item the ledger refuses is an error and leaves its
// allocation where it was: not charged, ChargedThrough unmoved.
func TestFailedChargeNotMarkedCharged(t *testing.T) {
	f := newFSM(t, FSMConfig{})
	at := t0.Add(time.Minute)
	var allocs []Alloc
	var charges []Charge
	for i := range 70 {
		id := fmt.Sprintf("big-%02d", i)
		allocs = append(allocs, Alloc{ID: id, JobID: "default/j", Leaf: "ai2/nlp", GPUs: MaxGPUs, StartedAt: t0})
		charges = append(charges, Charge{Alloc: id, Leaf: "ai2/nlp", GPUs: MaxGPUs, From: t0, To: at})
	}
	mustApply(t, f, AllocUpsertType, AllocUpsertRequest{Allocs: allocs})
	data, _ := Encode(ChargeType, ChargeRequest{Charges: charges, Now: at})
	res := f.ApplyEntry(data).(ChargeResult)
	// A bucket holds 4,294,967,295 GPU-seconds: 68 minutes of MaxGPUs fit.
	perAlloc := int64(MaxGPUs) * 60
	fit := int((1<<32 - 1) / perAlloc)
	if res.GPUSeconds != int64(fit)*perAlloc || res.Skipped != 70-fit || !errors.Is(res.Err, budgets.ErrBucketOverflow) {
		t.Fatalf("result %+v, want %d charged and %d refused with a bucket overflow", res, fit, 70-fit)
	}
	v := f.Read()
	for i, a := range allocs {
		got := v.Alloc(a.ID)
		charged := i < fit
		if charged != (got.ChargedGPUSeconds == perAlloc && got.ChargedThrough.Equal(at)) ||
			!charged && (got.ChargedGPUSeconds != 0 || !got.ChargedThrough.Equal(t0)) {
			t.Fatalf("alloc %s: charged %d through %s; want charged: %t", a.ID, got.ChargedGPUSeconds, got.ChargedThrough, charged)
		}
	}
	f.WithLedger(func(l *budgets.Ledger) {
		if u := l.Usage("ai2/nlp", t0, at); u != int64(fit)*perAlloc {
			t.Fatalf("ledger holds %d, want %d", u, int64(fit)*perAlloc)
		}
	})
}

// TestPassKeepsAReturnRequestedMeanwhile: an operator's return request
// that lands between the leader reading a drain record and its pass being
// applied is kept.
func TestPassKeepsAReturnRequestedMeanwhile(t *testing.T) {
	f := newFSM(t, FSMConfig{})
	sick := NodeObservation{NodeID: "n1", Fault: fault, HealthyGPUs: 7, Allocs: []DrainAlloc{{ID: "a1", GPUs: 4}}}
	observeVia(t, f, PassType, t0, sick)
	changes, err := DrainChanges(f.Read(), []NodeObservation{sick}, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, f, DrainReturnType, DrainReturnRequest{NodeID: "n1", At: t0.Add(30 * time.Second)})
	mustApply(t, f, PassType, PassRequest{At: t0.Add(time.Minute), Drains: changes})
	if r := f.Read().Drain("n1"); !r.ReturnRequested || !r.ObservedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("record %+v: the return request was lost", r)
	}
}

// TestPreviewShowsThePassRows: the leader computes charges on the state
// with the pass's rows in; the preview changes nothing.
func TestPreviewShowsThePassRows(t *testing.T) {
	f, req := passFixture(t)
	before := snapshotBytes(t, f)
	var due []Charge
	if err := f.Preview(&req, func(v *View) { due = ChargesDue(v, req.At, time.Time{}) }); err != nil {
		t.Fatal(err)
	}
	if len(due) != 2 || due[1].Alloc != "a2" || !due[1].From.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("charges due on the preview: %+v, want a1's and the new a2's from its start", due)
	}
	if !bytes.Equal(before, snapshotBytes(t, f)) {
		t.Fatal("Preview changed the state")
	}
	req.Allocs = append(req.Allocs, Alloc{})
	if err := f.Preview(&req, func(*View) {}); err == nil || !strings.Contains(err.Error(), "has no ID") {
		t.Fatalf("preview of an invalid pass: %v", err)
	}
}
