package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/allot-sched/allot/overlay/client"
)

// leafJSON is one leaf of `budgets list -json`: what a job may name in its
// meta budget, with its effective share of the cluster as a fraction.
type leafJSON struct {
	Path        string   `json:"path"`
	Effective   float64  `json:"effective"`
	Description string   `json:"description"`
	Owners      []string `json:"owners"`
}

// leavesJSON is the answer of `budgets list -json`. From is "server" or the
// directory read; Revision and AppliedAt describe the server's tree.
type leavesJSON struct {
	From      string     `json:"from"`
	Revision  string     `json:"revision,omitempty"`
	AppliedAt time.Time  `json:"applied_at,omitzero"`
	Leaves    []leafJSON `json:"leaves"`
}

// budgetsListCommand lists the leaves jobs may name: of the tree in force
// on the server, or of a budget directory.
func budgetsListCommand() *cli.Command {
	return &cli.Command{
		Name:      "list",
		Usage:     "list the budget leaves a job may name in meta budget: of the tree applied on the server, or of DIR",
		ArgsUsage: "[DIR]",
		Flags:     apiFlags(true),
		Action: func(ctx context.Context, c *cli.Command) error {
			var out leavesJSON
			switch c.NArg() {
			case 0:
				cl, err := apiClient(c)
				if err != nil {
					return err
				}
				bs, err := cl.Budgets(ctx, c.Bool("stale"))
				if err != nil {
					return apiError(err)
				}
				out = serverLeaves(bs)
			case 1:
				tree, err := loadTree(c, c.Args().First())
				if err != nil {
					return err
				}
				out = leavesJSON{From: c.Args().First(), Leaves: []leafJSON{}}
				for _, l := range tree.Leaves() {
					out.Leaves = append(out.Leaves, leafJSON{Path: l.Path, Effective: round12(l.Effective),
						Description: l.Description, Owners: append([]string{}, l.Owners...)})
				}
			default:
				return usagef("budgets list takes at most one budget directory, got %d arguments", c.NArg())
			}
			if c.Bool("json") {
				return printJSON(c.Root().Writer, out)
			}
			return printLeaves(c.Root().Writer, out)
		},
	}
}

func serverLeaves(bs *client.Budgets) leavesJSON {
	out := leavesJSON{From: "server", Revision: bs.Revision, Leaves: []leafJSON{}}
	if len(bs.Budgets) > 0 {
		out.AppliedAt = bs.AppliedAt
	}
	for _, b := range bs.Budgets {
		if b.Leaf {
			out.Leaves = append(out.Leaves, leafJSON{Path: b.Path, Effective: round12(b.Effective),
				Description: b.Description, Owners: append([]string{}, b.Owners...)})
		}
	}
	return out
}

// printLeaves writes one leaf a line with its effective share of the cluster.
func printLeaves(w io.Writer, l leavesJSON) error {
	switch {
	case l.From == "server" && len(l.Leaves) == 0:
		_, err := fmt.Fprintln(w, "No budget tree applied yet (allot budgets apply DIR); every job runs unallocated.")
		return err
	case l.From == "server":
		fmt.Fprintf(w, "Budget tree %s, applied %s: %s\n\n", l.Revision, l.AppliedAt.UTC().Format(time.RFC3339), plural(len(l.Leaves), "leaf"))
	default:
		fmt.Fprintf(w, "%s: %s\n\n", l.From, plural(len(l.Leaves), "leaf"))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LEAF\tOF CLUSTER\tDESCRIPTION")
	for _, leaf := range l.Leaves {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", leaf.Path, percent(leaf.Effective), orDash(leaf.Description))
	}
	return tw.Flush()
}
