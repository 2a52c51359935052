package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/policy"
)

type evKind uint8

const (
	evFinish evKind = iota
	evReconcile
	evWake
	evRunning  // a fully placed job's allocations run (Options.StartLatency)
	evReported // Nomad hears of finished tasks (Options.FinishLatency)
	evExited   // a stopped task exits: blocked evals are retried (Options.ExitHolds)
	evChanged  // a change the policy reacts to (a stopped task's exit after a refused write)
)

type event struct {
	t    int64
	seq  uint64
	kind evKind
	job  int32
	gen  uint32
}

// eventHeap is a binary min-heap on (t, seq): hand-rolled because
// container/heap's interface calls cost a third of the engine's time.
type eventHeap []event

func (h eventHeap) less(a, b int) bool {
	return h[a].t < h[b].t || h[a].t == h[b].t && h[a].seq < h[b].seq
}

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *eventHeap) pop() event {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q = q[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && q.less(l, m) {
			m = l
		}
		if r < n && q.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}

func (s *State) pushEvent(t int64, k evKind, job int32, gen uint32) {
	s.seq++
	s.heap.push(event{t: t, seq: s.seq, kind: k, job: job, gen: gen})
}

// ErrEmptyTrace is returned for a trace without jobs.
var ErrEmptyTrace = errors.New("the trace has no jobs")

// Run replays the trace through the policy on a cluster of the given shape
// and returns the measurements. tree may be nil: every job is then
// unallocated. The trace's jobs must be sorted by submit time and its
// health events by time (the readers and the generator guarantee it).
func Run(tr *Trace, c ClusterSpec, tree *budgets.Tree, p Policy, opts Options) (*Result, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if len(tr.Jobs) == 0 {
		return nil, ErrEmptyTrace
	}
	var shares []float64
	if tree != nil {
		for _, l := range tree.Leaves() {
			shares = append(shares, l.Effective)
		}
	}
	horizon := int64(opts.Horizon / time.Second)
	if horizon <= 0 {
		horizon = int64(tr.End() / time.Second)
		if k := len(tr.Health) - 1; k >= 0 {
			horizon = max(horizon, int64((tr.Health[k].At+opts.HealthLatency)/time.Second)) // the last row is heard then
		}
	}
	if opts.HealthLatency < 0 {
		return nil, fmt.Errorf("health latency %v: want 0 or more (0: a health change is heard at once)", opts.HealthLatency)
	}
	if opts.Warmup < 0 || opts.Warmup > 0 && int64(opts.Warmup/time.Second) >= horizon {
		return nil, fmt.Errorf("warm-up %v must be >= 0 and shorter than the run (%v)", opts.Warmup, time.Duration(horizon)*time.Second)
	}
	s := newState(c, len(shares), shares, opts)
	s.tree = tree
	s.jobs = make([]job, len(tr.Jobs))
	slots := 0
	for i := range tr.Jobs {
		slots += max(tr.Jobs[i].Count, 0)
	}
	// Every job's slots share one array. Slots are placed about twice each
	// on the example (a preempted or moved allocation is placed again), so
	// the allocation table starts at twice the slots and rarely grows.
	slotBuf := make([]int32, slots)
	s.allocs = make([]alloc, 0, 2*slots)
	for i := range tr.Jobs {
		sp := &tr.Jobs[i]
		if err := sp.Validate(); err != nil {
			return nil, err
		}
		if i > 0 && sp.Submit < tr.Jobs[i-1].Submit {
			return nil, fmt.Errorf("job %q is submitted before the job above it; sort the trace by submit time", sp.ID)
		}
		leaf := int32(-1)
		if tree != nil && sp.MinRuntime > 0 {
			if n, ok := tree.Lookup(sp.Budget); ok && n.IsLeaf() {
				leaf = int32(n.LeafIndex)
			}
		}
		s.jobs[i] = job{spec: sp, leaf: leaf, slots: slotBuf[:sp.Count:sp.Count], runStart: -1, firstStart: -1,
			requeuedAt: -1, activeIdx: -1, feas: s.feasOf(sp)}
		slotBuf = slotBuf[sp.Count:]
		for k := range s.jobs[i].slots {
			s.jobs[i].slots[k] = -1
		}
	}
	if len(tr.Health) > 0 {
		gpus := nodeGPUs(c)
		for k := range tr.Health {
			if err := healthErr(&tr.Health[k], gpus, c); err != nil {
				return nil, err
			}
		}
	}
	if err := p.Init(s, tree); err != nil {
		return nil, fmt.Errorf("policy %s: %w", p.Name(), err)
	}
	s.loop(tr, p, horizon)
	if f, ok := p.(interface{ Err() error }); ok && f.Err() != nil {
		return nil, fmt.Errorf("policy %s: %w", p.Name(), f.Err())
	}
	return s.result(p.Name(), tr, horizon), nil
}

// loop is the event loop: it merges the sorted submissions and health events
// with the heap of model events, and jumps from one instant to the next.
func (s *State) loop(tr *Trace, p Policy, horizon int64) {
	delay := int64(s.opts.ReactionDelay / time.Second)
	nextJob, nextHealth := 0, 0
	reconcileAt, wakeAt := int64(-1), int64(-1)
	// wakeBy has the policy run again at next (a pass's passWake) unless a
	// wake at or before it is due already.
	wakeBy := func(t, next int64) {
		if next > t && (wakeAt < 0 || next < wakeAt) {
			wakeAt = next
			s.pushEvent(next, evWake, -1, 0)
		}
	}
	const never = int64(1) << 62
	var lastProgress int64
	for {
		t := never
		if len(s.heap) > 0 {
			t = s.heap[0].t
		}
		if nextJob < len(tr.Jobs) {
			t = min(t, int64(tr.Jobs[nextJob].Submit/time.Second))
		}
		if nextHealth < len(tr.Health) {
			t = min(t, int64((tr.Health[nextHealth].At+s.opts.HealthLatency)/time.Second))
		}
		if t == never || t > horizon {
			break
		}
		s.advance(t)
		s.now = t
		for nextHealth < len(tr.Health) && int64((tr.Health[nextHealth].At+s.opts.HealthLatency)/time.Second) == t {
			h := &tr.Health[nextHealth]
			s.setHealth(s.nodeBy[h.Node], h.GPU, h.Healthy, h.Reason)
			nextHealth++
		}
		for nextJob < len(tr.Jobs) && int64(tr.Jobs[nextJob].Submit/time.Second) == t {
			s.submit(int32(nextJob), p)
			nextJob++
		}
		runPolicy, reported := false, false
		for len(s.heap) > 0 && s.heap[0].t == t {
			e := s.heap.pop()
			switch e.kind {
			case evFinish:
				s.finish(e.job, e.gen)
			case evRunning:
				s.running(e.job, e.gen)
			case evReconcile:
				if e.t == reconcileAt {
					reconcileAt = -1
					runPolicy = true
				}
			case evReported:
				s.reported()
				reported = true
			case evExited:
				s.wakeAll = true
				reported = true
			case evChanged:
				s.changed = true
			case evWake:
				if e.t == wakeAt {
					wakeAt = -1
					runPolicy = true
				}
			}
		}
		if sp, ok := p.(reportPolicy); ok && reported && s.opts.PassOnReport {
			// allot's pass on the report reads the freed GPUs before Nomad's
			// placements on them; its writes land after them.
			plan := sp.Prepare(s)
			s.schedule()
			s.reconciles++
			wakeBy(t, s.passWake(t, sp.Commit(s, plan)))
		}
		s.schedule()
		if runPolicy {
			// This pass sees every change so far: a reconcile still due for
			// them would only read the same state again.
			reconcileAt = -1
			s.changed = false
			s.reconciles++
			next := s.passWake(t, p.Reconcile(s))
			s.schedule()
			wakeBy(t, next)
		}
		if s.changed && reconcileAt < 0 {
			reconcileAt = t + delay
			s.changed = false
			s.pushEvent(reconcileAt, evReconcile, -1, 0)
		}
		s.events++
		if s.opts.Progress != nil && s.events&0xffff == 0 && t-lastProgress > 0 {
			lastProgress = t
			s.opts.Progress(float64(t) / float64(max(horizon, 1)))
		}
	}
	s.advance(horizon)
	s.now = horizon
	s.closeRun()
}

// passWake is when the policy runs next after a pass at t whose plan asked
// to be woken at wake (0: never): no later than Options.ReconcileInterval
// after t.
func (s *State) passWake(t int64, wake time.Duration) int64 {
	next := int64(wake / time.Second)
	if iv := int64(s.opts.ReconcileInterval / time.Second); iv > 0 && (next <= t || next > t+iv) {
		next = t + iv
	}
	return next
}

// reportPolicy is a policy that decides and carries its plan out in two
// steps (Allot), for Options.PassOnReport.
type reportPolicy interface {
	Prepare(s *State) *policy.Plan
	Commit(s *State, plan *policy.Plan) time.Duration
}

// submit registers job i with Nomad at the policy's submit priority.
func (s *State) submit(i int32, p Policy) {
	j := &s.jobs[i]
	j.status = StatusPending
	j.activeIdx = int32(len(s.active))
	s.active = append(s.active, i)
	j.prio = min(max(p.SubmitPriority(s, i), 1), s.maxPrio)
	s.m.submittedJob(j, s.now)
	s.emitSubmit(j)
	s.changed = true
	s.enqueue(i)
}

// finish completes job i if the event is still current.
func (s *State) finish(i int32, gen uint32) {
	j := &s.jobs[i]
	if j.finishGen != gen || j.runStart < 0 || j.status >= StatusDone {
		return
	}
	ran := s.now - j.runStart
	j.usefulGPUSec += ran * int64(j.spec.TotalGPUs())
	s.m.ran(j, j.runStart, s.now)
	j.done += ran
	j.runStart = -1
	for _, a := range j.slots {
		if a >= 0 {
			s.stopAlloc(a, StopFinished, -1)
			s.withhold(a)
		}
	}
	s.dequeue(i)
	s.finishJob(i, StatusDone)
}

// closeRun ends the run at the horizon: running work is cut (not lost) and
// counted with the work left, and every leaf's series is flushed.
func (s *State) closeRun() {
	for _, i := range s.active {
		j := &s.jobs[i]
		done := j.done
		if j.runStart >= 0 {
			ran := s.now - j.runStart
			done += ran
			j.usefulGPUSec += ran * int64(j.spec.TotalGPUs())
			s.m.ran(j, j.runStart, s.now)
			j.runStart = -1
		}
		if j.status == StatusRunning {
			s.m.endRunning++
		} else {
			s.m.endPending++
		}
		s.m.endWorkSec += max(int64(j.spec.Work/time.Second)-done, 0) * int64(j.spec.TotalGPUs())
	}
	for l := range s.m.leafLast {
		s.m.flushLeaf(int32(l), s.now)
	}
}
