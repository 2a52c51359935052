package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// runCLI runs the allot CLI in-process and returns exit code, stdout, stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"allot"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestVersion(t *testing.T) {
	code, out, _ := runCLI(t, "version")
	if code != exitOK || !strings.HasPrefix(out, "allot ") {
		t.Fatalf("code %d out %q", code, out)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"version", "extra"}, {"-no-such-flag"}, {"version", "--bogus"}} {
		if code, _, errOut := runCLI(t, args...); code != exitUsage {
			t.Errorf("%v: code %d, want %d (stderr %q)", args, code, exitUsage, errOut)
		}
	}
}

// No command, or one allot does not have, is a bad command line (exit 2):
// no arguments print the usage to stderr; an unknown command is named, with
// a did-you-mean and the list of commands.
func TestNoOrUnknownCommand(t *testing.T) {
	code, out, errOut := runCLI(t)
	if code != exitUsage || out != "" || !strings.Contains(errOut, "USAGE:\n   allot [global options]") ||
		!strings.HasSuffix(errOut, "Error: allot needs a command: version, budgets, explain, nodes, operator, queue, server, sim, job, usage (allot COMMAND -help for one)\n") {
		t.Errorf("allot: %d %q %q", code, out, errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, `Error: unknown command "bogus"; the commands are version, budgets, explain, nodes, operator, queue, server, sim, job, usage (allot -help)` + "\n"},
		{[]string{"budgts", "list"}, `Error: unknown command "budgts" (did you mean "budgets"?); the commands are version, budgets,`},
		{[]string{"help", "qeueu"}, `Error: unknown command "qeueu" (did you mean "queue"?); the commands are`},
		{[]string{"budgets", "lsit"}, `Error: unknown allot budgets subcommand "lsit" (did you mean "list"?); valid: validate, show, list, plan, apply`},
		{[]string{"budgets", "help", "lsit"}, `Error: unknown allot budgets subcommand "lsit" (did you mean "list"?); valid: validate, show, list, plan, apply`},
		{[]string{"operator", "raft", "help", "x"}, `Error: unknown allot operator raft subcommand "x"; valid: list-peers`},
	} {
		code, out, errOut := runCLI(t, tc.args...)
		if code != exitUsage || out != "" || !strings.HasPrefix(errOut, tc.want) || strings.Contains(errOut, "No help topic") {
			t.Errorf("%v: %d %q %q, want exit 2 and stderr starting %q", tc.args, code, out, errOut, tc.want)
		}
	}
	if code, out, _ := runCLI(t, "-help"); code != exitOK || !strings.Contains(out, "COMMANDS:") {
		t.Errorf("allot -help: %d %q", code, out)
	}
}
