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

func init() { extraCommands = append(extraCommands, nodesCommand) }

func nodesCommand() *cli.Command {
	return &cli.Command{
		Name:  "nodes",
		Usage: "GPU nodes with their drain lifecycle (in-service, cordoned, draining, drained, returned), reservations and unhealthy GPUs",
		Description: "A cordoned or draining node lists every allocation left on it with the time allot moves it " +
			"(the end of its protected window; unallocated work at once; under `nomad node drain` never after the deadline).",
		Flags:    apiFlags(true),
		Commands: []*cli.Command{nodesReturnCommand()},
		Action: func(ctx context.Context, c *cli.Command) error {
			if c.NArg() > 0 {
				return usagef("nodes takes no arguments (did you mean `allot nodes return NODE`?)")
			}
			return showAnswer(c, func(cl *client.Client) (*client.Nodes, error) {
				return cl.Nodes(ctx, c.Bool("stale"))
			}, func(w io.Writer, ns *client.Nodes) error {
				return printNodes(w, ns, time.Now())
			})
		},
	}
}

// printNodes writes the node table, then the allocations left on each
// cordoned or draining node with when each leaves.
func printNodes(w io.Writer, ns *client.Nodes, now time.Time) error {
	if len(ns.Nodes) == 0 {
		fmt.Fprintln(w, "No GPU nodes known yet.")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tNAME\tSTATE\tGPUS (HEALTHY/TOTAL)\tSINCE\tREASON")
	for _, n := range ns.Nodes {
		lc := n.Lifecycle
		state, since, reason := lc.Phase, lc.PhaseSince, lc.Reason
		switch {
		case n.Reservation != nil:
			state, since, reason = "reserved", n.Reservation.Since, reservationText(n.Reservation)
		case lc.Phase == "" || lc.Phase == "in-service":
			state, since, reason = "in-service", n.Since, ""
		case lc.Phase == "returned":
			reason = "returned by " + lc.ReturnedBy + " after: " + lc.Reason
		}
		if lc.ReturnRequested {
			reason += " (return requested)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\n", n.ID, n.Name, state, n.HealthyGPUs, n.TotalGPUs,
			since.Format(time.RFC3339), orDash(reason))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := printUnhealthyGPUs(w, ns); err != nil {
		return err
	}
	for _, n := range ns.Nodes {
		lc := n.Lifecycle
		if lc.Phase != "cordoned" && lc.Phase != "draining" {
			continue
		}
		fmt.Fprintf(w, "\n%s (%s) %s: %d allocation(s) left, %d requeued, %.2f GPU-hours idle so far\n",
			n.Name, n.ID, lc.Phase, len(lc.Allocs), lc.Requeued, lc.GPUHoursLost)
		if len(lc.Allocs) == 0 {
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  ALLOC\tJOB\tGPUS\tLEAVES")
		for _, a := range lc.Allocs {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\n", a.ID, orDash(a.JobID), a.GPUs, leaves(a.LeavesAt, now))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// printUnhealthyGPUs lists each unhealthy GPU under its node with its
// model and reason (-json lists every GPU, healthy ones too).
func printUnhealthyGPUs(w io.Writer, ns *client.Nodes) error {
	var tw *tabwriter.Writer
	for _, n := range ns.Nodes {
		for _, g := range n.GPUs {
			if g.Healthy {
				continue
			}
			if tw == nil {
				fmt.Fprintln(w, "\nUnhealthy GPUs:")
				tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "  NODE\tGPU\tMODEL\tREASON")
			}
			name := n.Name
			if name == "" {
				name = n.ID
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", name, g.ID, orDash(g.Model), orDash(g.Reason))
		}
	}
	if tw == nil {
		return nil
	}
	return tw.Flush()
}

// reservationText says whom a node is held for and until when, once.
func reservationText(r *client.NodeReservation) string {
	s := "held for " + orDash(r.Job) + " until its GPUs are free"
	if !r.Until.IsZero() {
		s += " (at most until " + r.Until.UTC().Format(time.RFC3339) + ")"
	}
	return s
}

// leaves says when an allocation leaves a draining node.
func leaves(at, now time.Time) string {
	switch {
	case at.IsZero():
		return "not known yet (starting, or not managed by allot: Nomad's rules apply)"
	case !at.After(now):
		return at.Format(time.RFC3339) + " (now)"
	}
	return fmt.Sprintf("%s (in %s)", at.Format(time.RFC3339), at.Sub(now).Round(time.Second))
}

func nodesReturnCommand() *cli.Command {
	return &cli.Command{
		Name:      "return",
		Usage:     "put a drained node back in service (token required)",
		ArgsUsage: "NODE",
		Description: "NODE is a node ID, a unique ID prefix or a node name. The next reconcile pass marks the node " +
			"eligible once all its GPUs are healthy; with policy { drain { return = \"manual\" } } this is the only way back.",
		Flags: append(apiFlags(false), jsonFlag()),
		Action: func(ctx context.Context, c *cli.Command) error {
			if c.NArg() != 1 {
				return usagef("nodes return takes exactly one NODE (an ID, a unique ID prefix or a name from `allot nodes`)")
			}
			return showAnswer(c, func(cl *client.Client) (*client.NodeReturn, error) {
				return cl.ReturnNode(ctx, c.Args().First())
			}, func(w io.Writer, r *client.NodeReturn) error {
				_, err := fmt.Fprintln(w, r.Message)
				return err
			})
		},
	}
}
