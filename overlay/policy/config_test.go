package policy

import (
	"strings"
	"testing"
)

// The default bands keep the running band out of reach of a job Nomad
// places at protected (docs/nomad-facts.md b: a preemption needs a gap of
// preemption_gap), for every job_max_priority, and Validate refuses bands
// that do not.
func TestBandsKeepRunningOutOfProtectedReach(t *testing.T) {
	for _, max := range []int{100, 1000, maxNomadPriority} {
		c := ConfigForMaxPriority(max)
		if err := c.Validate(); err != nil {
			t.Fatalf("job_max_priority %d: %v", max, err)
		}
		if c.Protected > max || c.Protected-c.Running >= c.PreemptionGap || c.Running <= c.Pending.High {
			t.Fatalf("job_max_priority %d: protected %d, running %d, pending %v, gap %d", max, c.Protected, c.Running, c.Pending, c.PreemptionGap)
		}
	}
	c := DefaultConfig()
	c.Protected = c.Running + c.PreemptionGap
	ps := c.Problems()
	if len(ps) != 1 || !strings.Contains(ps[0].Message, "protected = 100 is preemption_gap (10) or more above running = 90") ||
		!strings.Contains(ps[0].Message, "want protected from 91 to 99") || ps[0].Fields[0] != "Protected" {
		t.Fatalf("protected a gap above running: %+v", ps)
	}
	c.Protected--
	if err := c.Validate(); err != nil {
		t.Fatalf("protected %d, running %d: %v", c.Protected, c.Running, err)
	}
}
