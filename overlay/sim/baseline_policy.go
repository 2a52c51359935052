package sim

import (
	"math"
	"time"

	"github.com/allot-sched/allot/budgets"
)

// BaselineConfig shapes the world before allot.
type BaselineConfig struct {
	// Guaranteed are the Nomad priorities of work within its team's limit,
	// by level. They sit less than Nomad's gap of 10 apart, so guaranteed
	// work never preempts guaranteed work: no time slicing.
	Guaranteed [3]int
	// Overflow are the priorities of work beyond the limit, by level: at
	// least the gap below every guaranteed level, so Nomad evicts overflow
	// work for guaranteed work, and less than the gap apart among themselves.
	Overflow [3]int
	// LimitScale multiplies each team's concurrent-GPU limit, which is its
	// effective share × cluster GPUs (rounded down).
	LimitScale float64
	// FillerInLimit counts work with a min_runtime of 0 (the filler) against
	// its team's limit like any other job. Off by default: the world before
	// allot had a preemptible tier for exactly such background work, and
	// counting a capacity-sized filler volume against the limits starves
	// every team's training (budgets 0 of 15 on the example), an old world
	// nobody operated.
	FillerInLimit bool
	// DrainDeadline is the deadline of the `nomad node drain` an operator
	// starts when a node turns unhealthy (facts e: batch work is killed at
	// the deadline without a replacement). Zero: nobody drains.
	DrainDeadline time.Duration
}

// DefaultBaselineConfig is the baseline of `allot sim`.
func DefaultBaselineConfig() BaselineConfig {
	return BaselineConfig{Guaranteed: [3]int{50, 55, 59}, Overflow: [3]int{20, 25, 29}, LimitScale: 1,
		DrainDeadline: 8 * time.Hour}
}

// Baseline is the world before allot: jobs carry a LOW/NORMAL/HIGH level
// (inflated: most say HIGH), each team has a concurrent-GPU limit for
// non-preemptible work, and work beyond it runs preemptible on idle GPUs and
// is evicted by Nomad for non-preemptible work. No time slicing. A job's tier
// is decided when it is queued: at submission, and again whenever an
// overflow job waits with nothing running (promoted, highest level first
// then first come, when its team's limit has room).
type Baseline struct {
	cfg      BaselineConfig
	limit    []int64
	used     []int64
	admitted [][]int32 // per leaf: guaranteed jobs not yet finished
	waiting  [][]int32 // per leaf: allocated overflow jobs, FIFO
	leafOf   []int32
	drainBy  map[int32]int64 // node → kill deadline (seconds)
}

// NewBaseline returns the baseline policy.
func NewBaseline(cfg BaselineConfig) *Baseline { return &Baseline{cfg: cfg} }

// Name implements Policy.
func (b *Baseline) Name() string { return "baseline" }

// Init implements Policy.
func (b *Baseline) Init(s *State, tree *budgets.Tree) error {
	gpus := 0
	for i := range s.nodes {
		gpus += s.nodes[i].total
	}
	b.drainBy = map[int32]int64{}
	b.leafOf = make([]int32, s.NumJobs())
	for i := range b.leafOf {
		b.leafOf[i] = -1
	}
	if tree == nil {
		return nil
	}
	leaves := tree.Leaves()
	b.limit = make([]int64, len(leaves))
	b.used = make([]int64, len(leaves))
	b.admitted = make([][]int32, len(leaves))
	b.waiting = make([][]int32, len(leaves))
	for k, l := range leaves {
		b.limit[k] = int64(math.Floor(l.Effective * float64(gpus) * b.cfg.LimitScale))
	}
	for i := range b.leafOf {
		sp := &s.jobs[i].spec
		if (*sp).MinRuntime == 0 && !b.cfg.FillerInLimit {
			continue // filler runs in the preemptible tier
		}
		if n, ok := tree.Lookup((*sp).Budget); ok && n.IsLeaf() {
			b.leafOf[i] = int32(n.LeafIndex)
		}
	}
	return nil
}

// SubmitPriority implements Policy: guaranteed if the team's limit allows.
func (b *Baseline) SubmitPriority(s *State, i int32) int {
	sp := s.jobs[i].spec
	l := b.leafOf[i]
	if l >= 0 && b.used[l]+int64(sp.TotalGPUs()) <= b.limit[l] {
		b.used[l] += int64(sp.TotalGPUs())
		b.admitted[l] = append(b.admitted[l], i)
		return b.cfg.Guaranteed[sp.Baseline]
	}
	if l >= 0 {
		b.waiting[l] = append(b.waiting[l], i)
	}
	s.SetPreemptible(i, true)
	return b.cfg.Overflow[sp.Baseline]
}

// Reconcile implements Policy: release finished jobs from the limits,
// admit waiting overflow jobs where a limit has room, and run the
// operator's drains.
func (b *Baseline) Reconcile(s *State) time.Duration {
	for l := range b.admitted {
		kept := b.admitted[l][:0]
		for _, i := range b.admitted[l] {
			if s.jobs[i].status >= StatusDone {
				b.used[l] -= int64(s.jobs[i].spec.TotalGPUs())
				continue
			}
			kept = append(kept, i)
		}
		b.admitted[l] = kept
		if b.used[l] < b.limit[l] && len(b.waiting[l]) > 0 {
			b.waiting[l] = b.promote(s, l, b.waiting[l])
		}
	}
	return b.drains(s)
}

// promote admits waiting overflow jobs of leaf l into its limit, highest
// level first, then first come, skipping those that do not fit (a quota has
// no reservation for a large job, like Nomad's blocked evals: facts i). A
// job waits when nothing of it runs: never started, or preempted and queued
// again (admission runs at each queueing, as for a new job). A running
// overflow job keeps its tier until it is preempted. It returns the
// overflow jobs still listed.
func (b *Baseline) promote(s *State, l int, w []int32) []int32 {
	for lv := int(numLevels) - 1; lv >= 0; lv-- {
		for _, i := range w {
			j := &s.jobs[i]
			if j.spec.Baseline != Level(lv) || j.status >= StatusDone || j.placed > 0 || !j.preemptible {
				continue
			}
			if g := int64(j.spec.TotalGPUs()); b.used[l]+g <= b.limit[l] {
				b.used[l] += g
				b.admitted[l] = append(b.admitted[l], i)
				s.SetPreemptible(i, false)
				s.SetPriority(i, b.cfg.Guaranteed[j.spec.Baseline])
			}
		}
	}
	kept := w[:0]
	for _, i := range w {
		if j := &s.jobs[i]; j.status < StatusDone && j.preemptible {
			kept = append(kept, i)
		}
	}
	return kept
}

// drains is the operator's `nomad node drain -deadline`: the node turns
// ineligible at once and its batch work is killed at the deadline.
func (b *Baseline) drains(s *State) time.Duration {
	if b.cfg.DrainDeadline <= 0 {
		return 0
	}
	next := int64(-1)
	for n := range s.nodes {
		nd := &s.nodes[n]
		dl, draining := b.drainBy[int32(n)]
		switch {
		case nd.sickSince >= 0 && !draining:
			dl = s.now + int64(b.cfg.DrainDeadline/time.Second)
			b.drainBy[int32(n)] = dl
			s.NoteOperator(int32(n)) // nomad node drain -enable -deadline: a person runs it
			s.SetEligible(int32(n), false)
		case nd.sickSince < 0 && draining:
			delete(b.drainBy, int32(n))
			s.SetEligible(int32(n), true) // repaired: the operator returns it
			continue
		case !draining:
			continue
		}
		if s.now >= dl {
			for len(nd.allocs) > 0 {
				s.KillJob(s.allocs[nd.allocs[0]].job)
			}
			continue
		}
		if next < 0 || dl < next {
			next = dl
		}
	}
	return time.Duration(max(next, 0)) * time.Second
}
