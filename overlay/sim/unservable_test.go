package sim

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// A leaf whose only job names a node pool no node is in asks for nothing a
// scheduler could give it: Nomad keeps the job blocked for ever, and fair
// share gives the leaf's share to the others meanwhile. Its demand is left
// out of owed for both policies, and the report says how much: counted, the
// leaf read 0% of owed and was every run's worst leaf.
func TestUnservableDemandNotOwed(t *testing.T) {
	tree := exampleTree(t)
	job := func(id, budget, pool string, at time.Duration) JobSpec {
		return JobSpec{ID: id, Budget: budget, Submit: at, Class: ClassTrain, Count: 1, GPUs: 8,
			Work: 10 * time.Hour, MinRuntime: time.Hour, Resumable: true, Pool: pool}
	}
	tr := &Trace{Jobs: []JobSpec{
		job("nowhere", "ai2/nlp/safety", "cpu", 0), // no node is in pool "cpu"
		job("runs", "ai2/nlp/reasoning", "", 0),
	}}
	opts := DefaultOptions()
	opts.Horizon, opts.Warmup = 6*time.Hour, 0
	for _, p := range []Policy{mustAllot(t), NewBaseline(DefaultBaselineConfig())} {
		r, err := Run(tr, UniformCluster(1, 8), tree, p, opts)
		if err != nil {
			t.Fatal(err)
		}
		if r.NeverPlaceable != 1 {
			t.Fatalf("%s: NeverPlaceable = %d, want 1", r.Policy, r.NeverPlaceable)
		}
		for _, b := range r.Budgets {
			switch b.Budget {
			case "ai2/nlp/safety":
				if b.Owed != 0 || b.Demand != 0 || b.Ratio != 1 || b.Unservable != 48 {
					t.Errorf("%s: the leaf of the unplaceable job: owed %.1f, demand %.1f, ratio %.2f, unservable %.1f GPU h; want 0, 0, 1, 48",
						r.Policy, b.Owed, b.Demand, b.Ratio, b.Unservable)
				}
			case "ai2/nlp/reasoning":
				if b.Delivered != 48 || b.Unservable != 0 {
					t.Errorf("%s: the placed job's leaf: delivered %.1f, unservable %.1f GPU h; want 48, 0", r.Policy, b.Delivered, b.Unservable)
				}
			}
		}
		f := FiguresOf(r)
		if f.WorstBudget == "ai2/nlp/safety" || f.WorstRatio < 1 {
			t.Errorf("%s: worst leaf %s at %.2f; the unplaceable job's leaf is owed nothing", r.Policy, f.WorstBudget, f.WorstRatio)
		}
		var out bytes.Buffer
		if err := WriteSummary(&out, []*Result{r}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "0 / 0 (100%, 100%), 48 unplaceable not owed") {
			t.Errorf("%s: the report does not say the unplaceable demand was left out:\n%s", r.Policy, out.String())
		}
	}
}
