package nomad

import (
	"slices"

	"github.com/allot-sched/allot/overlay/policy"
)

// appliedMemory is the policy memory the next pass passes back in
// Snapshot.Victims and Snapshot.Issued: the plan's held victims and its
// settling stops and evaluations, less what this plan issued and Nomad did
// not accept (or the applier never tried). A stop that failed is no hold
// and nothing settles for it: the next decision chooses again; an
// evaluation that failed is issued again at once.
func appliedMemory(plan *policy.Plan, results []Outcome) ([]policy.Victim, []policy.Issued) {
	stopped := map[string]bool{}   // job + first allocation of each stop that went through
	evaluated := map[string]bool{} // jobs whose evaluation went through
	for _, o := range results {
		if o.Err != nil {
			continue
		}
		switch o.Op.Kind {
		case OpStop:
			if len(o.Op.Allocs) > 0 {
				stopped[PolicyJobID(o.Op.Job)+"\x00"+o.Op.Allocs[0]] = true
				stopped[PolicyJobID(o.Op.Job)] = true
			}
		case OpEvaluate:
			evaluated[PolicyJobID(o.Op.Job)] = true
		}
	}
	var victims []policy.Victim
	for _, v := range plan.Victims {
		if !v.Since.Equal(plan.Now) || stopped[policyID(v.Job)] {
			victims = append(victims, v)
		}
	}
	var issued []policy.Issued
	for _, is := range plan.Issued {
		ok := !is.At.Equal(plan.Now) // carried from an earlier plan: it went through then
		switch {
		case ok:
		case is.Kind == policy.IssuedStop && len(is.Allocs) > 0:
			ok = stopped[policyID(is.Job)+"\x00"+is.Allocs[0]]
		case is.Kind == policy.IssuedEvaluate:
			ok = evaluated[policyID(is.Job)]
		}
		if ok {
			is.Allocs = slices.Clone(is.Allocs)
			issued = append(issued, is)
		}
	}
	return victims, issued
}

// policyID normalizes a plan's job ID ("namespace/id") the way the ops
// built from it name the job.
func policyID(id string) string { return PolicyJobID(jobKeyOf("", id)) }

// cloneNotices copies a plan's checkpoint notices for the next pass (the
// plan's slices are the decider's, reused by its next decision). A notice
// is carried whatever its signal's outcome: a job whose signal failed is
// still stopped at the deadline, never kept from being stopped, and never
// stopped before it (docs/design.md, "Notice before a stop").
func cloneNotices(ns []policy.Notice) []policy.Notice {
	out := make([]policy.Notice, len(ns))
	for i, n := range ns {
		n.Allocs = slices.Clone(n.Allocs)
		out[i] = n
	}
	return out
}
