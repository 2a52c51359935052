package sim

import (
	"reflect"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/policy"
)

// TestAllotIncrementalMatchesDecide runs the example scenario for a few
// hours with the allot adapter and checks every plan of its Incremental,
// explanations included, against policy.Decide on the Incremental's
// Snapshot: the deltas fed from the model lose nothing.
func TestAllotIncrementalMatchesDecide(t *testing.T) {
	tree := exampleTree(t)
	g := DefaultGenConfig()
	g.Days = 0.25
	tr, err := Generate(tree, g)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewAllot(policyDefault())
	if err != nil {
		t.Fatal(err)
	}
	p.inc.Explanations = true
	checked := 0
	p.verify = func(plan *policy.Plan, now time.Time) {
		want := policy.Decide(p.inc.Snapshot(), p.tree, p.fs, now, p.cfg)
		if !reflect.DeepEqual(plan, want) {
			t.Fatalf("decision %d at %v: the Incremental's plan differs from Decide on its snapshot", checked, now)
		}
		checked++
	}
	if _, err := Run(tr, UniformCluster(128, 8), tree, p, DefaultOptions()); err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d decisions checked", checked)
	}
	t.Logf("%d decisions checked", checked)
}
