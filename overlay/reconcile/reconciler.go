package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/contract"
	"github.com/allot-sched/allot/overlay/nomad"
	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/server"
	"github.com/allot-sched/allot/overlay/state"
	"github.com/hashicorp/go-hclog"
)

// Errors a reconcile pass returns instead of acting on an incomplete picture.
var (
	// ErrNotSynced: the view has not been built from Nomad's list endpoints
	// yet; acting now would take missing jobs for finished ones.
	ErrNotSynced = errors.New("nomad view not synced yet (waiting for the first rebuild from the list endpoints)")
	// ErrNoLedger: AttachLedger has not been called.
	ErrNoLedger = errors.New("no usage ledger attached to the reconciler (call AttachLedger with the server's FSM)")
)

// LedgerReader gives read access to the replicated usage ledger;
// *state.FSM implements it.
type LedgerReader interface {
	WithLedger(fn func(*budgets.Ledger))
}

// Config configures a Reconciler.
type Config struct {
	// Nomad is the adapter the pass reads its view from and applies its ops
	// through (nomad.NewAdapter).
	Nomad *nomad.Adapter
	// Policy is what Decide runs with; it also bounds what allot manages
	// (namespaces, node pools: rule 11), and its contract.Config
	// (runtime_cap) is what every job's contract is parsed with: one cap
	// for both.
	Policy policy.Config
	Logger hclog.Logger
}

// Reconciler is server.Reconciler over a live Nomad: the adapter's Watcher
// keeps its View in step with Nomad's event stream, and each pass builds the
// policy's Snapshot from it, decides, applies the plan through the adapter's
// Applier and returns what the server records (managed jobs, allocation
// lifecycles that the ledger is charged from, node states, priorities
// written, decisions and the queue).
//
// Run must be running (on every server, so that a new leader starts warm)
// for passes to succeed. Reconcile is called by the server's leader loop
// only, never concurrently with itself; Wake tells that loop to run a pass
// as soon as the view changes or the plan's NextWake comes.
type Reconciler struct {
	cfg  Config
	log  hclog.Logger
	wake chan struct{}

	mu     sync.Mutex // guards ledger and timer
	ledger LedgerReader
	timer  *time.Timer

	// Memory of the current leadership term, touched only by Reconcile.
	term    <-chan struct{}
	mem     termMemory
	decider policy.Decider
	usage   []int64
}

var (
	_ server.Reconciler = (*Reconciler)(nil)
	_ server.Waker      = (*Reconciler)(nil)
)

// landedWrite is a priority write Nomad accepted, remembered until the view
// shows it, so that a lagging view is not taken for someone else's change.
type landedWrite struct {
	priority    int
	modifyIndex uint64
}

// termMemory is what one leader remembers between passes beyond the
// replicated state: it only saves work or time, so losing it with the
// leadership loses no charge and no protection.
type termMemory struct {
	started bool
	carry   policy.Carry // the policy's memory: reservations, notices, victims, issued actions, node health
	landed  map[string]landedWrite
}

// New returns a reconciler over cfg.Nomad; start it with Run.
func New(cfg Config) (*Reconciler, error) {
	if cfg.Nomad == nil || cfg.Nomad.View == nil || cfg.Nomad.Watcher == nil || cfg.Nomad.Applier == nil {
		return nil, errors.New("reconciler: a Nomad adapter is required (nomad.NewAdapter)")
	}
	if err := cfg.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("reconciler: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Reconciler{cfg: cfg, log: cfg.Logger.Named("reconcile"), wake: make(chan struct{}, 1)}, nil
}

// AttachLedger gives the reconciler the ledger it reads window usage from
// (the server's FSM). Passes fail with ErrNoLedger until it is attached.
func (r *Reconciler) AttachLedger(l LedgerReader) {
	r.mu.Lock()
	r.ledger = l
	r.mu.Unlock()
}

// View is the reconciler's picture of Nomad.
func (r *Reconciler) View() *nomad.View { return r.cfg.Nomad.View }

// Watcher is the watcher feeding the view (for its counters).
func (r *Reconciler) Watcher() *nomad.Watcher { return r.cfg.Nomad.Watcher }

// Wake receives when a pass is due before the server's interval ends.
func (r *Reconciler) Wake() <-chan struct{} { return r.wake }

func (r *Reconciler) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run watches Nomad and forwards the view's changes to Wake until ctx ends.
func (r *Reconciler) Run(ctx context.Context) error {
	err := r.cfg.Nomad.Run(ctx, r.poke)
	r.mu.Lock()
	if r.timer != nil {
		r.timer.Stop()
	}
	r.mu.Unlock()
	return err
}

// wakeAt arms the wake-up for the plan's NextWake (zero: none). now is the
// pass's clock reading and spent the wall time the pass has taken since
// (applying the plan can take a while): the timer counts from the end of
// the pass, so it is shortened by spent to fire at NextWake itself.
func (r *Reconciler) wakeAt(t, now time.Time, spent time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	if t.IsZero() {
		return
	}
	// A few milliseconds late, so the pass sees the window as ended.
	r.timer = time.AfterFunc(t.Sub(now)-spent+5*time.Millisecond, r.poke)
}

// Reconcile runs one pass: snapshot, decide, apply, and the rows to record.
func (r *Reconciler) Reconcile(ctx context.Context, v *state.View, now time.Time) (server.Outcome, error) {
	if err := ctx.Err(); err != nil {
		return server.Outcome{}, err
	}
	began := time.Now()       // wall time, only to time the NextWake timer
	if ctx.Done() != r.term { // a new leadership term starts from the replicated state
		r.term, r.mem = ctx.Done(), termMemory{}
	}
	r.mu.Lock()
	ledger := r.ledger
	r.mu.Unlock()
	if ledger == nil {
		return server.Outcome{}, ErrNoLedger
	}
	st := r.cfg.Nomad.View.State()
	if !st.Synced {
		return server.Outcome{}, ErrNotSynced
	}
	out, next := r.pass(ctx, v, &st, ledger, now, r.cfg.Nomad.Applier.Apply)
	r.wakeAt(next, now, time.Since(began))
	return out, nil
}

// pass is one pass over a synced view st: snapshot, decide, apply (through
// apply: the Applier's, or a benchmark's), remember, and the record. It
// returns the record and the plan's NextWake.
func (r *Reconciler) pass(ctx context.Context, v *state.View, st *nomad.State, ledger LedgerReader, now time.Time,
	apply func(context.Context, []nomad.Op) []nomad.Outcome) (server.Outcome, time.Time) {
	tree, leaf := budgetTree(v)
	in := SnapshotInput{Policy: &r.cfg.Policy, Contract: r.cfg.Policy.Config, Leaf: leaf, Nearest: tree.NearestLeaf,
		Under: tree.LeavesUnder, Memory: r.memory(v, st, now)}
	snap := BuildSnapshot(st, in)
	r.patchLanded(snap)
	fs := r.fairShare(ledger, tree, now)
	plan := r.decider.Decide(snap, tree, fs, now, r.cfg.Policy)
	ops := OpsFromPlan(plan)
	var results []nomad.Outcome
	if len(ops) > 0 {
		results = apply(ctx, ops)
	}
	r.remember(plan, results, snap)
	out := buildOutcome(rowsInput{view: v, state: st, snap: snap, plan: plan, results: results,
		firstSeen: in.Memory.FirstSeen, leaf: leaf, nearest: tree.NearestLeaf, under: tree.LeavesUnder, cfg: &r.cfg, now: now})
	return out, plan.NextWake
}

// placeholderTree stands in before any budget tree is applied: no job can
// name a leaf of it (the contract's leaf check is nil), so all run unallocated.
var placeholderTree = func() *budgets.Tree {
	t, err := budgets.NewTree([]budgets.Spec{{Path: "_"}})
	if err != nil {
		panic(err) // a constant, valid tree
	}
	return t
}()

func budgetTree(v *state.View) (*budgets.Tree, contract.LeafCheck) {
	b := v.Budgets()
	if b == nil || b.Tree() == nil {
		return placeholderTree, nil
	}
	t := b.Tree()
	return t, func(path string) (bool, bool) {
		n, ok := t.Lookup(path)
		return ok, ok && n.IsLeaf()
	}
}

// fairShare orders the leaves by their usage over the lookback window.
func (r *Reconciler) fairShare(l LedgerReader, t *budgets.Tree, now time.Time) *budgets.FairShare {
	from := now.Add(-r.cfg.Policy.Lookback)
	l.WithLedger(func(led *budgets.Ledger) { r.usage = led.UsageByLeaf(t, from, now, r.usage) })
	return budgets.ComputeFairShare(t, r.usage)
}

// memory fills the policy's memory from the replicated state (node states,
// reservations, notices in flight, priorities written, first sight of each
// job) and from this term's own memory (policy.Carry) where the state keeps
// nothing.
func (r *Reconciler) memory(v *state.View, st *nomad.State, now time.Time) Memory {
	m := Memory{
		NodeStates: map[string]policy.NodeState{}, HealthySince: map[string]time.Time{},
		Written: map[string]int{}, FirstSeen: map[string]time.Time{},
	}
	for _, n := range v.Nodes() {
		m.NodeStates[n.ID] = n.Drain
	}
	for _, p := range v.Priorities() {
		m.Written[p.JobID] = p.Priority
	}
	m.ReturnRequested = returnRequests(v) // drain_rows.go
	for _, j := range v.Jobs() {
		m.FirstSeen[j.ID] = j.SubmittedAt
	}
	for _, j := range st.Jobs {
		id := PolicyJobID(j.Key)
		if _, ok := m.FirstSeen[id]; !ok {
			m.FirstSeen[id] = firstSight(&j, now)
		}
	}
	if !r.mem.started {
		r.mem = termMemory{started: true, landed: map[string]landedWrite{},
			carry: policy.Carry{Reservations: reservationsFromState(v), Notices: noticesFromState(v)}}
	}
	for id, n := range st.Nodes {
		if t := r.mem.carry.Health(id, healthy(&n), m.NodeStates[id], now); !t.IsZero() {
			m.HealthySince[id] = t
		}
	}
	m.Carry = &r.mem.carry
	return m
}

// healthy reports whether a node has GPUs and all of them are healthy.
func healthy(n *nomad.Node) bool {
	for _, m := range n.GPUs {
		if len(m.Unhealthy) > 0 {
			return false
		}
	}
	return len(n.GPUs) > 0
}

// firstSight is when allot first saw a job: its SubmitTime when Nomad gives
// one no later than now (allot's own writes move it later), else now.
func firstSight(j *nomad.Job, now time.Time) time.Time {
	if !j.SubmitTime.IsZero() && !j.SubmitTime.After(now) {
		return j.SubmitTime
	}
	return now
}

// reservationsFromState rebuilds reservations from the nodes the state
// holds reserved, for a leader that has no memory of its own.
func reservationsFromState(v *state.View) []policy.Reservation {
	var out []policy.Reservation
	idx := map[string]int{}
	for _, n := range v.Nodes() {
		if n.Drain != policy.NodeReserved || n.ReservedFor == "" {
			continue
		}
		i, ok := idx[n.ReservedFor]
		if !ok {
			i = len(out)
			idx[n.ReservedFor] = i
			out = append(out, policy.Reservation{Job: n.ReservedFor, Since: n.Since})
		}
		out[i].Nodes = append(out[i].Nodes, n.ID)
		if n.Since.Before(out[i].Since) {
			out[i].Since = n.Since
		}
	}
	return out
}

// patchLanded shows the policy the priorities Nomad accepted but the view
// does not reflect yet, so it neither rewrites them with a stale
// ModifyIndex nor takes them for a user's change.
func (r *Reconciler) patchLanded(snap *policy.Snapshot) {
	for i := range snap.Jobs {
		j := &snap.Jobs[i]
		w, ok := r.mem.landed[j.ID]
		if !ok {
			continue
		}
		if j.ModifyIndex >= w.modifyIndex {
			delete(r.mem.landed, j.ID) // the view caught up (or the user wrote since)
			continue
		}
		j.Priority, j.ModifyIndex = w.priority, w.modifyIndex
	}
}

// remember keeps what the next pass of this term needs: the policy's memory
// less what Nomad did not accept, and the priority writes that landed.
func (r *Reconciler) remember(plan *policy.Plan, results []nomad.Outcome, snap *policy.Snapshot) {
	r.mem.carry.Remember(plan, failedOf(plan, results))
	for _, o := range results {
		if o.Op.Kind == nomad.OpSetPriority && o.Err == nil {
			r.mem.landed[PolicyJobID(o.Op.Job)] = landedWrite{priority: o.Op.Priority, modifyIndex: o.ModifyIndex}
		}
	}
	if len(r.mem.landed) == 0 {
		return
	}
	live := make(map[string]bool, len(snap.Jobs))
	for i := range snap.Jobs {
		live[snap.Jobs[i].ID] = true
	}
	for id := range r.mem.landed {
		if !live[id] {
			delete(r.mem.landed, id) // the job left: nothing to show the policy
		}
	}
}

// failedOf names the plan's stops and evaluations whose ops Nomad did not
// accept (or the applier skipped or never tried). results are the outcomes
// of OpsFromPlan(plan), in order; fewer results than ops mean the rest were
// not tried.
func failedOf(plan *policy.Plan, results []nomad.Outcome) policy.Failed {
	// OpsFromPlan keeps each kind's ops in the plan's order, so the k-th
	// stop op is plan.Stops[k] and the k-th evaluation plan.Evaluations[k],
	// wherever the other kinds stand.
	stopOK := make([]bool, len(plan.Stops))
	evalOK := make([]bool, len(plan.Evaluations))
	var stops, evals int
	for _, o := range results {
		switch o.Op.Kind {
		case nomad.OpStop:
			if stops < len(stopOK) {
				stopOK[stops] = o.Err == nil
			}
			stops++
		case nomad.OpEvaluate:
			if evals < len(evalOK) {
				evalOK[evals] = o.Err == nil
			}
			evals++
		}
	}
	var f policy.Failed
	for i, ok := range stopOK {
		if !ok {
			f.Stops = append(f.Stops, i)
		}
	}
	for i, ok := range evalOK {
		if !ok {
			f.Evaluations = append(f.Evaluations, i)
		}
	}
	return f
}
