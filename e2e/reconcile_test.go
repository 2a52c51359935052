package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/policy"
)

// Scenario 1: of two pending jobs, the one from the budget under its share
// gets the higher priority and starts first when the GPUs free up.
func TestReconcileUnderServedBudgetFirst(t *testing.T) {
	c := startGPUCluster(t)
	// Hysteresis 1: with the default (3) a job that moves down one position
	// keeps its priority, so two adjacent pending jobs can tie (see report).
	al := startAllot(t, c, allotOptions{Policy: func(p *policy.Config) { p.Hysteresis = 1 }})
	now := time.Now()
	al.seedUsage("lab/a", 8, now.Add(-2*time.Hour), now.Add(-time.Hour))

	c.register(t, gpuJob{ID: "blocker", Budget: "lab/a", MinRuntime: "1h", GPUs: 8})
	c.waitRunning(t, "blocker", 1, 60*time.Second)
	c.waitLevel(t, "blocker", bands.Protected, "protected", 10*time.Second)

	c.register(t, gpuJob{ID: "over", Budget: "lab/a", MinRuntime: "30s", GPUs: 8})
	c.waitPriority(t, "over", func(p int) bool { return p != 50 }, "written by allot", 10*time.Second)
	c.register(t, gpuJob{ID: "under", Budget: "lab/b", MinRuntime: "30s", GPUs: 8})
	var pu, po int
	waitFor(t, 10*time.Second, "under above over", func() (bool, error) {
		pu, po = c.job(t, "under").Priority, c.job(t, "over").Priority
		return pu > po && pu <= 89 && po >= 40, nil
	})
	t.Logf("pending priorities: under-served lab/b %d, over-served lab/a %d", pu, po)

	c.stopJob(t, "blocker")
	c.waitRunning(t, "under", 1, 60*time.Second)
	if n := len(c.running(t, "over")); n != 0 {
		t.Fatalf("over-served job has %d running allocations; the under-served one should have gone first", n)
	}
	if q := al.Srv.FSM().Read().QueueEntry("default/over"); q == nil || q.Position != 1 || q.Band != "pending" {
		t.Fatalf("queue row of over = %+v, want pending at position 1", q)
	}
}

// Scenario 3: unallocated filler fills idle GPUs at the unallocated band and
// is preempted at once, by Nomad's own preemption, for allocated work.
func TestReconcileFillerPreempted(t *testing.T) {
	c := startGPUCluster(t)
	startAllot(t, c, allotOptions{})
	for i := 0; i < 8; i++ {
		c.register(t, gpuJob{ID: fmt.Sprintf("filler-%d", i), GPUs: 1})
	}
	for i := 0; i < 8; i++ {
		id := fmt.Sprintf("filler-%d", i)
		c.waitPriority(t, id, func(p int) bool { return p >= 10 && p <= 29 }, "in the unallocated band", 10*time.Second)
		c.waitRunning(t, id, 1, 60*time.Second)
	}
	registered := time.Now()
	c.register(t, gpuJob{ID: "work", Budget: "lab/b", MinRuntime: "1m", GPUs: 4})
	work := c.waitRunning(t, "work", 1, 30*time.Second)[0]
	t.Logf("allocated work running %s after registration", work.started().Sub(registered).Round(time.Millisecond))
	works := map[string]bool{}
	for _, a := range c.allocs(t, "work") {
		works[a.ID] = true
	}
	evicted := 0
	var victimsStopped time.Time // when the last victim's task ended
	for i := 0; i < 8; i++ {
		id := fmt.Sprintf("filler-%d", i)
		for _, a := range c.allocs(t, id) {
			if a.DesiredStatus == "evict" {
				evicted++
				if a.finished().After(victimsStopped) {
					victimsStopped = a.finished()
				}
				if !works[a.PreemptedByAllocation] {
					t.Errorf("%s evicted by %q, not by an allocation of the allocated job", a.ID, a.PreemptedByAllocation)
				}
				if j := c.job(t, id); j.Status == "dead" {
					t.Errorf("preempted filler %s is dead; want it requeued", id)
				}
			}
		}
	}
	t.Logf("%d filler allocations evicted by Nomad for the allocated job (%d allocation(s))", evicted, len(works))
	if evicted != 4 {
		t.Errorf("%d filler allocations evicted, want 4 (one GPU each for an ask of 4)", evicted)
	}
	if n := len(c.running(t, "work")); n != 1 {
		t.Fatalf("allocated job has %d running allocations, want 1", n)
	}
	// allot writes the job's priority only once its victims have stopped: a
	// write while the allocation waits for them makes Nomad replace it
	// ("alloc is being updated due to job update"), a second allocation
	// that starts late and may evict more.
	allocs := c.allocs(t, "work")
	for _, a := range allocs {
		if a.DesiredDescription == "alloc is being updated due to job update" {
			t.Errorf("allocation %s of the allocated job replaced by a job update: allot wrote its priority while it was placed", a.ID)
		}
	}
	if len(allocs) != 1 {
		t.Fatalf("allocated job has %d allocations, want 1", len(allocs))
	}
	vs := c.versions(t, "work")
	if len(vs) < 2 {
		t.Fatalf("allocated job has %d versions: allot never wrote its priority", len(vs))
	}
	if written := time.Unix(0, vs[1].SubmitTime); written.Before(victimsStopped) {
		t.Errorf("allot wrote priority %d at %s, before the last victim stopped at %s", vs[1].Priority,
			written.Format("15:04:05.000"), victimsStopped.Format("15:04:05.000"))
	}
}

// Scenario 2: a running job is not moved inside its protected window; when
// the window ends allot lowers it and stops it as a migration, the pending
// job takes the GPUs, and the victim is requeued and runs again later.
func TestReconcileProtectionThenTimeSlicing(t *testing.T) {
	c := startGPUCluster(t)
	al := startAllot(t, c, allotOptions{})
	now := time.Now()
	al.seedUsage("lab/a", 8, now.Add(-2*time.Hour), now.Add(-time.Hour))

	const window = 15 * time.Second
	c.register(t, gpuJob{ID: "victim", Budget: "lab/a", MinRuntime: "15s", GPUs: 8})
	v := c.waitRunning(t, "victim", 1, 60*time.Second)[0]
	windowEnd := v.started().Add(window)
	c.waitLevel(t, "victim", bands.Protected, "protected", 10*time.Second)
	// The pending job's window (8 GPUs x 30 s) must be worth at least the work
	// the victim loses (8 GPUs x ~15 s): policy MaxSliceLoss refuses a stop that
	// throws away more than the beneficiary is promised.
	c.register(t, gpuJob{ID: "pending", Budget: "lab/b", MinRuntime: "30s", GPUs: 8, Sleep: 6})

	// Inside the window nothing moves.
	waitFor(t, window+5*time.Second, "the protected window to end", func() (bool, error) {
		if time.Now().After(windowEnd.Add(-500 * time.Millisecond)) {
			return true, nil
		}
		if rs := c.running(t, "victim"); len(rs) != 1 || rs[0].ID != v.ID {
			return false, fmt.Errorf("victim moved inside its protected window (ends %s)", windowEnd.Format(time.RFC3339Nano))
		}
		return false, nil
	})
	p := c.waitRunning(t, "pending", 1, 30*time.Second)[0]
	// The victim leaves by allot's migration stop, or by Nomad's own
	// preemption for the pending job: allot lowers the victim a preemption gap
	// below the job it makes room for (so a replacement cannot take the GPUs
	// back, docs/nomad-facts.md b), and Nomad may retry the pending job's blocked eval
	// before the stop lands. Both requeue the victim without spending a
	// reschedule attempt (docs/nomad-facts.md b and c), which is checked below.
	old := c.alloc(t, "victim", v.ID)
	switch {
	case old.DesiredStatus == "stop" && strings.Contains(old.DesiredDescription, "migrat"):
		t.Logf("victim left by allot's migration stop")
	case old.DesiredStatus == "evict" && ownsAlloc(c.allocs(t, "pending"), old.PreemptedByAllocation):
		// The preempting allocation may since have been replaced by another
		// of the pending job's (docs/nomad-facts.md a does not hold while a placement's
		// victims are still stopping: allot's raise to 100 then updates it
		// destructively), so it is matched by job, not against p.
		t.Logf("victim left by Nomad's preemption for the pending job's allocation %s", old.PreemptedByAllocation)
	default:
		t.Fatalf("victim's allocation: desired %s (%q, preempted by %q), want a migration stop or an eviction by the pending job",
			old.DesiredStatus, old.DesiredDescription, old.PreemptedByAllocation)
	}
	lat := old.killedAt().Sub(windowEnd)
	t.Logf("window end -> victim killed: %s; pending job started %s after window end", lat.Round(time.Millisecond),
		p.started().Sub(windowEnd).Round(time.Millisecond))
	if lat < 0 {
		t.Fatalf("victim killed %s before its window ended", -lat)
	}
	lowered := false
	for _, ver := range c.versions(t, "victim") {
		if ver.Priority >= 40 && ver.Priority <= 89 {
			lowered = true
		}
	}
	if !lowered {
		t.Fatalf("victim was never lowered to the pending band before its stop")
	}
	if j := c.job(t, "victim"); j.Status == "dead" {
		t.Fatalf("victim job is dead; want it requeued")
	}
	// The pending job finishes (sleep 6); the victim runs again under the same name.
	again := c.waitRunning(t, "victim", 1, 60*time.Second)[0]
	if again.ID == v.ID || again.Name != v.Name {
		t.Fatalf("victim running again as %s (%s), want a new allocation named %s", again.ID, again.Name, v.Name)
	}
	if again.RescheduleTracker != nil && len(again.RescheduleTracker.Events) > 0 {
		t.Fatalf("replacement spent a reschedule attempt: %+v", again.RescheduleTracker)
	}
	// allot recorded the preemption with its reason.
	found := false
	for _, d := range al.Srv.FSM().Read().Decisions(0) {
		if d.Kind == "preempt" && d.AllocID == v.ID && strings.Contains(d.Reason, "time slicing") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no preempt decision recorded for %s", v.ID)
	}
}

// ownsAlloc reports whether id is one of allocs.
func ownsAlloc(allocs []nomadAlloc, id string) bool {
	for _, a := range allocs {
		if a.ID == id {
			return true
		}
	}
	return false
}
