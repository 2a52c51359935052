package sim

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func smallRun(t *testing.T, p Policy, seed uint64) *Result {
	t.Helper()
	tree := exampleTree(t)
	g := DefaultGenConfig()
	g.Days, g.GPUs, g.Nodes, g.DebugPerDay, g.Seed = 2, 128, 16, 300, seed
	tr, err := Generate(tree, g)
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Seed = seed
	r, err := Run(tr, UniformCluster(16, 8), tree, p, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestJSONIsByteIdenticalForSameSeed(t *testing.T) {
	var out [2]bytes.Buffer
	for k := range out {
		a, err := NewAllot(policyDefault())
		if err != nil {
			t.Fatal(err)
		}
		rs := []*Result{smallRun(t, a, 5), smallRun(t, NewBaseline(DefaultBaselineConfig()), 5)}
		if err := WriteJSON(&out[k], 5, rs); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(out[0].Bytes(), out[1].Bytes()) {
		t.Fatal("two runs with the same inputs and seed gave different JSON")
	}
	if !strings.Contains(out[0].String(), `"policy": "allot"`) {
		t.Fatal("JSON lacks the allot result")
	}
}

func TestHTMLIsSelfContained(t *testing.T) {
	r := smallRun(t, NewBaseline(DefaultBaselineConfig()), 2)
	var b bytes.Buffer
	if err := WriteHTML(&b, []*Result{r}); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	if !strings.Contains(s, "<svg") || strings.Contains(s, "http://") && strings.Contains(s, "<script src") {
		t.Fatal("report is not a self-contained page with inline SVG")
	}
	if strings.Count(s, "<svg") < 3 {
		t.Fatalf("%d charts, want the Gantt, usage and at least one CDF", strings.Count(s, "<svg"))
	}
}

func TestWorkConservedAcrossPreemption(t *testing.T) {
	h := newHarness(t, 4)
	low := h.submit("low", 20, 1, 4)
	h.s.now = 3600 // an hour of work done
	h.submit("high", 80, 1, 4)
	j := &h.s.jobs[low]
	if j.done != 3600-int64(15*time.Minute/time.Second) {
		t.Fatalf("resumable victim kept %ds of work, want an hour minus the 15m checkpoint loss", j.done)
	}
	if h.s.m.lostSec != 4*900 {
		t.Fatalf("lost %d GPU-seconds, want %d", h.s.m.lostSec, 4*900)
	}
}
