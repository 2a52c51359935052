package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/allot-sched/allot/overlay/client"
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
				return showAnswer(c, func(cl *client.Client) (*client.Explain, error) {
					return cl.Explain(ctx, c.Args().First(), c.Bool("stale"))
				}, printExplain)
			},
		}},
		Action: needSubcommand,
	}
}

// printExplain writes why a job is where it is: its contract, its place in
// the last plan, its allocations and the decisions about it.
func printExplain(w io.Writer, ex *client.Explain) error {
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
			fmt.Fprintf(w, "Position:     %d in line\n", ex.Queue.Position)
		}
		fmt.Fprintf(w, "Why:          %s\n", ex.Queue.Explanation)
	} else {
		fmt.Fprintln(w, "Why:          not in a plan yet")
	}
	for _, a := range ex.Allocs {
		fmt.Fprintf(w, "Alloc %s on %s: %d GPUs, started %s, protected until %s, charged %.2f GPU-h\n",
			a.ID, orDash(a.NodeID), a.GPUs, a.StartedAt.Format(time.RFC3339), a.ProtectedUntil.Format(time.RFC3339),
			float64(a.ChargedGPUSeconds)/3600)
	}
	for _, d := range ex.Decisions {
		fmt.Fprintf(w, "%s  %s: %s\n", d.At.Format(time.RFC3339), d.Kind, d.Reason)
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
