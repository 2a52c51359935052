package budgets

import (
	"math"
	"time"
)

// Delivery is one budget's owed and delivered GPU time over a report window.
type Delivery struct {
	Path string
	// Owed is Σ over hours of min(effective share × capacity × hour, demand
	// that hour), in GPU-seconds; for an internal node, its children's sum.
	Owed int64
	// Delivered is the GPU-seconds charged over the window, uncapped.
	Delivered int64
	// Credited is Σ over hours of min(delivered that hour, owed that hour):
	// delivery counts toward what was owed only up to what was owed in the
	// same hour, so an hour of surplus does not hide an hour of shortfall.
	Credited int64
	// Ratio is the published "received X% of owed" figure: Credited / Owed,
	// 1 when nothing was owed. It never exceeds 1.
	Ratio float64
}

// OwedReport returns, for every node of t in pre-order, the GPU time owed and
// delivered in [from, to) on a cluster of capacityGPUs GPUs.
//
// The window is cut at UTC hour boundaries (a partial first or last hour is
// its own period, with capacity prorated to its length). For each leaf and
// period h: owed_h = min(round(Effective × capacityGPUs × seconds(h)),
// demand_h) and delivered_h is the leaf's charge, where a bucket belongs to
// the period its start lies in (as for Ledger.Usage). Internal nodes sum
// their children's Owed, Delivered and Credited, and take the ratio of the
// sums. Cost: O(leaves × hours) window sums.
func OwedReport(t *Tree, l *Ledger, capacityGPUs int, from, to time.Time) []Delivery {
	nodes := t.Nodes()
	out := make([]Delivery, len(nodes))
	for i, n := range nodes {
		out[i].Path = n.Path
	}
	periods := hourPeriods(from, to)
	w := l.Windows(periods)
	delivered := make([]int64, len(periods))
	demand := make([]int64, len(periods))
	for _, leaf := range t.Leaves() {
		d := &out[leaf.Index]
		clear(delivered)
		clear(demand)
		l.AddWindowSums(leaf.Path, w, false, delivered)
		l.AddWindowSums(leaf.Path, w, true, demand)
		for i, p := range periods {
			capacity := leaf.Effective * float64(max(capacityGPUs, 0)) * p[1].Sub(p[0]).Seconds()
			owed := min(int64(math.Round(capacity)), demand[i])
			d.Owed += owed
			d.Delivered += delivered[i]
			d.Credited += min(delivered[i], owed)
		}
	}
	for i := len(nodes) - 1; i > 0; i-- {
		p := &out[nodes[i].Parent.Index]
		p.Owed += out[i].Owed
		p.Delivered += out[i].Delivered
		p.Credited += out[i].Credited
	}
	for i := range out {
		out[i].Ratio = 1
		if out[i].Owed > 0 {
			out[i].Ratio = float64(out[i].Credited) / float64(out[i].Owed)
		}
	}
	return out
}

// hourPeriods cuts [from, to) at UTC hour boundaries.
func hourPeriods(from, to time.Time) [][2]time.Time {
	if !from.Before(to) {
		return nil
	}
	var out [][2]time.Time
	for start := from; start.Before(to); {
		end := start.Truncate(time.Hour).Add(time.Hour)
		if end.After(to) {
			end = to
		}
		out = append(out, [2]time.Time{start, end})
		start = end
	}
	return out
}
