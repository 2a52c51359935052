package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/allot-sched/allot/budgets"
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
		return unknownSubcommand(c, c.Args().First())
	}
	return usagef("%s needs a subcommand: %s (%s -help)", c.FullName(), valid, c.FullName())
}

// unknownSubcommand is the usage error for a subcommand c does not have.
func unknownSubcommand(c *cli.Command, got string) error {
	return usagef("unknown %s subcommand %q%s; valid: %s", c.FullName(), got, didYouMean(got, c),
		strings.Join(subcommandPaths(c), ", "))
}

// unknownHelpTopic rewrites urfave/cli's "No help topic for 'x'", from
// `allot [COMMAND...] help x`, into the error running the unknown command
// gives: the same words, did-you-mean and list whichever way it is asked.
func unknownHelpTopic(app *cli.Command, args []string) error {
	c := app
	for i := 1; i+1 < len(args); i++ {
		switch sub := c.Command(args[i]); {
		case args[i] == "help" || args[i] == "h":
			if c == app {
				return unknownCommand(app, args[i+1])
			}
			return unknownSubcommand(c, args[i+1])
		case sub != nil:
			c = sub
		}
	}
	return usagef("%s", "no such help topic (allot -help lists the commands)")
}

// rootAction runs when no command matched: with no arguments it prints the
// usage to stderr, and either way it is a usage error (exit 2), the unknown
// command named with a did-you-mean and the list of commands.
func rootAction(_ context.Context, c *cli.Command) error {
	if c.NArg() == 0 {
		cli.HelpPrinter(c.Root().ErrWriter, cli.RootCommandHelpTemplate, c)
		return usagef("allot needs a command: %s (allot COMMAND -help for one)", strings.Join(commandNames(c), ", "))
	}
	return unknownCommand(c, c.Args().First())
}

// unknownCommand is the usage error for a command root does not have.
func unknownCommand(root *cli.Command, got string) error {
	return usagef("unknown command %q%s; the commands are %s (allot -help)", got, didYouMean(got, root),
		strings.Join(commandNames(root), ", "))
}

// didYouMean returns ` (did you mean "x"?)` for the command under c closest
// to got (budgets.Nearest), "" when none is close.
func didYouMean(got string, c *cli.Command) string {
	if near := budgets.Nearest(got, commandNames(c)); near != "" {
		return fmt.Sprintf(" (did you mean %q?)", near)
	}
	return ""
}

// commandNames are the names of the commands directly under c, help left out.
func commandNames(c *cli.Command) []string {
	var out []string
	for _, sub := range c.VisibleCommands() {
		if sub.Name != "help" {
			out = append(out, sub.Name)
		}
	}
	return out
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
