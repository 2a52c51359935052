package sim

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/hcl"
	"github.com/allot-sched/allot/overlay/policy"
)

// TestDiagWaits is a diagnostic, not a check (skipped without ALLOT_DIAG):
//
//	ALLOT_DIAG=NODES:SEED[:large|:published] [ALLOT_DIAG_LEAF=lab/x/y] [ALLOT_DIAG_JOB=ID] go test -count=1 -run TestDiagWaits -v ./overlay/sim/
//
// It replays a heavy-tailed suite trace (examples/sim/suite: 7 days; on
// 32 nodes 4 days with a 12h warm-up, as heavy-256; large: large-gangs),
// or with published the suite's gpus-88 shape of the example's generator
// (10 days, 172 debug and 4 interactive jobs a day, one node fault, the
// example's budgets) on NODES nodes, under allot with explanations and
// logs why the slowest 10% of the debug jobs submitted after the warm-up
// waited: the time each spent in each Wait of its explanation (the rule
// that held it) between decisions, the dominant one per job, its leaf's standing (served, position) halfway
// and at the end, and the leaves they belong to. With ALLOT_DIAG_LEAF it
// also logs the GPU-hours that leaf's jobs spent in each band and wait,
// and its standing every 12 hours. ALLOT_DIAG_TOP=0.02 looks at the
// slowest 2% instead of 10%. ALLOT_DIAG_TRACE=FILE.csv runs that trace
// (allot sim generate) on NODES nodes instead of generating one. ALLOT_DIAG_JOB=ID logs that job's
// explanation (band, level, wait, the job it waits for, FreeAt, reason)
// each time it changes.
func TestDiagWaits(t *testing.T) {
	spec := os.Getenv("ALLOT_DIAG")
	if spec == "" {
		t.Skip("a diagnostic: set ALLOT_DIAG=NODES:SEED[:large|:published]")
	}
	parts := strings.Split(spec, ":")
	nodes, err1 := strconv.Atoi(parts[0])
	seed, err2 := strconv.ParseUint(parts[min(1, len(parts)-1)], 10, 64)
	kind := ""
	if len(parts) == 3 {
		kind = parts[2]
	}
	if len(parts) < 2 || len(parts) > 3 || err1 != nil || err2 != nil || nodes < 1 || kind != "" && kind != "large" && kind != "published" {
		t.Fatalf("ALLOT_DIAG=%q: want NODES:SEED, NODES:SEED:large or NODES:SEED:published, e.g. 128:1 or 11:2:published", spec)
	}
	opts := DefaultOptions()
	opts.Seed, opts.Warmup = seed, 24*time.Hour
	budgetsDir := "../../examples/sim/suite/heavy-budgets"
	if kind == "published" {
		budgetsDir = "../../examples/budgets"
	}
	tree, err := hcl.LoadDir(budgetsDir)
	if err != nil {
		t.Fatal(err)
	}
	var tr *Trace
	if file := os.Getenv("ALLOT_DIAG_TRACE"); file != "" {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		tr, err = ReadCSV(f, ReadOptions{})
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	} else if kind == "published" {
		g := DefaultGenConfig()
		g.Seed, g.Days, g.GPUs, g.Nodes, g.DebugPerDay, g.InteractivePerDay, g.Failures = seed, 10, nodes*8, nodes, 172, 4, 1
		tr, err = Generate(tree, g)
	} else {
		h := DefaultHeavyConfig()
		h.Days, h.Seed, h.GPUs, h.LargeGangs = 7, seed, nodes*8, kind == "large"
		if nodes == 32 {
			h.Days, opts.Warmup = 4, 12*time.Hour
		}
		tr, err = GenerateHeavy(tree, h)
	}
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewAllot(policy.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	p.inc.Explanations = true
	from := opts.Warmup.Seconds()

	type state struct {
		t       float64
		wait    policy.Wait
		served  float64
		rankPos int
	}
	type debugJob struct {
		submit, start float64 // start -1: never started
		gpus          int
		budget        string
		states        []state
	}
	debug := map[string]*debugJob{}
	gpus, class := map[string]int{}, map[string]string{}
	for i := range tr.Jobs {
		j := &tr.Jobs[i]
		gpus[j.ID], class[j.ID] = j.TotalGPUs(), j.Class.String()
		if j.Class == ClassDebug {
			debug[j.ID] = &debugJob{submit: j.Submit.Seconds(), start: -1, gpus: j.TotalGPUs(), budget: j.Budget}
		}
	}
	leafName := os.Getenv("ALLOT_DIAG_LEAF")
	jobName, lastSaid := os.Getenv("ALLOT_DIAG_JOB"), ""
	leafTime := map[string]float64{}
	var last float64
	p.verify = func(plan *policy.Plan, now time.Time) {
		tt := now.Sub(Epoch).Seconds()
		logged := false
		for k := range plan.Explanations {
			e := &plan.Explanations[k]
			if jobName != "" && e.Job == jobName {
				said := fmt.Sprintf("%s %d waits for %s [%s] free at %v: %s", e.Band, e.Priority, e.Wait, e.WaitsFor, e.FreeAt, e.Reason)
				if said != lastSaid {
					t.Logf("%.2fh: %s", tt/3600, said)
					lastSaid = said
				}
			}
			if leafName != "" && e.Budget == leafName && tt > from {
				key := e.Band.String() + " " + class[e.Job]
				if e.Band == policy.BandPending {
					key += ": " + e.Wait.String()
				}
				leafTime[key] += (tt - last) * float64(gpus[e.Job])
				if e.Rank != nil && !logged && int(tt/43200) != int(last/43200) {
					logged = true
					t.Logf("%.1fd: %s served %.2f, position %d", tt/86400, leafName, e.Rank.ServedRatio(), e.Rank.Position)
				}
			}
			if r := debug[e.Job]; r != nil && r.start < 0 && e.Band == policy.BandPending {
				s := state{t: tt, wait: e.Wait}
				if e.Rank != nil {
					s.served, s.rankPos = e.Rank.ServedRatio(), e.Rank.Position
				}
				r.states = append(r.states, s)
			}
		}
		last = tt
	}
	opts.Events = func(e *Event) {
		if r := debug[e.Job]; r != nil && e.Kind == EventStart && r.start < 0 {
			r.start = e.T
		}
	}
	res, err := Run(tr, UniformCluster(nodes, 8), tree, p, opts)
	if err != nil {
		t.Fatal(err)
	}
	f := FiguresOf(res)
	t.Logf("%s: debug %s/%s/%s, worst leaf %.0f%% %s, %d/%d leaves at >= 95%%, all %.1f%%, occupancy %.1f%% (stalled %.1f%%), lost %.0f GPU h",
		spec, dur(f.DebugP50), dur(f.DebugP90), dur(f.DebugP99), 100*f.WorstRatio, f.WorstBudget, f.LeavesAt95, f.Leaves,
		100*f.AllLeaves, 100*f.Occupancy, 100*f.Stalled, f.LostHours)

	end := func(r *debugJob) float64 {
		if r.start < 0 {
			return float64(res.horizon)
		}
		return r.start
	}
	var ids []string
	for id, r := range debug {
		if r.submit >= from {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(a, b int) bool {
		wa, wb := end(debug[ids[a]])-debug[ids[a]].submit, end(debug[ids[b]])-debug[ids[b]].submit
		return wa > wb || wa == wb && ids[a] < ids[b]
	})
	frac := 0.1
	if v := os.Getenv("ALLOT_DIAG_TOP"); v != "" {
		if f, err := strconv.ParseFloat(v, 64); err == nil && f > 0 && f <= 1 {
			frac = f
		} else {
			t.Fatalf("ALLOT_DIAG_TOP=%q: want a fraction in (0, 1], e.g. 0.02", v)
		}
	}
	slow := ids[:int(float64(len(ids))*frac)]
	cause, dominant := map[string]float64{}, map[string]int{}
	byLeaf, bySize := map[string]int{}, map[int]int{}
	var total float64
	for k, id := range slow {
		r := debug[id]
		byLeaf[r.budget]++
		bySize[r.gpus]++
		per := map[string]float64{}
		for i, s := range r.states {
			next := end(r)
			if i+1 < len(r.states) {
				next = r.states[i+1].t
			}
			key := s.wait.String()
			if s.wait == policy.WaitQueue {
				key += " (not examined: the first MaxEvaluations, then rule 5b's quick jobs)"
			}
			per[key] += next - s.t
		}
		best, most := "", -1.0
		for c, v := range per {
			cause[c] += v
			total += v
			if v > most || v == most && c < best {
				best, most = c, v
			}
		}
		dominant[best]++
		if k < 20 && len(r.states) > 0 {
			mid, fin := r.states[len(r.states)/2], r.states[len(r.states)-1]
			t.Logf("%s (%s, %d GPUs) waited %s, mostly %q; halfway served %.2f position %d, at the end served %.2f position %d",
				id, r.budget, r.gpus, time.Duration(end(r)-r.submit)*time.Second, best, mid.served, mid.rankPos, fin.served, fin.rankPos)
		}
	}
	keys := make([]string, 0, len(cause))
	for c := range cause {
		keys = append(keys, c)
	}
	sort.Slice(keys, func(a, b int) bool { return cause[keys[a]] > cause[keys[b]] })
	t.Logf("the slowest %d of %d debug jobs:", len(slow), len(ids))
	for _, c := range keys {
		t.Logf("  %5.1f%% of their wait, the most of it for %3d jobs: %s", 100*cause[c]/total, dominant[c], c)
	}
	t.Logf("  by leaf: %v", byLeaf)
	t.Logf("  by GPUs asked: %v", bySize)
	if leafName != "" {
		for _, b := range res.Budgets {
			if b.Budget == leafName {
				t.Logf("%s: delivered %.0f of %.0f GPU h owed (%.0f%%)", leafName, b.Delivered, b.Owed, 100*b.Ratio)
			}
		}
		keys = keys[:0]
		for k := range leafTime {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			t.Logf("  %s: %.0f GPU h", k, leafTime[k]/3600)
		}
	}
}
