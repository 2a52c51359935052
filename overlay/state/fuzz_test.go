package state

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/policy"
)

// entryGen turns fuzz bytes into log entries: mostly well-formed ones drawn
// from small ID sets (so entries collide and overwrite each other), some raw.
type entryGen struct{ data []byte }

func (g *entryGen) byte() byte {
	if len(g.data) == 0 {
		return 0
	}
	b := g.data[0]
	g.data = g.data[1:]
	return b
}

func (g *entryGen) pick(choices ...string) string { return choices[int(g.byte())%len(choices)] }
func (g *entryGen) at() time.Time                 { return t0.Add(time.Duration(g.byte()) * 37 * time.Second) }

// when is mostly at, sometimes days behind or years ahead (a wrong clock,
// issue 14).
func (g *entryGen) when() time.Time {
	switch b := g.byte(); b % 16 {
	case 0:
		return t0.Add(time.Duration(b) * 24 * 365 * time.Hour) // years ahead
	case 1:
		return t0.Add(-time.Duration(b) * 12 * time.Minute) // up to 2 days behind
	default:
		return g.at()
	}
}

// now is an entry's leader clock: none (an old leader's entry) or near t0.
func (g *entryGen) now() time.Time {
	if g.byte()%2 == 0 {
		return time.Time{}
	}
	return g.at()
}

// gpus is mostly small, sometimes beyond any bound.
func (g *entryGen) gpus() int {
	if b := g.byte(); b >= 250 {
		return []int{math.MaxInt, -1, MaxGPUs + 1, MaxGPUs, math.MinInt, 1 << 40}[b-250]
	} else {
		return int(b % 9)
	}
}

var (
	fuzzJobs   = []string{"default/a", "default/b", "ml/c"}
	fuzzAllocs = []string{"a1", "a2", "a3", "a4"}
	fuzzLeaves = []string{"ai2/nlp", "ai2/prior/olmo", "ai2/prior/molmo", ""}
)

func (g *entryGen) next() []byte {
	typ := MessageType(g.byte() % 15)
	var req any
	switch typ {
	case BudgetsApplyType:
		specs := sampleSpecs()
		if g.byte()%4 == 0 {
			specs = specs[1:] // no root: rejected
		}
		req = BudgetsApplyRequest{Revision: g.pick("r1", "r2"), Specs: specs, AppliedAt: g.at(),
			Digests: map[string]string{g.pick("a.hcl", "b.hcl"): g.pick("d1", "d2")}}
	case ChargeType:
		req = ChargeRequest{Charges: []Charge{{Alloc: g.pick(fuzzAllocs...), Leaf: g.pick(fuzzLeaves...),
			GPUs: g.gpus(), From: g.when(), To: g.when()}}, Now: g.now()}
	case DemandType:
		req = DemandRequest{Samples: []DemandSample{{Leaf: g.pick(fuzzLeaves...), GPUs: g.gpus(), From: g.when(), To: g.when()}}, Now: g.now()}
	case JobUpsertType:
		req = JobUpsertRequest{Jobs: []Job{{ID: g.pick(fuzzJobs...), GPUs: int(g.byte()),
			Contract: Contract{Budget: g.pick(fuzzLeaves...), MinRuntime: time.Duration(g.byte()) * time.Minute}, SubmittedAt: g.at()}}}
	case JobDeleteType:
		req = JobDeleteRequest{JobIDs: []string{g.pick(fuzzJobs...)}}
	case AllocUpsertType:
		a := Alloc{ID: g.pick(fuzzAllocs...), JobID: g.pick(fuzzJobs...), Leaf: g.pick(fuzzLeaves...), GPUs: int(g.byte() % 9), StartedAt: g.at()}
		if g.byte()%2 == 0 {
			a.StoppedAt = g.at()
		}
		req = AllocUpsertRequest{Allocs: []Alloc{a}}
	case NodeUpsertType:
		req = NodeUpsertRequest{Nodes: []Node{{ID: g.pick("n1", "n2"), Drain: policy.NodeState(g.byte() % 6), Since: g.at()}}}
	case DecisionAppendType:
		req = DecisionAppendRequest{Decisions: []Decision{{At: g.at(), Kind: "priority", JobID: g.pick(fuzzJobs...)}}}
	case PrioritiesType:
		req = PrioritiesRequest{Priorities: []Priority{{JobID: g.pick(fuzzJobs...), Priority: int(g.byte()), WrittenAt: g.at()}}}
	case PlanRecordType:
		q := QueueEntry{JobID: g.pick(fuzzJobs...), Position: int(g.byte() % 3)}
		if g.byte()%2 == 0 { // a standing whose level may be +Inf (an idle sibling)
			level := []budgets.Ratio{0.5, 1, budgets.Ratio(math.Inf(1))}[g.byte()%3]
			q.Standing = &Standing{Metric: level, LeafPosition: 1, ServedRatio: level,
				Parts: []StandingPart{{Path: g.pick(fuzzLeaves...), Share: 0.5, Level: level}}}
			q.FreeAt = g.at()
		}
		req = PlanRecordRequest{At: g.at(), Queue: []QueueEntry{q}}
	case ServerUpsertType:
		req = ServerUpsertRequest{Server: Server{ID: g.pick("s1", "s2", ""), HTTPAddr: g.pick("h1", "h2")}}
	case DrainObserveType:
		o := NodeObservation{NodeID: g.pick("n1", "n2", ""), Healthy: g.byte()%2 == 0, Fault: "XID 79",
			NomadDrain: g.byte()%3 == 0, Eligible: g.byte()%2 == 0, HealthyGPUs: int(g.byte() % 9),
			ReturnedBy: g.pick("", ReturnedByPolicy, ReturnedByOperator)}
		for i := 0; i < int(g.byte()%3); i++ {
			o.Allocs = append(o.Allocs, DrainAlloc{ID: g.pick(fuzzAllocs...), GPUs: int(g.byte() % 9), LeavesAt: g.at()})
		}
		if g.byte()%2 == 0 {
			o.Requeued = []string{g.pick(fuzzAllocs...)}
		}
		if g.byte()%4 == 0 {
			o.ForeignStops = []string{g.pick(fuzzAllocs...)}
		}
		req = DrainObserveRequest{At: g.at(), Nodes: []NodeObservation{o}}
	case DrainReturnType:
		req = DrainReturnRequest{NodeID: g.pick("n1", "n2"), At: g.at()}
	case PassType:
		a := Alloc{ID: g.pick(fuzzAllocs...), JobID: g.pick(fuzzJobs...), Leaf: g.pick(fuzzLeaves...), GPUs: int(g.byte() % 9), StartedAt: g.at()}
		p := PassRequest{At: g.now(), Allocs: []Alloc{a}, ReplaceQueue: g.byte()%2 == 0,
			Priorities: []Priority{{JobID: g.pick(fuzzJobs...), Priority: int(g.byte()), WrittenAt: g.at()}},
			Decisions:  []Decision{{At: g.at(), Kind: "priority", JobID: g.pick(fuzzJobs...)}},
			Demand:     []DemandSample{{Leaf: g.pick(fuzzLeaves...), GPUs: g.gpus(), From: g.when(), To: g.when()}}}
		for i := 0; i < 1+int(g.byte()%2); i++ {
			p.Charges = append(p.Charges, Charge{Alloc: g.pick(fuzzAllocs...), Leaf: g.pick(fuzzLeaves...), GPUs: g.gpus(), From: g.when(), To: g.when()})
		}
		req = p
	default: // raw bytes, mostly malformed
		n := int(g.byte() % 16)
		raw := make([]byte, 0, n)
		for i := 0; i < n; i++ {
			raw = append(raw, g.byte())
		}
		return raw
	}
	data, err := Encode(typ, req)
	if err != nil {
		panic(err)
	}
	return data
}

// FuzzApply feeds random entries to Apply and checks that snapshot →
// restore gives an identical state, and that the ledger holds exactly what
// the allocation lifecycles say was charged.
func FuzzApply(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 0, 6, 0, 0, 0, 1, 10, 1, 2, 0, 0, 3, 0, 10, 40})
	f.Add([]byte{6, 1, 1, 1, 4, 0, 1, 2, 2, 1, 4, 5, 90, 2, 1, 1, 4, 0, 200, 5, 1})
	f.Add([]byte{8, 0, 0, 8, 0, 0, 7, 1, 2, 3, 10, 0, 1, 2, 12, 5, 9, 99, 123, 4, 1, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		fsm := newFSM(t, FSMConfig{DecisionLogSize: 4})
		g := &entryGen{data: data}
		for len(g.data) > 0 {
			var head0 time.Time
			var written bool
			fsm.WithLedger(func(l *budgets.Ledger) { head0, written = l.Head() })
			entry := g.next()
			var before []byte
			if len(entry) > 0 && MessageType(entry[0]) == PassType {
				before = snapshotBytes(t, fsm)
			}
			if _, refused := fsm.ApplyEntry(entry).(error); refused && before != nil {
				// A pass is all or nothing, the ledger included.
				if after := snapshotBytes(t, fsm); !bytes.Equal(before, after) {
					t.Fatalf("a refused pass changed the state:\nbefore %q\n after %q", before, after)
				}
			}
			fsm.WithLedger(func(l *budgets.Ledger) {
				// The ledger rule (beginLedgerEntry): no entry moves the
				// newest bucket, and with it the horizon, more than MaxAdvance.
				if head, _ := l.Head(); written && head.Sub(head0) > l.MaxAdvance() {
					t.Fatalf("an entry moved the ledger's newest bucket from %v to %v, more than %v", head0, head, l.MaxAdvance())
				}
			})
		}
		checkLedgerMatchesAllocs(t, fsm)
		want := snapshotBytes(t, fsm)
		restored := newFSM(t, FSMConfig{DecisionLogSize: 4})
		if err := restored.Restore(io.NopCloser(bytes.NewReader(want))); err != nil {
			t.Fatalf("restore: %v", err)
		}
		if got := snapshotBytes(t, restored); !bytes.Equal(got, want) {
			t.Fatalf("snapshot → restore changed the state:\n got %q\nwant %q", got, want)
		}
		if a, b := dumpString(fsm), dumpString(restored); a != b {
			t.Fatalf("views differ after restore:\n%s\n%s", a, b)
		}
	})
}

// checkLedgerMatchesAllocs: the ledger holds at least what the allocation
// lifecycles of each leaf say was charged (more once a job, and with it its
// allocations, was deleted).
func checkLedgerMatchesAllocs(t *testing.T, f *FSM) {
	v := f.Read()
	perLeaf := map[string]int64{}
	for _, a := range v.Allocs() {
		perLeaf[a.Leaf] += a.ChargedGPUSeconds
	}
	f.WithLedger(func(l *budgets.Ledger) {
		for _, leaf := range l.Leaves() {
			got := l.Usage(leaf, t0.AddDate(-1, 0, 0), t0.AddDate(300, 0, 0)) // when() reaches 2 days back, 255 years on
			if got < perLeaf[leaf] {
				t.Fatalf("leaf %s: ledger %d < allocations %d", leaf, got, perLeaf[leaf])
			}
		}
	})
}

func dumpString(f *FSM) string {
	v := f.Read()
	var b bytes.Buffer
	if bs := v.Budgets(); bs != nil {
		fmt.Fprintf(&b, "%s %v %+v %v %d\n", bs.Revision, bs.Digests, bs.Specs, bs.AppliedAt, len(bs.Tree().Leaves()))
	}
	for _, x := range v.Jobs() {
		fmt.Fprintf(&b, "%+v\n", *x)
	}
	for _, x := range v.Allocs() {
		fmt.Fprintf(&b, "%+v\n", *x)
	}
	for _, x := range v.Decisions(0) {
		fmt.Fprintf(&b, "%+v\n", *x)
	}
	for _, x := range v.Queue() {
		row, st := *x, x.Standing
		row.Standing = nil // print what it points to, not its address
		fmt.Fprintf(&b, "%+v\n", row)
		if st != nil {
			fmt.Fprintf(&b, "  %+v\n", *st)
		}
	}
	return b.String()
}
