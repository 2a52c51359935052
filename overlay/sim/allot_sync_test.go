package sim

import (
	"reflect"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/policy"
)

// TestAllotIncrementalMatchesDecide runs the example scenario with the
// allot adapter and checks plans of its Incremental, explanations
// included, against policy.Decide on the Incremental's Snapshot: the deltas
// fed from the model lose nothing. Every plan of the first 6 hours (the
// cluster filling up) is checked, then one in 29 over two days of a full
// cluster: time slicing, reservations, drains, free work evicted.
func TestAllotIncrementalMatchesDecide(t *testing.T) {
	tree := exampleTree(t)
	g := DefaultGenConfig()
	g.Days = 2
	tr, err := Generate(tree, g)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewAllot(policyDefault())
	if err != nil {
		t.Fatal(err)
	}
	checked, late := 0, 0
	fill := Epoch.Add(6 * time.Hour)
	decisions := matchDecide(t, p, func(n int, now time.Time) bool { return !now.After(fill) || n%29 == 0 },
		func(_ *policy.Plan, now time.Time) {
			checked++
			if now.After(fill) {
				late++
			}
		})
	opts := DefaultOptions()
	opts.Horizon = 48 * time.Hour
	if _, err := Run(tr, UniformCluster(128, 8), tree, p, opts); err != nil {
		t.Fatal(err)
	}
	if checked < 500 || late < 100 {
		t.Fatalf("only %d decisions checked (%d on a full cluster)", checked, late)
	}
	t.Logf("%d of %d decisions checked (%d on a full cluster)", checked, *decisions, late)
}

// matchDecide makes p, with explanations on, check the plans of its
// Incremental that sample picks (by the decision's 1-based count and time)
// against policy.Decide on the Incremental's Snapshot, failing t at the
// first that differs; checked sees each plan Decide made for a checked
// decision. It returns the count of decisions, kept as the run goes.
func matchDecide(t *testing.T, p *Allot, sample func(n int, now time.Time) bool, checked func(want *policy.Plan, now time.Time)) *int {
	p.inc.Explanations = true
	decisions := 0
	p.verify = func(plan *policy.Plan, now time.Time) {
		decisions++
		if !sample(decisions, now) {
			return
		}
		want := policy.Decide(p.inc.Snapshot(), p.tree, p.fs, now, p.cfg)
		if !reflect.DeepEqual(plan, want) {
			t.Fatalf("decision %d at %v: the Incremental's plan differs from Decide on its snapshot", decisions, now)
		}
		checked(want, now)
	}
	return &decisions
}

// syncChecked is the allot policy with a check before each decision: once
// syncModel has fed the model's changes in, the Incremental holds exactly
// the model's live jobs and allocations (syncModel finds the ended ones
// through State.ended, not a scan of every allocation put).
type syncChecked struct {
	*Allot
	t      *testing.T
	checks int
}

func (c *syncChecked) Reconcile(s *State) time.Duration {
	c.syncModel(s, at(s.now)) // Reconcile's own sync then finds nothing new
	snap := c.inc.Snapshot()
	got := map[string]bool{}
	for _, a := range snap.Allocs {
		got[a.ID] = true
	}
	want := 0
	for al := range s.allocs {
		r := &s.allocs[al]
		if r.end >= 0 || s.jobs[r.job].status >= StatusDone {
			continue
		}
		want++
		if !got[c.allocID(int32(al))] {
			c.t.Fatalf("at %v: allocation %d of job %s runs in the model, not in the Incremental", time.Duration(s.now)*time.Second, al, s.jobs[r.job].spec.ID)
		}
	}
	if len(got) != want {
		c.t.Fatalf("at %v: the Incremental holds %d allocations, the model %d live ones", time.Duration(s.now)*time.Second, len(got), want)
	}
	jobs := 0
	for i := range s.jobs {
		if st := s.jobs[i].status; st != StatusFuture && st < StatusDone {
			jobs++
		}
	}
	if len(snap.Jobs) != jobs {
		c.t.Fatalf("at %v: the Incremental holds %d jobs, the model %d submitted and not done", time.Duration(s.now)*time.Second, len(snap.Jobs), jobs)
	}
	c.checks++
	return c.Allot.Reconcile(s)
}

// TestAllotSyncMatchesModel checks syncModel's invariant at every decision
// of 12 hours of the example scenario, the cluster filling up and full.
func TestAllotSyncMatchesModel(t *testing.T) {
	tree := exampleTree(t)
	g := DefaultGenConfig()
	g.Days = 1
	tr, err := Generate(tree, g)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAllot(policyDefault())
	if err != nil {
		t.Fatal(err)
	}
	c := &syncChecked{Allot: a, t: t}
	opts := DefaultOptions()
	opts.Horizon = 12 * time.Hour
	if _, err := Run(tr, UniformCluster(128, 8), tree, c, opts); err != nil {
		t.Fatal(err)
	}
	if c.checks < 200 || a.sync.nextEnded < 1000 {
		t.Fatalf("only %d decisions checked, %d allocations ended: the test does not exercise the sync", c.checks, a.sync.nextEnded)
	}
	t.Logf("%d decisions checked, %d allocations ended", c.checks, a.sync.nextEnded)
}
