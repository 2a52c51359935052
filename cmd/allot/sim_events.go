package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/allot-sched/allot/overlay/sim"
)

// eventsPath is where policy's event log goes for -events path: path
// itself for a run of one policy, path with the policy's name before its
// extension (events.allot.jsonl) for several.
func eventsPath(path, policy string, several bool) string {
	if !several {
		return path
	}
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "." + policy + ext
}

// openEvents creates the event log of one policy's run; the returned close
// flushes it and reports the first write error.
func openEvents(path string) (func(*sim.Event), func() error, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, fmt.Errorf("-events: %w", err)
	}
	w := sim.NewEventWriter(f)
	return w.Write, func() error {
		err := w.Flush()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("-events %s: %w", path, err)
		}
		return nil
	}, nil
}

func simCompareCommand() *cli.Command {
	return &cli.Command{
		Name:      "compare",
		Usage:     "compare two event logs of one trace (allot sim -events, the fidelity harness): start order, stops, waits, GPU time per budget, first divergences",
		ArgsUsage: "A.jsonl B.jsonl",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "tie", Usage: "starts of one side closer than this are tied in the start order (0: equal times only)"},
			&cli.DurationFlag{Name: "slack", Value: sim.DefaultCompareSlack, Usage: "a job whose starts differ by more than this is a divergence"},
			&cli.DurationFlag{Name: "horizon", DefaultText: "the later log's last event", Usage: "trace time both logs are cut at (GPU time, waits of jobs never started)"},
			&cli.IntFlag{Name: "divergences", Value: 5, Usage: "how many divergences to list"},
			&cli.StringFlag{Name: "trace", Usage: "the logs' trace (.csv or .jsonl): its jobs that are the same but for the name are interchangeable, matched between the logs (B's take A's names) and tied in the start order"},
			jsonFlag(),
		},
		Action: func(_ context.Context, c *cli.Command) error {
			if c.NArg() != 2 {
				return usagef("sim compare takes two event logs, e.g. allot sim compare nomad.jsonl sim.jsonl")
			}
			for _, f := range []string{"tie", "slack", "horizon"} {
				if d := c.Duration(f); d < 0 {
					return usagef("-%s %v: want a duration of 0 or more", f, d)
				}
			}
			if n := c.Int("divergences"); n < 1 {
				return usagef("-divergences %d: want 1 or more", n)
			}
			var logs [2][]sim.Event
			for k, path := range c.Args().Slice() {
				f, err := os.Open(path)
				if err != nil {
					return err
				}
				logs[k], err = sim.ReadEvents(f)
				f.Close()
				var le *sim.EventLogError
				if errors.As(err, &le) {
					return fmt.Errorf("%s%s: %w", path, le.Pos(), le.Err)
				}
				if err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
			}
			var alike map[string]string
			if path := c.String("trace"); path != "" {
				tr, err := readTrace(path, false)
				if err != nil {
					return fmt.Errorf("-trace: %w", err)
				}
				alike = sim.AlikeJobs(tr)
			}
			fd := sim.Compare(logs[0], logs[1], sim.CompareOptions{Tie: c.Duration("tie"), Slack: c.Duration("slack"),
				Horizon: c.Duration("horizon"), Divergences: c.Int("divergences"), Alike: alike})
			if c.Bool("json") {
				enc := json.NewEncoder(c.Root().Writer)
				enc.SetIndent("", "  ")
				return enc.Encode(fd)
			}
			name := func(p string) string { return strings.TrimSuffix(filepath.Base(p), filepath.Ext(p)) }
			return sim.WriteFidelity(c.Root().Writer, fd, name(c.Args().Get(0)), name(c.Args().Get(1)))
		},
	}
}
