package sim

import (
	"bytes"
	"math"
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

// A resumable job with an 8h window on a node whose GPU fails: allot moves
// it at its window end by itself; the baseline's operator drain kills it at
// the 8h deadline without a replacement. The drain report says so.
func TestDrainReportAllotAgainstNomadDrain(t *testing.T) {
	tree := exampleTree(t)
	tr := &Trace{Jobs: []JobSpec{
		{ID: "long", Budget: "ai2/infra", Class: ClassTrain, Count: 1, GPUs: 4, Work: 30 * time.Hour,
			MinRuntime: 2 * time.Hour, Resumable: true, Priority: 50, Baseline: LevelHigh},
		{ID: "late", Submit: 40 * time.Hour, Budget: "ai2/infra", Class: ClassDebug, Count: 1, GPUs: 1,
			Work: time.Minute, MinRuntime: time.Minute, Priority: 50, Baseline: LevelHigh}},
		Health: []HealthEvent{{At: time.Hour, Node: "default-0", GPU: 7, Reason: "XID 79"},
			{At: 30 * time.Hour, Node: "default-0", GPU: 7, Healthy: true, Reason: "repaired"}}}
	a, err := NewAllot(policyDefault())
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	ra, err := Run(tr, UniformCluster(1, 8), tree, a, opts)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := Run(tr, UniformCluster(1, 8), tree, NewBaseline(DefaultBaselineConfig()), opts)
	if err != nil {
		t.Fatal(err)
	}
	da, db := ra.Drains, rb.Drains
	if da.Drained != 1 || da.NoOperator != 1 || da.Killed != 0 || da.P50 != 3600 {
		t.Errorf("allot drain %+v: want drained by itself at the window end (1h after the fault), nothing killed", da)
	}
	// The drain starts at the policy's reconcile, 30s after the fault. The
	// baseline kills the job at the deadline, 8h later: 9h30s of work on 4
	// GPUs lost, and the 3 other healthy GPUs idle on the cordoned node for
	// 8h. allot's stop loses the 15m checkpoint interval of 4 GPUs and
	// leaves the 3 GPUs idle from the cordon to the window end.
	const reaction = 30
	if db.Drained != 1 || db.NoOperator != 0 || db.Killed != 1 || db.P50 != 8*3600+reaction ||
		db.LostGPUHours != 4*float64(9*3600+reaction)/3600 || db.IdleGPUHours != 3*8 {
		t.Errorf("baseline drain %+v: want the operator's drain to kill the job at the 8h deadline", db)
	}
	if da.LostGPUHours != 1 || da.IdleGPUHours != 3*float64(3600-reaction)/3600 {
		t.Errorf("allot drain lost %v GPU h, idle %v: want 1 and %v", da.LostGPUHours, da.IdleGPUHours,
			3*float64(3600-reaction)/3600)
	}
}

// The report's keys sit beside the charts: a colour per team grouped by
// program, grey for unallocated work, the hatching and the red edge; team
// colours keep away from that red; both policies' usage charts share one
// y-scale; and the wait CDFs say where never-started jobs are counted.
func TestHTMLKeysScaleAndNotes(t *testing.T) {
	a, err := NewAllot(policyDefault())
	if err != nil {
		t.Fatal(err)
	}
	rs := []*Result{smallRun(t, a, 3), smallRun(t, NewBaseline(DefaultBaselineConfig()), 3)}
	var b bytes.Buffer
	if err := WriteHTML(&b, rs); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	for _, want := range []string{"unallocated work (free, preemptible)", "red right edge: preempted", "hatched: preemptible",
		`<span class="grp">ai2/prior</span>`, "never started", "Same y-scale for every policy"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	pal := newPalette(rs[0].leafNames)
	for l, c := range pal.colors {
		h, _, _ := rgbHue(c.R, c.G, c.B)
		if d := math.Min(h, 360-h); d < 25 {
			t.Errorf("%s is coloured at hue %.0f, %.0f° from the red preemption edge", pal.names[l], h, d)
		}
	}
	ymax := math.Max(usageMax(rs[0]), usageMax(rs[1]))
	for _, r := range rs {
		p, err := usagePlot(r, newPalette(r.leafNames), ymax)
		if err != nil {
			t.Fatal(err)
		}
		if p.Y.Max != ymax*1.05 || p.Y.Min != 0 {
			t.Errorf("%s usage y-scale [%v, %v], want [0, %v] for both policies", r.Policy, p.Y.Min, p.Y.Max, ymax*1.05)
		}
	}
}

// rgbHue is the hue of an RGB colour in degrees.
func rgbHue(r, g, b uint8) (float64, float64, float64) {
	R, G, B := float64(r)/255, float64(g)/255, float64(b)/255
	mx, mn := math.Max(R, math.Max(G, B)), math.Min(R, math.Min(G, B))
	d := mx - mn
	if d == 0 {
		return 0, 0, mx
	}
	var h float64
	switch mx {
	case R:
		h = math.Mod((G-B)/d, 6)
	case G:
		h = (B-R)/d + 2
	default:
		h = (R-G)/d + 4
	}
	h *= 60
	if h < 0 {
		h += 360
	}
	return h, d / mx, mx
}
