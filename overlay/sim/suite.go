package sim

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// Figures are the suite's figures of one run (`allot sim suite`): what the
// issue-12 targets are stated in. Times are in seconds.
type Figures struct {
	Policy string `json:"policy"`
	// Debug waits, submit to first start (never started: censored at the
	// horizon), of debug jobs submitted after the warm-up.
	DebugJobs                    int     `json:"debug_jobs"`
	DebugP50, DebugP90, DebugP99 float64 `json:"-"`
	// Leaves: each leaf with owed time, delivered / owed.
	Leaves      int     `json:"leaves_owed"`
	LeavesAt95  int     `json:"leaves_at_95pct"`
	WorstBudget string  `json:"worst_budget"`
	WorstRatio  float64 `json:"worst_ratio"`
	// AllLeaves is the owed time delivered, summed over the leaves (each
	// leaf's delivered time counted up to what it is owed), over the owed
	// time of every leaf (1 when nothing is owed).
	AllLeaves float64 `json:"all_leaves_ratio"`
	// CreditedAt95 and CreditedAllLeaves are the same two figures read hour
	// by hour (BudgetResult.CreditedRatio, as `allot usage` prints beside
	// delivered/owed): each hour's delivered counted up to that hour's owed.
	CreditedAt95      int     `json:"credited_leaves_at_95pct"`
	CreditedAllLeaves float64 `json:"credited_all_leaves_ratio"`
	// Occupancy counts GPU time of jobs making progress, allocated or free;
	// Stalled is GPU time held by jobs placed in part (or otherwise held
	// without progress), counted apart: both fractions of capacity.
	Occupancy float64 `json:"occupancy"`
	Stalled   float64 `json:"stalled"`
	LostHours float64 `json:"lost_gpu_hours"`
	// LostWholeHours and LostAgainHours are Result.LostWholeGPUHours and
	// Result.LostAgainGPUHours: whole runs of jobs not resumable thrown
	// away, and of those on a job's second or later stop.
	LostWholeHours float64 `json:"lost_whole_run_gpu_hours"`
	LostAgainHours float64 `json:"lost_again_gpu_hours"`
	// LargestJobs are the allocated jobs asking at least half the GPUs of
	// the largest allocated job submitted after the warm-up; LargestP90 is
	// the p90 of their waits (censored as above).
	LargestJobs int     `json:"largest_jobs"`
	LargestGPUs int     `json:"largest_gpus"`
	LargestP90  float64 `json:"largest_p90_s"`
}

// FiguresOf computes the suite's figures of a run.
func FiguresOf(r *Result) Figures {
	f := Figures{Policy: r.Policy, LostHours: r.LostGPUHours, LostWholeHours: r.LostWholeGPUHours,
		LostAgainHours: r.LostAgainGPUHours, WorstRatio: 1}
	for _, w := range r.Waits {
		if w.Class == ClassDebug.String() {
			f.DebugJobs, f.DebugP50, f.DebugP90, f.DebugP99 = w.Jobs, w.P50, w.P90, w.P99
		}
	}
	var del, credited, owed float64
	for _, b := range r.Budgets {
		if b.Owed <= 0 {
			continue
		}
		f.Leaves++
		del, credited, owed = del+min(b.Delivered, b.Owed), credited+b.Credited, owed+b.Owed
		if b.Ratio >= 0.95 {
			f.LeavesAt95++
		}
		if b.CreditedRatio >= 0.95 {
			f.CreditedAt95++
		}
		if f.WorstBudget == "" || b.Ratio < f.WorstRatio {
			f.WorstBudget, f.WorstRatio = b.Budget, b.Ratio
		}
	}
	f.AllLeaves, f.CreditedAllLeaves = 1, 1
	if owed > 0 {
		f.AllLeaves, f.CreditedAllLeaves = del/owed, credited/owed
	}
	f.Stalled, f.Occupancy = r.Occupancy.Stalled, r.Occupancy.Total
	f.largest(r)
	return f
}

func (f *Figures) largest(r *Result) {
	from := int64(r.WarmupHours * 3600)
	for i := range r.jobRecords {
		j := &r.jobRecords[i]
		if j.leaf >= 0 && j.status != StatusFuture && int64(j.spec.Submit/time.Second) >= from {
			f.LargestGPUs = max(f.LargestGPUs, j.spec.TotalGPUs())
		}
	}
	var waits []int64
	for i := range r.jobRecords {
		j := &r.jobRecords[i]
		sub := int64(j.spec.Submit / time.Second)
		if j.leaf < 0 || sub < from || 2*j.spec.TotalGPUs() < f.LargestGPUs || j.status == StatusFuture {
			continue
		}
		end := j.firstStart
		if end < 0 {
			end = r.horizon
		}
		waits = append(waits, end-sub)
	}
	slices.Sort(waits)
	f.LargestJobs, f.LargestP90 = len(waits), float64(percentile(waits, .9))
}

// SuiteRow is one scenario and seed of a suite, with each policy's figures.
type SuiteRow struct {
	Scenario string    `json:"scenario"`
	Seed     uint64    `json:"seed"`
	GPUs     int       `json:"gpus"`
	Days     float64   `json:"days"`
	Figures  []Figures `json:"figures"`
}

// WriteSuiteTable prints one line per scenario, seed and policy.
func WriteSuiteTable(w io.Writer, rows []SuiteRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tseed\tGPUs\tdays\tpolicy\tdebug p50/p90/p99\tworst leaf\tleaves>=95%\tall leaves\tsame hour\toccupied (stalled)\tlost GPU h (x base)\tlargest-job wait p90")
	for _, r := range rows {
		var base float64
		for _, f := range r.Figures {
			if f.Policy == "baseline" {
				base = f.LostHours
			}
		}
		for _, f := range r.Figures {
			debug := "-"
			if f.DebugJobs > 0 {
				debug = fmt.Sprintf("%s/%s/%s", dur(f.DebugP50), dur(f.DebugP90), dur(f.DebugP99))
			}
			ratio := "-"
			if base > 0 {
				ratio = fmt.Sprintf("%.2f", f.LostHours/base)
			}
			leaves := "-"
			if f.Leaves > 0 {
				leaves = fmt.Sprintf("%d/%d (%.0f%%)", f.LeavesAt95, f.Leaves, 100*float64(f.LeavesAt95)/float64(f.Leaves))
			}
			largest := "-"
			if f.LargestJobs > 0 {
				largest = fmt.Sprintf("%s (%d jobs >= %d GPUs)", dur(f.LargestP90), f.LargestJobs, (f.LargestGPUs+1)/2)
			}
			same := "-"
			if f.Leaves > 0 {
				same = fmt.Sprintf("%.1f%% %d/%d", 100*f.CreditedAllLeaves, f.CreditedAt95, f.Leaves)
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%s\t%s\t%.0f%% %s\t%s\t%.1f%%\t%s\t%.1f%% (%.1f%%)\t%.0f (%s)\t%s\n",
				r.Scenario, r.Seed, r.GPUs, r.Days, f.Policy, debug, 100*f.WorstRatio, f.WorstBudget, leaves,
				100*f.AllLeaves, same, 100*f.Occupancy, 100*f.Stalled, f.LostHours, ratio, largest)
		}
	}
	return tw.Flush()
}

// dur writes seconds as the report does: 0s, 42s, 3.5m, 2.1h, 1.5d.
func dur(s float64) string {
	switch {
	case s < 60:
		return fmt.Sprintf("%.0fs", s)
	case s < 3600:
		return fmt.Sprintf("%.1fm", s/60)
	case s < 86400:
		return fmt.Sprintf("%.1fh", s/3600)
	}
	return fmt.Sprintf("%.1fd", s/86400)
}
