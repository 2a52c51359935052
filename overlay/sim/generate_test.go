package sim

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
)

func TestGenConfigJSONDurationsAsStrings(t *testing.T) {
	d := DefaultGenConfig()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"train_work_min":"2h0m0s"`) {
		t.Fatalf("durations are not written as strings: %s", b)
	}
	var back GenConfig
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, d) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", back, d)
	}
	// Keys left out keep the values already there.
	g := DefaultGenConfig()
	if err := json.Unmarshal([]byte(`{"demand": 1.5, "repair_max": "72h"}`), &g); err != nil {
		t.Fatal(err)
	}
	if g.Demand != 1.5 || g.RepairMax != 72*time.Hour || g.TrainWorkMin != d.TrainWorkMin || g.Days != d.Days {
		t.Fatalf("partial override: %+v", g)
	}
	for _, bad := range []string{`{"train_work_min": 7200000000000}`, `{"repair_min": "two hours"}`, `{"demnd": 2}`} {
		if err := json.Unmarshal([]byte(bad), &g); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestGenerateDebugRanksAboveTrainingWithinBudget(t *testing.T) {
	tree, err := budgets.NewTree([]budgets.Spec{{Path: "lab", Share: 1}, {Path: "lab/a", Share: 1}, {Path: "lab/b", Share: 3}})
	if err != nil {
		t.Fatal(err)
	}
	g := DefaultGenConfig()
	g.Days, g.GPUs, g.Failures, g.DebugPerDay = 1, 64, 0, 50
	tr, err := Generate(tree, g)
	if err != nil {
		t.Fatal(err)
	}
	var minDebug, maxTrain, free = 101, -1, 0
	for _, j := range tr.Jobs {
		switch {
		case j.MinRuntime == 0:
			free++
			if j.Budget == "" {
				t.Fatalf("filler %s names no team: the baseline could not count it against a limit", j.ID)
			}
		case j.Class == ClassDebug || j.Class == ClassInteractive:
			minDebug = min(minDebug, j.Priority)
		default:
			maxTrain = max(maxTrain, j.Priority)
		}
	}
	if free == 0 || maxTrain < 0 || minDebug > 100 {
		t.Fatalf("trace lacks a class: free %d, max train priority %d, min debug priority %d", free, maxTrain, minDebug)
	}
	if minDebug <= maxTrain {
		t.Fatalf("a debug job (priority %d) ranks at or below a training job (%d) of its budget", minDebug, maxTrain)
	}
}

// Demand counts all work submitted and Allocated its allocated part: the
// generated volumes match them (jobs are whole, so within a few percent).
func TestGenerateDemandSplitsAllocatedAndFiller(t *testing.T) {
	tree := exampleTree(t)
	g := DefaultGenConfig()
	g.Days, g.Failures = 10, 0
	tr, err := Generate(tree, g)
	if err != nil {
		t.Fatal(err)
	}
	var alloc, free float64
	for _, j := range tr.Jobs {
		h := float64(j.TotalGPUs()) * j.Work.Hours()
		if j.MinRuntime == 0 {
			free += h
		} else {
			alloc += h
		}
	}
	capH := float64(g.GPUs) * g.Days * 24
	if a := alloc / capH; a < g.Allocated*0.95 || a > g.Allocated*1.05 {
		t.Errorf("allocated work %.3f x capacity, want %.2f", a, g.Allocated)
	}
	if d := (alloc + free) / capH; d < g.Demand*0.95 || d > g.Demand*1.05 {
		t.Errorf("all work %.3f x capacity, want %.2f", d, g.Demand)
	}
	bad := g
	bad.Allocated = g.Demand + 1
	if _, err := Generate(tree, bad); err == nil || !strings.Contains(err.Error(), "demand") {
		t.Errorf("allocated above demand: error %v, want one naming demand", err)
	}
}

// TrainCap keeps every training job within its team's share of the cluster
// (whole nodes, at least the smallest size); without it every size appears.
func TestGenerateTrainCapBoundsJobsByShare(t *testing.T) {
	tree := exampleTree(t)
	g := DefaultGenConfig()
	g.Days, g.Failures = 10, 0
	for _, cap := range []float64{0, 1} {
		g.TrainCap = cap
		tr, err := Generate(tree, g)
		if err != nil {
			t.Fatal(err)
		}
		largest, over := map[string]int{}, 0
		for _, j := range tr.Jobs {
			if j.Class == ClassTrain {
				largest[j.Budget] = max(largest[j.Budget], j.TotalGPUs())
			}
		}
		for _, leaf := range tree.Leaves() {
			limit := max(int(leaf.Effective*float64(g.GPUs))/8*8, 8)
			got := largest[leaf.Path]
			if got == 0 {
				t.Fatalf("cap %v: %s submitted no training", cap, leaf.Path)
			}
			if got > limit {
				over++
			}
			if cap == 1 && got > limit {
				t.Errorf("cap 1: %s (share %.1f%% = %d GPUs) submitted a %d-GPU job", leaf.Path, 100*leaf.Effective, limit, got)
			}
		}
		if cap == 0 && over == 0 {
			t.Errorf("no cap: no team submitted training larger than its share: %v", largest)
		}
	}
}

// Faults name a GPU the node has: drawn below the cluster's GPUs per node.
func TestGenerateFaultsOnExistingGPUs(t *testing.T) {
	tree := exampleTree(t)
	g := DefaultGenConfig()
	g.Days, g.Failures, g.Nodes, g.GPUs, g.DebugPerDay = 2, 400, 16, 64, 10
	tr, err := Generate(tree, g)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, h := range tr.Health {
		if h.GPU < 0 || h.GPU >= 4 {
			t.Fatalf("fault on GPU %d of a 4-GPU node: %+v", h.GPU, h)
		}
		seen[h.GPU] = true
	}
	if len(seen) != 4 {
		t.Fatalf("400 faults hit GPUs %v, want all 4", seen)
	}
}

// On a cluster of small nodes every generated allocation fits a node and no
// job asks more than the cluster: Check finds nothing to refuse, and the
// training jobs are split into allocations of whole nodes.
func TestGenerateFitsTheNodes(t *testing.T) {
	for _, tc := range []struct {
		name                string
		nodes, gpusPerNode  int
		trainCap            float64
		wantMaxPer, wantMax int
	}{
		{"4-GPU nodes", 16, 4, 1, 4, 64},
		{"3-GPU nodes, no train cap", 8, 3, 0, 3, 24},
		{"8-GPU nodes", 8, 8, 0, 8, 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := DefaultGenConfig()
			g.Days, g.DebugPerDay, g.Failures, g.TrainCap = 2, 200, 0, tc.trainCap
			spec := UniformCluster(tc.nodes, tc.gpusPerNode)
			g.GPUs, g.Nodes, g.GPUsPerNode = spec.GPUs(), tc.nodes, tc.gpusPerNode
			tr, err := Generate(exampleTree(t), g)
			if err != nil {
				t.Fatal(err)
			}
			maxPer, maxTotal, split := 0, 0, 0
			for _, j := range tr.Jobs {
				maxPer, maxTotal = max(maxPer, j.GPUs), max(maxTotal, j.TotalGPUs())
				if j.Count > 1 {
					split++
				}
			}
			if maxPer > tc.wantMaxPer || maxTotal > tc.wantMax || split == 0 {
				t.Errorf("largest allocation %d GPUs (want <= %d), largest job %d (want <= %d), %d split jobs (want some)",
					maxPer, tc.wantMaxPer, maxTotal, tc.wantMax, split)
			}
			if _, err := tr.Check(spec, exampleTree(t), CheckOptions{}); err != nil {
				t.Errorf("Check: %v", err)
			}
		})
	}
}

// A priority range is two numbers: a third (which a Go [2]int drops) or a
// lone one is an error naming the key, as a bad duration is.
func TestGenConfigJSONKeyErrors(t *testing.T) {
	for in, key := range map[string]string{
		`{"debug_priority": [80, 90, 100]}`: "debug_priority",
		`{"train_priority": [20]}`:          "train_priority",
		`{"train_work_max": "3d"}`:          "train_work_max",
	} {
		g := DefaultGenConfig()
		var ke *GenConfigKeyError
		if err := json.Unmarshal([]byte(in), &g); !errors.As(err, &ke) || ke.Key != key {
			t.Errorf("%s: %v, want a GenConfigKeyError for %s", in, err, key)
		}
	}
}
