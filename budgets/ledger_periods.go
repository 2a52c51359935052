package budgets

import "time"

// Windows is a list of report periods turned into bucket ranges once, so
// that summing them for many leaves costs only the block prefix reads: a
// report over 1,000 leaves and 336 hours would otherwise redo the same time
// arithmetic and map lookup 336,000 times. Valid for the ledger that made it
// until its next Prune.
type Windows struct {
	ab [][2]int64
}

// Len returns the number of periods.
func (w Windows) Len() int { return len(w.ab) }

// Windows returns periods (each [from, to)) as bucket ranges: a bucket
// belongs to a period when its start lies in it, as for Usage.
func (l *Ledger) Windows(periods [][2]time.Time) Windows {
	w := Windows{ab: make([][2]int64, len(periods))}
	for i, p := range periods {
		a, b := l.window(p[0], p[1])
		w.ab[i] = [2]int64{a, b}
	}
	return w
}

// AddWindowSums adds leaf's charged GPU-seconds (its demand when demand is
// true) in each period of w to dst[i]; dst must have w.Len() elements. Each
// dst[i] gains exactly Usage (or Demand) over period i.
func (l *Ledger) AddWindowSums(leaf string, w Windows, demand bool, dst []int64) {
	ls := l.leaves[leaf]
	if ls == nil {
		return
	}
	s := ls.pick(demand)
	if s == nil || s.empty() {
		return
	}
	for i, ab := range w.ab {
		if ab[0] < ab[1] {
			dst[i] += s.sum(ab[0], ab[1], l.nb)
		}
	}
}
