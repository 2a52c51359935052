package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// allot sim -events writes one log per policy; allot sim compare reads two
// and prints the comparison; the log against itself matches in every way.
func TestSimEventsAndCompare(t *testing.T) {
	dir := t.TempDir()
	ev := filepath.Join(dir, "ev.jsonl")
	code, _, errOut := runCLI(t, "sim", "-trace", "../../examples/sim/small.csv", "-budgets", "../../examples/budgets",
		"-nodes", "2", "-horizon", "12h", "-events", ev)
	if code != 0 {
		t.Fatalf("sim: code %d: %s", code, errOut)
	}
	for _, p := range []string{"allot", "baseline"} {
		b, err := os.ReadFile(filepath.Join(dir, "ev."+p+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), `{"t":0,"kind":"submit","job":"pretrain-1","budget":"ai2/prior/olmo/pretrain","gpus":16}`) {
			t.Errorf("%s log starts %.120q", p, b)
		}
	}
	a := filepath.Join(dir, "ev.allot.jsonl")
	code, out, errOut := runCLI(t, "sim", "compare", a, a)
	if code != 0 || !strings.Contains(out, "1.000 (") || !strings.Contains(out, "(same set for 100%)") || strings.Contains(out, "divergence") {
		t.Errorf("compare a log with itself: code %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "sim", "compare", a, filepath.Join(dir, "ev.baseline.jsonl"))
	if code != 0 || !strings.Contains(out, "divergence at ") || !strings.Contains(out, "stops by reason: ev.allot") {
		t.Errorf("compare allot with baseline: code %d\n%s", code, out)
	}
	// With the trace its interchangeable jobs (rows the same but for the
	// name) are matched: the slicing trace's twelve free jobs and four
	// trainings submitted together.
	sl := filepath.Join(dir, "sl.jsonl")
	code, _, errOut = runCLI(t, "sim", "-trace", "../../examples/sim/fidelity/slicing.csv", "-budgets", "../../examples/sim/fidelity/budgets",
		"-cluster", "../../examples/sim/fidelity/cluster.hcl", "-policies", "allot", "-horizon", "3h", "-events", sl)
	if code != 0 {
		t.Fatalf("sim slicing: code %d: %s", code, errOut)
	}
	code, out, errOut = runCLI(t, "sim", "compare", "-trace", "../../examples/sim/fidelity/slicing.csv", sl, sl)
	if code != 0 || !strings.Contains(out, "16 (0 of sl's matched to another's name)") || !strings.Contains(out, "(same set for 100%)") {
		t.Errorf("compare with -trace: code %d\n%s%s", code, out, errOut)
	}
}

func TestSimCompareRefuses(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, filepath.Join(dir, "good.jsonl"), `{"t": 0, "kind": "submit", "job": "a"}`+"\n")
	bad := writeFile(t, filepath.Join(dir, "bad.jsonl"), `{"t": 0, "kind": "submit", "job": "a"}`+"\n"+`{"t": 1, "kind": "begin", "job": "a"}`+"\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{good}, "sim compare takes two event logs"},
		{[]string{good, bad}, bad + `:2: kind "begin": want one of submit, place, start, stop, done, node, health`},
		{[]string{"-slack", "-1m", good, good}, "-slack -1m0s: want a duration of 0 or more"},
		{[]string{good, filepath.Join(dir, "none.jsonl")}, "no such file"},
		{[]string{"-trace", good, good, good}, "-trace: " + good + `:1:2: unknown key "t"`},
	} {
		code, _, errOut := runCLI(t, append([]string{"sim", "compare"}, tc.args...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: code %d, stderr %q, want %q", tc.args, code, errOut, tc.want)
		}
	}
}

// A budgets directory with an HCL problem is an error naming file:line:col,
// not a panic (the scenario check compared hcl.Diagnostics, a slice).
func TestSimBadBudgetsDir(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "b.hcl"), "budget \"lab\" {\n  share = 1\n  budget \"a\" {\n    share = 1\n  }\n}\n")
	code, _, errOut := runCLI(t, "sim", "-trace", "../../examples/sim/small.csv", "-budgets", dir, "-nodes", "2")
	if code == 0 || !strings.Contains(errOut, "b.hcl:2:3: the root budget \"lab\" takes no share") {
		t.Errorf("code %d, stderr %q", code, errOut)
	}
}
