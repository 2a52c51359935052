package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/allot-sched/allot/overlay/sim"
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
	if want := "Error: " + bad + ":3: job \"b\": gpus per allocation 99 must be between 1 and 64\n"; code != exitInvalid || errOut != want {
		t.Fatalf("bad row: code %d stderr %q; want 1 and %q", code, errOut, want)
	}
	code, _, errOut = runCLI(t, "sim", "-trace", bad, "-nodes", "2", "-skip-invalid", "-policies", "baseline")
	if code != exitOK || !strings.Contains(errOut, bad+": skipped 1 invalid row (-skip-invalid)") {
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

// sim generate -cluster: faults name the cluster file's nodes (and a GPU
// each node has), and the trace replays on that cluster.
func TestSimGenerateCluster(t *testing.T) {
	dir := t.TempDir()
	cluster := filepath.Join(dir, "c.hcl")
	if err := os.WriteFile(cluster, []byte("pool \"a100\" {\n  nodes = 2\n  gpus_per_node = 4\n  model = \"a100\"\n}\npool \"h100\" {\n  nodes = 3\n  gpus_per_node = 8\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "t.csv")
	code, _, errOut := runCLI(t, "sim", "generate", "-budgets", "../../examples/budgets", "-days", "2", "-debug-per-day", "20",
		"-failures", "40", "-cluster", cluster, "-o", out)
	if code != exitOK {
		t.Fatalf("code %d stderr %q", code, errOut)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := sim.ReadCSV(f, sim.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gpus := map[string]int{"a100-0": 4, "a100-1": 4, "h100-0": 8, "h100-1": 8, "h100-2": 8}
	for _, h := range tr.Health {
		if n, ok := gpus[h.Node]; !ok || h.GPU >= n {
			t.Fatalf("fault on %s GPU %d: not a GPU of the cluster file", h.Node, h.GPU)
		}
	}
	if len(tr.Health) != 80 {
		t.Fatalf("%d health rows, want 80 (40 faults and their repairs)", len(tr.Health))
	}
	code, _, errOut = runCLI(t, "sim", "-budgets", "../../examples/budgets", "-trace", out, "-cluster", cluster, "-policies", "baseline")
	if code != exitOK {
		t.Fatalf("replaying on the cluster: code %d stderr %q", code, errOut)
	}
	code, _, errOut = runCLI(t, "sim", "generate", "-budgets", "../../examples/budgets", "-cluster", cluster, "-nodes", "3")
	if code != exitUsage || !strings.Contains(errOut, "not both") {
		t.Fatalf("-cluster with -nodes: code %d stderr %q", code, errOut)
	}
}
