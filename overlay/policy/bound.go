package policy

import "time"

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
