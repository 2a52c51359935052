package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/overlay/server"
)

func init() { extraCommands = append(extraCommands, usageCommand) }

func usageCommand() *cli.Command {
	return &cli.Command{
		Name:     "usage",
		Usage:    "GPU time per budget over a window: charged, demand, owed, delivered/owed and its same-hour reading",
		Commands: []*cli.Command{usageSeriesCommand()},
		Flags:    append(apiFlags(true), &cli.StringFlag{Name: "since", Value: "7d", Usage: "window length, e.g. 7d, 36h, 90m"}),
		Action: func(ctx context.Context, c *cli.Command) error {
			if c.NArg() > 0 {
				return usagef("usage takes no arguments (use -since)")
			}
			if _, err := server.ParseSince(c.String("since")); err != nil {
				return usagef("-since: %v", err)
			}
			return showAnswer(c, func(cl *client.Client) (*client.Usage, error) {
				return cl.Usage(ctx, c.String("since"), c.Bool("stale"))
			}, printUsage)
		},
	}
}

// printUsage writes GPU time per budget, each indented under its parent.
func printUsage(w io.Writer, u *client.Usage) error {
	fmt.Fprintf(w, "Window %s to %s, capacity %d GPUs\n", u.From.Format(time.RFC3339), u.To.Format(time.RFC3339), u.CapacityGPUs)
	if len(u.Budgets) == 0 {
		fmt.Fprintln(w, "No budgets applied yet (allot budgets apply DIR).")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BUDGET\tCHARGED GPU-H\tDEMAND GPU-H\tOWED GPU-H\tDELIVERED/OWED\tSAME HOUR")
	for _, r := range u.Budgets {
		indent := strings.Repeat("  ", strings.Count(r.Path, "/"))
		fmt.Fprintf(tw, "%s%s\t%.1f\t%.1f\t%.1f\t%.0f%%\t%.0f%%\n", indent, r.Path, r.Charged, r.Demand, r.Owed,
			100*r.Ratio, 100*r.CreditedRatio)
	}
	return tw.Flush()
}
