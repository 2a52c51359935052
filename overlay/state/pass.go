package state

import (
	"errors"
	"fmt"
	"time"

	"github.com/allot-sched/allot/budgets"
	memdb "github.com/hashicorp/go-memdb"
)

// PassRequest is one reconcile pass, recorded as one entry: the rows the
// pass observed and wrote, the charges and demand due once they are in,
// the decisions it made and the drain changes the leader worked out. The
// FSM applies it in one transaction, all or nothing: an invalid item
// anywhere refuses the whole entry, the ledger included.
type PassRequest struct {
	// At is the leader's clock at the pass: the queue's PlannedAt, the
	// drain changes' time and the ledger entry's Now (see ChargeRequest).
	At          time.Time
	Jobs        []Job      `json:",omitempty"`
	DeletedJobs []string   `json:",omitempty"`
	Allocs      []Alloc    `json:",omitempty"`
	Nodes       []Node     `json:",omitempty"`
	Priorities  []Priority `json:",omitempty"`
	// ReplaceQueue replaces the stored queue with Queue (empty: cleared);
	// false keeps the last plan's queue.
	ReplaceQueue bool         `json:",omitempty"`
	Queue        []QueueEntry `json:",omitempty"`
	// Charges and Demand are applied after the rows above, under the
	// ledger rule of beginLedgerEntry; unlike a charge entry's, an item
	// the ledger refuses refuses the pass.
	Charges   []Charge       `json:",omitempty"`
	Demand    []DemandSample `json:",omitempty"`
	Decisions []Decision     `json:",omitempty"`
	Drains    []DrainChange  `json:",omitempty"`
	// ReplaceNotices replaces the checkpoint notices in flight with
	// Notices (empty: none); false keeps them (notice.go). Entries written
	// before notices were replicated have neither.
	ReplaceNotices bool     `json:",omitempty"`
	Notices        []Notice `json:",omitempty"`
}

// Empty reports whether the pass records nothing.
func (r *PassRequest) Empty() bool {
	return len(r.Jobs) == 0 && len(r.DeletedJobs) == 0 && len(r.Allocs) == 0 && len(r.Nodes) == 0 &&
		len(r.Priorities) == 0 && !r.ReplaceQueue && len(r.Charges) == 0 && len(r.Demand) == 0 &&
		len(r.Decisions) == 0 && len(r.Drains) == 0 && !r.ReplaceNotices
}

// PassResult is what Apply returns for a pass it applied.
type PassResult struct {
	GPUSeconds int64 // charged by the pass
	// Notes joins what the ledger rule left for later (a charge cut at the
	// entry's bound after an outage) or never counts (a part older than
	// the ledger keeps); nil when none.
	Notes error
}

// applyPass applies a pass entry in one memdb transaction. The ledger is
// not in memdb: every change to it is worked out and checked first, and
// written last, with WriteSpans (all or nothing); the Advance the entry's
// Now makes is undone when the entry is refused.
func (f *FSM) applyPass(body []byte) any {
	var req PassRequest
	if err := decode(body, &req); err != nil {
		return err
	}
	txn := f.db.Txn(true)
	defer txn.Abort()
	mark := f.ledger.Mark()
	res, err := f.applyPassIn(txn, &req)
	if err != nil {
		if rerr := f.ledger.Rewind(mark); rerr != nil {
			return errors.Join(err, rerr) // unreachable: nothing is written before the last step
		}
		return err
	}
	txn.Commit()
	return res
}

func (f *FSM) applyPassIn(txn *memdb.Txn, req *PassRequest) (PassResult, error) {
	var res PassResult
	if err := applyPassRows(txn, req); err != nil {
		return res, err
	}
	spans, res, err := f.planPassLedger(txn, req)
	if err != nil {
		return res, err
	}
	if err := f.appendDecisions(txn, req.Decisions); err != nil {
		return res, err
	}
	if len(req.Drains) > 0 {
		if err := f.storeDrains(txn, req.At, req.Drains); err != nil {
			return res, err
		}
	}
	if err := f.ledger.WriteSpans(spans); err != nil {
		return res, fmt.Errorf("ledger: %w", err)
	}
	return res, nil
}

// applyPassRows applies the rows of a pass: what Preview shows.
func applyPassRows(txn *memdb.Txn, req *PassRequest) error {
	steps := []struct {
		what  string
		apply func() error
	}{
		{"jobs", func() error { return upsertJobs(txn, req.Jobs) }},
		{"allocations", func() error { return upsertAllocs(txn, req.Allocs) }},
		{"deleted jobs", func() error { return deleteJobs(txn, req.DeletedJobs) }},
		{"nodes", func() error { return upsertNodes(txn, req.Nodes) }},
		{"priorities", func() error { return upsertPriorities(txn, req.Priorities) }},
		{"queue", func() error {
			if !req.ReplaceQueue {
				return nil
			}
			return replaceQueue(txn, req.At, req.Queue)
		}},
		{"notices", func() error {
			if !req.ReplaceNotices {
				return nil
			}
			return replaceNotices(txn, req.Notices)
		}},
	}
	for _, st := range steps {
		if err := st.apply(); err != nil {
			return fmt.Errorf("%s: %w", st.what, err)
		}
	}
	return nil
}

// planPassLedger works out the pass's charges and demand, records how far
// each got in txn, and returns the spans to write.
func (f *FSM) planPassLedger(txn *memdb.Txn, req *PassRequest) ([]budgets.Span, PassResult, error) {
	var res PassResult
	if len(req.Charges) == 0 && len(req.Demand) == 0 {
		return nil, res, nil
	}
	e := f.beginLedgerEntry(req.At)
	items := make([]ledgerItem, 0, len(req.Charges)+len(req.Demand))
	names := make([]string, 0, cap(items))
	for i, c := range req.Charges {
		items = append(items, f.planCharge(txn, e, c))
		names = append(names, fmt.Sprintf("charge %d (alloc %s)", i, QuotePrefix(c.Alloc)))
		if err := f.recordItem(txn, &items[len(items)-1]); err != nil {
			return nil, res, fmt.Errorf("%s: %w", names[len(names)-1], err)
		}
	}
	for i, s := range req.Demand {
		items = append(items, f.planDemand(txn, e, s))
		names = append(names, fmt.Sprintf("demand %d (budget %s)", i, QuotePrefix(s.Leaf)))
		if err := f.recordItem(txn, &items[len(items)-1]); err != nil {
			return nil, res, fmt.Errorf("%s: %w", names[len(names)-1], err)
		}
	}
	var spans []budgets.Span
	var notes []error
	for i := range items {
		if items[i].span != nil {
			spans = append(spans, *items[i].span)
			if !items[i].span.Demand {
				res.GPUSeconds += items[i].gpuSeconds()
			}
		}
		if items[i].note != nil {
			notes = append(notes, fmt.Errorf("%s: %w", names[i], items[i].note))
		}
	}
	res.Notes = errors.Join(notes...)
	return spans, res, nil
}

// recordItem refuses a refused item, else stores how far it got (so that a
// later item of the same allocation or leaf starts there).
func (f *FSM) recordItem(txn *memdb.Txn, it *ledgerItem) error {
	if it.err != nil {
		return it.err
	}
	if it.row == nil {
		return nil
	}
	return txn.Insert(it.table, it.row)
}

// Preview calls read with a view of the state as it would be once the
// rows of req (jobs, allocations, deleted jobs, nodes, priorities, queue,
// notices) are applied, changing nothing: the leader computes a pass's
// charges and demand on it (ChargesDue, DemandDue), so that allocations the pass
// records are charged by the same entry. read must not keep the view.
func (f *FSM) Preview(req *PassRequest, read func(*View)) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	txn := f.db.Txn(true)
	defer txn.Abort()
	if err := applyPassRows(txn, req); err != nil {
		return err
	}
	read(&View{txn: txn})
	return nil
}
