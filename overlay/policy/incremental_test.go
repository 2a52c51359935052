package policy

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/contract"
)

// incWorld drives an Incremental and checks each of its decisions against
// Decide on its Snapshot.
type incWorld struct {
	r     *rand.Rand
	tree  *budgets.Tree
	fs    *budgets.FairShare
	now   time.Time
	cfg   Config
	inc   Incremental
	seq   int
	steps map[string]int // deltas applied, by kind
	// leftOut counts decisions that left queued jobs out; smaller those
	// that read fewer jobs than the Snapshot holds; freeOut those that left
	// running free work out (Incremental.leftOutRunning), and pinned those
	// that read running free work because of a node that is not plain.
	leftOut, smaller, freeOut, pinned int
	// runsKept counts decisions that began with the run counts kept
	// through the deltas since the last (Incremental.runsOK).
	runsKept int
	// outKept counts leftOutRunning answers kept from an earlier decision.
	outKept int
	// listsKept counts decisions that began with the record lists kept
	// through the deltas since the last (Incremental.lists).
	listsKept int
	// dueKept counts decisions that began with the run counts kept but
	// for some jobs' (Incremental.runsDue), counted again from their
	// records alone.
	dueKept int
	// nodesKept counts decisions that kept what they derive from the nodes
	// alone from the decision before (Decider.capKept); drained those that
	// had a node drain could act on (Decider.drainNodes).
	nodesKept, drained int
	// sumsKept counts job run sums kept from an earlier decision (checked
	// against sums counted afresh); settled the decisions in which settle
	// took allocations as stopping (their jobs' sums are not read).
	sumsKept, settled int
	gone              []Node // removed nodes, to come back
}

func newIncWorld(seed int64, cfg Config, pending int) *incWorld {
	r := rand.New(rand.NewSource(seed))
	g := genSpec{nodes: 24, gpusPerNode: 8, programs: 2, projects: 2, people: 3,
		running: 40, pending: pending, free: 30, unhealthy: 1, drains: 1, maxCount: 2}
	tree, fs, snap, now := genCluster(r, g)
	w := &incWorld{r: r, tree: tree, fs: fs, now: now, cfg: cfg, steps: map[string]int{}}
	w.inc.Explanations = true
	for _, n := range snap.Nodes {
		w.inc.PutNode(n)
	}
	for _, j := range snap.Jobs {
		w.inc.PutJob(j)
	}
	for _, a := range snap.Allocs {
		w.inc.PutAlloc(a)
	}
	w.inc.LastDecision = snap.LastDecision
	return w
}

// checkSums checks every job run sum the Incremental kept against the sum
// jobState counts from the job's allocations in snapshot order.
func (w *incWorld) checkSums(t *testing.T, step int, snap *Snapshot) {
	t.Helper()
	x := &w.inc
	for s := range x.sums {
		if !x.sums[s].ok || !x.jobs[s].live {
			continue
		}
		w.sumsKept++
		var want runSum
		at := int32(-1)
		for i := range snap.Allocs { // in snapshot order, as jobState walks them
			if snap.Allocs[i].Job == x.jobs[s].ID {
				want.add(&snap.Allocs[i], int32(i), &at)
			}
		}
		want.setWindow(x.jobs[s].Contract.Protected, w.cfg.RuntimeCap)
		if x.sums[s].runSum != want {
			t.Fatalf("step %d: job %s: kept run sum %+v, counted afresh %+v", step, x.jobs[s].ID, x.sums[s].runSum, want)
		}
	}
}

// decide compares the Incremental's plan with Decide's, then applies it.
func (w *incWorld) decide(t *testing.T, step int) {
	t.Helper()
	snap := w.inc.Snapshot()
	want := Decide(snap, w.tree, w.fs, w.now, w.cfg)
	if w.inc.runsOK {
		w.runsKept++
		if len(w.inc.runsDue) > 0 {
			w.dueKept++
		}
	}
	if w.inc.lists.ok && len(w.inc.lists.nodeRun) == len(w.inc.nodes) {
		w.listsKept++
		w.checkLists(t, step)
	}
	w.checkSums(t, step, snap)
	got := w.inc.Decide(w.tree, w.fs, w.now, w.cfg)
	if len(w.inc.d.taken) > 0 {
		w.settled++
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("step %d (%v): incremental plan differs from Decide:\n%s", step, w.steps, planDiff(got, want))
	}
	if w.inc.d.capKept {
		w.nodesKept++
	}
	// takeRecs' index of the records by job is the one buildKeys builds.
	var fresh csr
	fresh.buildKeys(len(w.inc.tl.jp), w.inc.tl.allocJob)
	if tl := &w.inc.tl.jobAllocs; !slices.Equal(tl.start, fresh.start) || !slices.Equal(tl.items, fresh.items) {
		t.Fatalf("step %d (%v): records by job %v %v, built afresh %v %v", step, w.steps, tl.start, tl.items, fresh.start, fresh.items)
	}
	if len(w.inc.d.drainNodes) > 0 {
		w.drained++
	}
	// drain looks only at drainNodes: every other node is one no branch of
	// it acts on (healthy, no Nomad drain, in service, never recovered).
	for i, n := range snap.Nodes {
		if !slices.Contains(w.inc.d.drainNodes, int32(i)) &&
			(!n.Healthy || n.Drain != nil || n.State == NodeDraining || n.State == NodeDrained || !n.HealthySince.IsZero()) {
			t.Fatalf("step %d: node %s (%+v) left out of drainNodes %v", step, n.ID, n, w.inc.d.drainNodes)
		}
	}
	// leftOutRunning's answers kept from earlier decisions are those it
	// gives afresh now.
	for _, s := range w.inc.active.items {
		r := w.inc.runs[s]
		if r.outOK && r.outFrom < w.inc.now {
			w.outKept++
		}
		got := w.inc.leftOutRunning(s)
		want := r.freeWork && r.plain > 0 && r.pinned == 0 &&
			w.cfg.freePriority(int(r.prio), r.free, r.resumable, w.inc.now) == int(r.prio)
		if got != want {
			t.Fatalf("step %d (%v): job %s: left out %v, afresh %v (runs %+v)", step, w.steps, w.inc.jobs[s].ID, got, want, r)
		}
	}
	// The run counts kept through the deltas are those counted afresh.
	kept := slices.Clone(w.inc.runs)
	w.inc.runsOK = false
	w.inc.pinFreeWork()
	for s := range kept {
		j := &w.inc.jobs[s]
		if !j.live {
			continue
		}
		k, f := kept[s], w.inc.runs[s]
		k.outOK, k.out, k.outFrom, k.outUntil = false, false, 0, 0 // checked above
		if k != f {
			t.Fatalf("step %d (%v): job %s: run counts kept %+v, counted afresh %+v", step, w.steps, j.ID, k, f)
		}
		if r := kept[s]; int(r.prio) != j.Priority || r.freeWork != (j.managed && j.leaf < 0) || r.resumable != j.Contract.Resumable {
			t.Fatalf("step %d (%v): job %s: runs hold priority %d, free work %v, resumable %v; the job %d, %v, %v", step, w.steps, j.ID,
				r.prio, r.freeWork, r.resumable, j.Priority, j.managed && j.leaf < 0, j.Contract.Resumable)
		}
	}
	copy(w.inc.runs, kept) // the same counts, with leftOutRunning's answers kept for the next decision
	if w.inc.tl.first > 0 {
		w.leftOut++
	}
	if len(w.inc.tl.jp) < len(snap.Jobs) {
		w.smaller++
	}
	if slices.ContainsFunc(w.inc.tl.outFree, func(g int32) bool { return g > 0 }) {
		w.freeOut++
	}
	for _, j := range w.inc.tl.jp {
		if s := w.inc.jobAt[j.ID]; w.inc.jobs[s].leaf < 0 && w.inc.jobs[s].managed && w.inc.runs[s].pinned > 0 {
			w.pinned++
			break
		}
	}
	w.apply(got)
}

// checkLists compares the record lists kept through the deltas with the
// lists made afresh from every record.
func (w *incWorld) checkLists(t *testing.T, step int) {
	t.Helper()
	x := &w.inc
	keptOf, keptNone, keptRun := recSets(&x.lists), recSet(&x.lists, x.lists.none), slices.Clone(x.lists.nodeRun)
	x.relist()
	freshOf, freshNone := recSets(&x.lists), recSet(&x.lists, x.lists.none)
	for s := range max(len(keptOf), len(freshOf)) {
		var k, f []int32
		if s < len(keptOf) {
			k = keptOf[s]
		}
		if s < len(freshOf) {
			f = freshOf[s]
		}
		if !slices.Equal(k, f) {
			t.Fatalf("step %d (%v): job slot %d: records kept %v, listed afresh %v", step, w.steps, s, k, f)
		}
	}
	if !slices.Equal(keptNone, freshNone) || !slices.Equal(keptRun, x.lists.nodeRun) {
		t.Fatalf("step %d (%v): records of no job kept %v, afresh %v; running GPUs by node kept %v, afresh %v",
			step, w.steps, keptNone, freshNone, keptRun, x.lists.nodeRun)
	}
}

// recSets lists each job slot's records, sorted, walking the links forward
// and checking them backward.
func recSets(l *recLists) [][]int32 {
	var of [][]int32
	for _, h := range l.head {
		of = append(of, recSet(l, h))
	}
	return of
}

// recSet is the list whose head is h, sorted; nil when a backward link
// does not match.
func recSet(l *recLists, h int32) []int32 {
	var out []int32
	prev := int32(0)
	for i := h - 1; i >= 0; i = l.nextOf[i] - 1 {
		if l.prev[i] != prev {
			return []int32{-1, i} // a broken link
		}
		out = append(out, i)
		prev = i + 1
	}
	slices.Sort(out)
	return out
}

func planDiff(got, want *Plan) string {
	g, wv := reflect.ValueOf(*got), reflect.ValueOf(*want)
	for i := 0; i < g.NumField(); i++ {
		if !reflect.DeepEqual(g.Field(i).Interface(), wv.Field(i).Interface()) {
			f := g.Type().Field(i).Name
			if f == "Explanations" {
				for k := range min(len(got.Explanations), len(want.Explanations)) {
					if !reflect.DeepEqual(got.Explanations[k], want.Explanations[k]) {
						return fmt.Sprintf("Explanations[%d]:\n got %+v\nwant %+v", k, got.Explanations[k], want.Explanations[k])
					}
				}
			}
			return fmt.Sprintf("%s:\n got %+v\nwant %+v", f, g.Field(i).Interface(), wv.Field(i).Interface())
		}
	}
	return "(no field differs)"
}

// apply carries a plan out as an adapter would, sometimes failing to apply
// a stop (the Issued memory then settles it).
func (w *incWorld) apply(p *Plan) {
	snap := w.inc.Snapshot()
	jobs := map[string]Job{}
	for _, j := range snap.Jobs {
		jobs[j.ID] = j
	}
	for k, sp := range p.SetPriorities {
		j := jobs[sp.Job]
		j.Priority, j.LastWrittenPriority = sp.To, sp.To
		j.ModifyIndex++
		if k%2 == 0 {
			w.inc.PutPriority(j.ID, j.Priority, j.LastWrittenPriority, j.ModifyIndex)
		} else {
			w.inc.PutJob(j)
		}
	}
	allocs := map[string]Alloc{}
	for _, a := range snap.Allocs {
		allocs[a.ID] = a
	}
	for _, st := range p.Stops {
		if w.r.Intn(5) == 0 {
			continue // not visible yet
		}
		for _, id := range st.Allocs {
			a := allocs[id]
			a.DesiredStatus, a.ClientStatus = DesiredStop, ClientComplete
			w.inc.PutAlloc(a)
		}
	}
	for _, na := range p.NodeActions {
		for _, n := range snap.Nodes {
			if n.ID == na.Node {
				n.State = na.State()
				n.Eligible = na.Kind.Eligible()
				w.inc.PutNode(n)
			}
		}
	}
	w.inc.Remember(p, Failed{})
}

// delta applies one random change.
func (w *incWorld) delta() {
	r := w.r
	snap := w.inc.Snapshot()
	pick := func(ok func(*Job) bool) *Job {
		for tries := 0; tries < 20 && len(snap.Jobs) > 0; tries++ {
			if j := &snap.Jobs[r.Intn(len(snap.Jobs))]; ok(j) {
				return j
			}
		}
		return nil
	}
	live := map[string]int{}
	for _, a := range snap.Allocs {
		if a.live() {
			live[a.Job]++
		}
	}
	kind := r.Intn(12)
	w.steps[fmt.Sprint(kind)]++
	switch kind {
	case 0, 1: // submit
		w.seq++
		meta := map[string]string{}
		if r.Intn(5) > 0 {
			meta["budget"] = w.tree.Leaves()[r.Intn(len(w.tree.Leaves()))].Path
			meta["min_runtime"] = fmt.Sprintf("%dm", r.Intn(120))
			meta["priority"] = fmt.Sprint(r.Intn(101))
			if r.Intn(3) == 0 { // a checkpoint notice (notice.go), some of them sessions
				meta["checkpoint_signal"], meta["checkpoint_notice"] = "SIGUSR1", fmt.Sprintf("%ds", 1+r.Intn(600))
				if r.Intn(2) == 0 {
					meta["class"] = "session"
				}
			}
		}
		leaf := func(p string) (bool, bool) { n, ok := w.tree.Lookup(p); return ok, ok && n.IsLeaf() }
		id := fmt.Sprintf("s%d", w.seq)
		gpus := []int{1, 2, 4, 8, 16}[r.Intn(5)]
		j := Job{ID: id, Namespace: "default", Type: "batch", Contract: contract.Parse(id, meta, contract.Config{}, leaf),
			SubmitTime: w.now.Add(-time.Duration(r.Intn(3600)) * time.Second), Priority: 50,
			Groups: []TaskGroup{{Name: "g", Count: 1 + r.Intn(2), GPUs: gpus}}}
		if r.Intn(4) == 0 {
			j.Priority = w.cfg.Pending.Low
		}
		if r.Intn(6) == 0 && len(snap.Nodes) > 0 {
			// Its allocation is seen before the job itself (Nomad's events
			// come in any order): counted for a job not there yet.
			w.seq++
			n := snap.Nodes[r.Intn(len(snap.Nodes))]
			w.inc.PutAlloc(Alloc{ID: fmt.Sprintf("a%d", w.seq), Job: id, Node: n.ID, Group: "g", GPUs: gpus,
				StartedAt: w.now, ClientStatus: ClientRunning, DesiredStatus: DesiredRun})
		}
		w.inc.PutJob(j)
	case 2: // start an allocation of a waiting job
		j := pick(func(j *Job) bool { return live[j.ID] < j.Groups[0].Count })
		if j == nil {
			return
		}
		w.seq++
		n := snap.Nodes[r.Intn(len(snap.Nodes))]
		a := Alloc{ID: fmt.Sprintf("a%d", w.seq), Job: j.ID, Node: n.ID, Group: "g", GPUs: j.Groups[0].GPUs,
			StartedAt: w.now, ClientStatus: ClientRunning, DesiredStatus: DesiredRun}
		if r.Intn(4) == 0 {
			a.StartedAt, a.ClientStatus = time.Time{}, ClientPending // placed, starts later (case 3)
		}
		w.inc.PutAlloc(a)
	case 3: // an allocation starts, stops, fails or is collected
		if len(snap.Allocs) == 0 {
			return
		}
		a := snap.Allocs[r.Intn(len(snap.Allocs))]
		if a.ClientStatus == ClientPending && r.Intn(2) == 0 {
			a.StartedAt, a.ClientStatus = w.now, ClientRunning
			if r.Intn(2) == 0 { // the record replaced by one on another node (PutAlloc keeps its place)
				a.Node = snap.Nodes[r.Intn(len(snap.Nodes))].ID
			}
			w.inc.PutAlloc(a)
			return
		}
		switch r.Intn(3) {
		case 0:
			w.inc.RemoveAlloc(a.ID)
		case 1:
			a.ClientStatus = ClientFailed
			w.inc.PutAlloc(a)
		default:
			a.ClientStatus = ClientComplete
			w.inc.PutAlloc(a)
		}
	case 4: // a job finishes and leaves (sometimes purged before its allocations)
		if j := pick(func(*Job) bool { return true }); j != nil {
			w.inc.RemoveJob(j.ID)
			for _, a := range snap.Allocs {
				if a.Job == j.ID && r.Intn(4) > 0 {
					w.inc.RemoveAlloc(a.ID)
				}
			}
			if r.Intn(3) == 0 {
				w.inc.PutJob(*j) // registered again while allocations of it remain
			}
		}
	case 5: // a node's health, eligibility or drain changes
		n := snap.Nodes[r.Intn(len(snap.Nodes))]
		switch r.Intn(4) {
		case 0:
			n.Healthy, n.HealthReason = !n.Healthy, "XID 79"
			if n.Healthy {
				n.HealthySince = w.now
			}
		case 1:
			n.Eligible = !n.Eligible
		case 2:
			if n.Drain == nil {
				n.Drain = &Drain{Deadline: w.now.Add(time.Duration(r.Intn(90)) * time.Minute)}
			} else {
				n.Drain = nil
			}
		default:
			n.ReturnRequested = true
		}
		w.inc.PutNode(n)
	case 6: // usage charged: fair share moves
		usage := make([]int64, len(w.tree.Leaves()))
		for i := range usage {
			usage[i] = int64(r.Intn(1000)) * 3600
		}
		w.fs = budgets.ComputeFairShare(w.tree, usage)
	case 7: // a user changes a priority
		if j := pick(func(*Job) bool { return true }); j != nil {
			c := *j
			c.Priority = 1 + r.Intn(100)
			if r.Intn(2) == 0 {
				c.Priority = w.cfg.Pending.Low
			}
			w.inc.PutJob(c)
		}
	case 8: // memory lost or dropped by the caller
		switch r.Intn(3) {
		case 0:
			w.inc.Issued = nil
		case 1:
			w.inc.Victims = nil
			w.inc.Notices = nil
		default:
			w.inc.Reservations = nil
		}
	case 11: // a node leaves the cluster, or one that left comes back
		if len(w.gone) > 0 && r.Intn(2) == 0 {
			w.inc.PutNode(w.gone[len(w.gone)-1])
			w.gone = w.gone[:len(w.gone)-1]
		} else if len(snap.Nodes) > 2 {
			n := snap.Nodes[r.Intn(len(snap.Nodes))]
			w.inc.RemoveNode(n.ID)
			w.gone = append(w.gone, n)
		}
	default: // time advances
		w.now = w.now.Add(time.Duration(1+r.Intn(40)) * time.Minute)
	}
}

// TestIncrementalMatchesDecide replays random delta sequences through an
// Incremental and compares every plan, explanations included, with Decide
// on the equivalent Snapshot.
func TestIncrementalMatchesDecide(t *testing.T) {
	narrow := DefaultConfig()
	narrow.Pending = Range{40, 49}
	narrow.MaxEvaluations = 3
	narrow.Hysteresis = 4
	cfgs := map[string]Config{"default": DefaultConfig(), "narrow band, few evaluations": narrow}
	for name, cfg := range cfgs {
		t.Run(name, func(t *testing.T) {
			leftOut, smaller, freeOut, pinned, kept, outKept, listsKept, dueKept, decisions := 0, 0, 0, 0, 0, 0, 0, 0, 0
			nodesKept, drained, sumsKept, settled := 0, 0, 0, 0
			for seed := int64(1); seed <= 12; seed++ {
				w := newIncWorld(seed, cfg, 150+int(seed)*20)
				for step := 0; step < 60; step++ {
					for k := w.r.Intn(4); k >= 0; k-- {
						w.delta()
					}
					w.decide(t, step)
					decisions++
				}
				leftOut += w.leftOut
				smaller += w.smaller
				freeOut += w.freeOut
				pinned += w.pinned
				kept += w.runsKept
				outKept += w.outKept
				listsKept += w.listsKept
				dueKept += w.dueKept
				nodesKept += w.nodesKept
				drained += w.drained
				sumsKept += w.sumsKept
				settled += w.settled
			}
			t.Logf("%d job run sums kept from an earlier decision; %d decisions took allocations as stopping (settle)", sumsKept, settled)
			if sumsKept < decisions || settled == 0 {
				t.Errorf("%d run sums kept in %d decisions, %d with allocations taken by settle: the test does not exercise both", sumsKept, decisions, settled)
			}
			t.Logf("%d decisions kept what they derive from the nodes alone, %d had nodes drain may act on", nodesKept, drained)
			if nodesKept < decisions/4 || nodesKept > decisions*9/10 || drained < decisions/4 {
				t.Errorf("%d of %d decisions kept the nodes' parts, %d had nodes drain may act on: the test does not exercise both ways", nodesKept, decisions, drained)
			}
			t.Logf("%d answers of leftOutRunning kept from an earlier decision", outKept)
			if outKept < decisions {
				t.Errorf("only %d answers of leftOutRunning kept in %d decisions: the test does not exercise them", outKept, decisions)
			}
			t.Logf("%d decisions kept the record lists through the deltas, %d counted some jobs' runs again from their records alone", listsKept, dueKept)
			if dueKept == 0 {
				t.Errorf("no decision counted a job's runs again from its records alone: the test does not exercise it")
			}
			if listsKept < decisions/4 {
				t.Errorf("only %d of %d decisions kept the record lists through the deltas: the test does not exercise them", listsKept, decisions)
			}
			if kept < decisions/4 {
				t.Errorf("only %d of %d decisions kept the run counts through the deltas: the test does not exercise them", kept, decisions)
			}
			t.Logf("%d decisions: %d left queued jobs out, %d read fewer jobs than the snapshot, %d left running free work out, %d read free work pinned by a node, %d kept the run counts",
				decisions, leftOut, smaller, freeOut, pinned, kept)
			if freeOut < decisions/2 || pinned < decisions/10 {
				t.Errorf("%d of %d decisions left running free work out and %d read some pinned by a node: the test does not exercise both", freeOut, decisions, pinned)
			}
			if leftOut < decisions/2 {
				t.Errorf("only %d of %d decisions left queued jobs out: the test does not exercise the tail", leftOut, decisions)
			}
		})
	}
}

// TestIncrementalCompaction purges most jobs while some of their
// allocations stay, so that the Incremental compacts its job slots (and
// every slot its allocations cached goes stale), and compares each plan
// with Decide's.
func TestIncrementalCompaction(t *testing.T) {
	w := newIncWorld(7, DefaultConfig(), 300)
	compactions, listed := 0, 0
	for step := 0; step < 40; step++ {
		snap := w.inc.Snapshot()
		before := w.inc.jobEra
		for k := 0; k < len(snap.Jobs)/8; k++ {
			j := snap.Jobs[w.r.Intn(len(snap.Jobs))]
			w.inc.RemoveJob(j.ID)
			for _, a := range snap.Allocs {
				if a.Job == j.ID && w.r.Intn(2) == 0 {
					w.inc.RemoveAlloc(a.ID)
				}
			}
		}
		if w.inc.jobEra != before && w.inc.lists.ok {
			listed++ // the record lists moved with the slots: as listed afresh?
			w.checkLists(t, step)
		}
		for k := 0; k < 30; k++ {
			w.delta()
		}
		if w.inc.jobEra != before {
			compactions++
		}
		w.decide(t, step)
	}
	if compactions == 0 || listed == 0 {
		t.Fatalf("%d compactions, %d with the record lists kept: the test does not exercise stale slots", compactions, listed)
	}
	t.Logf("%d compactions in 40 decisions", compactions)
}

// TestIncrementalCompactBeforeGrow checks that a job put when the slots are
// full and more than a quarter of them are holes closes the holes instead
// of growing the slots, and that the decisions after it are Decide's.
func TestIncrementalCompactBeforeGrow(t *testing.T) {
	w := newIncWorld(11, DefaultConfig(), 300)
	w.decide(t, 0)
	snap := w.inc.Snapshot()
	n := len(w.inc.jobs)
	for k := 0; k < n/2; k++ { // at most half: RemoveJob does not compact
		w.inc.RemoveJob(snap.Jobs[k].ID)
	}
	if w.inc.holes <= 64 || w.inc.holes > len(w.inc.jobs)/2 || w.inc.holes <= cap(w.inc.jobs)/4 {
		t.Fatalf("%d holes in %d slots of %d: the test wants more than 64, at most half, more than a quarter of the capacity",
			w.inc.holes, len(w.inc.jobs), cap(w.inc.jobs))
	}
	w.decide(t, 1)
	c, era := cap(w.inc.jobs), w.inc.jobEra
	for k := 0; w.inc.jobEra == era; k++ {
		if k > c {
			t.Fatalf("no compaction after %d jobs put into %d slots of %d", k, len(w.inc.jobs), c)
		}
		j := snap.Jobs[len(snap.Jobs)-1-k%(len(snap.Jobs)/2)]
		j.ID = fmt.Sprintf("grow%d", k)
		w.inc.PutJob(j)
		if k%16 == 0 {
			w.decide(t, 2+k)
		}
	}
	if cap(w.inc.jobs) != c || w.inc.holes != 0 {
		t.Fatalf("slots grew from %d to %d (%d holes): want the holes closed first", c, cap(w.inc.jobs), w.inc.holes)
	}
	w.decide(t, 1000)
	for k := 0; k < 20; k++ {
		w.delta()
		w.decide(t, 1001+k)
	}
}

// TestIncrementalRecordCompaction checks that the run sums kept for jobs
// hold when removals renumber the allocation records (in order), and that
// the decision after is Decide's.
func TestIncrementalRecordCompaction(t *testing.T) {
	w := newIncWorld(5, DefaultConfig(), 200)
	w.decide(t, 0)
	snap := w.inc.Snapshot()
	var ids []string
	for k := 0; k < 160; k++ {
		j := snap.Jobs[w.r.Intn(len(snap.Jobs))]
		n := snap.Nodes[w.r.Intn(len(snap.Nodes))]
		w.seq++
		id := fmt.Sprintf("rc%d", w.seq)
		ids = append(ids, id)
		start := w.now.Add(-time.Duration(w.r.Intn(7200)) * time.Second)
		w.inc.PutAlloc(Alloc{ID: id, Job: j.ID, Node: n.ID, Group: "g", GPUs: 1 + w.r.Intn(4),
			StartedAt: start, ClientStatus: ClientRunning, DesiredStatus: DesiredRun})
	}
	w.decide(t, 1) // counts the sums with the new records
	records := len(w.inc.allocs)
	for _, id := range ids[:130] {
		w.inc.RemoveAlloc(id)
	}
	if len(w.inc.allocs) >= records {
		t.Fatalf("%d records, %d holes after removing 130 of %d: no compaction", len(w.inc.allocs), w.inc.aHoles, records)
	}
	kept := 0
	for s := range w.inc.sums {
		if w.inc.sums[s].ok && w.inc.jobs[s].live && w.inc.jobs[s].allocs > 0 {
			kept++
		}
	}
	if kept == 0 {
		t.Fatal("no run sum of a job with records kept through the compaction: the test does not exercise it")
	}
	w.decide(t, 2) // checks the kept sums against sums counted afresh
	for k := 0; k < 20; k++ {
		w.delta()
		w.decide(t, 3+k)
	}
}
