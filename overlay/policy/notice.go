package policy

import (
	"slices"
	"time"

	"github.com/allot-sched/allot/overlay/contract"
)

// Notice before a stop (docs/design.md, "Notice before a stop"). A job whose
// contract declares checkpoint_signal and checkpoint_notice is not stopped
// at once when the policy decides to stop it (time slicing, a reservation,
// a drain): the plan signals the stopped allocations' tasks (Plan.Signals)
// and remembers a Notice (Plan.Notices, passed back in Snapshot.Notices).
// The decision that finds the notice's deadline passed issues the stop as
// the decision without a notice would have. Meanwhile:
//
//   - the victim keeps its running priority (a pending job cannot preempt it
//     through Nomad) and is no victim for any other job;
//   - a time-slicing notice is not re-decided: the job it was sent for takes
//     the noticed victims' GPUs in the placement model and waits for them
//     (WaitNotice, until the deadline); it is released only when that job
//     fits without them or no longer waits;
//   - the notice ends early when the signalled allocations have all exited
//     (the job says it is done): the GPUs are free, the waiting job is
//     evaluated, and nothing is stopped.
//
// A stop that is no longer decided while its notice runs (a reservation
// released, a node healthy again, a job that no longer waits) drops the
// notice: the job keeps running, having saved a checkpoint for nothing.

// Notice is a checkpoint notice under way: Job was signalled at SentAt and
// is stopped at Deadline (SentAt + its checkpoint_notice) for Reason.
type Notice struct {
	Job string
	// For is the job the stop makes room for ("" for a drain).
	For string
	// Allocs are the allocations signalled.
	Allocs []string
	// Reason is the stop's reason, issued with the stop at Deadline.
	Reason           Reason
	SentAt, Deadline time.Time
}

// SignalJob sends Signal to every task of the allocations (Nomad's
// allocation signal API): the notice before a stop.
type SignalJob struct {
	Job, Namespace string
	Allocs         []string
	Signal         string
	// Reason is ReasonNoticeSent: At the deadline, Job the job it makes
	// room for, N the notice in seconds.
	Reason Reason
}

// sliceStop reports whether a stop reason is time slicing's (rule 5).
func sliceStop(c ReasonCode) bool {
	return c == ReasonVictim || c == ReasonVictimOwn || c == ReasonVictimPartial
}

// keepNotices reads Snapshot.Notices once the jobs are indexed: each notice
// whose allocations still run is in force (noticeOf); one whose allocations
// all exited ended early, and the job it was sent for is evaluated.
func (d *Decider) keepNotices() {
	d.noticeOf = resize(d.noticeOf, len(d.jobs))
	for j := range d.noticeOf {
		d.noticeOf[j] = -1
	}
	d.inNotice = resize(d.inNotice, len(d.jobs))
	for j := range d.inNotice {
		d.inNotice[j] = -1
	}
	d.awaiting = d.awaiting[:0]
	d.stopAt = resize(d.stopAt, len(d.jobs))
	clear(d.stopAt)
	for k := range d.snap.Notices {
		n := &d.snap.Notices[k]
		v, ok := d.jobIndex(n.Job)
		if !ok || d.jobs[v].state == jsUnmanaged {
			continue
		}
		if len(d.liveIdx(v, n.Allocs)) == 0 {
			// Done early (or stopped by someone else): the GPUs are free.
			if b, ok := d.jobIndex(n.For); ok && (d.jobs[b].state == jsPending || d.jobs[b].state == jsPartial) &&
				d.evals < d.cfg.MaxEvaluations && !d.jobs[b].evaluated {
				d.evaluate(b, Reason{Code: ReasonNoticeDone, Job: n.Job})
			}
			continue
		}
		d.noticeOf[v] = int32(k)
		if sliceStop(n.Reason.Code) {
			if b, ok := d.jobIndex(n.For); ok {
				d.awaiting = append(d.awaiting, b)
			}
		}
	}
}

// liveIdx lists the indexes of job v's live allocations among ids.
func (d *Decider) liveIdx(v int32, ids []string) []int32 {
	var out []int32
	for _, ai := range d.jobAllocs.row(v) {
		if a := d.ap[ai]; a.live() && slices.Contains(ids, a.ID) {
			out = append(out, ai)
		}
	}
	return out
}

// noticeAllows reports whether job v may be chosen as a victim for job j:
// a job under notice is a victim only for the job it was signalled for.
func (d *Decider) noticeAllows(v, j int32) bool {
	if len(d.noticeOf) == 0 || d.noticeOf[v] < 0 {
		return true
	}
	return d.snap.Notices[d.noticeOf[v]].For == d.jp[j].ID
}

// noticeAhead is moveOff's step for job j, to be stopped at a known time
// at (its window's end, a Nomad drain's deadline less DrainLead) after now:
// a job with a notice is signalled its notice before at, so that its stop
// comes at at, not a notice later (under a Nomad drain that would be past
// the deadline, when Nomad kills it without a replacement). It reports
// whether the stop is to be planned now (notify keeps it back until at);
// otherwise it asks to wake when the notice must be sent.
func (d *Decider) noticeAhead(j int32, at time.Time) bool {
	notice := min(d.jp[j].Contract.Notice, d.cfg.MaxNotice)
	send := at.Add(-notice)
	if notice <= 0 || send.After(d.now) {
		d.wakeAt(send)
		return false
	}
	d.stopAt[j] = at
	return true
}

// keepNoticed is place's step for waiting job j that time-slicing notices
// were sent for: unless j fits without them, it takes their victims' GPUs
// in the placement model and their stops are planned again (notify keeps
// them back until the deadline). It reports whether j is settled.
func (d *Decider) keepNoticed(j int32, asks []ask) bool {
	if !slices.Contains(d.awaiting, j) {
		return false
	}
	job, info := d.jp[j], &d.jobs[j]
	mark := d.cap.mark()
	if d.fitAll(job, asks) {
		info.fits, info.wait = true, WaitPlacement // the notices lapse: not planned again
		return true
	}
	d.cap.rollback(mark)
	var victims []int32
	for v, k := range d.noticeOf {
		if k < 0 {
			continue
		}
		n := &d.snap.Notices[k]
		if n.For != job.ID || !sliceStop(n.Reason.Code) || d.jobs[v].victimFor >= 0 {
			continue
		}
		victims = append(victims, int32(v))
		for _, ai := range d.liveIdx(int32(v), n.Allocs) {
			if d.allocNode[ai] >= 0 {
				d.cap.change(d.allocNode[ai], int32(d.ap[ai].GPUs))
			}
		}
	}
	if d.tl != nil {
		d.checkTailRoom()
	}
	if len(victims) == 0 || !d.fitAll(job, asks) {
		d.cap.rollback(mark)
		return false
	}
	var node string
	for _, v := range victims {
		n := &d.snap.Notices[d.noticeOf[v]]
		vi := &d.jobs[v]
		vi.victimFor, vi.victimGPUs = j, int32(n.Reason.N)
		if nd, ok := d.nodeIndex(n.Reason.Node); ok {
			vi.victimNode = nd
		}
		node = n.Reason.Node
		d.plan.Stops = append(d.plan.Stops, StopJob{Job: d.jp[v].ID, Namespace: d.jp[v].Namespace,
			Allocs: d.liveAllocs(v, -1), Reason: n.Reason})
	}
	info.wait = WaitVictims
	d.evaluate(j, Reason{Code: ReasonVictimsStopped, Node: node})
	return true
}

// notify turns this plan's stops of jobs with a notice into signals: a
// stop of a job under no notice becomes a SignalJob and a new Notice; one
// whose notice runs is kept back until its deadline; one whose deadline
// passed is issued. A job kept back keeps its running priority and is no
// victim in this plan; the job it makes room for waits for it (WaitNotice)
// and is not evaluated for it.
func (d *Decider) notify() {
	if len(d.plan.Stops) == 0 {
		return
	}
	stops := d.plan.Stops[:0]
	var back []int32 // beneficiaries a stop was kept back for
	var stopped []int32
	for _, s := range d.plan.Stops {
		v, ok := d.jobIndex(s.Job)
		if !ok {
			stops = append(stops, s)
			continue
		}
		if d.jp[v].Contract.Notice <= 0 || s.Reason.Code == ReasonPartialRelease {
			// No notice declared, or a job placed in part giving its
			// GPUs back (rule 5c): it never ran, so it has nothing to
			// checkpoint and a notice would only keep the GPUs stalled.
			stops = append(stops, s)
			stopped = append(stopped, d.jobs[v].victimFor)
			continue
		}
		c := &d.jp[v].Contract
		if k := d.noticeOf[v]; k >= 0 {
			if n := &d.snap.Notices[k]; !d.now.Before(n.Deadline) {
				stops = append(stops, s) // the notice is over: stop as planned
				stopped = append(stopped, d.jobs[v].victimFor)
				continue
			}
		}
		if b := d.jobs[v].victimFor; b >= 0 {
			back = append(back, b)
		}
		d.keepBack(v, s, c.Signal, min(c.Notice, d.cfg.MaxNotice))
	}
	d.plan.Stops = stops
	if len(stops) == 0 && d.tl == nil {
		d.plan.Stops = nil
	}
	if len(back) == 0 {
		return
	}
	evals := d.plan.Evaluations[:0]
	for _, e := range d.plan.Evaluations {
		b, ok := d.jobIndex(e.Job)
		if ok && e.Reason.Code == ReasonVictimsStopped && slices.Contains(back, b) && !slices.Contains(stopped, b) {
			d.evals--
			continue // nothing was stopped for it yet
		}
		evals = append(evals, e)
	}
	d.plan.Evaluations = evals
	if len(evals) == 0 && d.tl == nil {
		d.plan.Evaluations = nil // as a plan that planned none has it
	}
}

// keepBack keeps stop s of job v back while its notice runs: a new notice
// is sent (a SignalJob) unless one runs, and the notice is carried into
// Plan.Notices.
func (d *Decider) keepBack(v int32, s StopJob, signal string, notice time.Duration) {
	vi := &d.jobs[v]
	if i := d.inNotice[v]; i >= 0 { // a second stop of the job in this plan (a drain on two nodes)
		n := &d.plan.Notices[i]
		if d.noticeOf[v] < 0 {
			n.Allocs = append(n.Allocs, s.Allocs...)
			sg := &d.plan.Signals[len(d.plan.Signals)-1]
			for k := range d.plan.Signals {
				if d.plan.Signals[k].Job == s.Job {
					sg = &d.plan.Signals[k]
				}
			}
			sg.Allocs = append(sg.Allocs, s.Allocs...)
		}
		vi.victimFor = -1
		return
	}
	var n Notice
	if k := d.noticeOf[v]; k >= 0 {
		n = d.snap.Notices[k]
		n.Allocs = slices.Clone(n.Allocs)
	} else {
		n = Notice{Job: s.Job, For: s.Reason.Job, Allocs: slices.Clone(s.Allocs), Reason: s.Reason,
			SentAt: d.now, Deadline: d.now.Add(notice)}
		if int(v) < len(d.stopAt) && d.stopAt[v].After(d.now) && d.stopAt[v].Before(n.Deadline) {
			n.Deadline = d.stopAt[v] // a drain's stop at a known time: the notice ends there (noticeAhead)
		}
		if s.Reason.Code == ReasonDrainStop || s.Reason.Code == ReasonDrainUnallocated || s.Reason.Code == ReasonNomadDrain {
			n.For = ""
		}
		d.plan.Signals = append(d.plan.Signals, SignalJob{Job: s.Job, Namespace: s.Namespace,
			Allocs: slices.Clone(s.Allocs), Signal: signal, Reason: n.reason()})
	}
	d.inNotice[v] = int32(len(d.plan.Notices))
	d.plan.Notices = append(d.plan.Notices, n)
	d.wakeAt(n.Deadline)
	if b := vi.victimFor; b >= 0 {
		bi := &d.jobs[b]
		bi.wait, bi.waitFor = WaitNotice, v
		if n.Deadline.After(bi.freeAt) {
			bi.freeAt = n.Deadline
		}
	}
	vi.victimFor = -1
}

// reason is the notice as a reason: At the deadline, N the notice in
// seconds, Job the job it makes room for, Node the node of a drain.
func (n *Notice) reason() Reason {
	r := Reason{Code: ReasonNoticeSent, Job: n.For, At: n.Deadline, N: int(n.Deadline.Sub(n.SentAt) / time.Second)}
	if n.For == "" {
		r.Node = n.Reason.Node
	}
	return r
}

// noticeReason sets *r to the reason of job j while its notice runs in
// this plan, and leaves it alone otherwise (the common case: no Reason
// is copied).
func (d *Decider) noticeReason(j int32, r *Reason) {
	if len(d.inNotice) != 0 && d.inNotice[j] >= 0 {
		*r = d.plan.Notices[d.inNotice[j]].reason()
	}
}

// queueRank orders the waiting jobs of one leaf, lowest first: a
// restorable session stopped and requeued (contract.Session, QueuedSince
// after its submission) comes first, ahead of its budget's other pending
// work, so that it finds its saved state again soon; then meta priority,
// higher first.
func queueRank(j *Job) uint32 {
	if j.Contract.Session && j.QueuedSince.After(j.SubmitTime) {
		return 0
	}
	return uint32(contract.MaxPriority-j.Contract.Priority) + 1
}
