package main

import (
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v3"
)

// commandPaths lists every command of the tree below c with its words
// ("sim generate"), c's own first ("" for the root).
func commandPaths(c *cli.Command, prefix string) map[string]*cli.Command {
	out := map[string]*cli.Command{prefix: c}
	for _, sub := range c.Commands {
		p := strings.TrimSpace(prefix + " " + sub.Name)
		for k, v := range commandPaths(sub, p) {
			out[k] = v
		}
	}
	return out
}

// Every flag of every allot command says what it is for.
func TestEveryFlagHasUsage(t *testing.T) {
	cmds := commandPaths(newApp(io.Discard, io.Discard), "")
	if len(cmds) < 10 {
		t.Fatalf("walked %d commands; the tree is larger", len(cmds))
	}
	flags := 0
	for path, c := range cmds {
		for _, f := range c.Flags {
			flags++
			df, ok := f.(cli.DocGenerationFlag)
			if !ok {
				t.Errorf("allot %s -%s: %T has no usage text to check", path, f.Names()[0], f)
				continue
			}
			if strings.TrimSpace(df.GetUsage()) == "" {
				t.Errorf("allot %s -%s has no usage text", path, f.Names()[0])
			}
		}
	}
	if flags < 30 {
		t.Fatalf("checked %d flags; allot has more", flags)
	}
}

// Every command's help shows each flag's default at most once.
func TestHelpShowsOneDefault(t *testing.T) {
	twice := regexp.MustCompile(`\(default: .*\(default: `)
	for path := range commandPaths(newApp(io.Discard, io.Discard), "") {
		args := append(strings.Fields(path), "-h")
		code, out, errOut := runCLI(t, args...)
		if code != exitOK {
			t.Errorf("allot %s: code %d, stderr %q", strings.Join(args, " "), code, errOut)
			continue
		}
		for _, line := range strings.Split(out, "\n") {
			if twice.MatchString(line) {
				t.Errorf("allot %s shows two defaults: %s", strings.Join(args, " "), strings.TrimSpace(line))
			}
		}
	}
}

// sim generate lists and takes only its own flags, and says -budgets is
// required; sim's -horizon shows its default once, in words.
func TestSimGenerateHelp(t *testing.T) {
	code, out, _ := runCLI(t, "sim", "generate", "-h")
	if code != exitOK {
		t.Fatalf("code %d", code)
	}
	if strings.Contains(out, "GLOBAL OPTIONS") || strings.Contains(out, "--trace") || strings.Contains(out, "--policies") {
		t.Errorf("sim generate -h lists sim's flags:\n%s", out)
	}
	if !regexp.MustCompile(`--budgets string .*\(required\)`).MatchString(out) {
		t.Errorf("sim generate -h does not say -budgets is required:\n%s", out)
	}
	for _, flag := range []string{"-trace", "-json", "-horizon"} {
		code, _, errOut := runCLI(t, "sim", "generate", "-budgets", "../../examples/budgets", flag, "1h")
		if code != exitUsage || !strings.Contains(errOut, "flag provided but not defined: "+flag) {
			t.Errorf("sim generate %s: code %d stderr %q, want a usage error", flag, code, errOut)
		}
	}
	_, out, _ = runCLI(t, "sim", "-h")
	if !regexp.MustCompile(`--horizon duration +simulated time to run \(default: the trace's end\)\n`).MatchString(out) {
		t.Errorf("sim -h -horizon line:\n%s", out)
	}
}
