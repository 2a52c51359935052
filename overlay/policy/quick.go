package policy

// sliceFailure is a pending job whose asks are all alike (one allocation,
// or a gang of allocations of one size, pool and model) that time slicing
// examined in this decision (rule 5 or 5b) and that found no victims for a
// reason its later siblings share (fair share, its budget's own order,
// protected windows; not the loss bound): see impliedFailure.
type sliceFailure struct {
	leaf     int32
	pool     string
	model    string
	gpus     int32 // of each ask
	count    int32 // asks
	priority int
	margin   float64
	wait     Wait // what it waits for, and the job (sliceFor)
	waitFor  int32
}

// impliedFailure is the skip of rules 5 and 5b: a pending job j need not
// be examined, and does not use one of the pass's MaxEvaluations, when a
// job of its own leaf examined before it in this decision (by either pass)
// found no victims for a reason that holds for j too. Both have asks all
// alike, of the same node pool and GPU model; j's are no smaller and no
// fewer, its meta priority no higher (fewer of its own budget's jobs are
// below it) and its fairness margin no smaller (no more of other budgets'
// jobs are served enough above its own), and the GPUs free or stoppable on
// every node only shrink as the pass goes on. So wherever j could take
// victims for all its asks, the earlier job could have taken them for as
// many of its own; a failure of the loss bound is not carried over (the
// bound depends on the ask and the wait). Without the skip, a budget's
// quick jobs that cannot run used up the pass, and the debug jobs of
// budgets further down the order were never examined: on heavy-1024 seed
// 3 of the suite (main 22b4a95), 54 of the slowest 61 debug jobs (2%,
// 91-113 hours, all of one budget served 4.8-5.6 times its share, whose
// own lower-priority training jobs ran past their windows) waited the
// most of it unexamined. In the first pass (stop 34) the least served
// budget's gangs of one shape, each failing as the first did, used the
// pass's examinations the same way. A skipped job waits for what its
// sibling waits for (its explanation says so) and wakes when its own
// margin falls to the gap, as if examined.
func (d *Decider) impliedFailure(j int32, asks []ask) bool {
	if !alike(asks) {
		return false
	}
	job, info := d.jp[j], &d.jobs[j]
	pool, m := poolOf(job.Pool), d.marginFor(j)
	for i := range d.sliceFailed {
		f := &d.sliceFailed[i]
		if f.leaf == info.leaf && f.pool == pool && f.model == asks[0].model && asks[0].gpus >= f.gpus && int32(len(asks)) >= f.count &&
			job.Contract.Priority <= f.priority && m >= f.margin {
			info.wait, info.waitFor = f.wait, f.waitFor
			if gap := d.vServed - d.served[info.leaf]; f.wait == WaitFairShare && gap > 0 {
				d.wakeAt(d.marginEnds(j, gap))
			}
			return true
		}
	}
	return false
}

// noteFailure records pending job j, just examined for time slicing
// without finding victims, for impliedFailure: only a job whose asks are
// all alike and whose wait is not the loss bound's.
func (d *Decider) noteFailure(j int32, asks []ask) {
	info := &d.jobs[j]
	if !alike(asks) || info.wait == WaitWork {
		return
	}
	d.sliceFailed = append(d.sliceFailed, sliceFailure{leaf: info.leaf, pool: poolOf(d.jp[j].Pool),
		model: asks[0].model, gpus: asks[0].gpus, count: int32(len(asks)), priority: d.jp[j].Contract.Priority, margin: d.marginFor(j),
		wait: info.wait, waitFor: info.waitFor})
}

// alike reports whether asks are one or more of one size and GPU model.
func alike(asks []ask) bool {
	if len(asks) == 0 {
		return false
	}
	for _, a := range asks[1:] {
		if a.gpus != asks[0].gpus || a.model != asks[0].model {
			return false
		}
	}
	return true
}
