package main

import (
	"context"
	"strings"

	"github.com/urfave/cli/v3"
)

// isFlagError recognizes the flag package's parse errors, which urfave/cli
// returns unwrapped for unknown flags and bad values.
func isFlagError(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "flag provided but not defined") ||
		strings.Contains(s, "invalid value") ||
		strings.Contains(s, "flag needs an argument") ||
		strings.HasPrefix(s, "No help topic") ||
		strings.Contains(s, "Required flag")
}

// needSubcommand is the action of a command that only groups subcommands:
// a usage error naming the subcommands it has, so that the list stays true
// as subcommands are added.
func needSubcommand(_ context.Context, c *cli.Command) error {
	valid := strings.Join(subcommandPaths(c), ", ")
	if c.NArg() > 0 {
		return usagef("unknown %s subcommand %q; valid: %s", c.FullName(), c.Args().First(), valid)
	}
	return usagef("%s needs a subcommand: %s (%s -help)", c.FullName(), valid, c.FullName())
}

// subcommandPaths lists the commands that run under c, as the words that
// follow c's name: "validate", or "raft list-peers" below a group (a
// subcommand with subcommands of its own).
func subcommandPaths(c *cli.Command) []string {
	var out []string
	for _, sub := range c.VisibleCommands() {
		below := subcommandPaths(sub)
		if len(below) == 0 {
			out = append(out, sub.Name)
		}
		for _, b := range below {
			out = append(out, sub.Name+" "+b)
		}
	}
	return out
}
