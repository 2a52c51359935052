// Command allot is the CLI of allot: budgets, the simulator, the server and
// the read commands that talk to it. Flags follow Nomad's habits: single-dash
// long flags (-json, -address) and the double-dash form both work.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v3"
)

// Exit codes, as documented in the README.
const (
	exitOK      = 0
	exitInvalid = 1 // the input (files, server state, a job) is invalid or an operation failed
	exitUsage   = 2 // the command line itself is wrong
)

// usageError marks an error in how the command was invoked.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// newApp builds the command tree; stdout and stderr are injected so tests can
// run commands and read their output.
func newApp(stdout, stderr io.Writer) *cli.Command {
	app := &cli.Command{
		Name:      "allot",
		Usage:     "GPU-time budgets, fair share and time slicing for Nomad clusters",
		Writer:    stdout,
		ErrWriter: stderr,
		// Errors are printed by run, once, with the right exit code.
		ExitErrHandler: func(context.Context, *cli.Command, error) {},
		OnUsageError: func(_ context.Context, _ *cli.Command, err error, _ bool) error {
			return usageError{err}
		},
		Commands: []*cli.Command{
			versionCommand(),
		},
		Action: rootAction,
	}
	for _, add := range extraCommands {
		app.Commands = append(app.Commands, add())
	}
	setUsageErrors(app)
	return app
}

// extraCommands lets each command file register its top-level command.
var extraCommands []func() *cli.Command

// setUsageErrors makes every subcommand report flag errors as usage errors.
func setUsageErrors(c *cli.Command) {
	for _, sub := range c.Commands {
		if sub.OnUsageError == nil {
			sub.OnUsageError = c.OnUsageError
		}
		setUsageErrors(sub)
	}
}

// run executes args (including the program name) and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
	err := app.Run(ctx, args)
	if err == nil {
		return exitOK
	}
	if strings.HasPrefix(err.Error(), "No help topic") {
		err = unknownHelpTopic(app, args) // `allot help bogus` says what `allot bogus` says
	}
	fmt.Fprintln(stderr, "Error:", err)
	var ue usageError
	if errors.As(err, &ue) || isFlagError(err) {
		return exitUsage
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return exitInvalid
}

func main() {
	os.Exit(run(context.Background(), os.Args, os.Stdout, os.Stderr))
}
