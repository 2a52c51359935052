package sim

import (
	"bytes"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/policy"
)

func TestKendallTauB(t *testing.T) {
	for _, tc := range []struct {
		name       string
		x, y       []float64
		tie        float64
		tau        float64
		conc, disc int
		tied       int
	}{
		{"same order", []float64{1, 2, 3, 4}, []float64{10, 20, 30, 40}, 0, 1, 6, 0, 0},
		{"reversed", []float64{1, 2, 3, 4}, []float64{4, 3, 2, 1}, 0, -1, 0, 6, 0},
		{"one swap", []float64{1, 2, 3, 4}, []float64{1, 3, 2, 4}, 0, 4.0 / 6, 5, 1, 0},
		{"a tie in x", []float64{1, 2, 2}, []float64{1, 2, 3}, 0, 2 / math.Sqrt(6), 2, 0, 1},
		// 2 and 3 are within the tie of each other: the swap is a tie.
		{"swap within the tie", []float64{1, 2, 3, 4}, []float64{1, 3, 2.5, 4}, 0.6, 5 / math.Sqrt(5*6), 5, 0, 1},
	} {
		tau, c, d, tied := kendallTauB(tc.x, tc.y, nil, tc.tie)
		if math.Abs(tau-tc.tau) > 1e-9 || c != tc.conc || d != tc.disc || tied != tc.tied {
			t.Errorf("%s: tau %.4f (%d, %d, %d), want %.4f (%d, %d, %d)", tc.name, tau, c, d, tied, tc.tau, tc.conc, tc.disc, tc.tied)
		}
	}
}

func yes() *bool { v := true; return &v }

// Two hand-made logs of one trace: job c starts before b on A and after it
// on B, A stops x by time slicing and B stops y by Nomad's preemption.
func handMade() (a, b []Event) {
	a = []Event{
		{T: 0, Kind: EventSubmit, Job: "a", Budget: "lab/a", GPUs: 8},
		{T: 0, Kind: EventSubmit, Job: "x", Budget: "", GPUs: 8},
		{T: 0, Kind: EventPlace, Job: "a", Alloc: "1", Node: "n-0", GPUs: 8},
		{T: 0, Kind: EventStart, Job: "a"},
		{T: 0, Kind: EventPlace, Job: "x", Alloc: "2", Node: "n-1", GPUs: 8},
		{T: 0, Kind: EventStart, Job: "x"},
		{T: 60, Kind: EventSubmit, Job: "b", Budget: "lab/b", GPUs: 8},
		{T: 60, Kind: EventSubmit, Job: "c", Budget: "lab/b", GPUs: 8},
		{T: 100, Kind: EventStop, Job: "x", Alloc: "2", Node: "n-1", Reason: "time-slice", By: "c"},
		{T: 100, Kind: EventPlace, Job: "c", Alloc: "3", Node: "n-1", GPUs: 8},
		{T: 100, Kind: EventStart, Job: "c"},
		{T: 3600, Kind: EventStop, Job: "a", Alloc: "1", Node: "n-0", Reason: "finished"},
		{T: 3600, Kind: EventDone, Job: "a", Reason: "finished"},
		{T: 3700, Kind: EventPlace, Job: "b", Alloc: "4", Node: "n-0", GPUs: 8},
		{T: 3700, Kind: EventStart, Job: "b"},
		{T: 3700, Kind: EventNode, Node: "n-0", Eligible: yes()},
	}
	b = []Event{
		{T: 0, Kind: EventSubmit, Job: "a", Budget: "lab/a", GPUs: 8},
		{T: 0, Kind: EventSubmit, Job: "x", Budget: "", GPUs: 8},
		{T: 0, Kind: EventSubmit, Job: "y", Budget: "", GPUs: 1},
		{T: 0, Kind: EventPlace, Job: "a", Alloc: "a0", Node: "n-1", GPUs: 8},
		{T: 0, Kind: EventStart, Job: "a"},
		{T: 0, Kind: EventPlace, Job: "x", Alloc: "a1", Node: "n-0", GPUs: 8},
		{T: 0, Kind: EventStart, Job: "x"},
		{T: 60, Kind: EventSubmit, Job: "b", Budget: "lab/b", GPUs: 8},
		{T: 60, Kind: EventSubmit, Job: "c", Budget: "lab/b", GPUs: 8},
		{T: 90, Kind: EventPlace, Job: "b", Alloc: "a2", Node: "n-0", GPUs: 8},
		{T: 90, Kind: EventStop, Job: "x", Alloc: "a1", Node: "n-0", Reason: "nomad-preemption", By: "b"},
		{T: 90, Kind: EventStart, Job: "b"},
		{T: 3600, Kind: EventStop, Job: "a", Alloc: "a0", Node: "n-1", Reason: "finished"},
		{T: 3600, Kind: EventPlace, Job: "c", Alloc: "a3", Node: "n-1", GPUs: 8},
		{T: 3600, Kind: EventStart, Job: "c"},
	}
	return a, b
}

func TestCompareHandMade(t *testing.T) {
	a, b := handMade()
	c := Compare(a, b, CompareOptions{Horizon: 2 * time.Hour})
	if c.Jobs != 4 || !slices.Equal(c.OnlyB, []string{"y"}) || len(c.OnlyA) != 0 {
		t.Fatalf("jobs %d, only A %v, only B %v; want 4, none, [y]", c.Jobs, c.OnlyA, c.OnlyB)
	}
	// Starts: A a=0 x=0 c=100 b=3700; B a=0 x=0 b=90 c=3600. Pairs: (a,x)
	// tied on both; (a,b) (a,c) (x,b) (x,c) concordant; (b,c) discordant.
	if c.Concordant != 4 || c.Discordant != 1 || c.TiedPairs != 1 {
		t.Fatalf("pairs %d/%d/%d, want 4 concordant, 1 discordant, 1 tied", c.Concordant, c.Discordant, c.TiedPairs)
	}
	if want := 3 / 5.0; math.Abs(c.Tau-want) > 1e-9 {
		t.Errorf("tau %.4f, want %.4f", c.Tau, want)
	}
	if !slices.Equal(c.StoppedBoth, []string{"x"}) || c.StopMatch != 1 {
		t.Errorf("stopped both %v (match %.2f), want [x] (1)", c.StoppedBoth, c.StopMatch)
	}
	if c.StopsA["time-slice"] != 1 || c.StopsB["nomad-preemption"] != 1 || c.StopsA["finished"] != 1 {
		t.Errorf("stops A %v, B %v", c.StopsA, c.StopsB)
	}
	// Waits A: a 0, x 0, b 3640, c 40; B: a 0, x 0, b 30, c 3540.
	// Differences: 0, 0, 3610, 3500.
	if c.WaitA.P50 != 0 || c.WaitA.P90 != 3640 || c.WaitB.P90 != 3540 || c.WaitDiff.P50 != 0 || c.WaitDiff.P90 != 3610 {
		t.Errorf("waits A %+v, B %+v, diff %+v", c.WaitA, c.WaitB, c.WaitDiff)
	}
	// GPU hours to the 2h horizon: lab/a 8 on both; lab/b A: c 8×(7200-100)
	// + b 8×(7200-3700); B: b 8×(7200-90) + c 8×(7200-3600).
	want := map[string][2]float64{
		"lab/a": {8, 8},
		"lab/b": {8 * (7100 + 3500) / 3600.0, 8 * (7110 + 3600) / 3600.0},
		"":      {8 * 100 / 3600.0, 8 * 90 / 3600.0},
	}
	if len(c.Budgets) != len(want) {
		t.Fatalf("budgets %+v", c.Budgets)
	}
	for _, bt := range c.Budgets {
		w := want[bt.Budget]
		if math.Abs(bt.A-w[0]) > 1e-9 || math.Abs(bt.B-w[1]) > 1e-9 {
			t.Errorf("budget %q: A %.4f B %.4f, want %.4f %.4f", bt.Budget, bt.A, bt.B, w[0], w[1])
		}
	}
	// The first divergences: b starts 3610 s apart at 90, c 3500 s apart at 100.
	if len(c.Divergences) != 2 || c.Divergences[0].Job != "b" || c.Divergences[1].Job != "c" {
		t.Fatalf("divergences %+v", c.Divergences)
	}
	if d := c.Divergences[0]; d.At != 90 || len(d.A) == 0 || len(d.B) == 0 {
		t.Errorf("first divergence %+v", d)
	}
	var out bytes.Buffer
	if err := WriteFidelity(&out, c, "nomad", "sim"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"0.600 (4 pairs in the same order, 1 opposite, 1 tied", "1 / 0 / 0 (same set for 100%)", "divergence at 1.5m: b starts 1.0h apart"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, out.String())
		}
	}
}

// Alike jobs: in the hand-made logs b and c (lab/b, 8 GPUs, submitted
// together) swap fates between the sides; taken as interchangeable, B's b
// and c are renamed to match A's, their pair is tied in the start order,
// and the preemptor B names is renamed with them.
func TestCompareAlike(t *testing.T) {
	a, b := handMade()
	c := Compare(a, b, CompareOptions{Horizon: 2 * time.Hour, Alike: map[string]string{"b": "b", "c": "b"}})
	if c.AlikeJobs != 2 || c.Renamed != 2 {
		t.Fatalf("alike %d, renamed %d; want 2 and 2", c.AlikeJobs, c.Renamed)
	}
	// (a,x) and (b,c) tied, the other four concordant: tau-b 4/sqrt(4×4).
	if c.Concordant != 4 || c.Discordant != 0 || c.TiedPairs != 2 || math.Abs(c.Tau-1) > 1e-9 {
		t.Errorf("tau %.4f (%d/%d/%d), want 1 (4/0/2)", c.Tau, c.Concordant, c.Discordant, c.TiedPairs)
	}
	// Waits A: b 3640, c 40; B renamed: b 3540 (c's), c 30 (b's).
	if c.WaitDiff.P90 != 100 || len(c.Divergences) != 0 {
		t.Errorf("wait differences %+v, divergences %+v; want p90 100 s and none", c.WaitDiff, c.Divergences)
	}
	var out bytes.Buffer
	if err := WriteFidelity(&out, c, "nomad", "sim"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "2 (2 of sim's matched to another's name)") {
		t.Errorf("report:\n%s", out.String())
	}
	// Without the groups nothing is renamed and the report says nothing.
	if c := Compare(a, b, CompareOptions{Horizon: 2 * time.Hour}); c.Renamed != 0 || c.Discordant != 1 {
		t.Errorf("no groups: renamed %d, discordant %d", c.Renamed, c.Discordant)
	}
	rn := renameJobs(b, map[string]string{"b": "c", "c": "b"})
	if rn[10].By != "c" || b[10].By != "b" {
		t.Errorf("preemptor %q (the original %q), want c (b)", rn[10].By, b[10].By)
	}
}

// AlikeJobs groups rows the same but for the name: the same submit time,
// ask and contract.
func TestAlikeJobs(t *testing.T) {
	row := JobSpec{Submit: time.Minute, Budget: "lab/a", Count: 1, GPUs: 2, Work: time.Hour, Priority: 50}
	tr := &Trace{}
	for _, id := range []string{"p", "q", "r", "s", "t"} {
		sp := row
		sp.ID = id
		switch id {
		case "s":
			sp.Submit = 2 * time.Minute // later: not alike
		case "t":
			sp.GPUs = 4
		}
		tr.Jobs = append(tr.Jobs, sp)
	}
	got := AlikeJobs(tr)
	if len(got) != 3 || got["p"] != "p" || got["q"] != "p" || got["r"] != "p" {
		t.Errorf("alike %v, want p, q and r in group p", got)
	}
}

// assign finds the least-cost permutation: checked against every
// permutation of small random matrices.
func TestAssign(t *testing.T) {
	seed := uint64(1)
	rnd := func() float64 {
		seed = seed*6364136223846793005 + 1442695040888963407
		return float64(seed>>40) / (1 << 24)
	}
	for n := 1; n <= 6; n++ {
		for trial := 0; trial < 20; trial++ {
			cost := make([][]float64, n)
			for i := range cost {
				cost[i] = make([]float64, n)
				for j := range cost[i] {
					cost[i][j] = math.Floor(rnd() * 10)
				}
			}
			total := func(p []int) float64 {
				s := 0.0
				for i, j := range p {
					s += cost[i][j]
				}
				return s
			}
			got := assign(cost)
			seen := map[int]bool{}
			for _, j := range got {
				seen[j] = true
			}
			if len(seen) != n {
				t.Fatalf("n=%d: %v is not a permutation", n, got)
			}
			best := math.Inf(1)
			perm := make([]int, n)
			for i := range perm {
				perm[i] = i
			}
			var walk func(k int)
			walk = func(k int) {
				if k == n {
					best = min(best, total(perm))
					return
				}
				for i := k; i < n; i++ {
					perm[k], perm[i] = perm[i], perm[k]
					walk(k + 1)
					perm[k], perm[i] = perm[i], perm[k]
				}
			}
			walk(0)
			if total(got) != best {
				t.Fatalf("n=%d: cost %v of %v, the least is %v (%v)", n, total(got), got, best, cost)
			}
		}
	}
}

// A job stopped on one side only, and one never started there.
func TestCompareOneSided(t *testing.T) {
	a := []Event{
		{T: 0, Kind: EventSubmit, Job: "p"},
		{T: 0, Kind: EventSubmit, Job: "q"},
		{T: 0, Kind: EventPlace, Job: "p", Alloc: "1", GPUs: 2},
		{T: 0, Kind: EventStart, Job: "p"},
		{T: 50, Kind: EventStop, Job: "p", Alloc: "1", Reason: "drain"},
		{T: 600, Kind: EventPlace, Job: "q", Alloc: "2", GPUs: 1},
		{T: 600, Kind: EventStart, Job: "q"},
	}
	b := []Event{
		{T: 0, Kind: EventSubmit, Job: "p"},
		{T: 0, Kind: EventSubmit, Job: "q"},
		{T: 0, Kind: EventPlace, Job: "p", Alloc: "1", GPUs: 2},
		{T: 0, Kind: EventStart, Job: "p"},
	}
	c := Compare(a, b, CompareOptions{Horizon: 1000 * time.Second})
	if !slices.Equal(c.StoppedOnlyA, []string{"p"}) || c.StopMatch != 0 {
		t.Errorf("stopped only A %v, match %.2f", c.StoppedOnlyA, c.StopMatch)
	}
	if !slices.Equal(c.StartedOnlyA, []string{"q"}) || c.StartedBoth != 1 {
		t.Errorf("started only A %v, both %d", c.StartedOnlyA, c.StartedBoth)
	}
	// q waits 600 on A and to the horizon (1000) on B.
	if c.WaitDiff.P90 != 400 || c.WaitB.P90 != 1000 {
		t.Errorf("wait diff %+v, B %+v", c.WaitDiff, c.WaitB)
	}
	if c.Tau != 1 {
		t.Errorf("tau of one pairless job %.2f, want 1", c.Tau)
	}
	if len(c.Divergences) != 2 || c.Divergences[0].Job != "p" || c.Divergences[1].Job != "q" {
		t.Errorf("divergences %+v", c.Divergences)
	}
}

func TestReadEventsErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"t": 0, "kind": "submit", "job": "a"}` + "\n" + `{"t": 1, "kind": "launch", "job": "a"}`, `line 2: kind "launch": want one of submit`},
		{`{"t": 0, "kind": "submit"}`, "line 1: submit event at t=0 has no job"},
		{`{"t": 0, "kind": "node", "node": "n-0"}`, `line 1: node event at t=0 has no "eligible"`},
		{`{"t": "x", "kind": "submit", "job": "a"}`, "line 1:9: t: want float64, not string"},
		{`{"t": 0, "kind": "submit", "job": "a"`, "line 1:"},
		{`{"t": 0, "kind": "submit", "job": "a", "jbo": 1}`, `unknown field "jbo"`},
		{`{"t": -5, "kind": "start", "job": "a"}`, "time -5 is negative"},
	} {
		_, err := ReadEvents(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.in, err, tc.want)
		}
	}
}

// The model's event log of the example trace: it reads back, compares equal
// to itself, and its GPU time is the run's.
func TestSimEventLog(t *testing.T) {
	tr := readTraceFile(t, "../../examples/sim/small.csv")
	tree := exampleTree(t)
	for _, p := range []Policy{NewBaseline(DefaultBaselineConfig()), mustAllot(t)} {
		var buf bytes.Buffer
		opts := DefaultOptions()
		opts.Horizon = 24 * time.Hour
		r, evs := runLogged(t, tr, UniformCluster(2, 8), tree, p, opts, &buf)
		kinds := map[EventKind]int{}
		for _, e := range evs {
			kinds[e.Kind]++
		}
		if kinds[EventSubmit] != len(tr.Jobs) || kinds[EventStart] == 0 || int64(kinds[EventDone]) != r.Finished+r.Dead ||
			kinds[EventHealth] != len(tr.Health) {
			t.Errorf("%s: kinds %v; %d jobs, %d finished, %d dead, %d health rows", p.Name(), kinds, len(tr.Jobs), r.Finished, r.Dead, len(tr.Health))
		}
		c := Compare(evs, evs, CompareOptions{Horizon: opts.Horizon})
		if c.Tau != 1 || c.StopMatch != 1 || c.WaitDiff.P90 != 0 || len(c.Divergences) != 0 || c.Jobs != len(tr.Jobs) {
			t.Errorf("%s: the log against itself: %+v", p.Name(), c)
		}
		var held float64
		for _, b := range c.Budgets {
			held += b.A
		}
		want := (r.Occupancy.Total + r.Occupancy.Stalled) * float64(r.GPUs) * 24
		if math.Abs(held-want) > 1e-6 {
			t.Errorf("%s: the log holds %.3f GPU hours, the run %.3f", p.Name(), held, want)
		}
	}
}

// The stop that interrupts a run carries the run's length and the work it
// threw away: on one node, the squatter (not resumable, 1h window) is
// stopped for owed after 2h (and the loss bound's lapse) and loses that run
// at 8 GPUs; summed, the log's Lost is the run's lost GPU hours, by stop
// reason too.
func TestSimEventLogLost(t *testing.T) {
	tr := readTraceFile(t, "../../examples/sim/suite/squatter.csv")
	var buf bytes.Buffer
	opts := DefaultOptions()
	opts.Horizon, opts.Warmup = 12*time.Hour, 0
	r, evs := runLogged(t, tr, UniformCluster(1, 8), exampleTree(t), mustAllot(t), opts, &buf)
	var lost float64
	by := map[string]float64{}
	var squat *Event
	for i, e := range evs {
		if e.Kind != EventStop {
			if e.Ran != 0 || e.Lost != 0 {
				t.Errorf("%s event at %v carries ran %v, lost %v", e.Kind, e.T, e.Ran, e.Lost)
			}
			continue
		}
		lost += e.Lost
		by[e.Reason] += e.Lost
		if e.Job == "squatter" && squat == nil {
			squat = &evs[i]
		}
	}
	if squat == nil {
		t.Fatalf("the squatter is never stopped: %v", evs)
	}
	// owed is submitted at 2h; the stop throws away just over twice owed's
	// loss bound and nothing cheaper is in sight, so the bound lapses after
	// two doublings (policy lapseAt), and the model's reaction delay (30s)
	// passes before the stop.
	lapse := 2 * policy.DefaultConfig().SliceLossDoubling.Seconds()
	if squat.Reason != "time-slice" || squat.By != "owed" || squat.Ran < 7200 || squat.Ran > 7200+lapse+60 || squat.Lost != 8*squat.Ran {
		t.Errorf("the squatter's stop: %+v, want a time-slice stop for owed after 2h (+ %vs of the loss bound and the reaction delay), losing the run at 8 GPUs", *squat, lapse)
	}
	if math.Abs(lost/3600-r.LostGPUHours) > 1e-9 || lost == 0 {
		t.Errorf("the log's stops lose %.3f GPU hours, the run %.3f", lost/3600, r.LostGPUHours)
	}
	for _, p := range r.Preemptions {
		if math.Abs(by[p.Reason]/3600-p.LostGPUHours) > 1e-9 {
			t.Errorf("%s: the log's stops lose %.3f GPU hours, the run %.3f", p.Reason, by[p.Reason]/3600, p.LostGPUHours)
		}
	}
}

// readTraceFile reads the CSV trace at path.
func readTraceFile(t *testing.T, path string) *Trace {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := ReadCSV(f, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// runLogged runs tr with opts, its event log written to buf, and returns
// the result and the log read back.
func runLogged(t *testing.T, tr *Trace, c ClusterSpec, tree *budgets.Tree, p Policy, opts Options, buf *bytes.Buffer) (*Result, []Event) {
	t.Helper()
	w := NewEventWriter(buf)
	opts.Events = w.Write
	r, err := Run(tr, c, tree, p, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	evs, err := ReadEvents(buf)
	if err != nil {
		t.Fatal(err)
	}
	return r, evs
}
