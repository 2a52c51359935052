package nomad

import (
	"context"
	"fmt"

	"github.com/hashicorp/nomad/api"
)

// resync rebuilds the view from the list endpoints and returns the index the
// event stream must resume from: the lowest index of the lists, so that no
// change after any of them is skipped (replays are harmless, see View).
// Jobs whose JobModifyIndex is unchanged come from the job cache (the view);
// the others are read in full, for their task groups and meta.
func (w *Watcher) resync(ctx context.Context) (uint64, error) {
	q := func() *api.QueryOptions {
		return (&api.QueryOptions{Namespace: w.cfg.Namespace}).WithContext(ctx)
	}
	stubs, jm, err := w.client.Jobs().List(withParams(q(), "meta", "true"))
	if err != nil {
		return 0, fmt.Errorf("list jobs: %w", err)
	}
	jobs := make([]*Job, 0, len(stubs))
	byKey := make(map[JobKey]*Job, len(stubs))
	for _, s := range stubs {
		j, err := w.jobFromStub(ctx, s)
		if err != nil {
			return 0, err
		}
		if j == nil {
			continue // purged between the list and the read
		}
		jobs = append(jobs, j)
		byKey[j.Key] = j
	}
	astubs, am, err := w.client.Allocations().List(withParams(q(), "resources", "true"))
	if err != nil {
		return 0, fmt.Errorf("list allocations: %w", err)
	}
	allocs := make([]*Alloc, 0, len(astubs))
	for _, s := range astubs {
		a := allocFromStub(s, byKey[JobKey{Namespace: orDefault(s.Namespace), ID: s.JobID}])
		allocs = append(allocs, &a)
	}
	nodes, nm, err := w.listNodes(ctx)
	if err != nil {
		return 0, err
	}
	bq := q()
	bq.Filter = `Status == "blocked" or Status == "pending"`
	evals, em, err := w.client.Evaluations().List(bq)
	if err != nil {
		return 0, fmt.Errorf("list blocked and pending evaluations: %w", err)
	}
	var blocked []*BlockedEval
	var pending []*pendingEval
	for _, e := range evals {
		switch {
		case e.JobID == "":
		case e.Status == "blocked":
			b := blockedFromEval(e)
			blocked = append(blocked, &b)
		case inFlight(e):
			pending = append(pending, pendingFromEval(e))
		}
	}
	index := min(jm.LastIndex, am.LastIndex, nm.LastIndex, em.LastIndex)
	w.view.replace(jobs, allocs, nodes, blocked, pending, em.LastIndex, index)
	w.resyncs.Add(1)
	w.log.Debug("view rebuilt from list endpoints", "jobs", len(jobs), "allocs", len(allocs),
		"nodes", len(nodes), "blocked", len(blocked), "evaluating", len(pending), "index", index)
	return index, nil
}

// jobFromStub reuses the cached job when its definition did not change.
func (w *Watcher) jobFromStub(ctx context.Context, s *api.JobListStub) (*Job, error) {
	key := JobKey{Namespace: orDefault(s.Namespace), ID: s.ID}
	if c, ok := w.view.Job(key); ok && c.JobModifyIndex == s.JobModifyIndex {
		c.Status, c.Stop, c.Priority, c.ModifyIndex = s.Status, s.Stop, s.Priority, s.ModifyIndex
		return &c, nil
	}
	j, _, err := w.client.Jobs().Info(s.ID, (&api.QueryOptions{Namespace: key.Namespace}).WithContext(ctx))
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read job %s: %w", key, err)
	}
	out := jobFromAPI(j)
	return &out, nil
}

// listNodes lists nodes with their resources; draining nodes are read in
// full, since only the node itself carries the drain strategy's deadline.
func (w *Watcher) listNodes(ctx context.Context) ([]*Node, *api.QueryMeta, error) {
	q := withParams((&api.QueryOptions{}).WithContext(ctx), "resources", "true")
	stubs, qm, err := w.client.Nodes().List(q)
	if err != nil {
		return nil, nil, fmt.Errorf("list nodes: %w", err)
	}
	out := make([]*Node, 0, len(stubs))
	for _, s := range stubs {
		n := nodeFromStub(s)
		if s.Drain {
			full, _, err := w.client.Nodes().Info(s.ID, (&api.QueryOptions{}).WithContext(ctx))
			if err != nil && !isNotFound(err) {
				return nil, nil, fmt.Errorf("read draining node %s: %w", s.ID, err)
			}
			if full != nil {
				n = nodeFromAPI(full)
			}
		}
		out = append(out, &n)
	}
	return out, qm, nil
}

func withParams(q *api.QueryOptions, kv ...string) *api.QueryOptions {
	if q.Params == nil {
		q.Params = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Params[kv[i]] = kv[i+1]
	}
	return q
}
