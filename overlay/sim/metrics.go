package sim

import "slices"

// metrics accumulates everything the report needs while the model runs.
//
// Everything is measured from `from` (the warm-up's end) on: GPU time held
// after it, waits of jobs submitted after it, stops and lost work that
// happen after it, and unhealthy episodes that begin after it. Job counts,
// and owed and delivered time (BudgetResult: the hours the policy's usage
// ledger holds), cover the whole run.
type metrics struct {
	capacity int64
	last     int64
	from     int64

	heldAllocated, heldFree int64 // GPUs held now
	allocatedSec, freeSec   int64 // GPU-seconds held
	lostSec                 int64 // GPU-seconds of work thrown away
	// lostWhole and lostAgain split lostSec: what stops of jobs that are
	// not resumable threw away (their whole run), and of that what a
	// job's second or later stop that lost work threw away.
	lostWhole, lostAgain int64
	usefulSec            int64 // GPU-seconds of runs (all allocations placed), kept or lost later
	usefulAllocSec       int64 // the part of usefulSec of allocated jobs

	waits        [numClasses][]int64 // submit to first start, seconds
	requeueWaits [numClasses][]int64
	stops        [numStopReasons]int64 // allocations stopped, by reason
	stopGPUs     [numStopReasons]int64
	stopLost     [numStopReasons]int64 // GPU-seconds of work thrown away, by reason

	submitted, finished, dead int64
	// At the end of the run: jobs running (placed in all or part) and
	// pending, and the GPU-seconds of work they had left.
	endRunning, endPending, endWorkSec int64

	leafShare []float64
	leafLast  []int64
	leafRun   []int64 // GPUs held by the leaf's allocated jobs
	leafDem   []int64 // GPUs of the leaf's running + pending allocated jobs that some node may hold
	delivered [][]int64
	demand    [][]int64
	// leafNever is the GPUs of the leaf's pending allocated jobs that no
	// node of their pool and model can hold (job.feas 0), and neverSec
	// their GPU-seconds: demand no scheduler can serve, left out of owed
	// (unservable).
	leafNever []int64
	neverSec  []int64

	drain  drainMetrics
	notice noticeMetrics
	// writes and freeWrites: Result.PriorityWrites and FreeLevelWrites.
	writes, freeWrites int64
	refusedWrites      int64 // Result.RefusedWrites
}

// drainMetrics follows each unhealthy episode of a node from its first
// unhealthy GPU to drained (empty and ineligible), or to its recovery.
type drainMetrics struct {
	open       []episode
	episodes   int64
	times      []int64 // unhealthy to drained, seconds
	recovered  int64   // healthy again before drained
	noOperator int64   // drained with no operator action
	lostSec    int64   // GPU-seconds of work thrown away by drain stops and kills
	idleSec    int64   // healthy GPU-seconds idle on cordoned nodes before drained
	killed     int64   // jobs killed without a replacement
	last       int64
}

type episode struct {
	node     int32
	start    int64
	operator bool
}

func newMetrics(capacity, nLeaves int, shares []float64, from int64) *metrics {
	m := &metrics{capacity: int64(capacity), leafShare: shares, from: from}
	m.leafLast = make([]int64, nLeaves)
	m.leafRun = make([]int64, nLeaves)
	m.leafDem = make([]int64, nLeaves)
	m.leafNever = make([]int64, nLeaves)
	m.neverSec = make([]int64, nLeaves)
	m.delivered = make([][]int64, nLeaves)
	m.demand = make([][]int64, nLeaves)
	return m
}

// advance integrates the cluster-wide counters up to t.
func (m *metrics) advance(t int64) {
	if lo := max(m.last, m.from); t > lo {
		m.allocatedSec += m.heldAllocated * (t - lo)
		m.freeSec += m.heldFree * (t - lo)
	}
	m.last = max(m.last, t)
}

// ran counts the useful GPU time of job j's run over [from, to).
func (m *metrics) ran(j *job, from, to int64) {
	if from = max(from, m.from); to > from {
		m.usefulSec += (to - from) * int64(j.spec.TotalGPUs())
		if j.leaf >= 0 {
			m.usefulAllocSec += (to - from) * int64(j.spec.TotalGPUs())
		}
	}
}

// addHours spreads v GPUs over [from, to) into hourly buckets.
func addHours(h *[]int64, from, to, v int64) {
	if v == 0 || to <= from {
		return
	}
	for from < to {
		hour := from / 3600
		end := min(to, (hour+1)*3600)
		for int64(len(*h)) <= hour {
			*h = append(*h, 0)
		}
		(*h)[hour] += v * (end - from)
		from = end
	}
}

func (m *metrics) flushLeaf(l int32, now int64) {
	from := m.leafLast[l]
	addHours(&m.delivered[l], from, now, m.leafRun[l])
	addHours(&m.demand[l], from, now, m.leafDem[l])
	m.neverSec[l] += m.leafNever[l] * max(now-from, 0)
	m.leafLast[l] = now
}

func (m *metrics) held(j *job, now int64, gpus int) {
	if j.leaf < 0 {
		m.heldFree += int64(gpus)
		return
	}
	m.heldAllocated += int64(gpus)
	m.flushLeaf(j.leaf, now)
	m.leafRun[j.leaf] += int64(gpus)
}

func (m *metrics) submittedJob(j *job, now int64) {
	m.submitted++
	if j.leaf >= 0 {
		m.flushLeaf(j.leaf, now)
		*m.demandOf(j) += int64(j.spec.TotalGPUs())
	}
}

// demandOf is the count job j's GPUs add to while it waits or runs: its
// leaf's demand, or, when no node of its pool and model exists (Nomad
// keeps it blocked for ever, Result.NeverPlaceable), its leaf's unservable
// demand. Owed time is the leaf's fair share of what it asked for; a job
// no scheduler could place asks nothing it could be given, and fair share
// rightly gives its share to the others meanwhile, so counted as demand it
// read as the leaf's shortfall under every policy (its leaf 0% of owed
// for as long as the job waited).
func (m *metrics) demandOf(j *job) *int64 {
	if j.feas == 0 {
		return &m.leafNever[j.leaf]
	}
	return &m.leafDem[j.leaf]
}

func (m *metrics) jobEnded(j *job, st JobStatus) {
	if st == StatusDone {
		m.finished++
	} else {
		m.dead++
	}
	if j.leaf >= 0 {
		m.flushLeaf(j.leaf, j.doneAt)
		*m.demandOf(j) -= int64(j.spec.TotalGPUs())
	}
}

// firstWait records the wait of a job submitted at submit that started now.
func (m *metrics) firstWait(j *job, submit, now int64) {
	if submit >= m.from {
		m.waits[j.spec.Class] = append(m.waits[j.spec.Class], now-submit)
	}
}

func (m *metrics) requeueWait(j *job, requeued, now int64) {
	if requeued >= m.from {
		m.requeueWaits[j.spec.Class] = append(m.requeueWaits[j.spec.Class], now-requeued)
	}
}

func (m *metrics) stopped(j *job, why StopReason, now int64) {
	if now >= m.from {
		m.stops[why]++
		m.stopGPUs[why] += int64(j.spec.GPUs)
	}
}

func (m *metrics) lost(gpuSec, now int64) {
	if now >= m.from {
		m.lostSec += gpuSec
	}
}

// lostRun counts a stop of a job that is not resumable, which threw its
// whole run away (gpuSec, already counted by lost); again says that an
// earlier stop of the job threw work away too.
func (m *metrics) lostRun(gpuSec int64, again bool, now int64) {
	if now >= m.from {
		m.lostWhole += gpuSec
		if again {
			m.lostAgain += gpuSec
		}
	}
}

func (m *metrics) sickStart(node int32, now int64) {
	if now >= m.from {
		m.drain.episodes++
		m.drain.open = append(m.drain.open, episode{node: node, start: now})
	}
}

// episodeEnd closes node's open episode: drained, or recovered first.
func (m *metrics) episodeEnd(node int32, now int64, drained bool) {
	k := slices.IndexFunc(m.drain.open, func(e episode) bool { return e.node == node })
	if k < 0 {
		return
	}
	e := m.drain.open[k]
	m.drain.open = slices.Delete(m.drain.open, k, k+1)
	switch {
	case !drained:
		m.drain.recovered++
	default:
		m.drain.times = append(m.drain.times, now-e.start)
		if !e.operator {
			m.drain.noOperator++
		}
	}
}

func (m *metrics) operator(node int32) {
	if k := slices.IndexFunc(m.drain.open, func(e episode) bool { return e.node == node }); k >= 0 {
		m.drain.open[k].operator = true
	}
}

func (m *metrics) lostBy(why StopReason, gpuSec, now int64) {
	if now >= m.from {
		m.stopLost[why] += gpuSec
	}
}

func (m *metrics) drainLost(gpuSec, now int64) {
	if now >= m.from {
		m.drain.lostSec += gpuSec
	}
}

// percentile of sorted xs (nearest rank); 0 for none.
func percentile(xs []int64, p float64) int64 {
	if len(xs) == 0 {
		return 0
	}
	k := int(p*float64(len(xs))+0.999999) - 1
	return xs[min(max(k, 0), len(xs)-1)]
}

func sortedCopy(xs []int64) []int64 {
	out := slices.Clone(xs)
	slices.Sort(out)
	return out
}
