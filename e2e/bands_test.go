package e2e

import (
	"testing"
	"time"
)

// TestProtectedPlacementSparesRunningBand: with allot's default bands, a
// job Nomad places at the protected level (a protected job placed again:
// rescheduled, migrated off a drained node, or replaced by a priority
// write) cannot preempt a job of the running band, which only allot may
// stop; one placed a preemption gap above running does (the bands before
// stop 33, protected 100 over running 90: the fidelity harness counted 15,
// 6 and 12 running-band allocations so preempted in runs 27-29). r holds
// the node's 8 GPUs at bands.Running; p, asking for 8, is registered at
// bands.Protected and its evaluation ends blocked with r untouched; q at
// bands.Running+PreemptionGap then preempts r.
func TestProtectedPlacementSparesRunningBand(t *testing.T) {
	c := startGPUCluster(t)
	c.agent.preemptionOn(t)
	c.register(t, gpuJob{ID: "r", Priority: bands.Running, GPUs: 8})
	r := c.waitRunning(t, "r", 1, 60*time.Second)[0]

	c.register(t, gpuJob{ID: "p", Priority: bands.Protected, GPUs: 8})
	waitFor(t, 30*time.Second, "p's evaluation done", func() (bool, error) {
		var evals []struct{ Status string }
		if err := c.agent.Get("/v1/job/p/evaluations", &evals); err != nil {
			return false, err
		}
		for _, e := range evals {
			if e.Status == "blocked" || e.Status == "complete" {
				return true, nil
			}
		}
		return false, nil
	})
	if as := live(c.allocs(t, "p")); len(as) != 0 {
		t.Fatalf("p (priority %d) was placed on the full node: %+v", bands.Protected, as)
	}
	if rs := c.running(t, "r"); len(rs) != 1 || rs[0].ID != r.ID {
		t.Fatalf("r (priority %d) lost its allocation to p (priority %d): %+v", bands.Running, bands.Protected, c.allocs(t, "r"))
	}

	c.register(t, gpuJob{ID: "q", Priority: bands.Running + bands.PreemptionGap, GPUs: 8})
	waitFor(t, 30*time.Second, "r preempted for q, a preemption gap above it", func() (bool, error) {
		for _, a := range c.allocs(t, "r") {
			if a.ID == r.ID && a.DesiredStatus == "evict" {
				return true, nil
			}
		}
		return false, nil
	})
}
