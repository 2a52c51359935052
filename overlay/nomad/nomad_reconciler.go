package nomad

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/contract"
	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/server"
	"github.com/allot-sched/allot/overlay/state"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
)

// Errors a reconcile pass returns instead of acting on an incomplete picture.
var (
	// ErrNotSynced: the view has not been built from Nomad's list endpoints
	// yet; acting now would take missing jobs for finished ones.
	ErrNotSynced = errors.New("nomad view not synced yet (waiting for the first rebuild from the list endpoints)")
	// ErrNoLedger: AttachLedger has not been called.
	ErrNoLedger = errors.New("no usage ledger attached to the nomad reconciler (call AttachLedger with the server's FSM)")
)

// LedgerReader gives read access to the replicated usage ledger;
// *state.FSM implements it.
type LedgerReader interface {
	WithLedger(fn func(*budgets.Ledger))
}

// ReconcilerConfig configures a Reconciler.
type ReconcilerConfig struct {
	Client *api.Client
	Nomad  Config
	// Policy is what Decide runs with; its contract.Config (runtime_cap)
	// is what every job's contract is parsed with: one cap for both.
	Policy policy.Config
	Logger hclog.Logger
}

// Reconciler is server.Reconciler over a live Nomad: a Watcher keeps a View
// in step with Nomad's event stream, and each pass builds the policy's
// Snapshot from it, decides, applies the plan through the Applier and
// returns what the server records (managed jobs, allocation lifecycles that
// the ledger is charged from, node states, priorities written, decisions and
// the queue).
//
// Run must be running (on every server, so that a new leader starts warm)
// for passes to succeed. Reconcile is called by the server's leader loop
// only, never concurrently with itself; Wake tells that loop to run a pass
// as soon as the view changes or the plan's NextWake comes.
type Reconciler struct {
	cfg     ReconcilerConfig
	log     hclog.Logger
	view    *View
	watcher *Watcher
	applier *Applier
	wake    chan struct{}

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
	started      bool
	lastDecision time.Time
	reservations []policy.Reservation // the last plan's, expired ones included
	healthy      map[string]bool      // node -> healthy at the last pass
	healthySince map[string]time.Time
	landed       map[string]landedWrite
	victims      []policy.Victim // the last plan's held victims (the policy holds them)
	issued       []policy.Issued // the last plan's settling stops and evaluations, less failed ones
	notices      []policy.Notice // the last plan's checkpoint notices (carried whatever the signal's outcome)
}

// NewReconciler returns a reconciler; start its watcher with Run.
func NewReconciler(cfg ReconcilerConfig) (*Reconciler, error) {
	if cfg.Client == nil {
		return nil, errors.New("nomad reconciler: a Nomad API client is required")
	}
	if err := cfg.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("nomad reconciler: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	r := &Reconciler{cfg: cfg, log: cfg.Logger.Named("reconcile"), view: NewView(), wake: make(chan struct{}, 1)}
	r.watcher = NewWatcher(cfg.Client, r.view, cfg.Nomad.Watch, cfg.Logger)
	r.applier = NewApplier(cfg.Client, cfg.Nomad.Apply, cfg.Logger)
	return r, nil
}

// AttachLedger gives the reconciler the ledger it reads window usage from
// (the server's FSM). Passes fail with ErrNoLedger until it is attached.
func (r *Reconciler) AttachLedger(l LedgerReader) {
	r.mu.Lock()
	r.ledger = l
	r.mu.Unlock()
}

// View is the reconciler's picture of Nomad.
func (r *Reconciler) View() *View { return r.view }

// Watcher is the watcher feeding the view (for its counters).
func (r *Reconciler) Watcher() *Watcher { return r.watcher }

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
	done := make(chan error, 1)
	go func() { done <- r.watcher.Run(ctx) }()
	for {
		select {
		case <-ctx.Done():
			r.mu.Lock()
			if r.timer != nil {
				r.timer.Stop()
			}
			r.mu.Unlock()
			<-done
			return ctx.Err()
		case <-r.view.Changed():
			r.poke()
		}
	}
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
	st := r.view.State()
	if !st.Synced {
		return server.Outcome{}, ErrNotSynced
	}
	tree, leaf := budgetTree(v)
	in := SnapshotInput{Config: &r.cfg.Nomad, Contract: r.cfg.Policy.Config, Leaf: leaf, Nearest: tree.NearestLeaf, Under: tree.LeavesUnder, Memory: r.memory(v, &st, now)}
	snap := BuildSnapshot(&st, in)
	r.patchLanded(snap)
	fs := r.fairShare(ledger, tree, now)
	plan := r.decider.Decide(snap, tree, fs, now, r.cfg.Policy)
	ops := OpsFromPlan(plan)
	var results []Outcome
	if len(ops) > 0 {
		results = r.applier.Apply(ctx, ops)
	}
	r.remember(plan, results, snap, now)
	r.wakeAt(plan.NextWake, now, time.Since(began))
	out := buildOutcome(rowsInput{view: v, state: &st, snap: snap, plan: plan, results: results,
		firstSeen: in.Memory.FirstSeen, leaf: leaf, nearest: tree.NearestLeaf, under: tree.LeavesUnder, cfg: &r.cfg, now: now})
	return out, nil
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
// reservations, priorities written, first sight of each job) and from this
// term's own memory where the state keeps nothing.
func (r *Reconciler) memory(v *state.View, st *State, now time.Time) Memory {
	m := Memory{
		NodeStates: map[string]policy.NodeState{}, HealthySince: map[string]time.Time{},
		Written: map[string]int{}, FirstSeen: map[string]time.Time{}, LastDecision: r.mem.lastDecision,
	}
	for _, n := range v.Nodes() {
		m.NodeStates[n.ID] = nodeStateOf(n.Drain)
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
		r.mem = termMemory{started: true, healthy: map[string]bool{}, healthySince: map[string]time.Time{},
			landed: map[string]landedWrite{}, reservations: reservationsFromState(v)}
	}
	r.trackHealth(st, m.NodeStates, now)
	for id, t := range r.mem.healthySince {
		m.HealthySince[id] = t
	}
	m.Reservations, m.Victims, m.Issued = r.mem.reservations, r.mem.victims, r.mem.issued
	m.Notices = r.mem.notices // notice glue (issue 16)
	return m
}

// firstSight is when allot first saw a job: its SubmitTime when Nomad gives
// one no later than now (allot's own writes move it later), else now.
func firstSight(j *Job, now time.Time) time.Time {
	if !j.SubmitTime.IsZero() && !j.SubmitTime.After(now) {
		return j.SubmitTime
	}
	return now
}

// trackHealth records when each GPU node turned healthy. At the first pass
// of a term a healthy node that allot holds draining or drained counts as
// healthy since now, so a returning node waits its full DrainReturnAfter.
func (r *Reconciler) trackHealth(st *State, states map[string]policy.NodeState, now time.Time) {
	for id, n := range st.Nodes {
		h := len(n.GPUs) > 0
		for _, m := range n.GPUs {
			if len(m.Unhealthy) > 0 {
				h = false
			}
		}
		was, seen := r.mem.healthy[id]
		switch {
		case !h:
			delete(r.mem.healthySince, id)
		case seen && !was:
			r.mem.healthySince[id] = now
		case !seen && (states[id] == policy.NodeDraining || states[id] == policy.NodeDrained):
			r.mem.healthySince[id] = now
		}
		r.mem.healthy[id] = h
	}
}

// reservationsFromState rebuilds reservations from the nodes the state
// holds reserved, for a leader that has no memory of its own.
func reservationsFromState(v *state.View) []policy.Reservation {
	var out []policy.Reservation
	idx := map[string]int{}
	for _, n := range v.Nodes() {
		if n.Drain != state.NodeReserved || n.ReservedFor == "" {
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

// remember keeps what the next pass of this term needs.
func (r *Reconciler) remember(plan *policy.Plan, results []Outcome, snap *policy.Snapshot, now time.Time) {
	r.mem.lastDecision = now
	r.mem.reservations = append([]policy.Reservation(nil), plan.Reservations...)
	for _, o := range results {
		if o.Op.Kind == OpSetPriority && o.Err == nil {
			r.mem.landed[PolicyJobID(o.Op.Job)] = landedWrite{priority: o.Op.Priority, modifyIndex: o.ModifyIndex}
		}
	}
	r.mem.victims, r.mem.issued = appliedMemory(plan, results)
	r.mem.notices = cloneNotices(plan.Notices) // notice glue (issue 16)
	for id := range r.mem.landed {
		if !hasJob(snap, id) {
			delete(r.mem.landed, id)
		}
	}
}

func hasJob(snap *policy.Snapshot, id string) bool {
	for i := range snap.Jobs {
		if snap.Jobs[i].ID == id {
			return true
		}
	}
	return false
}

func nodeStateOf(drain string) policy.NodeState {
	switch drain {
	case state.NodeReserved:
		return policy.NodeReserved
	case state.NodeDraining:
		return policy.NodeDraining
	case state.NodeDrained:
		return policy.NodeDrained
	}
	return policy.NodeNormal
}

func drainOf(s policy.NodeState) string {
	switch s {
	case policy.NodeReserved:
		return state.NodeReserved
	case policy.NodeDraining:
		return state.NodeDraining
	case policy.NodeDrained:
		return state.NodeDrained
	}
	return state.NodeActive
}

// NewClientFor returns a Nomad client for addr ("" keeps NOMAD_ADDR), the
// rest from Nomad's standard environment.
func NewClientFor(addr string) (*api.Client, error) {
	return NewClient(func(c *api.Config) {
		if addr != "" {
			c.Address = addr
		}
	})
}
