package budgets

import (
	"math"
	"time"
)

// Delivery is one budget's owed and delivered GPU time over a report window,
// read two ways. Ratio is DESIGN.md's headline figure (delivered / owed, per
// leaf and rolled up the tree), what `allot usage`, the web UI and `allot sim`
// all print; CreditedRatio is the stricter same-hour reading, where an hour's
// surplus cannot pay for another hour's shortfall. A budget whose jobs are
// larger than its hourly share (a 3% team on 1,024 GPUs owed 30 GPUs an hour,
// training on 32) runs in turns under fair share's 7-day lookback: over the
// window it can get all it was owed, hour by hour never more than the share
// of the hours it ran, so only the window reading can reach 1 for it.
type Delivery struct {
	Path string
	// Owed is Σ over hours of min(effective share × capacity × hour, demand
	// that hour), in GPU-seconds; for an internal node, its children's sum.
	Owed int64
	// Delivered is the GPU-seconds charged over the window, uncapped.
	Delivered int64
	// Credited is Σ over hours of min(delivered that hour, owed that hour).
	Credited int64
	// Ratio is Delivered / Owed, 1 when nothing was owed; above 1 for a
	// budget that got more than it was owed.
	Ratio float64
	// CreditedRatio is Credited / Owed, 1 when nothing was owed; at most 1.
	CreditedRatio float64
}

// ShareCapacity is the GPU-seconds a budget of the given effective share is
// owed at most over d on a cluster of capacityGPUs GPUs, rounded to the
// second.
func ShareCapacity(effective float64, capacityGPUs int, d time.Duration) int64 {
	return int64(math.Round(effective * float64(max(capacityGPUs, 0)) * d.Seconds()))
}

// Add counts one period (an hour, or a partial one) of a leaf: capacity is
// its ShareCapacity over the period, demand and delivered its GPU-seconds.
func (d *Delivery) Add(capacity, demand, delivered int64) {
	owed := min(capacity, demand)
	d.Owed += owed
	d.Delivered += delivered
	d.Credited += min(delivered, owed)
}

// Sum adds another node's totals (a child into its parent).
func (d *Delivery) Sum(o Delivery) {
	d.Owed += o.Owed
	d.Delivered += o.Delivered
	d.Credited += o.Credited
}

// SetRatios sets Ratio and CreditedRatio from the totals.
func (d *Delivery) SetRatios() {
	d.Ratio, d.CreditedRatio = 1, 1
	if d.Owed > 0 {
		d.Ratio = float64(d.Delivered) / float64(d.Owed)
		d.CreditedRatio = float64(d.Credited) / float64(d.Owed)
	}
}

// OwedReport returns, for every node of t in pre-order, the GPU time owed and
// delivered in [from, to) on a cluster of capacityGPUs GPUs.
//
// The window is cut at UTC hour boundaries (a partial first or last hour is
// its own period, with capacity prorated to its length). For each leaf and
// period h: owed_h = min(round(Effective × capacityGPUs × seconds(h)),
// demand_h) and delivered_h is the leaf's charge, where a bucket belongs to
// the period its start lies in (as for Ledger.Usage). Internal nodes sum
// their children's Owed, Delivered and Credited, and take the ratios of the
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
			d.Add(ShareCapacity(leaf.Effective, capacityGPUs, p[1].Sub(p[0])), demand[i], delivered[i])
		}
	}
	for i := len(nodes) - 1; i > 0; i-- {
		out[nodes[i].Parent.Index].Sum(out[i])
	}
	for i := range out {
		out[i].SetRatios()
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
