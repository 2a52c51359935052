package main

import (
	"context"
	"fmt"
	"runtime"

	"github.com/urfave/cli/v3"

	"github.com/allot-sched/allot/internal/version"
)

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the allot version",
		Action: func(_ context.Context, c *cli.Command) error {
			if c.NArg() > 0 {
				return usagef("version takes no arguments, got %q", c.Args().Slice())
			}
			_, err := fmt.Fprintf(c.Root().Writer, "allot %s (%s %s/%s)\n", version.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}
