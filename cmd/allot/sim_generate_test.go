package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/allot-sched/allot/hcl"
	"github.com/allot-sched/allot/overlay/sim"
)

// `allot sim generate -shape heavy` writes, byte for byte, the trace a
// suite scenario's "heavy" key generates for the same seed, settings and
// cluster (suiteTrace), and a heavy-tailed one: not the published shape's.
func TestSimGenerateHeavyIsTheSuiteTrace(t *testing.T) {
	const budgetsDir = "../../examples/sim/suite/heavy-budgets"
	tree, err := hcl.LoadDir(budgetsDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		flags []string
		heavy string
		seed  uint64
		nodes int
		pools string // a cluster file of the suite, instead of nodes
	}{
		{"defaults but days", []string{"-days", "2"}, `{"days": 2}`, 2, 16, ""},
		{"every setting", []string{"-days", "3", "-allocated", "2", "-team-spread", "0.5", "-filler", "0.1", "-resumable", "0.5",
			"-max-nodes", "4", "-large-gangs", "-bursty", "2", "-burst-idle-days", "1", "-burst-factor", "4"},
			`{"days": 3, "allocated": 2, "team_spread": 0.5, "filler": 0.1, "resumable": 0.5, "max_nodes": 4, "large_gangs": true,
			  "bursty": 2, "burst_idle_days": 1, "burst_factor": 4}`, 3, 8, ""},
		{"two pools", []string{"-days", "1"}, `{"days": 1}`, 1, 0, "../../examples/sim/suite/two-pools.hcl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "heavy.csv")
			args := append([]string{"sim", "generate", "-shape", "heavy", "-budgets", budgetsDir, "-seed", strconv.FormatUint(tc.seed, 10), "-o", out}, tc.flags...)
			sc := scenarioFile{Nodes: tc.nodes}
			if tc.pools != "" {
				args = append(args, "-cluster", tc.pools)
				sc = scenarioFile{Cluster: tc.pools}
			} else {
				args = append(args, "-nodes", strconv.Itoa(tc.nodes))
			}
			if code, _, errOut := runCLI(t, args...); code != exitOK {
				t.Fatalf("allot %s: code %d: %s", strings.Join(args, " "), code, errOut)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			cluster, err := suiteCluster(sc, ".")
			if err != nil {
				t.Fatal(err)
			}
			tr, err := suiteTrace(suiteScenario{scenarioFile: sc, Heavy: json.RawMessage(tc.heavy)}, sc, ".", tree, cluster, tc.seed)
			if err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			if err := sim.WriteCSV(&want, tr); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("sim generate -shape heavy wrote %d bytes, the suite's trace is %d: they differ", len(got), want.Len())
			}
			back, err := sim.ReadCSV(bytes.NewReader(got), sim.ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(back.Jobs) < 100 {
				t.Fatalf("%d jobs: want a trace", len(back.Jobs))
			}
			if tc.pools != "" && !strings.Contains(string(got), "b200") {
				t.Fatalf("a two-pool trace names no job of the b200 pool")
			}
		})
	}
	// The published shape of the same seed is another trace.
	code, pub, _ := runCLI(t, "sim", "generate", "-budgets", budgetsDir, "-days", "2", "-nodes", "16", "-seed", "2")
	code2, heavy, _ := runCLI(t, "sim", "generate", "-shape", "heavy", "-budgets", budgetsDir, "-days", "2", "-nodes", "16", "-seed", "2")
	if code != exitOK || code2 != exitOK || pub == heavy {
		t.Fatalf("codes %d, %d: the published and heavy shapes wrote the same trace", code, code2)
	}
}

// A bad heavy-shape command line is refused with exit code 2 and an error
// naming the flag and what would be valid.
func TestSimGenerateHeavyRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-shape", "huge"}, `-shape "huge": want published (the example's generator) or heavy (heavy-tailed runtimes, as the suite's heavy scenarios)`},
		{[]string{"-shape", "heavy", "-days", "0"}, "-days 0: want days of submissions, more than 0 and at most 3650"},
		{[]string{"-shape", "heavy", "-allocated", "-1"}, "-allocated -1: want allocated work as a multiple of capacity, 0 or more (e.g. 3)"},
		{[]string{"-shape", "heavy", "-filler", "-0.5"}, "-filler -0.5: want unallocated work as a multiple of capacity, 0 or more (e.g. 0.05)"},
		{[]string{"-shape", "heavy", "-team-spread", "NaN"}, "-team-spread NaN: want the spread of the teams' demand around their shares, 0 or more (0: every team at its share)"},
		{[]string{"-shape", "heavy", "-resumable", "1.5"}, "-resumable 1.5: want the fraction of training jobs that may be requeued, in [0, 1]"},
		{[]string{"-shape", "heavy", "-max-nodes", "0"}, "-max-nodes 0: want the most nodes a gang job spans, 1 or more"},
		{[]string{"-shape", "heavy", "-bursty", "-1"}, "-bursty -1: want the number of bursty teams, 0 or more"},
		{[]string{"-shape", "heavy", "-bursty", "2", "-burst-factor", "0"}, "-burst-factor 0: want a bursty team's demand after its idle days, as a multiple of its share, more than 0"},
		{[]string{"-shape", "heavy", "-bursty", "2", "-burst-idle-days", "-1"}, "-burst-idle-days -1: want the days a bursty team submits nothing, 0 or more"},
		{[]string{"-shape", "heavy", "-demand", "3"}, "-demand is not a setting of -shape heavy (its own are -filler, -resumable, -max-nodes, -large-gangs, -bursty, -burst-idle-days, -burst-factor; and -days, -allocated, -team-spread)"},
		{[]string{"-shape", "heavy", "-failures", "3"}, "-failures is not a setting of -shape heavy (its own are -filler, -resumable, -max-nodes, -large-gangs, -bursty, -burst-idle-days, -burst-factor; and -days, -allocated, -team-spread)"},
		{[]string{"-large-gangs"}, "-large-gangs is not a setting of -shape published (its own are -demand, -debug-per-day, -train-cap, -failures; and -days, -allocated, -team-spread)"},
		{[]string{"-shape", "heavy", "-nodes", "0"}, "-nodes 0: want the number of GPU nodes, 1 to 100000"},
	} {
		args := append([]string{"sim", "generate", "-budgets", "../../examples/sim/suite/heavy-budgets"}, tc.args...)
		code, out, errOut := runCLI(t, args...)
		if want := "Error: " + tc.want + "\n"; code != exitUsage || errOut != want || out != "" {
			t.Errorf("allot %s: code %d stderr %q, want code 2 and %q", strings.Join(tc.args, " "), code, errOut, want)
		}
	}
}
