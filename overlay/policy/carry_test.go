package policy

import (
	"slices"
	"testing"
	"time"
)

// The memory carried keeps what the caller carried out: held victims whose
// stop went through, victims held without a stop (a lander), this plan's
// stops and evaluations that went through, and what earlier plans issued;
// a failed or skipped action leaves nothing behind. Nothing failed: the
// plan's memory whole.
func TestCarryRemember(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	before := now.Add(-10 * time.Second)
	plan := &Plan{Now: now,
		Stops: []StopJob{
			{Job: "default/v1", Namespace: "default", Allocs: []string{"a1"}},
			{Job: "default/v2", Namespace: "default", Allocs: []string{"a2"}},
		},
		Evaluations: []Evaluate{{Job: "default/b1"}, {Job: "default/b2"}},
		Victims: []Victim{
			{Job: "default/v1", For: "default/b1", Since: now},
			{Job: "default/v2", For: "default/b2", Since: now},
			{Job: "default/v0", For: "default/b0", Since: before},
			{Job: "default/lander", For: "default/b1", Since: now}, // held, not stopped
		},
		Issued: []Issued{
			{Kind: IssuedStop, Job: "default/v0", Allocs: []string{"a0"}, At: before},
			{Kind: IssuedStop, Job: "default/v1", Allocs: []string{"a1"}, At: now},
			{Kind: IssuedStop, Job: "default/v2", Allocs: []string{"a2"}, At: now},
			{Kind: IssuedEvaluate, Job: "default/b1", At: now},
			{Kind: IssuedEvaluate, Job: "default/b2", At: now},
		},
		Reservations: []Reservation{{Job: "default/big", Nodes: []string{"n1"}, Since: before}},
	}
	names := func(c *Carry) (victims, issued []string) {
		for _, v := range c.Victims {
			victims = append(victims, v.Job)
		}
		for _, is := range c.Issued {
			issued = append(issued, is.Kind.String()+" "+is.Job)
		}
		return victims, issued
	}
	for _, tc := range []struct {
		name            string
		failed          Failed
		victims, issued []string
	}{
		{"second stop and evaluation failed", Failed{Stops: []int{1}, Evaluations: []int{1}},
			[]string{"default/v1", "default/v0", "default/lander"}, []string{"stop default/v0", "stop default/v1", "evaluate default/b1"}},
		{"nothing failed", Failed{},
			[]string{"default/v1", "default/v2", "default/v0", "default/lander"},
			[]string{"stop default/v0", "stop default/v1", "stop default/v2", "evaluate default/b1", "evaluate default/b2"}},
		{"everything failed", Failed{Stops: []int{0, 1}, Evaluations: []int{0, 1}},
			[]string{"default/v0", "default/lander"}, []string{"stop default/v0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Carry
			c.Remember(&Plan{Now: before, Victims: []Victim{{Job: "old"}}}, Failed{}) // replaced below
			c.Remember(plan, tc.failed)
			v, is := names(&c)
			if !slices.Equal(v, tc.victims) {
				t.Errorf("victims %v, want %v", v, tc.victims)
			}
			if !slices.Equal(is, tc.issued) {
				t.Errorf("issued %v, want %v", is, tc.issued)
			}
			if !c.LastDecision.Equal(now) || len(c.Reservations) != 1 || c.Reservations[0].Job != "default/big" {
				t.Errorf("last decision %v, reservations %v; want %v and the plan's one", c.LastDecision, c.Reservations, now)
			}
			var s Snapshot
			c.Fill(&s)
			if len(s.Victims) != len(c.Victims) || len(s.Issued) != len(c.Issued) || !s.LastDecision.Equal(now) || len(s.Reservations) != 1 {
				t.Errorf("Fill: %+v, want the carried memory", s)
			}
		})
	}
}

// A node's HealthySince is when it turned healthy after being seen
// unhealthy, zero while unhealthy and for a node healthy since first seen;
// a node first seen healthy while held draining or drained is healthy
// since then, so that it waits its whole DrainReturnAfter.
func TestCarryHealth(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var c Carry
	steps := []struct {
		node    string
		healthy bool
		state   NodeState
		now     time.Time
		want    time.Time
	}{
		{"n1", true, NodeNormal, at(0), time.Time{}},     // healthy from the start
		{"n2", false, NodeNormal, at(0), time.Time{}},    // unhealthy from the start
		{"n3", true, NodeDrained, at(0), at(0)},          // a new leader finds it drained and healthy
		{"n1", true, NodeNormal, at(5), time.Time{}},     // still healthy
		{"n2", true, NodeDraining, at(5), at(5)},         // repaired
		{"n2", true, NodeDraining, at(9), at(5)},         // keeps its since
		{"n2", false, NodeDraining, at(12), time.Time{}}, // faulty again
		{"n2", true, NodeDraining, at(20), at(20)},       // and repaired again
		{"n3", true, NodeDrained, at(20), at(0)},
	}
	for i, s := range steps {
		if got := c.Health(s.node, s.healthy, s.state, s.now); !got.Equal(s.want) {
			t.Errorf("step %d: Health(%s, healthy=%t) = %v, want %v", i, s.node, s.healthy, got, s.want)
		}
	}
}
