package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/overlay/policy"
)

func init() { extraCommands = append(extraCommands, explainCommand) }

func explainCommand() *cli.Command {
	return &cli.Command{
		Name:  "explain",
		Usage: "say why a job is pending, running or was preempted",
		Commands: []*cli.Command{{
			Name:      "job",
			Usage:     "explain one job (ID: namespace/name, or name in the default namespace)",
			ArgsUsage: "ID",
			Flags:     apiFlags(true),
			Action: func(ctx context.Context, c *cli.Command) error {
				if c.NArg() != 1 {
					return usagef("explain job needs exactly one job ID, e.g. allot explain job default/olmo-7b")
				}
				var base string
				return showAnswer(c, func(cl *client.Client) (*client.Explain, error) {
					base = cl.Address()
					return cl.Explain(ctx, c.Args().First(), c.Bool("stale"))
				}, func(w io.Writer, ex *client.Explain) error {
					if err := printExplain(w, ex, time.Now()); err != nil {
						return err
					}
					fmt.Fprintf(w, "Web UI:       %s\n", uiLink(base, "job/"+ex.JobID))
					if ex.Budget != "" {
						fmt.Fprintf(w, "Budget page:  %s\n", uiLink(base, "budgets/"+ex.Budget))
					}
					return nil
				})
			},
		}},
		Action: needSubcommand,
	}
}

// printExplain writes why a job is where it is: its contract, its place in
// the last plan, its allocations and the decisions about it.
func printExplain(w io.Writer, ex *client.Explain, now time.Time) error {
	fmt.Fprintf(w, "Job:          %s\n", ex.JobID)
	fmt.Fprintf(w, "Budget:       %s\n", orDash(ex.Budget))
	fmt.Fprintf(w, "Min runtime:  %v\n", ex.MinRuntime)
	fmt.Fprintf(w, "GPUs:         %d\n", ex.GPUs)
	if ex.Unallocated != "" {
		fmt.Fprintf(w, "Unallocated:  %s\n", ex.Unallocated)
	}
	if ex.Queue != nil {
		fmt.Fprintf(w, "Band:         %s (priority %d, sort metric %.4f)\n", ex.Queue.Band, ex.Queue.Priority, ex.Queue.SortMetric)
		if ex.Queue.Position > 0 {
			fmt.Fprintf(w, "Queue:        %s in the pending queue\n", policy.Ordinal(ex.Queue.Position))
		}
		if err := printStanding(w, ex.Queue.Budget, ex.Queue.Standing); err != nil {
			return err
		}
		if !ex.Queue.ProtectedUntil.IsZero() {
			fmt.Fprintf(w, "Protected:    until %s\n", ex.Queue.ProtectedUntil.UTC().Format(time.RFC3339))
		}
		if !ex.Queue.FreeAt.IsZero() {
			fmt.Fprintf(w, "GPUs free at: %s\n", ex.Queue.FreeAt.UTC().Format(time.RFC3339))
		}
		fmt.Fprintf(w, "Why:          %s\n", withoutShownWarnings(ex.Queue.Explanation, ex.Unallocated))
	} else {
		fmt.Fprintln(w, "Why:          not in a plan yet")
	}
	for _, a := range ex.Allocs {
		fmt.Fprintf(w, "Alloc %s on %s: %s, %s; charged %.2f GPU-h\n", a.ID, orDash(a.NodeID), plural(a.GPUs, "GPU"),
			allocStory(a, ex.Decisions, now), float64(a.ChargedGPUSeconds)/3600)
	}
	for _, d := range ex.Decisions {
		fmt.Fprintf(w, "%s  %s: %s\n", d.At.Format(time.RFC3339), d.Kind, d.Reason)
	}
	return nil
}

// withoutShownWarnings drops from a plan's explanation the contract
// warnings ("; warning: job ...: meta KEY = ...: MESSAGE") whose message the
// Unallocated line already shows, so that a screen says each thing once.
func withoutShownWarnings(why, unallocated string) string {
	if unallocated == "" {
		return why
	}
	const sep = "; warning: "
	parts := strings.Split(why, sep)
	kept := parts[:1]
	for _, p := range parts[1:] {
		shown := false
		for rest := p; !shown; {
			i := strings.Index(rest, "\": ")
			if i < 0 {
				break
			}
			rest = rest[i+3:]
			shown = rest != "" && strings.Contains(unallocated, rest)
		}
		if !shown {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, sep)
}

// allocStory says what happened to an allocation: running, inside or past
// its protected window (or never protected, as unallocated work), or
// stopped, when and by whom. It never prints a zero time.
func allocStory(a client.Alloc, decisions []client.Decision, now time.Time) string {
	rfc := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	var window string
	switch {
	case a.ProtectedUntil.IsZero():
		window = "never protected (unallocated work: any allocated job may preempt it)"
	case a.StoppedAt.IsZero() && a.ProtectedUntil.After(now):
		window = "protected until " + rfc(a.ProtectedUntil)
	case !a.StoppedAt.IsZero() && a.StoppedAt.Before(a.ProtectedUntil):
		window = "its protected window would have ended " + rfc(a.ProtectedUntil)
	default:
		window = "its protected window ended " + rfc(a.ProtectedUntil)
	}
	if a.StoppedAt.IsZero() {
		return "running since " + rfc(a.StartedAt) + ", " + window
	}
	ran := "ran " + rfc(a.StartedAt) + " to " + rfc(a.StoppedAt) + ", " + window
	var by *client.Decision
	for i := range decisions {
		if d := &decisions[i]; d.AllocID == a.ID {
			by = d // the last decision about it
		}
	}
	switch {
	case by != nil:
		return ran + "; stopped by allot (" + by.Kind + "): " + by.Reason + " (Nomad places a replacement)"
	case a.Preemptions > 0:
		return ran + "; evicted: preempted by Nomad for a higher-priority job (Nomad requeues it)"
	}
	return ran + "; stopped: it finished, or was stopped outside allot"
}

// printStanding writes a budget's fair-share rank among the budgets (not
// the job's place in the pending queue, which Queue says) and the level
// fairshare of each level of its path, which the ranking compares from the
// top down.
func printStanding(w io.Writer, budget string, st *client.Standing) error {
	if st == nil {
		return nil
	}
	fmt.Fprintf(w, "Fair share:   budget %s ranks %s among budgets, most owed first (sort metric %s); served %s (usage %s of the window, share %s)\n",
		budget, policy.Ordinal(st.LeafPosition), fmtRatio(st.Metric, "%.4f"), fmtRatio(st.ServedRatio, "%.2f"),
		fmtPercent(st.UsageShare), fmtPercent(st.Effective))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  LEVEL\tSHARE\tUSAGE\tLEVEL FAIRSHARE")
	for _, p := range st.Parts {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", p.Path, fmtPercent(p.Share), fmtPercent(p.UsageFraction), fmtRatio(p.Level, "%.2f"))
	}
	return tw.Flush()
}

// levelChain is a standing's level fairshares from the top level down,
// e.g. "1.81 > 1.25 > 0.78" ("-" without a standing).
func levelChain(st *client.Standing) string {
	if st == nil || len(st.Parts) == 0 {
		return "-"
	}
	parts := make([]string, len(st.Parts))
	for i, p := range st.Parts {
		parts[i] = fmtRatio(p.Level, "%.2f")
	}
	return strings.Join(parts, " > ")
}

// fmtRatio formats r with format, writing "inf" for +Inf and "-" for NaN
// (a ratio over nothing).
func fmtRatio(r client.Ratio, format string) string {
	f := float64(r)
	switch {
	case math.IsNaN(f):
		return "-"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return fmt.Sprintf(format, f)
}

// fmtPercent writes a fraction as a percentage with one decimal.
func fmtPercent(r client.Ratio) string {
	if math.IsNaN(float64(r)) || math.IsInf(float64(r), 0) {
		return fmtRatio(r, "")
	}
	return fmt.Sprintf("%.1f%%", 100*float64(r))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
