package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSimSmallTrace(t *testing.T) {
	args := []string{"sim", "-budgets", "../../examples/budgets", "-trace", "../../examples/sim/small.csv", "-nodes", "4", "-horizon", "12h"}
	code, out, errOut := runCLI(t, args...)
	if code != exitOK {
		t.Fatalf("code %d stderr %q", code, errOut)
	}
	for _, want := range []string{"allot", "baseline", "debug wait p50 / p90 / p99", "budgets at >= 95% of owed", "time to drained"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	_, a, _ := runCLI(t, append(args, "-json")...)
	_, b, _ := runCLI(t, append(args, "-json")...)
	if a != b || !strings.Contains(a, `"results"`) {
		t.Fatal("-json is not byte-identical across runs")
	}
}

func TestSimErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte("submit,job,gpus,work\n0,a,1,10m\n5,b,99,10m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, "sim", "-trace", bad, "-nodes", "2")
	if code != exitInvalid || !strings.Contains(errOut, "line 3") {
		t.Fatalf("bad row: code %d stderr %q; want 1 and the line number", code, errOut)
	}
	code, _, errOut = runCLI(t, "sim", "-trace", bad, "-nodes", "2", "-skip-invalid", "-policies", "baseline")
	if code != exitOK || !strings.Contains(errOut, "skipped 1 invalid") {
		t.Fatalf("skip-invalid: code %d stderr %q", code, errOut)
	}
	if code, _, _ := runCLI(t, "sim", "-trace", bad, "-policies", "fifo"); code != exitUsage {
		t.Fatalf("unknown policy: code %d, want %d", code, exitUsage)
	}
}

func TestSimGenerate(t *testing.T) {
	out := filepath.Join(t.TempDir(), "t.jsonl")
	code, _, errOut := runCLI(t, "sim", "generate", "-budgets", "../../examples/budgets", "-days", "1", "-nodes", "4", "-debug-per-day", "20", "-o", out)
	if code != exitOK {
		t.Fatalf("code %d stderr %q", code, errOut)
	}
	code, _, errOut = runCLI(t, "sim", "-budgets", "../../examples/budgets", "-trace", out, "-nodes", "4", "-policies", "baseline")
	if code != exitOK {
		t.Fatalf("replaying the generated trace: code %d stderr %q", code, errOut)
	}
}
