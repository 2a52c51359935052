package sim

import (
	"bytes"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/policy"
)

// TestHealthLatency: a fault is applied, logged and drained
// Options.HealthLatency after its row (the client's fingerprint reaches
// the servers that much later), and at once without it.
func TestHealthLatency(t *testing.T) {
	tree := exampleTree(t)
	tr := &Trace{
		Jobs: []JobSpec{{ID: "train", Budget: "ai2/nlp/reasoning", Count: 1, GPUs: 8, Work: 2 * time.Hour,
			MinRuntime: 10 * time.Minute, Resumable: true, Priority: 50}},
		Health: []HealthEvent{{At: 30 * time.Minute, Node: "default-0", GPU: 3, Reason: "XID 79"}},
	}
	for _, lat := range []time.Duration{0, 10 * time.Minute} {
		p, err := NewAllot(policy.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		opts := DefaultOptions()
		opts.Warmup, opts.Horizon, opts.HealthLatency = 0, 3*time.Hour, lat
		var buf bytes.Buffer
		_, evs := runLogged(t, tr, UniformCluster(1, 8), tree, p, opts, &buf)
		var health, drain float64 = -1, -1
		for _, e := range evs {
			switch {
			case e.Kind == EventHealth && health < 0:
				health = e.T
			case e.Kind == EventStop && e.Reason == StopDrain.String() && drain < 0:
				drain = e.T
			}
		}
		at := (30*time.Minute + lat).Seconds()
		if health != at {
			t.Errorf("latency %v: health logged at %vs, want %vs", lat, health, at)
		}
		// The job is past its window: the drain stops it at the policy's
		// next pass after the fault is heard (ReactionDelay).
		if drain < at || drain > at+opts.ReactionDelay.Seconds() {
			t.Errorf("latency %v: drain stop at %vs, want within %v of %vs", lat, drain, opts.ReactionDelay, at)
		}
	}
	opts := DefaultOptions()
	opts.HealthLatency = -time.Second
	if _, err := Run(tr, UniformCluster(1, 8), tree, NewBaseline(DefaultBaselineConfig()), opts); err == nil {
		t.Error("a negative health latency ran")
	}
}
