package uitest

import (
	"context"
	"fmt"
	"time"

	"github.com/allot-sched/allot/overlay/client"
)

// SeedLarge applies a tree of programs × projects × leaves budgets (10 × 10
// × 10 is the 1,000 leaves the UI's load-time target names) and charges
// every leaf over the retention (14 days by default, less its oldest 10
// minutes, which the server refuses) so that the minute buckets hold values: leaf k runs 1 + k%8 GPUs and
// wants 2 + k%8. The cluster has no nodes; capacity is 0.
func SeedLarge(ctx context.Context, cl *client.Client, now time.Time, programs, projects, leaves int, retention time.Duration) error {
	specs := []client.BudgetSpec{{Path: "lab"}}
	var paths []string
	for p := range programs {
		pp := fmt.Sprintf("lab/program-%02d", p)
		specs = append(specs, client.BudgetSpec{Path: pp, Share: float64(1 + p%4)})
		for q := range projects {
			qp := fmt.Sprintf("%s/project-%02d", pp, q)
			specs = append(specs, client.BudgetSpec{Path: qp, Share: float64(1 + q%3)})
			for l := range leaves {
				lp := fmt.Sprintf("%s/team-%02d", qp, l)
				specs = append(specs, client.BudgetSpec{Path: lp, Share: float64(1 + l%5)})
				paths = append(paths, lp)
			}
		}
	}
	if _, err := cl.ApplyBudgets(ctx, &client.BudgetsApply{Revision: "large", Budgets: specs}); err != nil {
		return fmt.Errorf("applying %d budgets: %w", len(specs), err)
	}
	// The server takes writes back to its retention less a bucket and its
	// clock skew allowance (a minute each by default): all but the oldest
	// 10 minutes of the retention are filled.
	from := now.Add(-retention + 10*time.Minute)
	// Batches of 50 charges (each 14 days of minute buckets) keep every
	// request well inside the client timeout on a loaded machine.
	for i := 0; i < len(paths); i += 50 {
		var led client.LedgerAppend
		for k := i; k < min(i+50, len(paths)); k++ {
			led.Charges = append(led.Charges, client.Charge{Alloc: "large-" + paths[k], Budget: paths[k], GPUs: 1 + k%8, From: from, To: now})
			led.Demand = append(led.Demand, client.Demand{Budget: paths[k], GPUs: 2 + k%8, From: from, To: now})
		}
		res, err := cl.AppendLedger(ctx, &led)
		if err != nil {
			return fmt.Errorf("appending the ledger: %w", err)
		}
		if len(res.Errors) > 0 {
			return fmt.Errorf("appending the ledger: %v", res.Errors)
		}
	}
	return nil
}
