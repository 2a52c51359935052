package sim

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Nomad places a job only on nodes of its node pool, "default" when it
// names none, and a model constraint narrows that to nodes of the model.
func TestNodePoolRule(t *testing.T) {
	c := ClusterSpec{Pools: []Pool{
		{Name: "default", Nodes: 1, GPUsPerNode: 8, Model: "h100"},
		{Name: "h", Nodes: 1, GPUsPerNode: 8, Model: "h100", NodePool: "gpu"},
		{Name: "b", Nodes: 1, GPUsPerNode: 8, Model: "b200", NodePool: "gpu"},
	}}
	job := func(id string, at time.Duration, pool, model string, gpus int, work time.Duration) JobSpec {
		return JobSpec{ID: id, Submit: at, Class: ClassOther, Count: 1, GPUs: gpus, Work: work, Pool: pool, Model: model}
	}
	tr := &Trace{Jobs: []JobSpec{
		job("b1", 0, "gpu", "b200", 8, 2*time.Hour),
		job("d1", 0, "", "", 8, time.Hour),
		job("g1", time.Second, "gpu", "", 8, 3*time.Hour),          // b1 holds the b200 node: only h-0 fits
		job("b2", 2*time.Second, "gpu", "b200", 4, time.Hour),      // default-0 frees at 1h, but b2 waits for b-0
		job("x", 3*time.Second, "cpu", "", 1, time.Hour),           // no node is in pool "cpu"
		job("d2", 4*time.Second, "default", "", 4, time.Hour),      // pool "default" named outright
		job("m", 5*time.Second, "", "b200", 1, time.Hour),          // no b200 in "default"
		job("h2", 6*time.Second, "gpu", "h100", 8, 30*time.Minute), // waits for g1 on h-0, not b-0
	}}
	opts := DefaultOptions()
	opts.Horizon = 6 * time.Hour
	r, err := Run(tr, c, nil, NewBaseline(DefaultBaselineConfig()), opts)
	if err != nil {
		t.Fatal(err)
	}
	type placed struct {
		node  string
		start time.Duration
	}
	want := map[string]placed{"b1": {"b-0", 0}, "d1": {"default-0", 0}, "g1": {"h-0", time.Second},
		"b2": {"b-0", 2 * time.Hour}, "d2": {"default-0", time.Hour}, "h2": {"h-0", 3*time.Hour + time.Second}}
	got := map[string]placed{}
	for _, a := range r.allocRecords {
		id := r.jobRecords[a.job].spec.ID
		if _, seen := got[id]; !seen {
			got[id] = placed{fmt.Sprint(a.node), time.Duration(a.start) * time.Second}
		}
	}
	for id, w := range want {
		g, ok := got[id]
		w.node = fmt.Sprint(nodeIndex(c, w.node))
		if !ok || g != w {
			t.Errorf("job %s placed %+v (ok %v), want node %s at %v", id, g, ok, w.node, w.start)
		}
	}
	for _, id := range []string{"x", "m"} {
		if _, ok := got[id]; ok {
			t.Errorf("job %s was placed; no node of its pool and model exists", id)
		}
	}
	if r.NeverPlaceable != 2 {
		t.Errorf("NeverPlaceable = %d, want 2 (x and m)", r.NeverPlaceable)
	}
	// Trace.Check says so before the run, naming the first job.
	ws, err := tr.Check(c, nil, CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) == 0 || ws[0].Kind != WarnNoNode || ws[0].Count != 2 ||
		!strings.Contains(ws[0].String(), `job "x" names pool "cpu", and no node is in it`) {
		t.Errorf("warnings %v, want 2 jobs without a node first, naming x", ws)
	}
}

// nodeIndex is the model's index of the node named id.
func nodeIndex(c ClusterSpec, id string) int32 {
	k := int32(0)
	for _, p := range c.Pools {
		for i := 0; i < p.Nodes; i++ {
			if p.Name+"-"+itoa(i) == id {
				return k
			}
			k++
		}
	}
	return -1
}

// The policy and the model agree on pools: a cluster in pool "gpu" whose
// jobs name it runs exactly as the default pool does, time slicing
// included; the same jobs naming no pool are never placed (Nomad sends
// them to "default", which no node is in), where the model used to place
// them anywhere while the policy, reading them as "default", saw no node
// for them and never time sliced.
func TestNodePoolPolicyAgrees(t *testing.T) {
	tree := exampleTree(t)
	g := DefaultGenConfig()
	g.Days, g.GPUs, g.Nodes, g.DebugPerDay, g.Seed = 2, 128, 16, 300, 3
	tr, err := Generate(tree, g)
	if err != nil {
		t.Fatal(err)
	}
	run := func(c ClusterSpec, pool string) *Result {
		t.Helper()
		tc := *tr
		tc.Jobs = append([]JobSpec(nil), tr.Jobs...)
		for i := range tc.Jobs {
			tc.Jobs[i].Pool = pool
		}
		p, err := NewAllot(policyDefault())
		if err != nil {
			t.Fatal(err)
		}
		r, err := Run(&tc, c, tree, p, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	gpuPool := ClusterSpec{Pools: []Pool{{Name: "default", Nodes: 16, GPUsPerNode: 8, Model: "h100", NodePool: "gpu"}}}
	plain := run(UniformCluster(16, 8), "")
	named := run(gpuPool, "gpu")
	var a, b bytes.Buffer
	if err := WriteJSON(&a, 1, []*Result{plain}); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&b, 1, []*Result{named}); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Errorf("pool \"gpu\" with jobs naming it differs from the default pool")
	}
	if n := stopsFor(plain, StopTimeSlice); n == 0 {
		t.Fatalf("no time-slice stops on the default pool: the test needs a trace that slices")
	}
	none := run(gpuPool, "")
	if none.NeverPlaceable != none.Jobs || none.Finished != 0 || len(none.allocRecords) != 0 {
		t.Errorf("jobs naming no pool on a \"gpu\" cluster: %d of %d never placeable, %d finished, %d allocations; want all, 0, 0",
			none.NeverPlaceable, none.Jobs, none.Finished, len(none.allocRecords))
	}
}

func stopsFor(r *Result, why StopReason) int64 {
	for _, p := range r.Preemptions {
		if p.Reason == why.String() {
			return p.Allocations
		}
	}
	return 0
}

// The trace's pool and model columns, in CSV and JSON lines, survive a
// round trip, and a bad pool is refused naming the line and the column.
func TestTracePoolModelColumns(t *testing.T) {
	in := &Trace{Jobs: []JobSpec{
		{ID: "a", Class: ClassDebug, Count: 1, GPUs: 1, Work: time.Minute, Baseline: LevelNormal},
		{ID: "b", Submit: time.Second, Class: ClassTrain, Count: 2, GPUs: 8, Work: time.Hour, Baseline: LevelHigh, Pool: "gpu", Model: "b200"},
	}}
	var csvBuf, jsonlBuf bytes.Buffer
	if err := WriteCSV(&csvBuf, in); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSONL(&jsonlBuf, in); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(jsonlBuf.String(), `"pool":"gpu","model":"b200"`) || strings.Count(jsonlBuf.String(), `"pool"`) != 1 {
		t.Errorf("JSON lines: %s; want pool and model on b's line only", jsonlBuf.String())
	}
	for name, read := range map[string]func() (*Trace, error){
		"csv":   func() (*Trace, error) { return ReadCSV(&csvBuf, ReadOptions{}) },
		"jsonl": func() (*Trace, error) { return ReadJSONL(&jsonlBuf, ReadOptions{}) },
	} {
		back, err := read()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(back.Jobs) != 2 || back.Jobs[0].Pool != "" || back.Jobs[0].Model != "" ||
			back.Jobs[1].Pool != "gpu" || back.Jobs[1].Model != "b200" {
			t.Errorf("%s: read back %+v", name, back.Jobs)
		}
	}
	for _, tc := range []struct{ row, want string }{
		{"0,x,1,1h,gpu pool,", `line 2: job "x": pool "gpu pool" must be 1 to 128 of a-z, A-Z, 0-9, '_' and '-' (a Nomad node pool name)`},
		{"0,x,1,1h,all,", `line 2: job "x": pool "all" (Nomad's built-in pool of every node) is not modelled`},
	} {
		_, err := ReadCSV(strings.NewReader("submit,job,gpus,work,pool,model\n"+tc.row+"\n"), ReadOptions{})
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("row %q: error %v, want it to start with %s", tc.row, err, tc.want)
		}
	}
	// The readers trim fields; a caller building a spec is told.
	sp := JobSpec{ID: "x", Count: 1, GPUs: 1, Work: time.Minute, Model: " b200"}
	if err := sp.Validate(); err == nil || !strings.Contains(err.Error(), `model " b200" has leading or trailing spaces`) {
		t.Errorf("model with a space: %v", err)
	}
}
