package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/contract"
)

func readCSVString(t *testing.T, in string) *Trace {
	t.Helper()
	tr, err := ReadCSV(strings.NewReader(in), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// What the allot contract warns about each job comes back counted by kind,
// the first job of each named with its line.
func TestTraceCheckWarnings(t *testing.T) {
	tr := readCSVString(t, "submit,job,budget,gpus,work,min_runtime\n"+
		"0,ok,ai2/vision/video,1,1h,1h\n"+
		"1,typo1,ai2/vision/vidoe,1,1h,1h\n"+
		"2,typo2,ai2/vision/vidoe,1,1h,2h\n"+
		"3,typo3,ai2/nope,1,1h,1h\n"+
		"4,inner,ai2/vision,1,1h,1h\n"+
		"5,long,ai2/vision/video,1,20h,12h\n"+
		"6,nobudget,,1,1h,1h\n"+
		"7,free,ai2/whatever,1,1h,0\n")
	ws, err := tr.Check(UniformCluster(2, 8), exampleTree(t), CheckOptions{Contract: contract.Config{RuntimeCap: 8 * time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range ws {
		got = append(got, w.String())
	}
	want := []string{
		`3 jobs name an unknown budget (first: line 3 job "typo1": meta budget = "ai2/vision/vidoe": no such budget (did you mean "ai2/vision/video"?)`,
		`1 job names a budget with sub-budgets (first: line 6 job "inner": meta budget = "ai2/vision": budget "ai2/vision" has sub-budgets; the job runs unallocated. Name one of its leaves instead: ai2/vision/geometry_3d, ai2/vision/perception, ai2/vision/video)`,
		`1 job has a min_runtime but no budget (first: line 8 job "nobudget": meta budget = "": `,
		`1 job asks a min_runtime above the cap (first: line 7 job "long": meta min_runtime = "12h0m0s": above the cap of 8h0m0s`,
	}
	if len(got) != len(want) {
		t.Fatalf("warnings:\n%s\nwant %d", strings.Join(got, "\n"), len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("warning %d:\n  %s\nwant it to start with\n  %s", i, got[i], want[i])
		}
	}
	// Without a tree every allocated job warns of it.
	ws, err = tr.Check(UniformCluster(2, 8), nil, CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 3 || ws[0].Kind != WarnNoBudget || ws[1].Kind != WarnNoTree || ws[1].Count != 6 {
		t.Errorf("without a tree: %v; want no budget (1), no tree (6) and the cap (1)", ws)
	}
}

// A job that no node could hold, and a health row for a GPU the node does
// not have, are refused before the run, naming the row's line; with
// SkipInvalid they are dropped and counted.
func TestTraceCheckRefuses(t *testing.T) {
	// Both groups of nodes are in Nomad's "default" pool, where the jobs go.
	cluster := ClusterSpec{Pools: []Pool{{Name: "a", Nodes: 2, GPUsPerNode: 4, NodePool: "default"},
		{Name: "b", Nodes: 1, GPUsPerNode: 8, NodePool: "default"}}}
	for _, tc := range []struct {
		name, in, want string
	}{
		{"more GPUs per allocation than any node", "submit,job,count,gpus,work\n0,x,1,8,1h\n60,y,1,16,1h\n",
			`line 3: job "y" asks 16 GPUs per allocation, but the largest node has 8 (pool "b"): it could never be placed; split it into allocations of at most 8 GPUs (count) or run a larger cluster`},
		{"more allocations than the nodes hold", "submit,job,count,gpus,work\n0,x,5,4,1h\n",
			`line 2: job "x" asks 5 allocations of 4 GPUs, but the cluster's nodes hold at most 4 of them at once: it could never be placed`},
		{"allocations only the largest node holds", "submit,job,count,gpus,work\n0,ok,4,4,1h\n0,x,2,8,1h\n",
			`line 3: job "x" asks 2 allocations of 8 GPUs, but the cluster's nodes hold at most 1 of them at once: it could never be placed`},
		{"a GPU the node does not have", "submit,job,gpus,work,node,health,gpu\n0,x,1,1h,,,\n10,,,,a-1,unhealthy,4\n",
			`line 3: health event for GPU 4 of node "a-1", which has 4 GPUs (0 to 3); give one of them, or -1 (or empty) for the whole node`},
		{"a node the cluster does not have", "submit,job,gpus,work,node,health\n0,x,1,1h,,\n10,,,,default-0,unhealthy\n",
			`line 3: health event names node "default-0", which the cluster does not have; its nodes are a-0 to a-1, b-0 to b-0`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := readCSVString(t, tc.in)
			if _, err := tr.Check(cluster, nil, CheckOptions{}); err == nil || err.Error() != tc.want {
				t.Fatalf("error\n  %v\nwant\n  %s", err, tc.want)
			}
			tr = readCSVString(t, tc.in)
			jobs, health := len(tr.Jobs), len(tr.Health)
			if _, err := tr.Check(cluster, nil, CheckOptions{SkipInvalid: true}); err != nil {
				t.Fatal(err)
			}
			if tr.Skipped != 1 || len(tr.Jobs)+len(tr.Health) != jobs+health-1 {
				t.Errorf("skip: skipped %d, %d jobs and %d health rows left of %d and %d", tr.Skipped, len(tr.Jobs), len(tr.Health), jobs, health)
			}
		})
	}
	// A job may use only the nodes of its pool and model: the size checks
	// read those alone.
	tr := readCSVString(t, "submit,job,gpus,work,pool,model\n0,x,8,1h,default,h100\n")
	mixed := ClusterSpec{Pools: []Pool{{Name: "h", Nodes: 2, GPUsPerNode: 4, Model: "h100", NodePool: "default"},
		{Name: "b", Nodes: 1, GPUsPerNode: 8, Model: "b200", NodePool: "default"}}}
	want := `line 2: job "x" asks 8 GPUs per allocation, but the largest node its pool and model allow has 4 (pool "h"): it could never be placed; split it into allocations of at most 4 GPUs (count) or run a larger cluster`
	if _, err := tr.Check(mixed, nil, CheckOptions{}); err == nil || err.Error() != want {
		t.Errorf("model-constrained job: error\n  %v\nwant\n  %s", err, want)
	}
	// Run refuses the GPU too, for callers that did not Check.
	tr = readCSVString(t, "submit,job,gpus,work,node,health,gpu\n0,x,1,1h,,,\n10,,,,a-1,unhealthy,4\n")
	if _, err := Run(tr, cluster, nil, NewBaseline(DefaultBaselineConfig()), DefaultOptions()); err == nil || !strings.Contains(err.Error(), "line 3: health event for GPU 4") {
		t.Errorf("Run: %v", err)
	}
}
