package server

import (
	"net/http"
	"sort"

	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/overlay/state"
)

// runningByNode lists the running managed allocations of each node, oldest
// first.
func runningByNode(v *state.View) map[string][]client.NodeAlloc {
	out := map[string][]client.NodeAlloc{}
	for _, a := range v.Allocs() {
		if !a.Running() || a.NodeID == "" {
			continue
		}
		out[a.NodeID] = append(out[a.NodeID], client.NodeAlloc{ID: a.ID, JobID: a.JobID, Budget: a.Leaf, GPUs: a.GPUs,
			StartedAt: a.StartedAt, ProtectedUntil: a.ProtectedUntil})
	}
	for _, as := range out {
		sort.SliceStable(as, func(i, j int) bool { return as[i].StartedAt.Before(as[j].StartedAt) })
	}
	return out
}

// filterDecisions returns up to limit of the newest decisions that match
// the query's kind, job, node and budget (a budget matches the decisions
// about jobs of it or of any budget under it), oldest first.
func filterDecisions(r *http.Request, v *state.View, limit int) []*state.Decision {
	q := r.URL.Query()
	kind, job, node, budget := q.Get("kind"), q.Get("job"), q.Get("node"), q.Get("budget")
	if kind == "" && job == "" && node == "" && budget == "" {
		return v.Decisions(limit)
	}
	var out []*state.Decision
	for _, d := range v.Decisions(0) {
		if (kind != "" && d.Kind != kind) || (job != "" && d.JobID != job) || (node != "" && d.NodeID != node) {
			continue
		}
		if budget != "" {
			j := v.Job(d.JobID)
			if j == nil || !hasBudgetPrefix(j.Contract.Budget, budget) {
				continue
			}
		}
		out = append(out, d)
	}
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out
}
