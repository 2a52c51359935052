package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/urfave/cli/v3"

	"github.com/allot-sched/allot/overlay/client"
)

func init() { extraCommands = append(extraCommands, operatorCommand) }

func operatorCommand() *cli.Command {
	listPeers := &cli.Command{
		Name:  "list-peers",
		Usage: "list the raft servers and which one leads",
		Flags: apiFlags(true),
		Action: func(ctx context.Context, c *cli.Command) error {
			if c.NArg() > 0 {
				return usagef("list-peers takes no arguments")
			}
			return showAnswer(c, func(cl *client.Client) (*client.Peers, error) { return cl.Peers(ctx) }, printPeers)
		},
	}
	return &cli.Command{
		Name:  "operator",
		Usage: "operate the allot server cluster",
		Commands: []*cli.Command{{
			Name:     "raft",
			Usage:    "inspect the raft group",
			Commands: []*cli.Command{listPeers},
			Action:   needSubcommand,
		}},
		Action: needSubcommand,
	}
}

// printPeers writes the raft servers and which one leads.
func printPeers(w io.Writer, ps *client.Peers) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRAFT ADDRESS\tHTTP ADDRESS\tSTATE\tVOTER")
	for _, p := range ps.Servers {
		st := "follower"
		if p.Leader {
			st = "leader"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\n", p.ID, p.RaftAddr, orDash(p.HTTPAddr), st, p.Voter)
	}
	return tw.Flush()
}
