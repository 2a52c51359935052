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
	removePeer := &cli.Command{
		Name: "remove-peer",
		Usage: "remove a server from the raft configuration (operator token): a server that is gone for good, " +
			"or one that lost its data_dir and must rejoin under a new ID",
		Flags: append(apiFlags(false), &cli.StringFlag{Name: "id", Usage: "the server's raft ID, as `allot operator raft list-peers` shows it"}),
		Action: func(ctx context.Context, c *cli.Command) error {
			if c.NArg() > 0 || c.String("id") == "" {
				return usagef("remove-peer takes -id SERVER_ID and no arguments (see allot operator raft list-peers)")
			}
			cl, err := apiClient(c)
			if err != nil {
				return err
			}
			res, err := cl.RemovePeer(ctx, c.String("id"))
			if err != nil {
				return apiError(err)
			}
			fmt.Fprintf(c.Root().Writer, "Removed server %s from the raft configuration (index %d)\n", c.String("id"), res.Index)
			return nil
		},
	}
	return &cli.Command{
		Name:  "operator",
		Usage: "operate the allot server cluster",
		Commands: []*cli.Command{{
			Name:     "raft",
			Usage:    "inspect and change the raft group",
			Commands: []*cli.Command{listPeers, removePeer},
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
