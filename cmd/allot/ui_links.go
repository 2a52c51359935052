package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/overlay/server"
)

func init() { extraCommands = append(extraCommands, jobCommand) }

// uiLink is the web UI's page for route ("queue", "job/default/x", ...) on
// the server at base (a URL, as client.Address returns). Routes sit in the
// fragment, so the link works behind a proxy's path prefix too.
func uiLink(base, route string) string {
	parts := strings.SplitN(route, "/", 2)
	if len(parts) == 2 {
		route = parts[0] + "/" + url.PathEscape(parts[1])
	}
	return strings.TrimSuffix(base, "/") + "/ui/#/" + route
}

// serverUIURL is the UI's address printed when `allot server` starts.
func serverUIURL(httpAddr string, tls bool) string {
	scheme := "http://"
	if tls {
		scheme = "https://"
	}
	return scheme + httpAddr + "/ui/"
}

func jobCommand() *cli.Command {
	return &cli.Command{
		Name:  "job",
		Usage: "one managed job's history",
		Commands: []*cli.Command{{
			Name:      "history",
			Usage:     "a job's submission, placements, protected windows, stops (with why) and charged GPU time",
			ArgsUsage: "ID",
			Flags:     apiFlags(true),
			Action: func(ctx context.Context, c *cli.Command) error {
				if c.NArg() != 1 {
					return usagef("job history needs exactly one job ID, e.g. allot job history default/olmo-7b")
				}
				var base string
				return showAnswer(c, func(cl *client.Client) (*client.JobHistory, error) {
					base = cl.Address()
					return cl.JobHistory(ctx, c.Args().First(), c.Bool("stale"))
				}, func(w io.Writer, h *client.JobHistory) error { return printHistory(w, h, base) })
			},
		}},
		Action: needSubcommand,
	}
}

// printHistory writes a job's history, one event a line, oldest first.
func printHistory(w io.Writer, h *client.JobHistory, base string) error {
	fmt.Fprintf(w, "Job:          %s\n", h.JobID)
	fmt.Fprintf(w, "Budget:       %s\n", orDash(h.Budget))
	fmt.Fprintf(w, "Min runtime:  %v (resumable: %t)\n", h.MinRuntime, h.Resumable)
	fmt.Fprintf(w, "Charged:      %.2f GPU-h over %d placements, %d requeues\n", h.ChargedGPUHours, h.Placements, h.Requeues)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tEVENT\tALLOC\tNODE\tGPUS\tDETAIL")
	for _, e := range h.Events {
		kind := e.Kind
		if e.StopKind != "" {
			kind += " (" + e.StopKind + ")"
		} else if e.DecisionKind != "" {
			kind += " (" + e.DecisionKind + ")"
		}
		detail := e.Reason
		if !e.Until.IsZero() {
			detail = strings.TrimSpace("protected until " + e.Until.UTC().Format(time.RFC3339) + " " + detail)
		}
		switch {
		case e.ForJobStandingAtStop != nil && e.StandingAtStop != nil:
			detail += fmt.Sprintf(" [at the stop: %s's budget %s #%d, served %s; this job's #%d, served %s]", e.ForJob, e.ForJobBudget,
				e.ForJobStandingAtStop.LeafPosition, fmtRatio(e.ForJobStandingAtStop.ServedRatio, "%.2f"),
				e.StandingAtStop.LeafPosition, fmtRatio(e.StandingAtStop.ServedRatio, "%.2f"))
		case e.ForJobStanding != nil:
			detail += fmt.Sprintf(" [%s's budget %s now #%d, served %s]", e.ForJob, e.ForJobBudget,
				e.ForJobStanding.LeafPosition, fmtRatio(e.ForJobStanding.ServedRatio, "%.2f"))
		}
		gpus := "-"
		if e.GPUs > 0 {
			gpus = fmt.Sprint(e.GPUs)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.At.UTC().Format(time.RFC3339), kind, orDash(e.AllocID),
			orDash(e.NodeID), gpus, detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "Web UI:       %s\n", uiLink(base, "job/"+h.JobID))
	return nil
}

func usageSeriesCommand() *cli.Command {
	return &cli.Command{
		Name:  "series",
		Usage: "average GPUs used and wanted per step, for a budget and each of its children, with their allocations",
		Flags: append(apiFlags(true),
			&cli.StringFlag{Name: "budget", Usage: "budget path (default: the root)"},
			&cli.StringFlag{Name: "since", Value: "7d", Usage: "window length, e.g. 14d, 24h, 6h"},
			&cli.StringFlag{Name: "step", Usage: "one point per step, a multiple of the ledger bucket (default: at most ~500 points)"}),
		Action: func(ctx context.Context, c *cli.Command) error {
			if c.NArg() > 0 {
				return usagef("usage series takes no arguments (use -budget, -since, -step)")
			}
			if _, err := server.ParseSince(c.String("since")); err != nil {
				return usagef("-since: %v", err)
			}
			return showAnswer(c, func(cl *client.Client) (*client.UsageSeries, error) {
				return cl.UsageSeries(ctx, c.String("budget"), c.String("since"), c.String("step"), c.Bool("stale"))
			}, printSeries)
		},
	}
}

// printSeries writes one row per step: the time, then used/allocation GPUs
// of each budget shown.
func printSeries(w io.Writer, u *client.UsageSeries) error {
	fmt.Fprintf(w, "Budget %s, %s to %s, step %v, capacity %d GPUs\n", orDash(u.Budget), u.From.Format(time.RFC3339),
		u.To.Format(time.RFC3339), u.Step, u.CapacityGPUs)
	if len(u.Series) == 0 {
		fmt.Fprintln(w, "No budgets applied yet (allot budgets apply DIR).")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, "STEP")
	for _, s := range u.Series {
		fmt.Fprintf(tw, "\t%s (of %.1f)", s.Path, s.AllocationGPUs)
	}
	fmt.Fprintln(tw)
	for i, t := range u.Times {
		fmt.Fprint(tw, time.Unix(t, 0).UTC().Format(time.RFC3339))
		for _, s := range u.Series {
			fmt.Fprintf(tw, "\t%.2f", s.UsedGPUs[i])
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}
