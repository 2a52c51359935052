package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/allot-sched/allot/hcl"
	"github.com/allot-sched/allot/overlay/sim"
)

// simJSON runs allot sim with -json and fails the test unless it succeeds.
func simJSON(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := runCLI(t, append([]string{"sim", "-json"}, args...)...)
	if code != exitOK {
		t.Fatalf("allot sim %v: code %d stderr %q", args, code, errOut)
	}
	return out
}

// simGPUs reads the cluster size each policy's result reports.
func simGPUs(t *testing.T, out string) []int {
	t.Helper()
	var doc struct {
		Results []struct {
			GPUs int `json:"gpus"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("reading -json: %v", err)
	}
	var gpus []int
	for _, r := range doc.Results {
		gpus = append(gpus, r.GPUs)
	}
	return gpus
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The shipped cluster file is the example's 128 × 8 H100: the same run from
// it and from the flags prints the same bytes, with -cluster in both the
// single-dash and the double-dash form.
func TestSimClusterFileMatchesFlags(t *testing.T) {
	common := []string{"-budgets", "../../examples/budgets", "-horizon", "6h", "-seed", "3"}
	fromFlags := simJSON(t, append([]string{"-nodes", "128", "-gpus-per-node", "8"}, common...)...)
	single := simJSON(t, append([]string{"-cluster", "../../examples/sim/cluster.hcl"}, common...)...)
	double := simJSON(t, append([]string{"--cluster", "../../examples/sim/cluster.hcl"}, common...)...)
	if single != fromFlags {
		t.Error("-cluster examples/sim/cluster.hcl differs from -nodes 128 -gpus-per-node 8")
	}
	if double != single {
		t.Error("--cluster differs from -cluster")
	}
	if g := simGPUs(t, single); len(g) != 2 || g[0] != 1024 || g[1] != 1024 {
		t.Errorf("gpus per result = %v, want [1024 1024]", g)
	}
}

// Precedence: -cluster, then the scenario's "cluster" (relative to the
// scenario file), then its "pools", then nodes × gpus_per_node.
func TestSimClusterPrecedence(t *testing.T) {
	dir := t.TempDir()
	budgetsDir, err := filepath.Abs("../../examples/budgets")
	if err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "clusters")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(sub, "six.hcl"), "pool \"default\" {\n  nodes = 3\n  gpus_per_node = 2\n}\n")
	five := writeFile(t, filepath.Join(dir, "five.hcl"), "pool \"x\" {\n  nodes = 5\n  gpus_per_node = 1\n}\n")
	scenario := func(name string, keys map[string]any) string {
		keys["budgets"], keys["generate"] = budgetsDir, map[string]any{"days": 1, "debug_per_day": 50, "failures": 0}
		b, err := json.Marshal(keys)
		if err != nil {
			t.Fatal(err)
		}
		return writeFile(t, filepath.Join(dir, name), string(b))
	}
	pools := []map[string]any{{"name": "p", "nodes": 2, "gpus_per_node": 4, "model": "h100"}}
	all := scenario("all.json", map[string]any{"cluster": "clusters/six.hcl", "pools": pools, "nodes": 7, "gpus_per_node": 1})
	noFile := scenario("pools.json", map[string]any{"pools": pools, "nodes": 7, "gpus_per_node": 1})
	onlyNodes := scenario("nodes.json", map[string]any{"nodes": 7, "gpus_per_node": 1})
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"-cluster wins over the scenario", []string{all, "-cluster", five}, 5},
		{"scenario cluster, relative to the scenario file, wins over pools", []string{all}, 6},
		{"scenario pools win over nodes", []string{noFile}, 8},
		{"scenario nodes x gpus_per_node", []string{onlyNodes}, 7},
		{"-nodes and -gpus-per-node win over the scenario's cluster", []string{all, "-nodes", "3", "-gpus-per-node", "3"}, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := simJSON(t, append(tc.args, "-policies", "baseline", "-horizon", "2h")...)
			if g := simGPUs(t, out); len(g) != 1 || g[0] != tc.want {
				t.Errorf("gpus = %v, want [%d]", g, tc.want)
			}
		})
	}
}

func TestSimClusterErrors(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, filepath.Join(dir, "bad.hcl"), "pool \"a\" {\n  nodes = 0\n  gpus_per_nod = 8\n}\n")
	code, _, errOut := runCLI(t, "sim", "-cluster", "../../examples/sim/cluster.hcl", "-nodes", "4", "-budgets", "../../examples/budgets")
	if code != exitUsage || !strings.Contains(errOut, "-cluster and -nodes/-gpus-per-node both give the cluster's shape") {
		t.Errorf("-cluster with -nodes: code %d stderr %q, want a usage error saying so", code, errOut)
	}
	code, _, errOut = runCLI(t, "sim", "--cluster", "../../examples/sim/cluster.hcl", "--gpus-per-node", "4", "-budgets", "../../examples/budgets")
	if code != exitUsage || !strings.Contains(errOut, "not both") {
		t.Errorf("--cluster with --gpus-per-node: code %d stderr %q, want a usage error", code, errOut)
	}
	code, _, errOut = runCLI(t, "sim", "-cluster", bad, "-budgets", "../../examples/budgets")
	want := []string{
		bad + `:1:1: pool "a" has no gpus_per_node; add gpus_per_node = N, the GPUs of each node (1 to 64)`,
		bad + `:2:11: pool "a": nodes = 0: want a whole number from 1 to 100000`,
		bad + `:3:3: pool "a": unknown attribute "gpus_per_nod" (did you mean "gpus_per_node"?); valid attributes are nodes, gpus_per_node, model and node_pool`,
		"Error: " + bad + " is not a valid cluster file (3 problems)",
	}
	if code != exitInvalid || strings.TrimSpace(errOut) != strings.Join(want, "\n") {
		t.Errorf("bad cluster file: code %d stderr:\n%s\nwant code %d and:\n%s", code, errOut, exitInvalid, strings.Join(want, "\n"))
	}
	missing := filepath.Join(dir, "missing.hcl")
	if code, _, errOut = runCLI(t, "sim", "-cluster", missing, "-budgets", "../../examples/budgets"); code != exitInvalid || !strings.Contains(errOut, missing) {
		t.Errorf("missing cluster file: code %d stderr %q", code, errOut)
	}
	sc := writeFile(t, filepath.Join(dir, "s.json"), `{"clusters": "c.hcl"}`)
	code, _, errOut = runCLI(t, "sim", sc)
	if code != exitInvalid || !strings.Contains(errOut, "valid keys: budgets, trace, cluster, config, pools, nodes, gpus_per_node, generate") {
		t.Errorf("unknown scenario key: code %d stderr %q, want the valid keys listed", code, errOut)
	}
}

// Generated faults hit nodes of every pool of a cluster whose first pool is
// not named "default" (the generator names fault nodes default-<k>).
func TestSimGeneratedFaultsHitEveryPool(t *testing.T) {
	tree, err := hcl.LoadDir("../../examples/budgets")
	if err != nil {
		t.Fatal(err)
	}
	spec := sim.ClusterSpec{Pools: []sim.Pool{
		{Name: "a100", Nodes: 3, GPUsPerNode: 8, Model: "a100"},
		{Name: "h100", Nodes: 5, GPUsPerNode: 8, Model: "h100"},
	}}
	g := sim.DefaultGenConfig()
	g.Days, g.DebugPerDay, g.Failures = 1, 10, 200
	g.GPUs, g.Nodes = spec.GPUs(), clusterNodes(spec)
	tr, err := sim.Generate(tree, g)
	if err != nil {
		t.Fatal(err)
	}
	nameFaultNodes(tr, spec)
	names := map[string]bool{}
	for _, p := range spec.Pools {
		for i := 0; i < p.Nodes; i++ {
			names[p.Name+"-"+strconv.Itoa(i)] = true
		}
	}
	hit := map[string]int{}
	for _, h := range tr.Health {
		if !names[h.Node] {
			t.Fatalf("fault on node %q, which the cluster does not have", h.Node)
		}
		hit[h.Node]++
	}
	if len(hit) != len(names) {
		t.Errorf("200 faults hit %d of the %d nodes: %v", len(hit), len(names), hit)
	}

	// And the whole run accepts them (it rejects health events on unknown
	// nodes). The faults fall in the trace's one day: measure from the start.
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "c.hcl"),
		"pool \"a100\" {\n  nodes = 3\n  gpus_per_node = 8\n  model = \"a100\"\n}\npool \"h100\" {\n  nodes = 5\n  gpus_per_node = 8\n}\n")
	budgetsDir, err := filepath.Abs("../../examples/budgets")
	if err != nil {
		t.Fatal(err)
	}
	sc := writeFile(t, filepath.Join(dir, "s.json"), `{"budgets": `+strconv.Quote(budgetsDir)+
		`, "cluster": "c.hcl", "generate": {"days": 1, "debug_per_day": 10, "failures": 20}}`)
	out := simJSON(t, sc, "-policies", "baseline", "-warmup", "0")
	var doc struct {
		Results []struct {
			GPUs   int `json:"gpus"`
			Drains struct {
				Unhealthy int `json:"unhealthy_episodes"`
			} `json:"drains"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Results) != 1 || doc.Results[0].GPUs != 64 || doc.Results[0].Drains.Unhealthy == 0 {
		t.Errorf("results = %+v, want 64 GPUs and some unhealthy episodes", doc.Results)
	}
}

// nameFaultNodes maps default-<k> to the k-th node in pool order and leaves
// other names alone.
func TestNameFaultNodes(t *testing.T) {
	spec := sim.ClusterSpec{Pools: []sim.Pool{{Name: "a", Nodes: 8}, {Name: "b", Nodes: 4}}}
	tr := &sim.Trace{}
	for _, n := range []string{"default-0", "default-7", "default-8", "default-11", "x-3", "default-z"} {
		tr.Health = append(tr.Health, sim.HealthEvent{Node: n})
	}
	nameFaultNodes(tr, spec)
	var got []string
	for _, h := range tr.Health {
		got = append(got, h.Node)
	}
	if want := "a-0 a-7 b-0 b-3 x-3 default-z"; strings.Join(got, " ") != want {
		t.Errorf("got %v, want %s", got, want)
	}
	// A GPU drawn for the cluster's mean node folds onto the node's own GPUs.
	spec = sim.ClusterSpec{Pools: []sim.Pool{{Name: "big", Nodes: 1, GPUsPerNode: 8}, {Name: "small", Nodes: 1, GPUsPerNode: 4}}}
	tr = &sim.Trace{Health: []sim.HealthEvent{
		{Node: "default-0", GPU: 6, Reason: "XID 79 on GPU 6"},
		{Node: "default-1", GPU: 6, Reason: "XID 79 on GPU 6"},
		{Node: "default-1", GPU: 2, Reason: "XID 79 on GPU 2"},
	}}
	nameFaultNodes(tr, spec)
	got = got[:0]
	for _, h := range tr.Health {
		got = append(got, fmt.Sprintf("%s/%d/%s", h.Node, h.GPU, h.Reason))
	}
	if want := "big-0/6/XID 79 on GPU 6 small-0/2/XID 79 on GPU 2 small-0/2/XID 79 on GPU 2"; strings.Join(got, " ") != want {
		t.Errorf("got %q, want %s", strings.Join(got, " "), want)
	}
}
