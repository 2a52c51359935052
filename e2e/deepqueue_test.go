package e2e

import (
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/policy"
)

// TestDeepPendingJobsByBudget: past the pending band's first positions,
// jobs sit in its bottom levels by their budget's fair-share place
// (policy.pendingLevel), so when GPUs free up where the first jobs do not
// fit, Nomad (highest priority first, then first come) gives them to the
// less served budget's deeper job rather than to an older job of a budget
// served more. A band of four levels and two budgets: lab/a (nothing used)
// before lab/b (8 GPUs for an hour). a1 and a2 (8 GPUs each) take 43 and
// 42; a3 (8 GPUs) and a4 (4 GPUs) lab/a's bottom level, 41; b-old (4 GPUs,
// registered before them) lab/b's, 40. With every later position on the
// band's bottom (before stop 34) a4 and b-old shared 40 and Nomad served
// them first come. No reservations, so the node stays eligible.
func TestDeepPendingJobsByBudget(t *testing.T) {
	c := startGPUCluster(t)
	al := startAllot(t, c, allotOptions{Policy: func(p *policy.Config) {
		p.Pending = policy.Range{Low: 40, High: 43}
		p.MaxReservations = 0
	}})
	now := time.Now()
	al.seedUsage("lab/b", 8, now.Add(-2*time.Hour), now.Add(-time.Hour))

	// Two protected jobs of lab/b hold the node's 8 GPUs.
	c.register(t, gpuJob{ID: "hold", Budget: "lab/b", MinRuntime: "1h", GPUs: 4})
	c.register(t, gpuJob{ID: "gap", Budget: "lab/b", MinRuntime: "1h", GPUs: 4})
	c.waitRunning(t, "hold", 1, 60*time.Second)
	c.waitRunning(t, "gap", 1, 60*time.Second)

	c.register(t, gpuJob{ID: "b-old", Budget: "lab/b", MinRuntime: "1h", GPUs: 4})
	for _, id := range []string{"a1", "a2", "a3"} {
		c.register(t, gpuJob{ID: id, Budget: "lab/a", MinRuntime: "1h", GPUs: 8})
	}
	c.register(t, gpuJob{ID: "a4", Budget: "lab/a", MinRuntime: "1h", GPUs: 4})
	for _, w := range []struct {
		job   string
		level int
		what  string
	}{
		{"a1", 43, "1st in the pending queue"},
		{"a2", 42, "2nd"},
		{"a3", 41, "3rd: lab/a's bottom level"},
		{"a4", 41, "4th: lab/a's bottom level"},
		{"b-old", 40, "5th: lab/b's bottom level"},
	} {
		c.waitLevel(t, w.job, w.level, w.what, 30*time.Second)
	}

	// 4 GPUs free up: a1-a3 do not fit them, a4 sits above b-old.
	c.stopJob(t, "gap")
	c.waitRunning(t, "a4", 1, 60*time.Second)
	if rs := c.running(t, "b-old"); len(rs) != 0 {
		t.Fatalf("b-old (lab/b, served more) took the GPUs: %+v", rs)
	}
}
