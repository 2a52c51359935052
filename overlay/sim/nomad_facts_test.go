package sim

import (
	"testing"
	"time"
)

// The tests of this file pin the cluster model against
// docs/nomad-facts.md, one behaviour each, named after the section.

type harness struct {
	t *testing.T
	s *State
}

func newHarness(t *testing.T, nodes ...int) *harness {
	t.Helper()
	c := ClusterSpec{}
	for i, g := range nodes {
		c.Pools = append(c.Pools, Pool{Name: "p" + itoa(i), Nodes: 1, GPUsPerNode: g, Model: "h100"})
	}
	s := newState(c, 0, nil, Options{Seed: 7, CheckpointLoss: 15 * time.Minute})
	return &harness{t: t, s: s}
}

// submit registers a job of count allocations × gpus at priority prio and
// runs the scheduler.
func (h *harness) submit(id string, prio, count, gpus int) int32 {
	sp := &JobSpec{ID: id, Count: count, GPUs: gpus, Work: time.Hour, Resumable: true}
	i := int32(len(h.s.jobs))
	// The harness's nodes are one pool each; its jobs may use any of them.
	h.s.jobs = append(h.s.jobs, job{spec: sp, leaf: -1, slots: make([]int32, count), runStart: -1,
		firstStart: -1, requeuedAt: -1, feas: h.s.allFeas})
	for k := range h.s.jobs[i].slots {
		h.s.jobs[i].slots[k] = -1
	}
	j := &h.s.jobs[i]
	j.status = StatusPending
	j.activeIdx = int32(len(h.s.active))
	h.s.active = append(h.s.active, i)
	j.prio = prio
	h.s.enqueue(i)
	h.s.schedule()
	return i
}

func (h *harness) placed(i int32) int { return h.s.jobs[i].placed }

func (h *harness) wantPlaced(i int32, want int) {
	h.t.Helper()
	if got := h.placed(i); got != want {
		h.t.Fatalf("job %s: %d allocations placed, want %d", h.s.jobs[i].spec.ID, got, want)
	}
}

// finish completes job i now, freeing its GPUs, and runs the scheduler. A
// job placed on GPUs of a stopped task runs when that task exits
// (killtimeout.go), an event the harness does not play: it runs first.
func (h *harness) finish(i int32) {
	h.t.Helper()
	if j := &h.s.jobs[i]; j.runStart < 0 && j.placed == len(j.slots) {
		h.s.jobRuns(i)
	}
	h.s.finish(i, h.s.jobs[i].finishGen)
	h.s.schedule()
}

func (h *harness) node(i int32) int32 {
	for _, a := range h.s.jobs[i].slots {
		if a >= 0 {
			return h.s.allocs[a].node
		}
	}
	return -1
}

func TestNomadFact_a_PriorityChangeIsInPlace(t *testing.T) {
	h := newHarness(t, 4)
	j := h.submit("train", 50, 1, 4)
	a := h.s.jobs[j].slots[0]
	h.s.now = 100
	h.s.SetPriority(j, 90)
	h.s.schedule()
	if got := h.s.jobs[j].slots[0]; got != a || h.s.allocs[a].start != 0 || h.s.allocs[a].end >= 0 {
		t.Fatalf("priority change restarted the allocation: alloc %d→%d start %d", a, got, h.s.allocs[got].start)
	}
	if h.s.jobs[j].prio != 90 {
		t.Fatalf("priority %d, want 90", h.s.jobs[j].prio)
	}
}

func TestNomadFact_b_PreemptionGap10(t *testing.T) {
	for _, tc := range []struct {
		high      int
		wantEvict bool
	}{{29, false}, {30, true}} {
		h := newHarness(t, 4)
		low := h.submit("low", 20, 1, 4)
		high := h.submit("high", tc.high, 1, 4)
		if got := h.placed(low) == 0; got != tc.wantEvict {
			t.Errorf("%d vs 20: evicted %v, want %v", tc.high, got, tc.wantEvict)
		}
		if got := h.placed(high) == 1; got != tc.wantEvict {
			t.Errorf("%d vs 20: placed %v, want %v", tc.high, got, tc.wantEvict)
		}
	}
}

func TestNomadFact_b_LowestPriorityEvictedFirstOnlyAsNeeded(t *testing.T) {
	h := newHarness(t, 4)
	a := h.submit("a", 30, 1, 2)
	b := h.submit("b", 20, 1, 2)
	high := h.submit("high", 80, 1, 2)
	h.wantPlaced(high, 1)
	h.wantPlaced(b, 0)
	h.wantPlaced(a, 1)
	if h.s.m.stops[StopPreempted] != 1 {
		t.Fatalf("%d allocations preempted, want 1", h.s.m.stops[StopPreempted])
	}
}

func TestNomadFact_b_VictimRequeuedNotRescheduled(t *testing.T) {
	h := newHarness(t, 4)
	low := h.submit("low", 20, 1, 4)
	high := h.submit("high", 60, 1, 4)
	h.wantPlaced(low, 0)
	if !h.s.jobs[low].inQueue {
		t.Fatal("the victim's job has no eval: it was not requeued")
	}
	h.finish(high)
	h.wantPlaced(low, 1)
	if h.s.jobs[low].status != StatusRunning || h.s.m.dead != 0 {
		t.Fatalf("victim status %s, dead %d: want running again", h.s.jobs[low].status, h.s.m.dead)
	}
}

func TestNomadFact_b_LoweringPriorityDoesNotWakeBlocked(t *testing.T) {
	h := newHarness(t, 4)
	run := h.submit("run", 50, 1, 4)
	pend := h.submit("pend", 50, 1, 4)
	h.wantPlaced(pend, 0)
	h.s.SetPriority(run, 20)
	h.s.schedule()
	h.wantPlaced(pend, 0) // still blocked: no capacity changed
	h.s.Evaluate(pend)
	h.s.schedule()
	h.wantPlaced(pend, 1)
	h.wantPlaced(run, 0)
}

func TestNomadFact_c_MigrateStopRequeues(t *testing.T) {
	h := newHarness(t, 4, 4)
	j := h.submit("train", 50, 1, 4)
	first := h.node(j)
	h.s.SetEligible(first, false)
	h.s.StopAllocs([]int32{h.s.jobs[j].slots[0]}, StopDrain)
	h.s.schedule()
	h.wantPlaced(j, 1)
	if h.node(j) == first {
		t.Fatal("the replacement landed on the ineligible node")
	}
	if h.s.jobs[j].status != StatusRunning || h.s.m.dead != 0 {
		t.Fatalf("status %s: a migrate stop must requeue, not kill", h.s.jobs[j].status)
	}
}

func TestNomadFact_d_BlockedPlacedInPriorityOrder(t *testing.T) {
	h := newHarness(t, 1)
	run := h.submit("run", 95, 1, 1)
	var ids []int32
	for _, p := range []int{30, 90, 20, 70, 50} {
		ids = append(ids, h.submit("p"+itoa(p), p, 1, 1))
	}
	var order []int
	cur := run
	for range ids {
		h.finish(cur)
		cur = -1
		for _, i := range ids {
			if h.placed(i) == 1 {
				cur = i
			}
		}
		if cur < 0 {
			t.Fatal("nothing placed after capacity freed")
		}
		order = append(order, h.s.jobs[cur].prio)
	}
	want := []int{90, 70, 50, 30, 20}
	for k := range want {
		if order[k] != want[k] {
			t.Fatalf("placement order %v, want %v", order, want)
		}
	}
}

func TestNomadFact_d_ReregisterMovesInQueue(t *testing.T) {
	h := newHarness(t, 1)
	run := h.submit("run", 95, 1, 1)
	a := h.submit("a", 50, 1, 1)
	b := h.submit("b", 50, 1, 1)
	// Same priority: first come first served, unless re-registered.
	h.s.SetPriority(a, 51)
	h.s.SetPriority(a, 50) // a new eval: now behind b
	h.s.schedule()
	h.finish(run)
	h.wantPlaced(b, 1)
	h.wantPlaced(a, 0)
}

func TestNomadFact_e_IneligibleGetsNothingUntilEligible(t *testing.T) {
	h := newHarness(t, 4)
	h.s.SetEligible(0, false)
	j := h.submit("j", 50, 1, 2)
	h.wantPlaced(j, 0)
	h.s.SetEligible(0, true)
	h.s.schedule()
	h.wantPlaced(j, 1)
}

func TestNomadFact_e_DrainDeadlineKillsWithoutReplacement(t *testing.T) {
	h := newHarness(t, 4, 4)
	j := h.submit("j", 50, 1, 4)
	h.s.now = 3600
	h.s.KillJob(j)
	h.s.schedule()
	if h.s.jobs[j].status != StatusDead || h.placed(j) != 0 || h.s.jobs[j].inQueue {
		t.Fatalf("status %s placed %d queued %v: want dead, no replacement", h.s.jobs[j].status, h.placed(j), h.s.jobs[j].inQueue)
	}
	if h.s.m.lostSec != 3600*4 {
		t.Fatalf("lost %d GPU-seconds, want %d", h.s.m.lostSec, 3600*4)
	}
}

func TestNomadFact_i_PreemptionIsSecondPass(t *testing.T) {
	h := newHarness(t, 4, 4)
	low := h.submit("low", 20, 1, 4)
	high := h.submit("high", 80, 1, 4)
	h.wantPlaced(high, 1)
	h.wantPlaced(low, 1)
	if h.node(high) == h.node(low) {
		t.Fatal("placed on the victim's node although another node fit")
	}
}

func TestNomadFact_i_WholeAllocationEvicted(t *testing.T) {
	h := newHarness(t, 4)
	low := h.submit("low", 20, 1, 4)
	high := h.submit("high", 80, 1, 2)
	h.wantPlaced(low, 0)
	h.wantPlaced(high, 1)
	if f := h.s.nodes[0].free(); f != 2 {
		t.Fatalf("%d GPUs free after evicting a 4-GPU victim for a 2-GPU ask, want 2 idle", f)
	}
}

func TestNomadFact_i_VictimsResortedByDevicesHeld(t *testing.T) {
	h := newHarness(t, 4)
	p20 := h.submit("p20", 20, 1, 1)
	p25 := h.submit("p25", 25, 1, 2)
	p60 := h.submit("p60", 60, 1, 1)
	ask := h.submit("ask", 80, 1, 2)
	h.wantPlaced(ask, 1)
	h.wantPlaced(p25, 0)
	h.wantPlaced(p20, 1)
	h.wantPlaced(p60, 1)
}

func TestNomadFact_i_AskFitsOnOneNode(t *testing.T) {
	h := newHarness(t, 4, 4)
	a := h.submit("a", 50, 1, 2)
	h.s.SetEligible(h.node(a), false)
	b := h.submit("b", 50, 1, 2)
	h.s.SetEligible(h.node(a), true)
	if h.node(a) == h.node(b) {
		t.Fatal("setup: want one 2-GPU job per node")
	}
	big := h.submit("big", 50, 1, 4) // 2 + 2 free on two nodes is not 4
	h.wantPlaced(big, 0)
}

func TestNomadFact_i_UnhealthyHeldDeviceFailsPreemption(t *testing.T) {
	h := newHarness(t, 2)
	victim := h.submit("victim", 20, 1, 2)
	h.s.setHealth(0, 1, false, "XID 79")
	ask := h.submit("ask", 80, 1, 2)
	h.wantPlaced(ask, 0)
	h.wantPlaced(victim, 1) // nothing evicted: the plan would not free 2 healthy GPUs
}

func TestNomadFact_i_NoReservationForBigAsk(t *testing.T) {
	h := newHarness(t, 4)
	run1 := h.submit("run1", 95, 1, 2)
	h.submit("run2", 95, 1, 2)
	big := h.submit("big", 45, 1, 4)
	small := h.submit("small", 41, 1, 2)
	h.finish(run1) // two GPUs free up: the small job takes them
	h.wantPlaced(small, 1)
	h.wantPlaced(big, 0)
}

func TestNomadFact_i_UnhealthyDeviceSkippedRunningKept(t *testing.T) {
	h := newHarness(t, 4)
	j := h.submit("j", 50, 1, 2)
	for g := 0; g < 4; g++ {
		if h.s.nodes[0].held&(1<<uint(g)) != 0 {
			h.s.setHealth(0, g, false, "XID 79")
			break
		}
	}
	h.wantPlaced(j, 1) // running allocation untouched
	k := h.submit("k", 50, 1, 2)
	h.wantPlaced(k, 1)
	l := h.submit("l", 50, 1, 1)
	h.wantPlaced(l, 0) // the fourth GPU is unhealthy: skipped
}

func TestNomadFact_i_ClassIneligibleNotWokenOnRecovery(t *testing.T) {
	h := newHarness(t, 4)
	h.s.setHealth(0, 3, false, "XID 79")
	big := h.submit("big", 50, 1, 4) // more than the node has healthy: class ineligible
	h.wantPlaced(big, 0)
	h.s.setHealth(0, 3, true, "")
	h.s.schedule()
	h.wantPlaced(big, 0) // recovery does not wake it
	h.s.Evaluate(big)
	h.s.schedule()
	h.wantPlaced(big, 1)
}

func TestNomadFact_i_ShortageWokenOnRecovery(t *testing.T) {
	h := newHarness(t, 4)
	h.s.setHealth(0, 3, false, "XID 79")
	run := h.submit("run", 50, 1, 2)
	small := h.submit("small", 50, 1, 2) // 1 healthy free: an ordinary shortage
	h.wantPlaced(run, 1)
	h.wantPlaced(small, 0)
	h.s.setHealth(0, 3, true, "")
	h.s.schedule()
	h.wantPlaced(small, 1)
}

func TestNomadFact_i_GroupCountPlacedIndependently(t *testing.T) {
	h := newHarness(t, 8)
	j := h.submit("j", 50, 3, 4)
	h.wantPlaced(j, 2) // no gang placement: two run, one waits
	if h.s.jobs[j].runStart >= 0 {
		t.Fatal("a job placed in part must not make progress")
	}
}

func TestNomadFact_i_BinpackPrefersFullerNode(t *testing.T) {
	h := newHarness(t, 8, 8)
	first := h.submit("first", 50, 1, 2)
	n := h.node(first)
	second := h.submit("second", 50, 1, 2)
	if h.node(second) != n {
		t.Fatalf("second job on node %d, want the fuller node %d", h.node(second), n)
	}
}

// PlacementBestFit is Nomad scoring every node (a job with an affinity, as
// the fidelity harness's jobs have): the fullest node with the placement
// wins, ties to the first node; in the preemption pass too, where the
// victims' priorities move Nomad's score by far less than a GPU of binpack
// (the two-choice model keeps the lower priority sum instead).
func TestPlacementBestFit(t *testing.T) {
	h := newHarness(t, 8, 8, 8)
	h.s.opts.Placement = PlacementBestFit
	a := h.submit("a", 50, 1, 2)
	b := h.submit("b", 50, 1, 4)
	c := h.submit("c", 50, 1, 4)
	d := h.submit("d", 50, 1, 1)
	for _, w := range []struct {
		job  int32
		node int32
	}{{a, 0}, {b, 0}, {c, 1}, {d, 0}} {
		if n := h.node(w.job); n != w.node {
			t.Errorf("%s on node %d, want %d", h.s.jobs[w.job].spec.ID, n, w.node)
		}
	}
	for _, bestFit := range []bool{false, true} {
		h := newHarness(t, 8, 8)
		if bestFit {
			h.s.opts.Placement = PlacementBestFit
		}
		x := h.submit("x", 25, 1, 4)
		h.submit("y", 25, 1, 4)
		z := h.submit("z", 20, 1, 6)
		h.submit("w", 20, 1, 2)
		if h.node(x) != 0 || h.node(z) != 1 {
			t.Fatalf("x on %d, z on %d; want 0 and 1", h.node(x), h.node(z))
		}
		high := h.submit("high", 80, 1, 4)
		// Node 0 evicts x (priority 25, 4 GPUs: full after), node 1 z
		// (priority 20, 6 GPUs: 6 of 8 held after).
		victim, want := z, int32(1)
		if bestFit {
			victim, want = x, 0
		}
		if h.node(high) != want || h.placed(victim) != 0 {
			t.Errorf("best-fit %t: high on node %d (want %d), %s placed %d", bestFit, h.node(high), want,
				h.s.jobs[victim].spec.ID, h.placed(victim))
		}
	}
}
