package policy

import (
	"math"
	"time"
)

// boundWindow is the window the loss bound (rule 5, sliceLossLimit)
// measures job j's promise by: its protected window, min(Protected,
// RuntimeCap), and never less than ResumeLoss. A stop of resumable work
// loses up to ResumeLoss of each GPU it frees (what it ran since its last
// checkpoint), so a bound of a shorter window (a debug job's 5-14
// minutes) refused every resumable victim of its size, however cheap the
// stop, and the job waited out SliceLossMaxWait whenever a window end was
// in sight, though no window end makes a resumable victim cheaper.
func (d *Decider) boundWindow(j int32) time.Duration {
	return max(min(d.jp[j].Contract.Protected, d.cfg.RuntimeCap), d.cfg.ResumeLoss)
}

// lapseAt is when job j's loss bound lapses for a set of victims that
// would throw away lost GPU-seconds, when no cheaper stop is in sight
// (cheaperAt found none): the bound, sliceLossLimit, doubles at each
// SliceLossDoubling that j has waited (since it was submitted or
// requeued), so a set that throws away up to 2^k times what j is promised
// is taken once j has waited k × SliceLossDoubling, and any set once it
// has waited SliceLossMaxWait (lossyFrom). The victim is never protected
// past that, whatever its run; until then j waits for room that comes
// without a stop (jobs finishing, whose ends nobody knows). The bound
// doubles in whole steps: a set that a job not resumable keeps making
// dearer while j waits is met at the next step (its loss grows linearly,
// the bound geometrically), where a bound growing smoothly would be met
// only in the limit of ever shorter waits. SliceLossDoubling 0 lapses at
// once.
func (d *Decider) lapseAt(j int32, lost int64) time.Time {
	end := d.lossyFrom(j)
	limit := d.sliceLossLimit(j)
	if d.cfg.SliceLossDoubling <= 0 || lost <= limit {
		return d.now
	}
	if limit <= 0 {
		return end
	}
	steps := math.Ceil(math.Log2(float64(lost) / float64(limit)))
	at := d.queuedSince(j).Add(time.Duration(min(steps*float64(d.cfg.SliceLossDoubling), float64(d.cfg.SliceLossMaxWait))))
	if at.After(end) {
		return end
	}
	return at
}
