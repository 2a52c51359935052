package sim

import (
	"slices"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
)

// passProbe is a policy that pulls no lever and records when it runs; its
// plans ask to be woken at wake after the start (0: never).
type passProbe struct {
	at   []int64
	wake time.Duration
}

func (*passProbe) Name() string                     { return "probe" }
func (*passProbe) Init(*State, *budgets.Tree) error { return nil }
func (*passProbe) SubmitPriority(*State, int32) int { return 50 }
func (p *passProbe) Reconcile(s *State) time.Duration {
	p.at = append(p.at, s.now)
	return p.wake
}

// With Options.ReconcileInterval the policy runs at most that long after
// its last pass, as allot's leader does between events (fair-share
// standings move with usage, and a real allot acts on a crossing at its next
// periodic pass); a wake its plan asks for sooner still comes first.
// Without it, the policy runs only on events and its plans' wakes.
func TestReconcileInterval_PassesBetweenEvents(t *testing.T) {
	tree, err := budgets.NewTree([]budgets.Spec{{Path: "lab", Share: 1}, {Path: "lab/a", Share: 1}})
	if err != nil {
		t.Fatal(err)
	}
	tr := &Trace{Jobs: []JobSpec{{ID: "long", Count: 1, GPUs: 4, Work: 2 * time.Hour}}}
	run := func(interval, wake time.Duration) []int64 {
		opts := DefaultOptions()
		opts.ReactionDelay, opts.ReconcileInterval, opts.Horizon = 0, interval, 90*time.Minute
		p := &passProbe{wake: wake}
		if _, err := Run(tr, UniformCluster(1, 4), tree, p, opts); err != nil {
			t.Fatal(err)
		}
		return p.at
	}
	if got, want := run(0, 0), []int64{0}; !slices.Equal(got, want) {
		t.Errorf("no interval: passes at %v s, want %v (the submission only)", got, want)
	}
	if got, want := run(30*time.Minute, 0), []int64{0, 1800, 3600, 5400}; !slices.Equal(got, want) {
		t.Errorf("30m interval: passes at %v s, want %v", got, want)
	}
	// A plan's wake 10 minutes in (Epoch + 10m) comes before the interval's.
	if got, want := run(30*time.Minute, 10*time.Minute), []int64{0, 600, 2400, 4200}; !slices.Equal(got, want) {
		t.Errorf("30m interval, wake at 10m: passes at %v s, want %v", got, want)
	}
}
