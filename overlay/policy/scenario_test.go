package policy

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/contract"
)

// TestScenarios runs testdata/*.txt: small stories of a cluster told in
// commands, with the plan each decision makes. See world.do for the commands.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios in testdata: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			w := newWorld()
			runDD(t, f, func(c *ddCase) string {
				out, err := w.do(c)
				if err != nil {
					return "error: " + err.Error()
				}
				return out
			})
		})
	}
}

// world is a tiny model of a Nomad cluster driven by scenario commands:
// Nomad's placements are spelled out with `start`, and every `decide`
// applies its plan the way the adapter would.
type world struct {
	t0, now time.Time
	cfg     Config
	tree    *budgets.Tree
	usage   []int64 // GPU-seconds by leaf index
	snap    Snapshot
	seq     int
	lagged  []*Plan // applied to Nomad, not yet seen by the view (decide lag)
}

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func newWorld() *world {
	tree, _ := budgets.NewTree([]budgets.Spec{{Path: "lab"}})
	return &world{t0: epoch, now: epoch, cfg: DefaultConfig(), tree: tree, usage: make([]int64, 1)}
}

// at writes a time as an offset from the scenario's start: "+2h", "+1h30m".
func (w *world) at(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	s := t.Sub(w.t0).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return "+" + s
}

func kv(args []string) (map[string]string, []string) {
	m := map[string]string{}
	var pos []string
	for _, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok {
			m[k] = v
		} else {
			pos = append(pos, a)
		}
	}
	return m, pos
}

func atoi(s string, def int) (int, error) {
	if s == "" {
		return def, nil
	}
	return strconv.Atoi(s)
}

func (w *world) do(c *ddCase) (string, error) {
	m, pos := kv(c.args)
	switch c.cmd {
	case "config":
		return "", w.config(m)
	case "budgets":
		return w.budgets(c.input)
	case "node":
		return "", w.node(pos, m)
	case "submit":
		return w.submit(pos, m)
	case "start":
		return w.start(pos, ClientRunning)
	case "place":
		return w.start(pos, ClientPending)
	case "victims-stopped":
		j, err := w.findJob(pos)
		if err != nil {
			return "", err
		}
		for i := range w.snap.Allocs {
			if w.snap.Allocs[i].Job == j.ID {
				w.snap.Allocs[i].WaitsForVictims = false
			}
		}
		return "", nil
	case "run":
		return "", w.run(pos)
	case "evaluating":
		j, err := w.findJob(pos)
		if err != nil {
			return "", err
		}
		j.EvaluatingSince = w.now
		return "", nil
	case "evaluated":
		j, err := w.findJob(pos)
		if err != nil {
			return "", err
		}
		j.EvaluatingSince = time.Time{}
		return "", nil
	case "finish":
		return "", w.finish(pos)
	case "exit":
		return "", w.exit(pos)
	case "advance":
		d, err := time.ParseDuration(strings.Join(pos, ""))
		if err != nil {
			return "", err
		}
		w.advance(d)
		return "now " + w.at(w.now), nil
	case "unhealthy":
		n, err := w.findNode(pos)
		if err != nil {
			return "", err
		}
		n.Healthy, n.HealthReason, n.HealthySince = false, strings.Join(pos[1:], " "), time.Time{}
		return "", nil
	case "healthy":
		n, err := w.findNode(pos)
		if err != nil {
			return "", err
		}
		n.Healthy, n.HealthReason, n.HealthySince = true, "", w.now
		return "", nil
	case "drain":
		n, err := w.findNode(pos)
		if err != nil {
			return "", err
		}
		n.Eligible, n.Drain = false, &Drain{}
		if d, ok := m["deadline"]; ok {
			dd, err := time.ParseDuration(d)
			if err != nil {
				return "", err
			}
			n.Drain.Deadline = w.now.Add(dd)
		}
		return "", nil
	case "return":
		n, err := w.findNode(pos)
		if err != nil {
			return "", err
		}
		n.ReturnRequested = true
		return "", nil
	case "eligible":
		n, err := w.findNode(pos)
		if err != nil {
			return "", err
		}
		// What `nomad node eligibility -enable` does: Nomad's eligibility
		// changes, allot's memory of the node (State) does not.
		n.Eligible = true
		return "", nil
	case "setprio":
		// setprio JOB PRIORITY [written]: a write outside this allot (a
		// user's), or with written one allot made (an earlier release's,
		// with other bands).
		j, err := w.findJob(pos)
		if err != nil || len(pos) < 2 || len(pos) > 3 || len(pos) == 3 && pos[2] != "written" {
			return "", fmt.Errorf("usage: setprio JOB PRIORITY [written] (%v)", err)
		}
		j.Priority, err = strconv.Atoi(pos[1])
		if len(pos) == 3 {
			j.LastWrittenPriority = j.Priority
		}
		j.ModifyIndex++
		return "", err
	case "decide":
		return w.decide(slices.Contains(pos, "lag")), nil
	case "catchup":
		w.catchup()
		return "", nil
	case "forget":
		// A new leader: the policy's memory of its own actions is gone (the
		// replicated state keeps reservations and node states, not these).
		w.snap.Victims, w.snap.Issued, w.snap.Notices = nil, nil, nil
		return "", nil
	}
	return "", fmt.Errorf("unknown command %q", c.cmd)
}

func (w *world) config(m map[string]string) error {
	for k, v := range m {
		var err error
		d := func() time.Duration {
			x, e := time.ParseDuration(v)
			err = e
			return x
		}
		switch k {
		case "margin":
			w.cfg.FairnessMargin, err = strconv.ParseFloat(v, 64)
		case "hysteresis":
			w.cfg.Hysteresis, err = strconv.Atoi(v)
		case "max-evaluations":
			w.cfg.MaxEvaluations, err = strconv.Atoi(v)
		case "quick-window":
			w.cfg.QuickWindow = d()
		case "reservation-nodes":
			w.cfg.ReservationNodes, err = strconv.Atoi(v)
		case "reservation-gather-nodes":
			w.cfg.GatherNodes, err = strconv.Atoi(v)
		case "reservation-max-age":
			w.cfg.ReservationMaxAge = d()
		case "drain-return-after":
			w.cfg.DrainReturnAfter = d()
		case "drain-lead":
			w.cfg.DrainLead = d()
		case "runtime-cap":
			w.cfg.RuntimeCap = d()
		case "max-notice":
			w.cfg.MaxNotice = d()
		case "victim-hold":
			w.cfg.VictimHold = d()
		case "settle":
			w.cfg.Settle = d()
		case "pending-band":
			lo, hi, _ := strings.Cut(v, "-")
			w.cfg.Pending.Low, err = strconv.Atoi(lo)
			if err == nil {
				w.cfg.Pending.High, err = strconv.Atoi(hi)
			}
		default:
			return fmt.Errorf("unknown config key %q", k)
		}
		if err != nil {
			return err
		}
	}
	return w.cfg.Validate()
}

// budgets reads "path share=N usage=GPUh" lines; the root is the first
// path element. It prints the leaves in fair-share order.
func (w *world) budgets(input []string) (string, error) {
	specs := []budgets.Spec{}
	use := map[string]float64{}
	seen := map[string]bool{}
	for _, l := range input {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		m, _ := kv(f[1:])
		share, _ := strconv.ParseFloat(m["share"], 64)
		if share == 0 {
			share = 1
		}
		parts := strings.Split(f[0], "/")
		for i := 1; i < len(parts); i++ {
			p := strings.Join(parts[:i], "/")
			if !seen[p] {
				seen[p] = true
				specs = append(specs, budgets.Spec{Path: p, Share: 1})
			}
		}
		if seen[f[0]] {
			for i := range specs {
				if specs[i].Path == f[0] {
					specs[i].Share = share
				}
			}
		} else {
			seen[f[0]] = true
			specs = append(specs, budgets.Spec{Path: f[0], Share: share})
		}
		if u, ok := m["usage"]; ok {
			h, err := strconv.ParseFloat(u, 64)
			if err != nil {
				return "", fmt.Errorf("usage %q: want GPU-hours", u)
			}
			use[f[0]] = h
		}
	}
	tree, err := budgets.NewTree(specs)
	if err != nil {
		return "", err
	}
	w.tree = tree
	w.usage = make([]int64, len(tree.Leaves()))
	for p, h := range use {
		n, _ := tree.Lookup(p)
		w.usage[n.LeafIndex] = int64(h * 3600)
	}
	return w.order(), nil
}

func (w *world) order() string {
	fs := budgets.ComputeFairShare(w.tree, w.usage)
	var b strings.Builder
	for i := range fs.Leaves {
		r := &fs.Leaves[i]
		fmt.Fprintf(&b, "%d. %s share=%.2f used=%.0fh served=%.2f\n", i+1, r.Leaf.Path, r.Effective,
			float64(r.Usage)/3600, r.ServedRatio())
	}
	return b.String()
}

func (w *world) node(pos []string, m map[string]string) error {
	if len(pos) != 1 {
		return fmt.Errorf("usage: node ID gpus=N [model=M] [pool=P]")
	}
	g, err := atoi(m["gpus"], 8)
	if err != nil {
		return err
	}
	model := m["model"]
	if model == "" {
		model = "h100"
	}
	w.snap.Nodes = append(w.snap.Nodes, Node{ID: pos[0], Pool: m["pool"], Model: model, GPUs: g, Eligible: true, Healthy: true})
	return nil
}

func (w *world) submit(pos []string, m map[string]string) (string, error) {
	if len(pos) != 1 {
		return "", fmt.Errorf("usage: submit ID [budget=..] [min_runtime=..] [resumable=..] [priority=..] gpus=N count=N [model=M] [pool=P] [ns=NS] [type=T] [nomad-priority=N]")
	}
	meta := map[string]string{}
	for _, k := range []string{contract.KeyBudget, contract.KeyMinRuntime, contract.KeyResumable, contract.KeyPriority,
		contract.KeyCheckpointSignal, contract.KeyCheckpointNotice, contract.KeyClass} {
		if v, ok := m[k]; ok {
			meta[k] = v
		}
	}
	gpus, err1 := atoi(m["gpus"], 8)
	count, err2 := atoi(m["count"], 1)
	prio, err3 := atoi(m["nomad-priority"], 50)
	if err1 != nil || err2 != nil || err3 != nil {
		return "", fmt.Errorf("gpus, count and nomad-priority must be integers")
	}
	ns := m["ns"]
	if ns == "" {
		ns = "default"
	}
	typ := m["type"]
	if typ == "" {
		typ = "batch"
	}
	leaf := func(p string) (bool, bool) {
		n, ok := w.tree.Lookup(p)
		return ok, ok && n.IsLeaf()
	}
	c := contract.Parse(pos[0], meta, contract.Config{RuntimeCap: w.cfg.RuntimeCap, MaxNotice: w.cfg.MaxNotice}, leaf)
	w.snap.Jobs = append(w.snap.Jobs, Job{ID: pos[0], Namespace: ns, Type: typ, Contract: c, Pool: m["pool"],
		SubmitTime: w.now, Priority: prio, ModifyIndex: 1,
		Groups: []TaskGroup{{Name: "g", Count: count, GPUs: gpus, Model: m["model"]}}})
	var b strings.Builder
	for _, warn := range c.Warnings {
		b.WriteString("warning: " + warn.String() + "\n")
	}
	return b.String(), nil
}

func (w *world) findNode(pos []string) (*Node, error) {
	for i := range w.snap.Nodes {
		if len(pos) > 0 && w.snap.Nodes[i].ID == pos[0] {
			return &w.snap.Nodes[i], nil
		}
	}
	return nil, fmt.Errorf("no node %v", pos)
}

func (w *world) findJob(pos []string) (*Job, error) {
	for i := range w.snap.Jobs {
		if len(pos) > 0 && w.snap.Jobs[i].ID == pos[0] {
			return &w.snap.Jobs[i], nil
		}
	}
	return nil, fmt.Errorf("no job %v", pos)
}

// start is Nomad placing a job's missing allocations, one on each node
// named, with that client status: running (started now) or pending (placed
// now; `run` starts it; one that preempted waits for its victims until
// `victims-stopped`). Like Nomad, it preempts allocations of jobs at least
// 10 below the job when the node is short, lowest first, and refuses what
// cannot fit.
func (w *world) start(pos []string, status string) (string, error) {
	j, err := w.findJob(pos)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, id := range pos[1:] {
		n, err := w.findNode([]string{id})
		if err != nil {
			return "", err
		}
		preempted := false
		g := j.Groups[0].GPUs
		if !n.Eligible || !n.Healthy {
			return "", fmt.Errorf("node %s is not eligible", id)
		}
		for free := w.free(n.ID); free < g; free = w.free(n.ID) {
			v := w.lowestBelow(n.ID, j.Priority-10)
			if v < 0 {
				return "", fmt.Errorf("%s does not fit on %s: %d GPUs free", j.ID, id, free)
			}
			a := w.snap.Allocs[v]
			fmt.Fprintf(&b, "nomad preempts %s on %s\n", a.Job, id)
			preempted = true
			w.snap.Allocs = slices.Delete(w.snap.Allocs, v, v+1)
		}
		w.seq++
		a := Alloc{ID: fmt.Sprintf("%s.%d", j.ID, w.seq), Job: j.ID, Node: id,
			Group: "g", GPUs: g, PlacedAt: w.now, ClientStatus: status, DesiredStatus: DesiredRun,
			WaitsForVictims: status == ClientPending && preempted}
		if status == ClientRunning {
			a.StartedAt = w.now
		}
		w.snap.Allocs = append(w.snap.Allocs, a)
	}
	return b.String(), nil
}

// run starts a job's pending allocations now.
func (w *world) run(pos []string) error {
	j, err := w.findJob(pos)
	if err != nil {
		return err
	}
	for i := range w.snap.Allocs {
		if a := &w.snap.Allocs[i]; a.Job == j.ID && a.ClientStatus == ClientPending {
			a.ClientStatus, a.StartedAt = ClientRunning, w.now
		}
	}
	return nil
}

func (w *world) free(node string) int {
	n, _ := w.findNode([]string{node})
	free := n.GPUs
	for _, a := range w.snap.Allocs {
		if a.Node == node && !w.stoppedUnseen(a.ID) {
			free -= a.GPUs
		}
	}
	return free
}

// stoppedUnseen reports whether a lagged plan stopped allocation id: Nomad
// counts its GPUs free at once (it places new work there, to start once
// the task has exited), while the view still shows it running.
func (w *world) stoppedUnseen(id string) bool {
	for _, p := range w.lagged {
		for _, s := range p.Stops {
			if slices.Contains(s.Allocs, id) {
				return true
			}
		}
	}
	return false
}

// lowestBelow is the allocation on node of the lowest-priority job at or
// below limit, or -1.
func (w *world) lowestBelow(node string, limit int) int {
	best, bestPrio := -1, limit+1
	for i, a := range w.snap.Allocs {
		j, _ := w.findJob([]string{a.Job})
		if a.Node == node && j.Priority < bestPrio && !w.stoppedUnseen(a.ID) {
			best, bestPrio = i, j.Priority
		}
	}
	return best
}

func (w *world) finish(pos []string) error {
	if _, err := w.findJob(pos); err != nil {
		return err
	}
	w.snap.Jobs = slices.DeleteFunc(w.snap.Jobs, func(j Job) bool { return j.ID == pos[0] })
	w.snap.Allocs = slices.DeleteFunc(w.snap.Allocs, func(a Alloc) bool { return a.Job == pos[0] })
	return nil
}

// exit is a job's tasks exiting on their own (its allocations complete),
// as a job that saved its state on a checkpoint signal may.
func (w *world) exit(pos []string) error {
	if _, err := w.findJob(pos); err != nil {
		return err
	}
	for i := range w.snap.Allocs {
		if w.snap.Allocs[i].Job == pos[0] {
			w.snap.Allocs[i].ClientStatus = ClientComplete
		}
	}
	return nil
}

// advance moves the clock, charging running allocated jobs to their leaf.
func (w *world) advance(d time.Duration) {
	for _, a := range w.snap.Allocs {
		j, _ := w.findJob([]string{a.Job})
		if n, ok := w.tree.Lookup(j.Contract.Budget); ok && j.Contract.Allocated && n.IsLeaf() {
			w.usage[n.LeafIndex] += int64(a.GPUs) * int64(d/time.Second)
		}
	}
	w.now = w.now.Add(d)
}

// decide runs the policy, prints the plan and applies it. With lag, the
// plan reaches Nomad but the view shows only its priority writes (the
// adapter patches in the writes Nomad accepted): the policy's memory is
// carried, and catchup applies the rest of the plan to the view later.
func (w *world) decide(lag bool) string {
	fs := budgets.ComputeFairShare(w.tree, w.usage)
	p := Decide(&w.snap, w.tree, fs, w.now, w.cfg)
	out := w.printPlan(p)
	if lag {
		w.lagged = append(w.lagged, &Plan{Stops: p.Stops, NodeActions: p.NodeActions})
		w.effects(&Plan{SetPriorities: p.SetPriorities})
		w.remember(p)
	} else {
		w.apply(p)
	}
	return out
}

func (w *world) printPlan(p *Plan) string {
	var b strings.Builder
	rs := func(r Reason) string { return r.Format(w.at) }
	for _, s := range p.SetPriorities {
		fmt.Fprintf(&b, "set-priority %s %d->%d: %s\n", s.Job, s.From, s.To, rs(s.Reason))
	}
	for _, s := range p.Stops {
		fmt.Fprintf(&b, "stop %s %v: %s\n", s.Job, s.Allocs, rs(s.Reason))
	}
	for _, s := range p.Signals {
		fmt.Fprintf(&b, "signal %s %v %s: %s\n", s.Job, s.Allocs, s.Signal, rs(s.Reason))
	}
	for _, a := range p.NodeActions {
		fmt.Fprintf(&b, "node %s %s: %s\n", a.Node, a.Kind, rs(a.Reason))
	}
	for _, e := range p.Evaluations {
		fmt.Fprintf(&b, "evaluate %s: %s\n", e.Job, rs(e.Reason))
	}
	for _, r := range p.Reservations {
		state := "held"
		switch {
		case r.Expired:
			state = "expired"
		case !r.Released.IsZero():
			state = "released " + w.at(r.Released)
		}
		fmt.Fprintf(&b, "reservation %s on %s since %s (%s)\n", r.Job, strings.Join(r.Nodes, ","), w.at(r.Since), state)
	}
	for _, v := range p.Victims {
		if v.Job == v.For {
			fmt.Fprintf(&b, "release of %s held since %s\n", v.Job, w.at(v.Since))
			continue
		}
		switch {
		case v.Kept:
			fmt.Fprintf(&b, "victim %s kept (no longer held below %s, since %s; evaluated with it live %s)\n", v.Job, v.For, w.at(v.Since), w.at(v.Replaced))
		case !v.Replaced.IsZero():
			fmt.Fprintf(&b, "victim %s held below %s since %s, evaluated with it live %s\n", v.Job, v.For, w.at(v.Since), w.at(v.Replaced))
		default:
			fmt.Fprintf(&b, "victim %s held below %s since %s\n", v.Job, v.For, w.at(v.Since))
		}
	}
	for _, n := range p.Notices {
		fmt.Fprintf(&b, "notice %s for %q sent %s, stop %s\n", n.Job, n.For, w.at(n.SentAt), w.at(n.Deadline))
	}
	for _, e := range p.Explanations {
		fmt.Fprintf(&b, "  %s %s %d", e.Job, e.Band, e.Priority)
		if e.Position > 0 {
			fmt.Fprintf(&b, " #%d", e.Position)
		}
		if e.Rank != nil {
			fmt.Fprintf(&b, " %s served=%.2f", e.Budget, e.Rank.ServedRatio())
		}
		if e.Wait != WaitNone {
			fmt.Fprintf(&b, " waits for %s", e.Wait)
		}
		if e.WaitsFor != "" {
			fmt.Fprintf(&b, " [%s]", e.WaitsFor)
		}
		if !e.FreeAt.IsZero() {
			fmt.Fprintf(&b, " (free at %s)", w.at(e.FreeAt))
		}
		if len(e.ReservedNodes) > 0 {
			fmt.Fprintf(&b, " on %s", strings.Join(e.ReservedNodes, ","))
		}
		fmt.Fprintf(&b, ": %s\n", rs(e.Reason))
	}
	fmt.Fprintf(&b, "next-wake %s\n", w.at(p.NextWake))
	return b.String()
}

// apply does what the Nomad adapter would: writes priorities, stops
// allocations (replacements wait, so the job is pending again), changes
// node eligibility, and carries the policy's memory to the next snapshot.
func (w *world) apply(p *Plan) {
	w.effects(p)
	w.remember(p)
}

// catchup shows the view what the lagged plans did.
func (w *world) catchup() {
	for _, p := range w.lagged {
		w.effects(p)
	}
	w.lagged = nil
}

// effects applies a plan's writes to the view.
func (w *world) effects(p *Plan) {
	for _, s := range p.SetPriorities {
		j, _ := w.findJob([]string{s.Job})
		j.Priority, j.LastWrittenPriority = s.To, s.To
		j.ModifyIndex++
	}
	for _, s := range p.Stops {
		var from time.Time // when the last of its stopped allocations started: the run the stop ends
		ran := 0
		for _, a := range w.snap.Allocs {
			if slices.Contains(s.Allocs, a.ID) && !a.StartedAt.IsZero() {
				ran++
				from = maxTime(from, a.StartedAt)
			}
		}
		w.snap.Allocs = slices.DeleteFunc(w.snap.Allocs, func(a Alloc) bool { return slices.Contains(s.Allocs, a.ID) })
		if j, err := w.findJob([]string{s.Job}); err == nil {
			j.QueuedSince, j.LastRun = w.now, 0 // requeued: it waits again from its stop
			if ran >= allocations(j) {
				j.LastRun = w.now.Sub(from) // all its allocations ran (as the reconcile pass reads it)
			}
		}
	}
	for _, a := range p.NodeActions {
		n, _ := w.findNode([]string{a.Node})
		n.Eligible, n.State = a.Kind.Eligible(), a.State()
		if a.State() == NodeNormal {
			n.ReturnRequested = false // the caller clears a request once the node is back
		}
	}
}

// remember carries the policy's memory to the next snapshot, as the adapter
// does whether or not its view shows the plan's effects yet.
func (w *world) remember(p *Plan) {
	w.snap.Reservations = slices.Clone(p.Reservations)
	w.snap.Victims = slices.Clone(p.Victims)
	w.snap.Issued = slices.Clone(p.Issued)
	w.snap.Notices = slices.Clone(p.Notices)
	w.snap.LastDecision = w.now
}
