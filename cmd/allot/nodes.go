package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"
)

func init() { extraCommands = append(extraCommands, nodesCommand) }

func nodesCommand() *cli.Command {
	return &cli.Command{
		Name:  "nodes",
		Usage: "GPU nodes with their drain and reservation states",
		Flags: apiFlags(true),
		Action: func(ctx context.Context, c *cli.Command) error {
			if c.NArg() > 0 {
				return usagef("nodes takes no arguments")
			}
			cl, err := apiClient(c)
			if err != nil {
				return err
			}
			ns, err := cl.Nodes(ctx, c.Bool("stale"))
			if err != nil {
				return apiError(err)
			}
			w := c.Root().Writer
			if c.Bool("json") {
				return printJSON(w, ns)
			}
			if len(ns.Nodes) == 0 {
				fmt.Fprintln(w, "No GPU nodes known yet.")
				return nil
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NODE\tNAME\tSTATE\tGPUS (HEALTHY/TOTAL)\tSINCE\tREASON")
			for _, n := range ns.Nodes {
				reason := n.Reason
				if n.ReservedFor != "" {
					reason = "reserved for " + n.ReservedFor + "; " + reason
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\n", n.ID, n.Name, n.Drain, n.HealthyGPUs, n.TotalGPUs,
					n.Since.Format(time.RFC3339), orDash(reason))
			}
			return tw.Flush()
		},
	}
}
