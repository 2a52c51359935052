package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Comparison is the JSON form of a side-by-side run: deterministic for the
// same inputs and seed (no wall-clock figures).
type Comparison struct {
	Seed    uint64    `json:"seed"`
	Results []*Result `json:"results"`
}

// WriteJSON writes the results as indented JSON.
func WriteJSON(w io.Writer, seed uint64, rs []*Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(Comparison{Seed: seed, Results: rs})
}

func fmtWait(sec float64) string {
	d := time.Duration(sec) * time.Second
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(sec))
	case d < time.Hour:
		return fmt.Sprintf("%.1fm", d.Minutes())
	case d < 48*time.Hour:
		return fmt.Sprintf("%.1fh", d.Hours())
	}
	return fmt.Sprintf("%.1fd", d.Hours()/24)
}

// WriteSummary writes the side-by-side text comparison of the runs.
func WriteSummary(w io.Writer, rs []*Result) error {
	if len(rs) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(label string, f func(r *Result) string) {
		cells := []string{label}
		for _, r := range rs {
			cells = append(cells, f(r))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	row("", func(r *Result) string { return r.Policy })
	row("simulated days (first hours left out)", func(r *Result) string {
		return fmt.Sprintf("%.1f (%gh)", r.Days, r.WarmupHours)
	})
	row("GPUs", func(r *Result) string { return fmt.Sprint(r.GPUs) })
	row("jobs submitted / finished", func(r *Result) string { return fmt.Sprintf("%d / %d", r.Jobs, r.Finished) })
	row("jobs killed (drain deadline, whole run)", func(r *Result) string { return fmt.Sprint(r.Dead) })
	row("unfinished at the end: running / pending", func(r *Result) string {
		return fmt.Sprintf("%d / %d", r.AtEnd.Running, r.AtEnd.Pending)
	})
	row("GPU hours of work left at the end", func(r *Result) string { return fmt.Sprintf("%.0f", r.AtEnd.UnfinishedGPUHours) })
	row("the run ended at (-horizon runs on)", func(r *Result) string { return r.AtEnd.Horizon })
	if slices.ContainsFunc(rs, func(r *Result) bool { return r.NeverPlaceable > 0 }) {
		row("jobs no node of their pool/model can place", func(r *Result) string { return fmt.Sprint(r.NeverPlaceable) })
	}
	classes := map[string]bool{}
	var order []string
	for _, r := range rs {
		for _, c := range r.Waits {
			if !classes[c.Class] {
				classes[c.Class] = true
				order = append(order, c.Class)
			}
		}
	}
	for _, c := range order {
		get := func(r *Result) *ClassWaits {
			for k := range r.Waits {
				if r.Waits[k].Class == c {
					return &r.Waits[k]
				}
			}
			return nil
		}
		row(c+" wait p50 / p90 / p99", func(r *Result) string {
			if x := get(r); x != nil {
				return fmtWait(x.P50) + " / " + fmtWait(x.P90) + " / " + fmtWait(x.P99)
			}
			return "-"
		})
		row(c+" never started (waits to the end)", func(r *Result) string {
			if x := get(r); x != nil && x.CensoredKilled > 0 {
				return fmt.Sprintf("%d of %d (%d killed)", x.Censored, x.Jobs, x.CensoredKilled)
			}
			if x := get(r); x != nil {
				return fmt.Sprintf("%d of %d", x.Censored, x.Jobs)
			}
			return "-"
		})
		row(c+" wait after requeue p50 / p90", func(r *Result) string {
			if x := get(r); x != nil && x.Requeues > 0 {
				return fmt.Sprintf("%s / %s (%d)", fmtWait(x.RequeueP50), fmtWait(x.RequeueP90), x.Requeues)
			}
			return "-"
		})
	}
	for k := range rs[0].Preemptions {
		reason := rs[0].Preemptions[k].Reason
		row("stopped allocs (GPU h lost): "+reason, func(r *Result) string {
			for _, p := range r.Preemptions {
				if p.Reason == reason {
					return fmt.Sprintf("%d (%.0f)", p.Allocations, p.LostGPUHours)
				}
			}
			return "-"
		})
	}
	row("lost GPU hours (work redone)", func(r *Result) string { return fmt.Sprintf("%.0f", r.LostGPUHours) })
	row("of it whole runs of jobs not resumable / on a 2nd+ stop", func(r *Result) string {
		return fmt.Sprintf("%.0f / %.0f", r.LostWholeGPUHours, r.LostAgainGPUHours)
	})
	row("priority writes: all / free work between levels", func(r *Result) string {
		return fmt.Sprintf("%d / %d", r.PriorityWrites, r.FreeLevelWrites)
	})
	row("notices: allocations signalled / stops that lost nothing", func(r *Result) string {
		return fmt.Sprintf("%d / %d", r.Notices.Signalled, r.Notices.Saved)
	})
	row("waits added by notices p50 / p90 (hours)", func(r *Result) string {
		n := r.Notices
		return fmtWait(n.WaitP50) + " / " + fmtWait(n.WaitP90) + fmt.Sprintf(" (%.0f)", n.WaitHours)
	})
	row("session stops / sessions that lost state", func(r *Result) string {
		return fmt.Sprintf("%d / %d", r.Notices.Sessions, r.Notices.SessionsLost)
	})
	row("stalled GPU hours (held without progress)", func(r *Result) string { return fmt.Sprintf("%.0f", r.StalledGPUHours) })
	row("occupancy allocated / unallocated / stalled / idle", func(r *Result) string {
		o := r.Occupancy
		return fmt.Sprintf("%.1f%% / %.1f%% / %.1f%% / %.1f%%", 100*o.Allocated, 100*o.Unallocated, 100*o.Stalled, 100*o.Idle)
	})
	row("budgets at >= 95% of owed", func(r *Result) string { return fmt.Sprintf("%d of %d", r.BudgetsAt95, len(r.Budgets)) })
	row("worst budget (delivered/owed)", func(r *Result) string {
		return fmt.Sprintf("%s %.0f%%", r.WorstBudget, 100*r.WorstRatio)
	})
	row("unhealthy episodes: drained / recovered first / open", func(r *Result) string {
		d := r.Drains
		return fmt.Sprintf("%d / %d / %d", d.Drained, d.Recovered, d.NotDrained)
	})
	row("time to drained p50 / p90 / max", func(r *Result) string {
		if r.Drains.Drained == 0 {
			return "-"
		}
		return fmtWait(r.Drains.P50) + " / " + fmtWait(r.Drains.P90) + " / " + fmtWait(r.Drains.Max)
	})
	row("drain GPU hours: work lost / idle cordoned", func(r *Result) string {
		return fmt.Sprintf("%.0f / %.0f", r.Drains.LostGPUHours, r.Drains.IdleGPUHours)
	})
	row("drain: jobs killed without replacement", func(r *Result) string { return fmt.Sprint(r.Drains.Killed) })
	row("drains that needed no operator", func(r *Result) string {
		if r.Drains.Drained == 0 {
			return "-"
		}
		return fmt.Sprintf("%d of %d (%.0f%%)", r.Drains.NoOperator, r.Drains.Drained, 100*r.Drains.NoOperatorShare)
	})
	if len(rs[0].Budgets) > 0 {
		fmt.Fprintln(tw, "\t")
		row("delivered / owed GPU hours (ratio, same hour)", func(r *Result) string { return r.Policy })
		for k := range rs[0].Budgets {
			b := rs[0].Budgets[k].Budget
			row(b, func(r *Result) string {
				for _, x := range r.Budgets {
					if x.Budget == b {
						return budgetCell(x)
					}
				}
				return "-"
			})
		}
	}
	return tw.Flush()
}

// budgetCell is a leaf's "delivered / owed (ratio, same-hour ratio)", and
// the GPU hours of demand left out of owed because no node of its jobs' pool
// and model can hold them (BudgetResult.Unservable), when there were any.
func budgetCell(x BudgetResult) string {
	c := fmt.Sprintf("%.0f / %.0f (%.0f%%, %.0f%%)", x.Delivered, x.Owed, 100*x.Ratio, 100*x.CreditedRatio)
	if x.Unservable > 0 {
		c += fmt.Sprintf(", %.0f unplaceable not owed", x.Unservable)
	}
	return c
}
