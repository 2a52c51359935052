package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/allot-sched/allot/budgets"
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

// spread calls add for each bucket-aligned piece of [from, to), with the
// piece's GPU-seconds.
func spread(from, to time.Time, bucket time.Duration, gpus int, add func(at time.Time, gpuSeconds int64) error) (int64, error) {
	var total int64
	for t := from; t.Before(to); {
		next := t.Truncate(bucket).Add(bucket)
		if next.After(to) {
			next = to
		}
		gs := int64(gpus) * int64(next.Sub(t)/time.Second)
		if gs > 0 {
			if err := add(t, gs); err != nil {
				return total, err
			}
			total += gs
		}
		t = next
	}
	return total, nil
}

// clampInterval cuts [from, to) to whole seconds and to the retention
// window ending at to; reports false when nothing is left.
func (f *FSM) clampInterval(from, to, after time.Time) (time.Time, time.Time, bool) {
	from, to = from.UTC().Truncate(time.Second), to.UTC().Truncate(time.Second)
	if from.Before(after) {
		from = after
	}
	if horizon := to.Add(-f.cfg.Retention); from.Before(horizon) {
		from = horizon
	}
	return from, to, from.Before(to)
}

// applyCharge charges each allocation for the part of its interval after its
// ChargedThrough, so a charge sent twice counts once.
func (f *FSM) applyCharge(body []byte) any {
	var req ChargeRequest
	if err := decode(body, &req); err != nil {
		return err
	}
	return chargeEach(f, req.Charges, f.chargeOne, func(i int, c Charge) string {
		return fmt.Sprintf("charge %d (alloc %q)", i, c.Alloc)
	})
}

// chargeEach applies one to every item of a charge or demand entry in a
// single transaction. Unlike an upsert, an invalid item does not refuse the
// entry: it counts as skipped, its error (prefixed with name(i, item)) joins
// the result's, and the other items still apply.
func chargeEach[T any](f *FSM, items []T, one func(*memdb.Txn, T) (int64, error), name func(int, T) string) ChargeResult {
	txn := f.db.Txn(true)
	defer txn.Abort()
	var res ChargeResult
	var errs []error
	for i, it := range items {
		n, err := one(txn, it)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name(i, it), err))
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

func (f *FSM) chargeOne(txn *memdb.Txn, c Charge) (int64, error) {
	if c.Alloc == "" || c.GPUs < 0 {
		return 0, errors.New("a charge needs an allocation ID and GPUs >= 0")
	}
	raw, err := txn.First(TableAllocs, "id", c.Alloc)
	if err != nil {
		return 0, err
	}
	var a Alloc
	if raw != nil {
		a = *raw.(*Alloc)
	} else {
		a = Alloc{ID: c.Alloc, Leaf: c.Leaf, GPUs: c.GPUs, StartedAt: c.From.UTC().Truncate(time.Second)}
	}
	if c.Leaf != "" && a.Leaf != c.Leaf {
		return 0, fmt.Errorf("charged to budget %q but the allocation belongs to %q", c.Leaf, a.Leaf)
	}
	if a.Leaf == "" {
		return 0, errors.New("the allocation has no budget: unallocated work is never charged")
	}
	from, to, ok := f.clampInterval(c.From, c.To, a.ChargedThrough)
	if !ok {
		return 0, nil
	}
	n, err := spread(from, to, f.cfg.Bucket, c.GPUs, func(at time.Time, gs int64) error {
		return f.ledger.Charge(a.Leaf, at, gs)
	})
	a.ChargedThrough = to
	a.ChargedGPUSeconds += n
	if ierr := txn.Insert(TableAllocs, &a); ierr != nil {
		return n, ierr
	}
	return n, err
}

// applyDemand records demand samples, each only after the leaf's mark.
func (f *FSM) applyDemand(body []byte) any {
	var req DemandRequest
	if err := decode(body, &req); err != nil {
		return err
	}
	return chargeEach(f, req.Samples, f.demandOne, func(i int, s DemandSample) string {
		return fmt.Sprintf("demand %d (budget %q)", i, s.Leaf)
	})
}

func (f *FSM) demandOne(txn *memdb.Txn, s DemandSample) (int64, error) {
	if s.Leaf == "" || s.GPUs < 0 {
		return 0, errors.New("a demand sample needs a budget and GPUs >= 0")
	}
	raw, err := txn.First(TableDemandMarks, "id", s.Leaf)
	if err != nil {
		return 0, err
	}
	mark := DemandMark{Leaf: s.Leaf}
	if raw != nil {
		mark = *raw.(*DemandMark)
	}
	from, to, ok := f.clampInterval(s.From, s.To, mark.Through)
	if !ok {
		if to.After(mark.Through) { // an empty first sample starts the leaf's record
			mark.Through = to
			return 0, txn.Insert(TableDemandMarks, &mark)
		}
		return 0, nil
	}
	n, err := spread(from, to, f.cfg.Bucket, s.GPUs, func(at time.Time, gs int64) error {
		return f.ledger.AddDemand(s.Leaf, at, gs)
	})
	mark.Through = to
	if ierr := txn.Insert(TableDemandMarks, &mark); ierr != nil {
		return n, ierr
	}
	return n, err
}

func (f *FSM) applyJobUpsert(body []byte) any {
	var req JobUpsertRequest
	if err := decode(body, &req); err != nil {
		return err
	}
	return upsertAll(f, TableJobs, req.Jobs, func(_ *memdb.Txn, i int, j *Job) error {
		if j.ID == "" {
			return fmt.Errorf("job %d has no ID; IDs are \"namespace/name\"", i)
		}
		j.SubmittedAt, j.UpdatedAt = j.SubmittedAt.UTC(), j.UpdatedAt.UTC()
		return nil
	})
}

// upsertAll inserts a copy of every item into table in one transaction,
// after prep has checked and normalized it (prep may read the table through
// txn). The first invalid item refuses the whole entry: upserts are all or
// nothing, and the returned error says which item and why.
func upsertAll[T any](f *FSM, table string, items []T, prep func(txn *memdb.Txn, i int, item *T) error) error {
	txn := f.db.Txn(true)
	defer txn.Abort()
	for i := range items {
		item := items[i] // a fresh copy: a stored object is never mutated after its insert
		if err := prep(txn, i, &item); err != nil {
			return err
		}
		if err := txn.Insert(table, &item); err != nil {
			return err
		}
	}
	txn.Commit()
	return nil
}

// applyJobDelete forgets jobs and everything keyed by them.
func (f *FSM) applyJobDelete(body []byte) any {
	var req JobDeleteRequest
	if err := decode(body, &req); err != nil {
		return err
	}
	txn := f.db.Txn(true)
	defer txn.Abort()
	for _, id := range req.JobIDs {
		for _, table := range []string{TableJobs, TablePriorities, TableQueue} {
			if _, err := txn.DeleteAll(table, "id", id); err != nil {
				return err
			}
		}
		if _, err := txn.DeleteAll(TableAllocs, "job", id); err != nil {
			return err
		}
	}
	txn.Commit()
	return nil
}

// applyAllocUpsert keeps the stored charging state: only charges move it.
// Once charged, an allocation also keeps its budget, so its charged
// GPU-seconds always lie in its own leaf's ledger.
func (f *FSM) applyAllocUpsert(body []byte) any {
	var req AllocUpsertRequest
	if err := decode(body, &req); err != nil {
		return err
	}
	return upsertAll(f, TableAllocs, req.Allocs, func(txn *memdb.Txn, i int, a *Alloc) error {
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
	if err := decode(body, &req); err != nil {
		return err
	}
	return upsertAll(f, TableNodes, req.Nodes, func(_ *memdb.Txn, i int, n *Node) error {
		if n.ID == "" {
			return fmt.Errorf("node %d has no ID", i)
		}
		switch n.Drain {
		case NodeActive, NodeDraining, NodeDrained, NodeReserved:
		default:
			return fmt.Errorf("node %q: drain state %q, want one of %s, %s, %s, %s", n.ID, n.Drain,
				NodeActive, NodeDraining, NodeDrained, NodeReserved)
		}
		n.Since, n.ReservedUntil = n.Since.UTC(), n.ReservedUntil.UTC()
		return nil
	})
}

func (f *FSM) applyDecisionAppend(body []byte) any {
	var req DecisionAppendRequest
	if err := decode(body, &req); err != nil {
		return err
	}
	txn := f.db.Txn(true)
	defer txn.Abort()
	if err := f.appendDecisions(txn, req.Decisions); err != nil {
		return err
	}
	txn.Commit()
	return nil
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
	if err := decode(body, &req); err != nil {
		return err
	}
	return upsertAll(f, TablePriorities, req.Priorities, func(_ *memdb.Txn, i int, p *Priority) error {
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
	if err := decode(body, &req); err != nil {
		return err
	}
	txn := f.db.Txn(true)
	defer txn.Abort()
	if _, err := txn.DeleteAll(TableQueue, "id"); err != nil {
		return err
	}
	for i := range req.Queue {
		q := req.Queue[i]
		if q.JobID == "" {
			return fmt.Errorf("queue entry %d has no job ID", i)
		}
		q.PlannedAt = req.At.UTC()
		if err := txn.Insert(TableQueue, &q); err != nil {
			return err
		}
	}
	txn.Commit()
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
