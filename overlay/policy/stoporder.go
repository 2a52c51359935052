package policy

import "slices"

// orderStops lists the plan's stops lowest level first: by the priority
// each stopped job is written at in this plan (its victim level), or the
// one it has when the plan does not write it, ties in the order the rules
// made them.
//
// Why: Nomad places a stopped job's replacement as soon as the stop lands,
// at the job's priority, preempting anything a preemption gap below it
// (nomad-facts b; the simulator's -eval-order), and the adapter applies
// the stops one after another after the plan's writes. A victim the plan
// lowered for time slicing is within reach from its write until its own
// stop. Stopped in the order the rules made them, a reservation's victim
// (stopped before time slicing ran) had its replacement placed on the GPUs
// of a victim lowered for another job and not stopped yet: Nomad preempted
// that victim for the replacement, which the job it was lowered for then
// preempted in turn (TestEvalOrder_RunningAllocatedWorkOutOfNomadsReach,
// 1 of 14,988 preemptions). Stopped lowest first, every victim a
// replacement could reach is stopped before that replacement exists, and a
// replacement cannot reach a job stopped after it, which sits at its level
// or above. The adapter keeps the order: the stops of one level go
// together, and the next level's start when they are done
// (reconcile.OpsFromPlan gives each level its own nomad.Op Step).
func (d *Decider) orderStops() {
	st := d.plan.Stops
	for k := range st {
		st[k].Level = d.stopLevel(&st[k])
	}
	slices.SortStableFunc(st, func(a, b StopJob) int { return a.Level - b.Level })
}

// stopLevel is the priority s's job is at when its stop lands.
func (d *Decider) stopLevel(s *StopJob) int {
	for i := range d.plan.SetPriorities {
		if w := &d.plan.SetPriorities[i]; w.Job == s.Job && w.Namespace == s.Namespace {
			return w.To
		}
	}
	if j, ok := d.jobIndex(s.Job); ok {
		return d.jp[j].Priority
	}
	return 0
}
