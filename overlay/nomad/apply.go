package nomad

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
)

// ErrConflict says a job changed after the decision that wanted to write it
// (a user's `nomad job run`, usually): the write was not made, and the next
// decision starts from the job as it is now. A user's change always wins.
var ErrConflict = errors.New("job changed since it was read (check-and-set on JobModifyIndex failed)")

// ErrWouldReplace says a priority write was not made because Nomad's planner
// would have replaced an allocation of the job rather than update it in
// place: Nomad checks that an updated allocation still fits its node, and
// counts the GPUs of allocations stopped there whose tasks have not exited
// yet, so a job placed on GPUs a stop just freed does not fit; the update is
// then destructive, restarting the job from zero, and the replacement is
// placed at the new priority, preempting what it may (at the protected
// level, work running past its window; docs/nomad-facts.md a). The next
// decision writes it again: once the stopped tasks exit, the update is in
// place. The same error refuses a write meant to lift placed work out of
// reach (Op.Placed) that would place an allocation: the decision's view was
// stale (checkInPlace).
var ErrWouldReplace = errors.New("the write would replace a running or placed allocation (Nomad could not update it in place), or place one the decision saw placed")

// OpKind is one lever the adapter pulls.
type OpKind uint8

const (
	OpSetPriority OpKind = iota // re-register with only Priority changed
	OpStop                      // stop allocations as migrations (requeued)
	OpEvaluate                  // POST /v1/job/<id>/evaluate
	OpEligibility               // node scheduling eligibility
	OpSignal                    // signal every task of allocations: a checkpoint notice
)

var opNames = [...]string{"set-priority", "stop", "evaluate", "eligibility", "signal"}

func (k OpKind) String() string {
	if int(k) < len(opNames) {
		return opNames[k]
	}
	return "unknown"
}

// Op is one write to Nomad.
type Op struct {
	Kind OpKind
	Job  JobKey
	// Priority and ModifyIndex: OpSetPriority writes Priority when the job's
	// JobModifyIndex still equals ModifyIndex.
	Priority    int
	ModifyIndex uint64
	Allocs      []string // OpStop, OpSignal
	Signal      string   // OpSignal: the signal name, e.g. "SIGUSR1"
	Node        string   // OpEligibility
	Eligible    bool     // OpEligibility
	Reason      string   // for logs; the decision log keeps the full reason
	// Step orders ops of one kind: Apply finishes those of one step before
	// it starts the next (a plan's priority writes: policy.WriteStep).
	Step uint8
	// Placed (OpSetPriority): the decision saw every allocation of the job
	// placed (policy.StepShield, StepLower); a write that would place one is
	// not made (ErrWouldReplace). A write without it makes Nomad place the
	// job: Apply waits for its evaluation before it returns.
	Placed bool
}

// Outcome is what happened to one Op.
type Outcome struct {
	Op Op
	// Err is nil on success; errors.Is(Err, ErrConflict) for a lost
	// check-and-set; ErrSkipped when an earlier op of the same job failed.
	Err error
	// ModifyIndex is the job's JobModifyIndex after a priority write.
	ModifyIndex uint64
	At          time.Time
}

// ErrSkipped marks an op not attempted because an earlier write for the same
// job failed: a victim whose priority could not be lowered is not stopped,
// or its requeued allocations would take the GPUs straight back.
var ErrSkipped = errors.New("skipped: an earlier write for this job failed")

// ApplyConfig tunes the Applier. Zero values take the defaults.
type ApplyConfig struct {
	// WriteRate is the steady number of writes per second to Nomad; WriteBurst
	// how many may go at once after a quiet spell (a token bucket).
	WriteRate  float64
	WriteBurst int
	// RetryMin and RetryMax bound the pause after a failed write (not a
	// conflict), doubling while writes keep failing.
	RetryMin, RetryMax time.Duration
	// Parallel is how many writes of one kind (to different jobs or nodes)
	// are in flight at once. A priority write is three requests (read the
	// job, read its submission, register); on a loaded 2-core host with
	// Nomad beside allot each took 80-580 ms, and one write after another
	// made a burst of 120 registrations wait up to 12 s for theirs.
	Parallel int
}

func (c ApplyConfig) withDefaults() ApplyConfig {
	if c.WriteRate <= 0 {
		c.WriteRate = 50
	}
	if c.WriteBurst <= 0 {
		c.WriteBurst = 100
	}
	if c.RetryMin <= 0 {
		c.RetryMin = 200 * time.Millisecond
	}
	if c.RetryMax <= 0 {
		c.RetryMax = 10 * time.Second
	}
	if c.Parallel <= 0 {
		c.Parallel = 8
	}
	return c
}

// Applier writes to Nomad: Apply runs a batch of ops in order, rate-limited,
// and reports what happened to each.
type Applier struct {
	client  *api.Client
	cfg     ApplyConfig
	log     hclog.Logger
	bucket  *tokenBucket
	mu      sync.Mutex // guards backoff
	backoff time.Duration
}

// batch is what the ops of one Apply share.
type batch struct {
	mu sync.Mutex
	// failed holds the jobs a write failed for: their later ops are skipped.
	failed map[JobKey]bool
	// registered maps each job re-registered in the batch to its
	// evaluation, which a stop of the same job waits for.
	registered map[JobKey]string
	// placing are the jobs whose write made Nomad place them (not
	// Op.Placed): Apply waits for their evaluations before it returns.
	placing []JobKey
	// stopping are the jobs the batch stops allocations of: their
	// priority writes are not checked (checkInPlace), since the stop that
	// follows ends the allocation a destructive update would replace (a
	// victim lowered, a job drained off a node whose GPUs failed: there
	// its allocation no longer fits, and every update is destructive).
	stopping map[JobKey]bool
}

func (b *batch) hasFailed(k JobKey) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failed[k]
}

func (b *batch) fail(k JobKey) {
	b.mu.Lock()
	b.failed[k] = true
	b.mu.Unlock()
}

func (b *batch) registration(k JobKey) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	eval, ok := b.registered[k]
	return eval, ok
}

func (b *batch) register(k JobKey, eval string) {
	b.mu.Lock()
	b.registered[k] = eval
	b.mu.Unlock()
}

// NewApplier returns an applier writing through client.
func NewApplier(client *api.Client, cfg ApplyConfig, log hclog.Logger) *Applier {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	cfg = cfg.withDefaults()
	return &Applier{
		client: client, cfg: cfg, log: log.Named("apply"),
		bucket: newTokenBucket(cfg.WriteRate, cfg.WriteBurst, time.Now),
	}
}

// Apply runs ops in order, rate-limited, and reports each outcome. Ops
// of one kind and Step in a row (a plan's priorities step by step, then
// stops, node actions, evaluations) form a step: up to Parallel of its ops
// to different jobs or nodes go at once, a job's or node's own ops one
// after another, and the next step starts when the step is done, so a stop
// still comes after the same job's priority write, evaluations after every
// priority, and a write that makes Nomad place (and maybe preempt) after
// every write that lifts a placed job out of its reach. After a failed
// write its worker pauses (exponential backoff) before the next one.
func (a *Applier) Apply(ctx context.Context, ops []Op) []Outcome {
	out := make([]Outcome, len(ops))
	b := &batch{failed: map[JobKey]bool{}, registered: map[JobKey]string{}, stopping: map[JobKey]bool{}}
	for _, op := range ops {
		if op.Kind == OpStop {
			b.stopping[op.Job] = true
		}
	}
	for start := 0; start < len(ops); {
		end := start + 1
		for end < len(ops) && ops[end].Kind == ops[start].Kind && ops[end].Step == ops[start].Step {
			end++
		}
		a.step(ctx, b, ops[start:end], out[start:end])
		start = end
	}
	// The evaluations of writes that make Nomad place (and maybe preempt)
	// settle before the next decision reads Nomad: its writes' in-place
	// check (checkInPlace) would otherwise plan against allocations such an
	// evaluation, still in flight, is about to preempt, and a job it saw
	// placed would be written protected and placed again there (fidelity
	// run 31, protected then 100: five jobs running past their windows
	// preempted so).
	for _, k := range b.placing {
		if eval, ok := b.registration(k); ok {
			a.settleRegistration(ctx, k, eval)
		}
	}
	return out
}

// step applies ops of one kind into out, Parallel targets at a time.
func (a *Applier) step(ctx context.Context, b *batch, ops []Op, out []Outcome) {
	var order []string
	byTarget := map[string][]int{}
	for i, op := range ops {
		t := "job " + op.Job.String()
		if op.Kind == OpEligibility {
			t = "node " + op.Node
		}
		if _, ok := byTarget[t]; !ok {
			order = append(order, t)
		}
		byTarget[t] = append(byTarget[t], i)
	}
	slots := make(chan struct{}, a.cfg.Parallel)
	var wg sync.WaitGroup
	for _, t := range order {
		idx := byTarget[t]
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			for _, i := range idx {
				out[i] = a.applyOne(ctx, b, ops[i])
			}
		}()
	}
	wg.Wait()
}

func (a *Applier) applyOne(ctx context.Context, b *batch, op Op) Outcome {
	if ctx.Err() != nil {
		return Outcome{Op: op, Err: ctx.Err(), At: time.Now()}
	}
	if op.Kind != OpEligibility && op.Kind != OpSignal && b.hasFailed(op.Job) {
		return Outcome{Op: op, Err: ErrSkipped, At: time.Now()}
	}
	if err := a.bucket.wait(ctx); err != nil {
		return Outcome{Op: op, Err: err, At: time.Now()}
	}
	o := a.apply(ctx, b, op)
	switch {
	case o.Err == nil:
		a.mu.Lock()
		a.backoff = 0
		a.mu.Unlock()
	case errors.Is(o.Err, ErrConflict):
		b.fail(op.Job)
		a.log.Info("job changed since the decision; not overwritten", "job", op.Job.String(), "op", op.Kind.String())
	case errors.Is(o.Err, ErrWouldReplace):
		b.fail(op.Job)
		a.log.Info("priority not written yet: Nomad would replace the job's allocation, not update it in place", "job", op.Job.String(),
			"priority", op.Priority, "detail", o.Err.Error())
	default:
		b.fail(op.Job)
		a.mu.Lock()
		a.backoff = min(max(2*a.backoff, a.cfg.RetryMin), a.cfg.RetryMax)
		d := a.backoff
		a.mu.Unlock()
		a.log.Warn("write to nomad failed", "op", op.Kind.String(), "job", op.Job.String(),
			"node", op.Node, "error", o.Err, "pause", d)
		pause(ctx, d)
	}
	return o
}

func (a *Applier) apply(ctx context.Context, b *batch, op Op) Outcome {
	o := Outcome{Op: op}
	switch op.Kind {
	case OpSetPriority:
		var eval string
		o.ModifyIndex, eval, o.Err = a.setPriority(ctx, op.Job, op.Priority, op.ModifyIndex, op.Placed, !b.stopping[op.Job])
		if o.Err == nil && eval != "" {
			b.register(op.Job, eval)
			if !op.Placed {
				b.mu.Lock()
				b.placing = append(b.placing, op.Job)
				b.mu.Unlock()
			}
		}
	case OpStop:
		if eval, ok := b.registration(op.Job); ok {
			a.settleRegistration(ctx, op.Job, eval)
		}
		o.Err = a.StopAllocs(ctx, op.Job, op.Allocs)
	case OpEvaluate:
		o.Err = a.Evaluate(ctx, op.Job)
	case OpEligibility:
		o.Err = a.SetEligibility(ctx, op.Node, op.Eligible)
	case OpSignal:
		o.Err = a.SignalAllocs(ctx, op.Job, op.Allocs, op.Signal)
	default:
		o.Err = fmt.Errorf("unknown op kind %d (valid: set-priority, stop, evaluate, eligibility, signal)", op.Kind)
	}
	o.At = time.Now()
	return o
}

// SetPriority re-registers a job with only its Priority changed, checked
// against the JobModifyIndex the decision read: Nomad updates running
// allocations in place (docs/nomad-facts.md a). The job's HCL submission, when Nomad
// kept one, goes with it so users still see their definition. It returns the
// job's new JobModifyIndex, ErrConflict when the job changed since, or
// ErrWouldReplace when Nomad would make the write by replacing an allocation
// of the job (checkInPlace).
func (a *Applier) SetPriority(ctx context.Context, key JobKey, priority int, readIndex uint64) (uint64, error) {
	idx, _, err := a.setPriority(ctx, key, priority, readIndex, false, true)
	return idx, err
}

// setPriority is SetPriority that also returns the evaluation the
// re-registration created ("" when nothing was written).
func (a *Applier) setPriority(ctx context.Context, key JobKey, priority int, readIndex uint64, placed, check bool) (uint64, string, error) {
	q := (&api.QueryOptions{Namespace: key.Namespace}).WithContext(ctx)
	job, _, err := a.client.Jobs().Info(key.ID, q)
	if err != nil {
		return 0, "", fmt.Errorf("read job %s: %w", key, err)
	}
	if cur := derefU64(job.JobModifyIndex); cur != readIndex {
		return cur, "", fmt.Errorf("%w: job %s is at JobModifyIndex %d, the decision read %d", ErrConflict, key, cur, readIndex)
	}
	if derefInt(job.Priority) == priority {
		return readIndex, "", nil
	}
	opts := &api.RegisterOptions{EnforceIndex: true, ModifyIndex: readIndex}
	if job.Version != nil {
		sub, _, err := a.client.Jobs().Submission(key.ID, int(*job.Version), q)
		switch {
		case err == nil && sub != nil && sub.Source != "":
			opts.Submission = sub
		case err != nil && !isNotFound(err):
			return 0, "", fmt.Errorf("read submission of job %s version %d: %w", key, *job.Version, err)
		}
	}
	job.Priority = &priority
	w := (&api.WriteOptions{Namespace: key.Namespace}).WithContext(ctx)
	if check {
		if err := a.checkInPlace(ctx, key, job, w, placed); err != nil {
			return 0, "", err
		}
	}
	resp, _, err := a.client.Jobs().RegisterOpts(job, opts, w)
	if err != nil {
		if strings.Contains(err.Error(), "conflicting job modify index") {
			return 0, "", fmt.Errorf("%w: job %s: %v", ErrConflict, key, err)
		}
		return 0, "", fmt.Errorf("register job %s with priority %d: %w", key, priority, err)
	}
	return resp.JobModifyIndex, resp.EvalID, nil
}

// checkInPlace returns ErrWouldReplace when registering job (at its new
// priority) would make Nomad replace an allocation of it rather than update
// it in place, or, with placed (the decision saw every allocation of the job
// placed: policy.StepShield or StepLower), place one: that allocation was stopped or
// preempted since the decision read it, and a write meant to lift placed
// work out of reach would have Nomad place it again at the new priority,
// preempting what it may (at the protected level, work running past its
// window). A job with no allocation placed is not checked unless placed (its
// write makes Nomad place it, as meant); the others are planned first (PUT
// /v1/job/<id>/plan, Nomad's own scheduler, nothing written).
func (a *Applier) checkInPlace(ctx context.Context, key JobKey, job *api.Job, w *api.WriteOptions, placed bool) error {
	if !placed {
		q := (&api.QueryOptions{Namespace: key.Namespace}).WithContext(ctx)
		allocs, _, err := a.client.Jobs().Allocations(key.ID, false, q)
		if err != nil {
			if isNotFound(err) {
				return nil
			}
			return fmt.Errorf("read allocations of job %s: %w", key, err)
		}
		live := false
		for _, al := range allocs {
			if al.DesiredStatus == api.AllocDesiredStatusRun && (al.ClientStatus == api.AllocClientStatusPending || al.ClientStatus == api.AllocClientStatusRunning) {
				live = true
				break
			}
		}
		if !live {
			return nil
		}
	}
	plan, _, err := a.client.Jobs().Plan(job, false, w)
	if err != nil {
		return fmt.Errorf("plan job %s at priority %d: %w", key, derefInt(job.Priority), err)
	}
	if plan.Annotations == nil {
		return nil
	}
	groups := make([]string, 0, len(plan.Annotations.DesiredTGUpdates))
	for g := range plan.Annotations.DesiredTGUpdates {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	for _, g := range groups {
		u := plan.Annotations.DesiredTGUpdates[g]
		switch {
		case u == nil:
		case u.DestructiveUpdate > 0:
			return fmt.Errorf("%w: job %s at priority %d: group %q: %d allocation(s) would be replaced, %d allocation(s) of other jobs preempted",
				ErrWouldReplace, key, derefInt(job.Priority), g, u.DestructiveUpdate, u.Preemptions)
		case placed && u.Place > 0:
			return fmt.Errorf("%w: job %s at priority %d: group %q: %d allocation(s) would be placed (the decision saw the job placed: stopped or preempted since), %d allocation(s) of other jobs preempted",
				ErrWouldReplace, key, derefInt(job.Priority), g, u.Place, u.Preemptions)
		}
	}
	return nil
}

// registrationSettle bounds how long a stop waits for the evaluation of the
// same job's re-registration; Nomad finishes an in-place update in
// milliseconds.
const registrationSettle = 5 * time.Second

// settleRegistration waits until the evaluation of a job's re-registration
// (a priority write) is no longer pending. Nomad loses a migrate-stop that
// lands while that evaluation is in flight: its in-place update plan
// rewrites the allocation without the stop's migrate transition, and the
// stop's own evaluation then finds nothing to stop (observed with Nomad
// 2.0.6: the victim ran on for 30 s, until allot stopped it again). A
// victim is lowered and then stopped in the same batch, so its stop waits
// here. Errors and the time bound only end the wait: the stop goes anyway.
func (a *Applier) settleRegistration(ctx context.Context, key JobKey, evalID string) {
	ctx, cancel := context.WithTimeout(ctx, registrationSettle)
	defer cancel()
	var index uint64
	for ctx.Err() == nil {
		q := (&api.QueryOptions{Namespace: key.Namespace, WaitIndex: index, WaitTime: time.Second}).WithContext(ctx)
		ev, qm, err := a.client.Evaluations().Info(evalID, q)
		if err != nil {
			a.log.Debug("re-registration evaluation not read; stopping anyway", "job", key.String(), "eval", evalID, "error", err)
			return
		}
		if ev.Status != api.EvalStatusPending {
			return
		}
		index = qm.LastIndex
	}
	a.log.Warn("re-registration evaluation still pending; stopping anyway", "job", key.String(), "eval", evalID)
}

// StopAllocs stops allocations as migrations: no reschedule parameter, so
// Nomad places a replacement with the same name that spends no reschedule
// attempt (docs/nomad-facts.md c). An allocation already gone counts as stopped.
func (a *Applier) StopAllocs(ctx context.Context, key JobKey, allocs []string) error {
	q := (&api.QueryOptions{Namespace: key.Namespace}).WithContext(ctx)
	var errs []error
	for _, id := range allocs {
		if _, err := a.client.Allocations().Stop(&api.Allocation{ID: id}, q); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("stop allocation %s of job %s: %w", id, key, err))
		}
	}
	return errors.Join(errs...)
}

// SignalAllocs sends signal to every task of each allocation (Nomad's
// allocation signal API with no task named signals them all): a
// checkpoint notice before allot stops them. An allocation already gone is
// no error. A signal that fails is logged by Apply; the notice still runs,
// so the job is stopped at its deadline all the same (a failed signal must
// not keep a job from being stopped).
func (a *Applier) SignalAllocs(ctx context.Context, key JobKey, allocs []string, signal string) error {
	q := (&api.QueryOptions{Namespace: key.Namespace}).WithContext(ctx)
	var errs []error
	for _, id := range allocs {
		if err := a.client.Allocations().Signal(&api.Allocation{ID: id}, q, "", signal); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("signal %s to allocation %s of job %s: %w", signal, id, key, err))
		}
	}
	return errors.Join(errs...)
}

// Evaluate asks Nomad to try placing a job now. Nomad does not wake blocked
// jobs when priorities drop, nor some when devices recover (docs/nomad-facts.md b, i).
func (a *Applier) Evaluate(ctx context.Context, key JobKey) error {
	w := (&api.WriteOptions{Namespace: key.Namespace}).WithContext(ctx)
	if _, _, err := a.client.Jobs().EvaluateWithOpts(key.ID, api.EvalOptions{}, w); err != nil {
		return fmt.Errorf("evaluate job %s: %w", key, err)
	}
	return nil
}

// SetEligibility marks a node eligible or ineligible for new placements;
// running allocations are left alone (docs/nomad-facts.md e). A node that already
// has that eligibility is not written, like a priority Nomad already has: a
// plan records a return an operator made in Nomad as an eligible action.
func (a *Applier) SetEligibility(ctx context.Context, node string, eligible bool) error {
	n, _, err := a.client.Nodes().Info(node, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("read node %s: %w", node, err)
	}
	if (n.SchedulingEligibility == api.NodeSchedulingEligible) == eligible {
		return nil
	}
	w := (&api.WriteOptions{}).WithContext(ctx)
	if _, err := a.client.Nodes().ToggleEligibility(node, eligible, w); err != nil {
		return fmt.Errorf("mark node %s eligible=%t: %w", node, eligible, err)
	}
	return nil
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
