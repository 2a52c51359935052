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
	p.inc.Explanations = true
	decisions, checked, late := 0, 0, 0
	fill := Epoch.Add(6 * time.Hour)
	p.verify = func(plan *policy.Plan, now time.Time) {
		decisions++
		if now.After(fill) && decisions%29 != 0 {
			return
		}
		want := policy.Decide(p.inc.Snapshot(), p.tree, p.fs, now, p.cfg)
		if !reflect.DeepEqual(plan, want) {
			t.Fatalf("decision %d at %v: the Incremental's plan differs from Decide on its snapshot", decisions, now)
		}
		checked++
		if now.After(fill) {
			late++
		}
	}
	opts := DefaultOptions()
	opts.Horizon = 48 * time.Hour
	if _, err := Run(tr, UniformCluster(128, 8), tree, p, opts); err != nil {
		t.Fatal(err)
	}
	if checked < 500 || late < 100 {
		t.Fatalf("only %d decisions checked (%d on a full cluster)", checked, late)
	}
	t.Logf("%d of %d decisions checked (%d on a full cluster)", checked, decisions, late)
}
