package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// Bad trace files: exit 1, one line naming file:line (and the column
// where there is one) and what would be valid.
func TestSimRefusesBadTraces(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, file, content string
		args                []string
		want                string // stderr after "Error: <file>"
	}{
		{"a row with fewer fields than the header", "short.csv",
			"submit,job,budget,gpus,work,min_runtime\n0,a,ai2/vision/video,1,10m,5m\n60,b,ai2/vision/video,2,10m\n", nil,
			":3: 5 fields, but the header names 6 columns: the row has no min_runtime (write an empty field for a default)"},
		{"a row with more fields than the header", "long.csv", "submit,job,gpus,work\n0,a,1,10m,5m\n", nil,
			":2: 5 fields, but the header names only 4 columns (submit, job, gpus, work); a field that holds a comma is quoted"},
		{"a job ID twice", "dup.csv", "submit,job,gpus,work\n0,a,1,10m\n60,a,1,10m\n", nil,
			`:3: job "a" is also the job of line 2; give every job its own id`},
		{"more GPUs than any node", "big.csv", "submit,job,gpus,work\n0,a,16,10m\n", nil,
			`:2: job "a" asks 16 GPUs per allocation, but the largest node has 8 (pool "default"): it could never be placed; split it into allocations of at most 8 GPUs (count) or run a larger cluster`},
		{"a health row for a GPU the node lacks", "gpu.csv", "submit,job,gpus,work,node,health,gpu\n0,a,1,10m,,,\n60,,,,default-1,unhealthy,8\n", nil,
			`:3: health event for GPU 8 of node "default-1", which has 8 GPUs (0 to 7); give one of them, or -1 (or empty) for the whole node`},
		{"a JSON key that is not a column", "key.jsonl", "{\"submit\": 0, \"job\": \"a\", \"gpus\": 1, \"work\": 600, \"gpu_count\": 2}\n", nil,
			`:1:51: unknown key "gpu_count"; valid keys: submit, job, budget, class, count, gpus, work, min_runtime, resumable, priority, baseline, pool, model, checkpoint_signal, checkpoint_notice, kill_timeout, node, health, gpu, reason, and "at" for "submit"`},
		{"no gpus column", "nogpus.csv", "submit,job,work\n0,a,10m\n", nil,
			":1: the header has no gpus column; every job row needs submit, job, gpus, work"},
		{"an empty file", "empty.csv", "", nil,
			":1: the file is empty; a CSV trace starts with a header row naming its columns, e.g. submit,job,gpus,work"},
		{"binary garbage", "garbage.csv", "\x00\x01\x02\x03" + strings.Repeat("\xff\xfe\x9c", 230), nil,
			`:1:1: binary data ("\x00\x01\x02\x03\xff\xfe\x9c\xff"), not a CSV trace`},
		{"a gzip file named .csv", "packed.csv", "\x1f\x8b\x08\x00\x00\x00", nil,
			":1:1: the file is gzip-compressed, not CSV; name it with .gz after the format (trace.csv.gz)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, filepath.Join(dir, tc.file), tc.content)
			args := append([]string{"sim", "-trace", path, "-nodes", "2", "-budgets", "../../examples/budgets"}, tc.args...)
			code, out, errOut := runCLI(t, args...)
			if want := "Error: " + path + tc.want + "\n"; code != exitInvalid || errOut != want || out != "" {
				t.Errorf("code %d stdout %q stderr\n  %q\nwant code 1 and\n  %q", code, out, errOut, want)
			}
			for _, r := range errOut {
				if r != '\n' && !unicode.IsPrint(r) {
					t.Errorf("stderr holds the raw byte %q", r)
					break
				}
			}
		})
	}
}

// What the allot contract would correct is printed before the run, counted
// per kind, the first job named with its line; the run goes on.
func TestSimWarnsPerKind(t *testing.T) {
	path := writeFile(t, filepath.Join(t.TempDir(), "w.csv"), "submit,job,budget,gpus,work,min_runtime\n"+
		"0,ok,ai2/vision/video,1,10m,5m\n"+
		"10,x,ai2/vision/vidoe,1,10m,5m\n"+
		"20,y,ai2/vision/vidoe,1,10m,5m\n"+
		"30,z,ai2/nlp/reasonin,1,10m,5m\n"+
		"40,inner,ai2/vision,1,10m,5m\n"+
		"50,long,ai2/vision/video,1,10h,12h\n"+
		"60,free,ai2/vision/vidoe,1,10m,0\n")
	code, out, errOut := runCLI(t, "sim", "-trace", path, "-nodes", "2", "-budgets", "../../examples/budgets", "-policies", "baseline")
	if code != exitOK || !strings.Contains(out, "baseline") {
		t.Fatalf("code %d stderr %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	want := []string{
		path + `: 3 jobs name an unknown budget (first: line 3 job "x": meta budget = "ai2/vision/vidoe": no such budget (did you mean "ai2/vision/video"?)`,
		path + `: 1 job names a budget with sub-budgets (first: line 6 job "inner": meta budget = "ai2/vision": budget "ai2/vision" has sub-budgets; the job runs unallocated. Name one of its leaves instead: ai2/vision/geometry_3d, ai2/vision/perception, ai2/vision/video)`,
		path + `: 1 job asks a min_runtime above the cap (first: line 7 job "long": meta min_runtime = "12h0m0s": above the cap of 8h0m0s`,
		"measuring from the start",
	}
	if len(lines) != len(want) {
		t.Fatalf("stderr:\n%s\nwant %d lines", errOut, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("stderr line %d:\n  %s\nwant it to start with\n  %s", i+1, lines[i], want[i])
		}
	}
}

// Bad scenario files: exit 1, each problem at file:line:col, then a count.
func TestSimRefusesBadScenarios(t *testing.T) {
	dir := t.TempDir()
	budgetsDir, err := filepath.Abs("../../examples/budgets")
	if err != nil {
		t.Fatal(err)
	}
	b := strconv.Quote(budgetsDir)
	for _, tc := range []struct {
		name, content string
		want          []string // the problems, after the file's name
	}{
		{"nodes 0", `{"budgets": ` + b + `, "nodes": 0}`,
			[]string{`:1:` + strconv.Itoa(len(b)+24) + `: nodes 0: want the number of GPU nodes from 1 to 100000`}},
		{"nodes -3", "{\n  \"nodes\": -3\n}", []string{`:2:12: nodes -3: want the number of GPU nodes from 1 to 100000`}},
		{"gpus_per_node 1000", "{\n  \"gpus_per_node\": 1000\n}", []string{`:2:20: gpus_per_node 1000: want the GPUs of each node from 1 to 64`}},
		{"nodes as a string", "{\"nodes\": \"4\"}", []string{`:1:11: nodes: want a whole number from 1 to 100000, not a string`}},
		{"pool keys in Go's spelling, all listed", "{\"pools\": [\n  {\"Name\": \"p\", \"Nodes\": 2, \"GPUsPerNode\": 4, \"modle\": \"x\"}\n]}", []string{
			`:2:4: unknown key "Name" in pools[0] (did you mean "name"?); valid keys: name, nodes, gpus_per_node, model, node_pool`,
			`:2:17: unknown key "Nodes" in pools[0] (did you mean "nodes"?); valid keys: name, nodes, gpus_per_node, model, node_pool`,
			`:2:29: unknown key "GPUsPerNode" in pools[0] (did you mean "gpus_per_node"?); valid keys: name, nodes, gpus_per_node, model, node_pool`,
			`:2:47: unknown key "modle" in pools[0] (did you mean "model"?); valid keys: name, nodes, gpus_per_node, model, node_pool`,
		}},
		{"a pool without gpus_per_node", `{"pools": [{"name": "p", "nodes": 2}]}`,
			[]string{`:1:12: pools[0] has no gpus_per_node; a pool needs name, nodes and gpus_per_node (model defaults to "h100")`}},
		{"unknown top-level and generate keys", "{\"cluter\": \"c.hcl\",\n \"generate\": {\"dayz\": 2}}", []string{
			`:1:2: unknown key "cluter" (did you mean "cluster"?); valid keys: budgets, trace, cluster, config, pools, nodes, gpus_per_node, generate`,
			`:2:15: unknown key "dayz" in generate (did you mean "days"?); valid keys: seed, days, gpus, demand, allocated, team_spread, debug_per_day, interactive_per_day, resumable, high_inflation, debug_priority, train_priority, train_sizes, train_weights, train_work_min, train_work_max, train_cap, failures, nodes, repair_min, repair_max, train_notice, interactive_notice`,
		}},
		{"the generator's gpus", `{"generate": {"gpus": 64}}`,
			[]string{`:1:15: generate.gpus: the generator takes the cluster's GPUs from the scenario's cluster, pools or nodes and gpus_per_node (or the flags); leave it out`}},
		{"a trace and generator settings", "{\"trace\": \"t.csv\",\n \"generate\": {\"days\": 2}}",
			[]string{`:2:14: generate: the scenario also names a trace, which it would replay instead; keep one of trace and generate`}},
		{"a syntax error", "{\n  \"budgets\": \"b\"\n  \"nodes\": 4\n}", []string{`:3:3: invalid character '"' after object key:value pair`}},
		{"a key twice", "{\"nodes\": 4, \"nodes\": 8}", []string{`:1:14: key "nodes" is given twice; give it once`}},
		{"a second document", "{\"nodes\": 4}\n{\"nodes\": 8}\n", []string{`:2:1: a second JSON value after the scenario's object; a scenario file holds one object`}},
		{"an array", "[{\"nodes\": 4}]", []string{`:1:1: a scenario is a JSON object ({...}) with keys budgets, trace, cluster, config, pools, nodes, gpus_per_node, generate`}},
		{"an empty file", "\n", []string{`:1:1: the file is empty; a scenario is one JSON object with keys budgets, trace, cluster, config, pools, nodes, gpus_per_node, generate`}},
		{"cut short", `{"nodes": 4`, []string{`:1:12: the JSON ends before the object is closed`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json"), tc.content)
			code, _, errOut := runCLI(t, "sim", path)
			var want []string
			for _, p := range tc.want {
				want = append(want, path+p)
			}
			want = append(want, "Error: "+path+" is not a valid scenario file ("+plural(len(tc.want), "problem")+")")
			if got := strings.TrimSpace(errOut); code != exitInvalid || got != strings.Join(want, "\n") {
				t.Errorf("code %d stderr:\n%s\nwant code 1 and:\n%s", code, got, strings.Join(want, "\n"))
			}
		})
	}
}

// The scenario's generator settings are checked at their key.
func TestSimScenarioGenerateErrors(t *testing.T) {
	budgetsDir, err := filepath.Abs("../../examples/budgets")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, tc := range []struct{ name, generate, want string }{
		{"a type", `{"days": "two"}`, `:3:24: generate.days: want a number, not a string`},
		{"a range", `{"days": 0}`, `:3:15: generate: days 0 must be in (0, 3650]`},
		{"a priority range of three", `{"debug_priority": [80, 90, 100]}`, `:3:34: generate.debug_priority: [80 90 100]: want a range [lo, hi] of two priorities, not 3`},
		{"a duration", `{"repair_min": "two hours"}`, `:3:30: generate.repair_min: "two hours" is not a duration; write it like "2h", "90m" or "3d" as "72h"`},
	} {
		path := writeFile(t, filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json"),
			"{\n  \"budgets\": "+strconv.Quote(budgetsDir)+",\n  \"generate\": "+tc.generate+"\n}\n")
		code, _, errOut := runCLI(t, "sim", path)
		if want := "Error: " + path + tc.want + "\n"; code != exitInvalid || errOut != want {
			t.Errorf("%s: code %d stderr\n  %q\nwant code 1 and\n  %q", tc.name, code, errOut, want)
		}
	}
}

// A scenario's pools by their documented names build the cluster.
func TestSimScenarioPools(t *testing.T) {
	budgetsDir, err := filepath.Abs("../../examples/budgets")
	if err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, filepath.Join(t.TempDir(), "s.json"), `{"budgets": `+strconv.Quote(budgetsDir)+
		`, "pools": [{"name": "a", "nodes": 2, "gpus_per_node": 4}, {"name": "b", "nodes": 1, "gpus_per_node": 2, "model": "a100"}],`+
		` "generate": {"days": 1, "debug_per_day": 20, "failures": 0}}`)
	if g := simGPUs(t, simJSON(t, path, "-policies", "baseline", "-horizon", "2h")); len(g) != 1 || g[0] != 10 {
		t.Errorf("gpus = %v, want [10]", g)
	}
}

// Bad flag values: exit 2, naming the flag and what is valid; the same
// value from a file is exit 1 (TestSimRefusesBadScenarios).
func TestSimRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "-reaction-delay", "-1s"}, "-reaction-delay -1s: want a duration of 0 or more (0: the policy reacts at once)"},
		{[]string{"sim", "--checkpoint-loss", "-15m"}, "-checkpoint-loss -15m0s: want a duration of 0 or more (0: a preempted job loses nothing)"},
		{[]string{"sim", "-horizon", "-1h"}, "-horizon -1h0m0s: want a duration of 0 or more (0: to the trace's end)"},
		{[]string{"sim", "-warmup", "-1h"}, "-warmup -1h0m0s: want a duration of 0 or more (0: measure from the start)"},
		{[]string{"sim", "-trace", "../../examples/sim/small.csv", "-nodes", "4", "-warmup", "4h"}, "-warmup 4h0m0s: want less than the run (4h0m0s); 0 measures from the start"},
		{[]string{"sim", "-policies", "allot,baseline,allot"}, "-policies allot,baseline,allot: allot is named twice; name each policy once"},
		{[]string{"sim", "-gpus-per-node", "1000"}, "-gpus-per-node 1000: want the GPUs of each node, 1 to 64"},
		{[]string{"sim", "-nodes", "0"}, "-nodes 0: want the number of GPU nodes, 1 to 100000"},
		{[]string{"sim", "generate", "-gpus-per-node", "1000"}, "-gpus-per-node 1000: want the GPUs of each node, 1 to 64"},
		{[]string{"sim", "generate", "--nodes", "-3"}, "-nodes -3: want the number of GPU nodes, 1 to 100000"},
		{[]string{"sim", "generate", "-days", "1", "trace.csv"}, `sim generate takes no arguments, got ["trace.csv"] (the output file is -o FILE)`},
		{[]string{"sim", "generate", "-o", "trace.txt"}, "-o trace.txt: name the file .csv or .jsonl (the format is chosen by the name)"},
	} {
		args := append(tc.args, "-budgets", "../../examples/budgets")
		code, out, errOut := runCLI(t, args...)
		if want := "Error: " + tc.want + "\n"; code != exitUsage || errOut != want || out != "" {
			t.Errorf("allot %s: code %d stderr %q, want code 2 and %q", strings.Join(tc.args, " "), code, errOut, want)
		}
	}
}

// An -html file that cannot be written is refused before the run.
func TestSimHTMLDirectoryMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "sim.html")
	code, out, errOut := runCLI(t, "sim", "-budgets", "../../examples/budgets", "-html", path)
	if want := "Error: -html " + path + ": no directory " + filepath.Dir(path) + " to write the report in\n"; code != exitInvalid || errOut != want || out != "" {
		t.Errorf("code %d stdout %q stderr %q, want code 1 and %q", code, out, errOut, want)
	}
}

// A path from the scenario that does not open names the scenario's key, and
// that the path is relative to the scenario file.
func TestSimScenarioPathsMissing(t *testing.T) {
	budgetsDir, err := filepath.Abs("../../examples/budgets")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, tc := range []struct{ name, content, want string }{
		{"budgets", "{\n  \"budgets\": \"nope\"\n}", ":2:14: budgets (relative to the scenario file): reading budget directory: open " + filepath.Join(dir, "nope") + ": no such file or directory"},
		{"trace", "{\n  \"budgets\": " + strconv.Quote(budgetsDir) + ",\n  \"trace\": \"t.csv\"\n}", ":3:12: trace (relative to the scenario file): open " + filepath.Join(dir, "t.csv") + ": no such file or directory"},
		{"cluster", "{\"budgets\": " + strconv.Quote(budgetsDir) + ", \"cluster\": \"c.hcl\"}", ":1:" + strconv.Itoa(len(budgetsDir)+28) + ": cluster (relative to the scenario file): reading cluster file: open " + filepath.Join(dir, "c.hcl") + ": no such file or directory"},
	} {
		path := writeFile(t, filepath.Join(dir, tc.name+".json"), tc.content)
		code, _, errOut := runCLI(t, "sim", path)
		if want := "Error: " + path + tc.want + "\n"; code != exitInvalid || errOut != want {
			t.Errorf("%s: code %d stderr\n  %q\nwant code 1 and\n  %q", tc.name, code, errOut, want)
		}
	}
}
