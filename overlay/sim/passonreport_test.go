package sim

import (
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/policy"
)

// reportProbe is a policy that pulls no lever and records what it sees:
// the node's free GPUs at each decision (Prepare) and when its plan is
// carried out (Commit), and at each ordinary reconcile.
type reportProbe struct {
	prepared, committed, reconciled []int
}

func (*reportProbe) Name() string                     { return "probe" }
func (*reportProbe) Init(*State, *budgets.Tree) error { return nil }
func (*reportProbe) SubmitPriority(*State, int32) int { return 50 }
func (r *reportProbe) Reconcile(s *State) time.Duration {
	r.reconciled = append(r.reconciled, s.Node(0).FreeGPUs)
	return 0
}
func (r *reportProbe) Prepare(s *State) *policy.Plan {
	r.prepared = append(r.prepared, s.Node(0).FreeGPUs)
	return nil
}
func (r *reportProbe) Commit(s *State, _ *policy.Plan) time.Duration {
	r.committed = append(r.committed, s.Node(0).FreeGPUs)
	return 0
}

// With Options.PassOnReport the policy decides when Nomad hears that a task
// finished, on the view with its GPUs free and before the scheduler places
// the waiting job there, and its plan is carried out after that placement;
// without it, the policy only reconciles ReactionDelay later, with the GPUs
// taken. (Fidelity run 46, reserve: allot reserved 17 times on Nomad's
// side, each a few trace seconds after a finish, and once in the model.)
func TestPassOnReport_DecidesBeforeThePlacements(t *testing.T) {
	tree, err := budgets.NewTree([]budgets.Spec{{Path: "lab", Share: 1}, {Path: "lab/a", Share: 1}})
	if err != nil {
		t.Fatal(err)
	}
	tr := &Trace{Jobs: []JobSpec{
		{ID: "first", Count: 1, GPUs: 4, Work: 10 * time.Minute},
		{ID: "waiting", Submit: time.Minute, Count: 1, GPUs: 4, Work: 10 * time.Minute},
	}}
	for _, on := range []bool{true, false} {
		opts := DefaultOptions()
		opts.FinishLatency, opts.ReactionDelay, opts.PassOnReport = 30*time.Second, 5*time.Second, on
		opts.Horizon = time.Hour
		p := &reportProbe{}
		if _, err := Run(tr, UniformCluster(1, 4), tree, p, opts); err != nil {
			t.Fatal(err)
		}
		if !on {
			if len(p.prepared) != 0 {
				t.Errorf("off: Prepare called %d times, want none", len(p.prepared))
			}
			continue
		}
		// The first job's finish is reported at 10m30s: one pass then, that
		// saw its 4 GPUs free, and whose plan landed once "waiting" held them.
		if len(p.prepared) != 2 || p.prepared[0] != 4 || p.committed[0] != 0 {
			t.Errorf("on: free GPUs seen when deciding %v, when carrying out %v; want the first report's pass to see 4 and carry out at 0", p.prepared, p.committed)
		}
	}
}
