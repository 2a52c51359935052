package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeBudgetDir writes files into a new temporary directory and returns it.
func writeBudgetDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, files)
	return dir
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, src := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// publishedFiles is the published diagram's tree, split: the prior program
// keeps its own file.
var publishedFiles = map[string]string{
	"root.hcl": `budget "ai2" {
  description = "Institute GPU time"
  owners      = ["program-office"]
  budget "robotics" { share = 50 }
}
`,
	"prior.hcl": `budget "ai2/prior" {
  share = 50
  budget "olmo" {
    share  = 70
    owners = ["olmo-leads"]
  }
  budget "vision" { share = 30 }
}
`,
}

const exampleDir = "../../examples/budgets"

func TestBudgetsValidateExamples(t *testing.T) {
	code, out, errOut := runCLI(t, "budgets", "validate", exampleDir)
	if code != exitOK || out != exampleDir+": 21 budgets, 15 leaves: ok\n" || errOut != "" {
		t.Fatalf("code %d\nstdout %q\nstderr %q", code, out, errOut)
	}
}

func TestBudgetsValidateReportsEveryProblem(t *testing.T) {
	good := writeBudgetDir(t, publishedFiles)
	bad := writeBudgetDir(t, map[string]string{
		"a.hcl": "budget \"ai2\" {\n  budget \"x\" { share = -1 }\n}\n",
		"b.hcl": "budget \"ai2/x\" { share = 1 }\nbudget \"ai2/y/z\" { share = 1 }\n",
	})
	empty := t.TempDir()
	code, out, errOut := runCLI(t, "budgets", "validate", good, bad, empty)
	if code != exitInvalid {
		t.Fatalf("code %d, want %d", code, exitInvalid)
	}
	if out != good+": 5 budgets, 3 leaves: ok\n" {
		t.Errorf("stdout %q", out)
	}
	a, b := filepath.Join(bad, "a.hcl"), filepath.Join(bad, "b.hcl")
	wantLines := []string{
		a + `:2:24: budget "ai2/x": share must be a positive finite number`,
		b + `:1:8: budget "ai2/x" is declared twice (first at ` + a + `:2:3)`,
		b + `:2:8: budget "ai2/y/z" is attached to "ai2/y", which no file declares`,
		empty + ": no budget files",
		"Error: 4 problems in 2 of 3 budget directories",
	}
	lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
	if len(lines) != len(wantLines) {
		t.Fatalf("stderr has %d lines, want %d:\n%s", len(lines), len(wantLines), errOut)
	}
	for i, w := range wantLines {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("stderr line %d:\n got %s\nwant %s...", i, lines[i], w)
		}
	}
}

func TestBudgetsUsageErrors(t *testing.T) {
	dir := writeBudgetDir(t, publishedFiles)
	for _, args := range [][]string{
		{"budgets"},
		{"budgets", "frobnicate"},
		{"budgets", "validate"},
		{"budgets", "show"},
		{"budgets", "show", dir, dir},
		{"budgets", "show", dir, "-jsn"},
		{"budgets", "plan", dir},
		{"budgets", "plan", dir, "-base"},
		{"budgets", "plan", "-base", dir},
	} {
		if code, _, errOut := runCLI(t, args...); code != exitUsage {
			t.Errorf("%v: code %d, want %d (stderr %q)", args, code, exitUsage, errOut)
		}
	}
}

func TestBudgetsShowText(t *testing.T) {
	dir := writeBudgetDir(t, publishedFiles)
	code, out, errOut := runCLI(t, "budgets", "show", dir)
	if code != exitOK {
		t.Fatalf("code %d stderr %q", code, errOut)
	}
	want := `BUDGET            SHARE  OF PARENT    OF CLUSTER
ai2                   -          -  →     100.0%
├── prior            50      50.0%  →      50.0%
│   ├── olmo         70      70.0%  →      35.0%
│   └── vision       30      30.0%  →      15.0%
└── robotics         50      50.0%  →      50.0%

5 budgets, 3 leaves
`
	if out != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
}

func TestBudgetsShowExamples(t *testing.T) {
	code, out, errOut := runCLI(t, "budgets", "show", exampleDir)
	if code != exitOK {
		t.Fatalf("code %d stderr %q", code, errOut)
	}
	for _, w := range []string{
		"│       └── pretrain           55      55.0%  →      13.2%\n",
		"└── vision                     15      15.0%  →      15.0%\n",
		"21 budgets, 15 leaves\n",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

func TestBudgetsShowJSON(t *testing.T) {
	dir := writeBudgetDir(t, publishedFiles)
	var first string
	// Nomad's single-dash long flags and the double-dash form, before or
	// after the directory.
	for _, args := range [][]string{
		{"budgets", "show", "-json", dir},
		{"budgets", "show", "--json", dir},
		{"budgets", "show", dir, "-json"},
		{"budgets", "show", dir, "--json"},
	} {
		code, out, errOut := runCLI(t, args...)
		if code != exitOK {
			t.Fatalf("%v: code %d stderr %q", args, code, errOut)
		}
		if first == "" {
			first = out
		} else if out != first {
			t.Errorf("%v: output differs from the first form", args)
		}
	}
	var got treeJSON
	if err := json.Unmarshal([]byte(first), &got); err != nil {
		t.Fatalf("%v\n%s", err, first)
	}
	if got.Budgets != 5 || got.Leaves != 3 || got.Root.Share != nil || got.Root.Effective != 1 || got.Root.Leaf {
		t.Errorf("root: %+v", got)
	}
	if got.Root.Description != "Institute GPU time" || len(got.Root.Owners) != 1 {
		t.Errorf("root description/owners: %q %q", got.Root.Description, got.Root.Owners)
	}
	prior := got.Root.Children[0]
	olmo := prior.Children[0]
	if prior.Path != "ai2/prior" || olmo.Path != "ai2/prior/olmo" || olmo.Name != "olmo" || !olmo.Leaf ||
		*olmo.Share != 70 || olmo.Normalized != 0.7 || olmo.Effective != 0.35 || olmo.Owners[0] != "olmo-leads" ||
		olmo.DeclaredAt != filepath.Join(dir, "prior.hcl")+":3:3" || olmo.Children == nil {
		t.Errorf("olmo: %+v", olmo)
	}
	// Empty lists are [] rather than null, so consumers need no special case.
	if !strings.Contains(first, `"owners": [],`) || !strings.Contains(first, `"children": []`) {
		t.Errorf("empty lists not rendered as []:\n%s", first)
	}
}

func TestBudgetsShowInvalid(t *testing.T) {
	dir := writeBudgetDir(t, map[string]string{"a.hcl": "budget \"ai2\" {\n  budget \"x\" {}\n}\n"})
	code, out, errOut := runCLI(t, "budgets", "show", dir)
	if code != exitInvalid || out != "" {
		t.Fatalf("code %d stdout %q", code, out)
	}
	if !strings.HasPrefix(errOut, filepath.Join(dir, "a.hcl")+`:2:3: budget "ai2/x" has no share`) ||
		!strings.Contains(errOut, "Error: "+dir+" is not a valid budget tree (1 problem;") {
		t.Errorf("stderr %q", errOut)
	}
}

// A group command's usage error lists every subcommand it has, read from
// the command tree (budgets apply was missing from a literal list).
func TestGroupCommandsListTheirSubcommands(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"budgets", "frob"}, `unknown allot budgets subcommand "frob"; valid: validate, show, list, plan, apply`},
		{[]string{"budgets"}, "allot budgets needs a subcommand: validate, show, list, plan, apply"},
		{[]string{"operator", "frob"}, `unknown allot operator subcommand "frob"; valid: raft list-peers`},
		{[]string{"operator", "raft"}, "allot operator raft needs a subcommand: list-peers"},
		{[]string{"explain", "frob"}, `unknown allot explain subcommand "frob"; valid: job`},
	} {
		code, _, errOut := runCLI(t, tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: %d %q, want usage error containing %q", tc.args, code, errOut, tc.want)
		}
	}
	// Every subcommand of budgets is named, whatever is added later.
	_, _, errOut := runCLI(t, "budgets", "frob")
	for _, sub := range budgetsCommand().Commands {
		if !strings.Contains(errOut, sub.Name) {
			t.Errorf("budgets frob: %q does not name subcommand %q", errOut, sub.Name)
		}
	}
}
