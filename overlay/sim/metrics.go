package sim

import "slices"

// metrics accumulates everything the report needs while the model runs.
type metrics struct {
	capacity int64
	last     int64

	heldAllocated, heldFree int64 // GPUs held now
	allocatedSec, freeSec   int64 // GPU-seconds held
	lostSec                 int64 // GPU-seconds of work thrown away
	usefulSec               int64

	waits        [numClasses][]int64 // submit to first start, seconds
	requeueWaits [numClasses][]int64
	stops        [numStopReasons]int64 // allocations stopped, by reason
	stopGPUs     [numStopReasons]int64

	submitted, finished, dead int64

	leafShare []float64
	leafLast  []int64
	leafRun   []int64 // GPUs held by the leaf's allocated jobs
	leafDem   []int64 // GPUs of the leaf's running + pending allocated jobs
	delivered [][]int64
	demand    [][]int64

	sickNodes   int64
	drainTimes  []int64
	sickPending map[string]int64
}

func newMetrics(capacity, nLeaves int, shares []float64) *metrics {
	m := &metrics{capacity: int64(capacity), leafShare: shares, sickPending: map[string]int64{}}
	m.leafLast = make([]int64, nLeaves)
	m.leafRun = make([]int64, nLeaves)
	m.leafDem = make([]int64, nLeaves)
	m.delivered = make([][]int64, nLeaves)
	m.demand = make([][]int64, nLeaves)
	return m
}

// advance integrates the cluster-wide counters up to t.
func (m *metrics) advance(t int64) {
	if d := t - m.last; d > 0 {
		m.allocatedSec += m.heldAllocated * d
		m.freeSec += m.heldFree * d
		m.last = t
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
		m.leafDem[j.leaf] += int64(j.spec.TotalGPUs())
	}
}

func (m *metrics) jobEnded(j *job, st JobStatus) {
	if st == StatusDone {
		m.finished++
	} else {
		m.dead++
	}
	m.usefulSec += j.usefulGPUSec
	if j.leaf >= 0 {
		m.flushLeaf(j.leaf, j.doneAt)
		m.leafDem[j.leaf] -= int64(j.spec.TotalGPUs())
	}
}

func (m *metrics) firstWait(j *job, w int64) {
	m.waits[j.spec.Class] = append(m.waits[j.spec.Class], w)
}

func (m *metrics) requeueWait(j *job, w int64) {
	m.requeueWaits[j.spec.Class] = append(m.requeueWaits[j.spec.Class], w)
}

func (m *metrics) stopped(j *job, why StopReason) {
	m.stops[why]++
	m.stopGPUs[why] += int64(j.spec.GPUs)
}

func (m *metrics) lost(gpuSec int64) { m.lostSec += gpuSec }

func (m *metrics) sickStart(node string, now int64) {
	m.sickNodes++
	m.sickPending[node] = now
}

func (m *metrics) drained(node string, d int64) {
	delete(m.sickPending, node)
	m.drainTimes = append(m.drainTimes, d)
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
