package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/policy"
	memdb "github.com/hashicorp/go-memdb"
)

// ChargeResult is what Apply returns for a charge or demand entry.
type ChargeResult struct {
	GPUSeconds int64 // added to the ledger by this entry
	Skipped    int   // items that changed nothing (already charged, or invalid)
	Err        error // joined errors of invalid items, nil when none
}

func decode(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %v", ErrBadEntry, err)
	}
	return nil
}

// applyBudgets replaces the budget tree; an invalid tree changes nothing.
func (f *FSM) applyBudgets(body []byte) any {
	var req BudgetsApplyRequest
	if err := decode(body, &req); err != nil {
		return err
	}
	if err := CheckBudgetsApply(&req); err != nil {
		return err
	}
	tree, err := budgets.NewTree(req.Specs)
	if err != nil {
		return err
	}
	specs := append([]budgets.Spec(nil), req.Specs...)
	sort.Slice(specs, func(i, j int) bool { return specs[i].Path < specs[j].Path })
	set := &BudgetSet{ID: CurrentBudgets, Revision: req.Revision, Digests: req.Digests, Specs: specs,
		AppliedAt: req.AppliedAt.UTC(), tree: tree}
	txn := f.db.Txn(true)
	defer txn.Abort()
	if err := txn.Insert(TableBudgets, set); err != nil {
		return err
	}
	reason := fmt.Sprintf("budget tree applied: revision %q, %d budgets, %d leaves", req.Revision, tree.Len(), len(tree.Leaves()))
	if err := f.appendDecisions(txn, []Decision{{At: set.AppliedAt, Kind: "budgets", Reason: reason}}); err != nil {
		return err
	}
	txn.Commit()
	return nil
}

// ledgerEntry is what one charge or demand entry may do to the ledger. It
// is fixed when the entry starts applying, from the entry and the state
// alone, so every replica decides the same.
type ledgerEntry struct {
	window  TimeWindow // where items must lie; zero From and To without Now
	hasNow  bool
	until   time.Time // no write reaches this time or later
	bounded bool      // false: until does not apply
}

// beginLedgerEntry applies the ledger rule of charge and demand entries,
// which keeps any one entry, whatever its timestamps, from moving the
// ledger's horizon by more than MaxAdvance:
//
//   - Let H be the start of the ledger's newest bucket when the entry
//     begins. The entry may write only buckets starting at or before
//     H + MaxAdvance: the part of an item after that is not charged (its
//     allocation's ChargedThrough, or the leaf's demand mark, stays where
//     the charge stopped, so a later entry sends it again) and the item
//     reports it in its error. The ledger refuses such writes too
//     (budgets.ErrTooFarAhead).
//   - An entry with Now (the leader's clock) first advances the ledger to
//     min(Now, H + MaxAdvance), so that time passing with nothing charged
//     still moves the window, at most MaxAdvance per entry; and each item
//     must lie in [Now - Retention + Bucket + MaxSkew, Now + MaxSkew]
//     (LedgerWindow),
//     or it is refused whole with an error naming the field and the range.
//   - On a ledger never written, an entry with Now advances it to Now; one
//     without (written by a leader before Now existed) is not bounded:
//     there is no history yet to lose.
//
// Parts of an item older than the ledger keeps (before the horizon, or more
// than Retention before the item's end) are never charged; the item says
// so in its error, so a charge is never acknowledged and then dropped.
func (f *FSM) beginLedgerEntry(now time.Time) ledgerEntry {
	var e ledgerEntry
	head, written := f.ledger.Head()
	if written {
		e.until, e.bounded = head.Add(f.ledger.MaxAdvance()+f.cfg.Bucket), true
	}
	if now.IsZero() {
		return e
	}
	e.hasNow, e.window = true, f.cfg.LedgerWindow(now)
	target := now
	if written && target.After(head.Add(f.ledger.MaxAdvance())) {
		target = head.Add(f.ledger.MaxAdvance())
	}
	_ = f.ledger.Advance(target) // within MaxAdvance of the head by construction
	if !written {
		head, _ = f.ledger.Head()
		e.until, e.bounded = head.Add(f.ledger.MaxAdvance()+f.cfg.Bucket), true
	}
	return e
}

// LedgerWindow is where a charge or demand sample may lie when the leader's
// clock reads now: from Retention before now to MaxSkew after it, less at
// the old end one bucket (the horizon's alignment) and MaxSkew (a write at
// the new end moves the horizon that much), so that nothing acknowledged
// inside the window is pushed out by the entry that brought it.
func (c FSMConfig) LedgerWindow(now time.Time) TimeWindow {
	c = c.withDefaults()
	return TimeWindow{From: now.Add(-c.Retention + c.Bucket + c.MaxSkew), To: now.Add(c.MaxSkew)}
}

// ledgerSpan is the part of an item's interval an entry may charge.
type ledgerSpan struct {
	from, to time.Time
	lost     error // the part older than the ledger keeps, nil when none
	cut      error // the part after the entry's bound, nil when none
}

// clampInterval cuts [from, to), after the mark already charged, to whole
// seconds, to what the ledger keeps and to the entry's bound.
func (f *FSM) clampInterval(e ledgerEntry, from, to, after time.Time) ledgerSpan {
	from, to = from.UTC().Truncate(time.Second), to.UTC().Truncate(time.Second)
	if from.Before(after) {
		from = after
	}
	sp := ledgerSpan{from: from, to: to}
	// Writing up to to makes the bucket holding to's last second the newest
	// one at the latest, and the horizon Retention (in whole buckets) behind
	// its end: what lies before that would be written and pushed out at once.
	keep := to.Add(-time.Nanosecond).Truncate(f.cfg.Bucket).Add(f.cfg.Bucket - f.ledger.Retention())
	if h, ok := f.ledger.Horizon(); ok && h.After(keep) {
		keep = h
	}
	if sp.from.Before(keep) && sp.from.Before(to) {
		end := keep
		if end.After(to) {
			end = to
		}
		sp.lost = fmt.Errorf("[%s, %s) is older than the ledger keeps (from %s): not counted",
			sp.from.Format(time.RFC3339), end.Format(time.RFC3339), keep.Format(time.RFC3339))
		sp.from = keep
	}
	if e.bounded && sp.to.After(e.until) {
		if sp.from.Before(e.until) {
			sp.cut = fmt.Errorf("charged only up to %s: one entry may move the ledger at most %v past its newest bucket; the rest waits for a later entry",
				e.until.Format(time.RFC3339), f.ledger.MaxAdvance())
		} else {
			sp.cut = fmt.Errorf("%w: [%s, %s) starts more than %v after the ledger's newest bucket: not charged",
				ErrOutOfBounds, sp.from.Format(time.RFC3339), sp.to.Format(time.RFC3339), f.ledger.MaxAdvance())
		}
		sp.to = e.until
	}
	return sp
}

// ok reports whether anything is left to charge.
func (sp ledgerSpan) ok() bool { return sp.from.Before(sp.to) }

// err joins what the span left out.
func (sp ledgerSpan) err() error { return errors.Join(sp.lost, sp.cut) }

// applyCharge charges each allocation for the part of its interval after its
// ChargedThrough, so a charge sent twice counts once, under the ledger rule
// of beginLedgerEntry.
func (f *FSM) applyCharge(body []byte) any {
	var req ChargeRequest
	if err := decode(body, &req); err != nil {
		return err
	}
	e := f.beginLedgerEntry(req.Now)
	return chargeEach(f, req.Charges, func(txn *memdb.Txn, c Charge) ledgerItem { return f.planCharge(txn, e, c) },
		func(i int, c Charge) string { return fmt.Sprintf("charge %d (alloc %s)", i, QuotePrefix(c.Alloc)) })
}

// ledgerItem is what one charge or demand sample does: the span it writes
// (nil: none), the row that records how far it got (nil: none), and why it
// did less than asked. A refused item (err) writes and records nothing; a
// note (the part older than the ledger keeps, or after the entry's bound)
// leaves the rest to apply.
type ledgerItem struct {
	span  *budgets.Span
	row   any    // *Alloc or *DemandMark, inserted once the span is written
	table string // row's table
	note  error
	err   error
}

// gpuSeconds is what the item adds to the ledger.
func (it *ledgerItem) gpuSeconds() int64 {
	if it.span == nil {
		return 0
	}
	return it.span.GPUs * int64(it.span.End.Sub(it.span.Start)/time.Second)
}

// chargeEach applies every item of a charge or demand entry in a single
// transaction. Unlike an upsert, an invalid item does not refuse the
// entry: it counts as skipped, its error (prefixed with name(i, item)) joins
// the result's, and the other items still apply. Each item is written with
// budgets.Ledger.WriteSpans, all or nothing: a refused write leaves its row
// (ChargedThrough, or the demand mark) where it was.
func chargeEach[T any](f *FSM, items []T, plan func(*memdb.Txn, T) ledgerItem, name func(int, T) string) ChargeResult {
	txn := f.db.Txn(true)
	defer txn.Abort()
	var res ChargeResult
	var errs []error
	for i, x := range items {
		it := plan(txn, x)
		if it.err == nil && it.span != nil {
			it.err = f.ledger.WriteSpans([]budgets.Span{*it.span})
		}
		if it.err == nil && it.row != nil {
			it.err = txn.Insert(it.table, it.row)
		}
		n := it.gpuSeconds()
		if it.err != nil {
			n = 0
		}
		if err := errors.Join(it.err, it.note); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name(i, x), err))
		}
		if n == 0 {
			res.Skipped++
		}
		res.GPUSeconds += n
	}
	txn.Commit()
	res.Err = errors.Join(errs...)
	return res
}

// checkItem checks a charge's or demand sample's bounds; field names the
// item as the API does ("charges" or "demand").
func (e ledgerEntry) checkItem(field, leaf string, gpus int, from, to time.Time) error {
	if err := CheckSize(field+".budget", leaf, MaxPathBytes); err != nil {
		return err
	}
	if err := CheckGPUs(field+".gpus", gpus, MaxGPUs); err != nil {
		return err
	}
	if e.hasNow {
		return e.window.CheckInterval(field, from, to)
	}
	return nil
}

// planCharge works out what a charge does, reading the allocation through
// txn; it writes nothing.
func (f *FSM) planCharge(txn *memdb.Txn, e ledgerEntry, c Charge) ledgerItem {
	refuse := func(err error) ledgerItem { return ledgerItem{err: err} }
	if c.Alloc == "" {
		return refuse(errors.New("a charge needs an allocation ID"))
	}
	if err := CheckSize("alloc", c.Alloc, MaxIDBytes); err != nil {
		return refuse(err)
	}
	if err := e.checkItem("charge", c.Leaf, c.GPUs, c.From, c.To); err != nil {
		return refuse(err)
	}
	raw, err := txn.First(TableAllocs, "id", c.Alloc)
	if err != nil {
		return refuse(err)
	}
	var a Alloc
	if raw != nil {
		a = *raw.(*Alloc)
	} else {
		a = Alloc{ID: c.Alloc, Leaf: c.Leaf, GPUs: c.GPUs, StartedAt: c.From.UTC().Truncate(time.Second)}
	}
	if c.Leaf != "" && a.Leaf != c.Leaf {
		return refuse(fmt.Errorf("charged to budget %s but the allocation belongs to %s", QuotePrefix(c.Leaf), QuotePrefix(a.Leaf)))
	}
	if a.Leaf == "" {
		return refuse(errors.New("the allocation has no budget: unallocated work is never charged"))
	}
	sp := f.clampInterval(e, c.From, c.To, a.ChargedThrough)
	it := ledgerItem{table: TableAllocs, note: sp.err()}
	if !sp.ok() {
		if sp.lost != nil && sp.cut == nil && sp.to.After(a.ChargedThrough) {
			a.ChargedThrough = sp.to // all of it is older than the ledger keeps: never chargeable
			it.row = &a
		}
		return it
	}
	it.span = &budgets.Span{Leaf: a.Leaf, Start: sp.from, End: sp.to, GPUs: int64(c.GPUs)}
	a.ChargedThrough = sp.to
	a.ChargedGPUSeconds += it.gpuSeconds()
	it.row = &a
	return it
}

// applyDemand records demand samples, each only after the leaf's mark,
// under the ledger rule of beginLedgerEntry.
func (f *FSM) applyDemand(body []byte) any {
	var req DemandRequest
	if err := decode(body, &req); err != nil {
		return err
	}
	e := f.beginLedgerEntry(req.Now)
	return chargeEach(f, req.Samples, func(txn *memdb.Txn, s DemandSample) ledgerItem { return f.planDemand(txn, e, s) },
		func(i int, s DemandSample) string {
			return fmt.Sprintf("demand %d (budget %s)", i, QuotePrefix(s.Leaf))
		})
}

// planDemand works out what a demand sample does, reading the leaf's mark
// through txn; it writes nothing.
func (f *FSM) planDemand(txn *memdb.Txn, e ledgerEntry, s DemandSample) ledgerItem {
	refuse := func(err error) ledgerItem { return ledgerItem{err: err} }
	if s.Leaf == "" {
		return refuse(errors.New("a demand sample needs a budget"))
	}
	if err := e.checkItem("demand", s.Leaf, s.GPUs, s.From, s.To); err != nil {
		return refuse(err)
	}
	raw, err := txn.First(TableDemandMarks, "id", s.Leaf)
	if err != nil {
		return refuse(err)
	}
	mark := DemandMark{Leaf: s.Leaf}
	if raw != nil {
		mark = *raw.(*DemandMark)
	}
	sp := f.clampInterval(e, s.From, s.To, mark.Through)
	it := ledgerItem{table: TableDemandMarks, note: sp.err()}
	if !sp.ok() {
		if sp.cut == nil && sp.to.After(mark.Through) { // an empty first sample starts the leaf's record
			mark.Through = sp.to
			it.row = &mark
		}
		return it
	}
	it.span = &budgets.Span{Leaf: s.Leaf, Start: sp.from, End: sp.to, GPUs: int64(s.GPUs), Demand: true}
	mark.Through = sp.to
	it.row = &mark
	return it
}

func (f *FSM) applyJobUpsert(body []byte) any {
	var req JobUpsertRequest
	return inTxn(f, body, &req, func(txn *memdb.Txn) error { return upsertJobs(txn, req.Jobs) })
}

// inTxn decodes an entry into req and runs apply in one write transaction,
// committed only when apply succeeds: an entry is all or nothing.
func inTxn[R any](f *FSM, body []byte, req *R, apply func(*memdb.Txn) error) any {
	if err := decode(body, req); err != nil {
		return err
	}
	txn := f.db.Txn(true)
	defer txn.Abort()
	if err := apply(txn); err != nil {
		return err
	}
	txn.Commit()
	return nil
}

func upsertJobs(txn *memdb.Txn, jobs []Job) error {
	return upsertAll(txn, TableJobs, jobs, func(_ *memdb.Txn, i int, j *Job) error {
		if j.ID == "" {
			return fmt.Errorf("job %d has no ID; IDs are \"namespace/name\"", i)
		}
		j.SubmittedAt, j.UpdatedAt = j.SubmittedAt.UTC(), j.UpdatedAt.UTC()
		return nil
	})
}

// upsertAll inserts a copy of every item into table through txn, after
// prep has checked and normalized it (prep may read the table through
// txn). The first invalid item refuses the whole entry: upserts are all or
// nothing, and the returned error says which item and why.
func upsertAll[T any](txn *memdb.Txn, table string, items []T, prep func(txn *memdb.Txn, i int, item *T) error) error {
	for i := range items {
		item := items[i] // a fresh copy: a stored object is never mutated after its insert
		if err := prep(txn, i, &item); err != nil {
			return err
		}
		if err := txn.Insert(table, &item); err != nil {
			return err
		}
	}
	return nil
}

// applyJobDelete forgets jobs and everything keyed by them.
func (f *FSM) applyJobDelete(body []byte) any {
	var req JobDeleteRequest
	return inTxn(f, body, &req, func(txn *memdb.Txn) error { return deleteJobs(txn, req.JobIDs) })
}

func deleteJobs(txn *memdb.Txn, ids []string) error {
	for _, id := range ids {
		for _, table := range []string{TableJobs, TablePriorities, TableQueue, TableNotices} {
			if _, err := txn.DeleteAll(table, "id", id); err != nil {
				return err
			}
		}
		if _, err := txn.DeleteAll(TableAllocs, "job", id); err != nil {
			return err
		}
	}
	return nil
}

// applyAllocUpsert keeps the stored charging state: only charges move it.
// Once charged, an allocation also keeps its budget, so its charged
// GPU-seconds always lie in its own leaf's ledger.
func (f *FSM) applyAllocUpsert(body []byte) any {
	var req AllocUpsertRequest
	return inTxn(f, body, &req, func(txn *memdb.Txn) error { return upsertAllocs(txn, req.Allocs) })
}

func upsertAllocs(txn *memdb.Txn, allocs []Alloc) error {
	return upsertAll(txn, TableAllocs, allocs, func(txn *memdb.Txn, i int, a *Alloc) error {
		if a.ID == "" {
			return fmt.Errorf("allocation %d has no ID", i)
		}
		a.StartedAt, a.ProtectedUntil, a.StoppedAt = a.StartedAt.UTC(), a.ProtectedUntil.UTC(), a.StoppedAt.UTC()
		raw, err := txn.First(TableAllocs, "id", a.ID)
		if err != nil {
			return err
		}
		if raw != nil {
			old := raw.(*Alloc)
			a.ChargedThrough, a.ChargedGPUSeconds = old.ChargedThrough, old.ChargedGPUSeconds
			if old.ChargedGPUSeconds > 0 {
				a.Leaf = old.Leaf // its charges are in that budget's ledger: it stays there
			}
		} else {
			a.ChargedThrough, a.ChargedGPUSeconds = a.StartedAt.Truncate(time.Second), 0
		}
		return nil
	})
}

func (f *FSM) applyNodeUpsert(body []byte) any {
	var req NodeUpsertRequest
	return inTxn(f, body, &req, func(txn *memdb.Txn) error { return upsertNodes(txn, req.Nodes) })
}

func upsertNodes(txn *memdb.Txn, nodes []Node) error {
	return upsertAll(txn, TableNodes, nodes, func(_ *memdb.Txn, i int, n *Node) error {
		if n.ID == "" {
			return fmt.Errorf("node %d has no ID", i)
		}
		switch n.Drain {
		case policy.NodeNormal, policy.NodeDraining, policy.NodeDrained, policy.NodeReserved:
		default:
			return fmt.Errorf("node %q: drain state %q, want one of %s, %s, %s, %s", n.ID, n.Drain.String(),
				policy.NodeNormal, policy.NodeDraining, policy.NodeDrained, policy.NodeReserved)
		}
		if err := CheckNodeGPUs(i, n); err != nil {
			return fmt.Errorf("node %s: %w", QuotePrefix(n.ID), err)
		}
		n.Since, n.ReservedUntil = n.Since.UTC(), n.ReservedUntil.UTC()
		return nil
	})
}

func (f *FSM) applyDecisionAppend(body []byte) any {
	var req DecisionAppendRequest
	return inTxn(f, body, &req, func(txn *memdb.Txn) error { return f.appendDecisions(txn, req.Decisions) })
}

// appendDecisions numbers decisions after the newest one and drops the
// oldest beyond the log's bound. Sequence numbers stay contiguous.
func (f *FSM) appendDecisions(txn *memdb.Txn, ds []Decision) error {
	first, last, err := decisionBounds(txn)
	if err != nil {
		return err
	}
	for i := range ds {
		d := ds[i]
		last++
		if first == 0 {
			first = last
		}
		d.Seq, d.At = last, d.At.UTC()
		if err := txn.Insert(TableDecisions, &d); err != nil {
			return err
		}
	}
	for ; first != 0 && last-first+1 > uint64(f.cfg.DecisionLogSize); first++ {
		if _, err := txn.DeleteAll(TableDecisions, "id", first); err != nil {
			return err
		}
	}
	return nil
}

// decisionBounds returns the first and last sequence numbers (0, 0 when empty).
func decisionBounds(txn *memdb.Txn) (uint64, uint64, error) {
	raw, err := txn.First(TableDecisions, "id")
	if err != nil || raw == nil {
		return 0, 0, err
	}
	last, err := txn.Last(TableDecisions, "id")
	if err != nil {
		return 0, 0, err
	}
	return raw.(*Decision).Seq, last.(*Decision).Seq, nil
}

func (f *FSM) applyPriorities(body []byte) any {
	var req PrioritiesRequest
	return inTxn(f, body, &req, func(txn *memdb.Txn) error { return upsertPriorities(txn, req.Priorities) })
}

func upsertPriorities(txn *memdb.Txn, ps []Priority) error {
	return upsertAll(txn, TablePriorities, ps, func(_ *memdb.Txn, i int, p *Priority) error {
		if p.JobID == "" {
			return fmt.Errorf("priority %d has no job ID", i)
		}
		p.WrittenAt = p.WrittenAt.UTC()
		return nil
	})
}

// applyPlanRecord replaces the whole queue with the plan's entries.
func (f *FSM) applyPlanRecord(body []byte) any {
	var req PlanRecordRequest
	return inTxn(f, body, &req, func(txn *memdb.Txn) error { return replaceQueue(txn, req.At, req.Queue) })
}

func replaceQueue(txn *memdb.Txn, at time.Time, queue []QueueEntry) error {
	if _, err := txn.DeleteAll(TableQueue, "id"); err != nil {
		return err
	}
	for i := range queue {
		q := queue[i]
		if q.JobID == "" {
			return fmt.Errorf("queue entry %d has no job ID", i)
		}
		q.PlannedAt = at.UTC()
		if err := txn.Insert(TableQueue, &q); err != nil {
			return err
		}
	}
	return nil
}

func (f *FSM) applyServerUpsert(body []byte) any {
	var req ServerUpsertRequest
	if err := decode(body, &req); err != nil {
		return err
	}
	if req.Server.ID == "" {
		return errors.New("server registration has no ID")
	}
	txn := f.db.Txn(true)
	defer txn.Abort()
	s := req.Server
	if err := txn.Insert(TableServers, &s); err != nil {
		return err
	}
	txn.Commit()
	return nil
}
