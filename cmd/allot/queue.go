package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/urfave/cli/v3"

	"github.com/allot-sched/allot/overlay/client"
)

func init() { extraCommands = append(extraCommands, queueCommand) }

func queueCommand() *cli.Command {
	return &cli.Command{
		Name:  "queue",
		Usage: "list managed jobs: the pending queue in order (QUEUE #), then the rest, with band, priority and their budget's fair-share standing",
		Flags: apiFlags(true),
		Action: func(ctx context.Context, c *cli.Command) error {
			if c.NArg() > 0 {
				return usagef("queue takes no arguments")
			}
			var base string
			return showAnswer(c, func(cl *client.Client) (*client.Queue, error) {
				base = cl.Address()
				return cl.Queue(ctx, c.Bool("stale"))
			}, func(w io.Writer, q *client.Queue) error {
				if err := printQueue(w, q); err != nil {
					return err
				}
				fmt.Fprintf(w, "Web UI: %s (a job's page: %s)\n", uiLink(base, "queue"), uiLink(base, "job/ID"))
				return nil
			})
		},
	}
}

// printQueue writes the managed jobs: pending ones by their place in the
// pending queue, then the others.
func printQueue(w io.Writer, q *client.Queue) error {
	if len(q.Jobs) == 0 {
		fmt.Fprintln(w, "No managed jobs in the last plan.")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE #\tJOB\tBUDGET\tBAND\tPRIORITY\tSORT METRIC\tSERVED\tLEVEL FAIRSHARE\tEXPLANATION")
	for _, j := range q.Jobs {
		pos := "-"
		if j.Position > 0 {
			pos = fmt.Sprint(j.Position)
		}
		served := "-"
		if j.Standing != nil {
			served = fmtRatio(j.Standing.ServedRatio, "%.2f")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%.4f\t%s\t%s\t%s\n", pos, j.JobID, j.Budget, j.Band, j.Priority, j.SortMetric,
			served, levelChain(j.Standing), j.Explanation)
	}
	return tw.Flush()
}
