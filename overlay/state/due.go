package state

import "time"

// ChargesDue returns the charge for each allocation with a budget whose
// charging lags behind now (or behind its stop), none starting before since
// (the oldest time an entry may charge: LedgerWindow(now).From; the ledger
// keeps nothing older, so that part is never charged). The leader sends
// them in every pass; the FSM charges only what is new, so sending a charge
// twice is harmless.
func ChargesDue(v *View, now, since time.Time) []Charge {
	var out []Charge
	for _, a := range v.Allocs() {
		if a.Leaf == "" || a.GPUs <= 0 {
			continue
		}
		end := now
		if !a.Running() && a.StoppedAt.Before(end) {
			end = a.StoppedAt
		}
		from := a.ChargedThrough
		if from.Before(since) {
			from = since
		}
		if from.Before(end.Truncate(time.Second)) {
			out = append(out, Charge{Alloc: a.ID, Leaf: a.Leaf, GPUs: a.GPUs, From: from, To: end})
		}
	}
	return out
}

// DemandDue returns, per budget leaf, the GPUs of its allocated jobs
// (running and pending) over the time since the leaf's last sample, at most
// maxGap back: the demand of an interval nobody observed is assumed equal
// to what is seen now only for that long. A leaf's first sample is empty
// (From = To = now): it only starts the leaf's record.
func DemandDue(v *View, now time.Time, maxGap time.Duration) []DemandSample {
	b := v.Budgets()
	if b == nil {
		return nil
	}
	tree := b.Tree()
	gpus := map[string]int{}
	var leaves []string
	for _, j := range v.Jobs() {
		c := j.Contract
		if c.Budget == "" || c.MinRuntime <= 0 || j.GPUs <= 0 || !tree.IsLeaf(c.Budget) {
			continue
		}
		if _, ok := gpus[c.Budget]; !ok {
			leaves = append(leaves, c.Budget)
		}
		gpus[c.Budget] += j.GPUs
	}
	out := make([]DemandSample, 0, len(leaves))
	for _, leaf := range leaves {
		from := now // first sample: nothing before now was observed
		if m := first[DemandMark](v, TableDemandMarks, leaf); m != nil {
			from = m.Through
			if gap := now.Add(-maxGap); from.Before(gap) {
				from = gap
			}
		}
		out = append(out, DemandSample{Leaf: leaf, GPUs: gpus[leaf], From: from, To: now})
	}
	return out
}
