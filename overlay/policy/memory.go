package policy

import (
	"slices"
	"time"
)

// The policy's memory of its own actions, carried by the caller from one
// Plan to the next Snapshot (in a Carry, carry.go): victims held below the
// job they made room for (Snapshot.Victims) and actions issued but perhaps
// not yet visible (Snapshot.Issued).

// settle reads Snapshot.Issued. A stop issued less than Settle ago whose
// allocations the snapshot still shows running is taken as under way: the
// decision reads those allocations as stopping (DesiredStatus stop, as the
// view will show them), so it neither stops them again nor counts them as
// live. Those allocations are read from copies (ap points at them in
// allocBuf): the snapshot is never modified. Stop records still
// unobserved, and evaluation records, are carried into Plan.Issued while
// they settle.
func (d *Decider) settle() {
	snap := d.snap
	d.taken = d.taken[:0]
	if d.cfg.Settle <= 0 || len(snap.Issued) == 0 {
		return
	}
	if d.stopping == nil {
		d.stopping = make(map[string]int32)
	}
	clear(d.stopping)
	d.unobserved = resize(d.unobserved, len(snap.Issued))
	clear(d.unobserved)
	for r := range snap.Issued {
		is := &snap.Issued[r]
		if !d.settling(is) || is.Kind != IssuedStop {
			continue
		}
		for _, id := range is.Allocs {
			d.stopping[id] = int32(r)
		}
	}
	if len(d.stopping) > 0 {
		taken := d.taken[:0]
		for i, a := range d.ap {
			if r, ok := d.stopping[a.ID]; ok && a.live() {
				d.unobserved[r] = true
				taken = append(taken, int32(i))
			}
		}
		d.taken = taken
		// Sized once, so that the pointers into it stay valid.
		d.allocBuf = resize(d.allocBuf, len(taken))
		for k, i := range taken {
			d.allocBuf[k] = *d.ap[i]
			d.allocBuf[k].DesiredStatus = DesiredStop
			d.ap[i] = &d.allocBuf[k]
		}
	}
	for r := range snap.Issued {
		is := &snap.Issued[r]
		switch {
		case !d.settling(is):
		case is.Kind == IssuedEvaluate:
			d.plan.Issued = append(d.plan.Issued, *is)
		case d.unobserved[r]:
			d.plan.Issued = append(d.plan.Issued, *is)
			d.wakeAt(is.At.Add(d.cfg.Settle)) // a stop never seen is then issued again
		}
	}
}

// settling reports whether an issued action is less than Settle old.
func (d *Decider) settling(is *Issued) bool {
	return !is.At.After(d.now) && d.now.Before(is.At.Add(d.cfg.Settle))
}

// evaluate plans an evaluation of job j for r (rule 6), unless one of the
// job for the same reason (code, job, node) was issued less than Settle ago:
// it is still under way, and the plan would only repeat it. Either way the
// job counts as evaluated in this decision.
func (d *Decider) evaluate(j int32, r Reason) {
	job := d.jp[j]
	d.jobs[j].evaluated = true
	if d.cfg.Settle > 0 {
		for i := range d.snap.Issued {
			is := &d.snap.Issued[i]
			if is.Kind == IssuedEvaluate && is.Job == job.ID && d.settling(is) && sameCause(is.Reason, r) {
				d.wakeAt(is.At.Add(d.cfg.Settle))
				return
			}
		}
	}
	d.plan.Evaluations = append(d.plan.Evaluations, Evaluate{Job: job.ID, Namespace: job.Namespace, Reason: r})
	d.evals++
}

func sameCause(a, b Reason) bool { return a.Code == b.Code && a.Job == b.Job && a.Node == b.Node }

// recordIssued adds this plan's stops and evaluations to Plan.Issued.
func (d *Decider) recordIssued() {
	if d.cfg.Settle <= 0 {
		return
	}
	for _, s := range d.plan.Stops {
		d.plan.Issued = append(d.plan.Issued, Issued{Kind: IssuedStop, Job: s.Job, Allocs: s.Allocs, At: d.now})
	}
	for _, e := range d.plan.Evaluations {
		d.plan.Issued = append(d.plan.Issued, Issued{Kind: IssuedEvaluate, Job: e.Job, Reason: e.Reason, At: d.now})
	}
}

// keepVictims reads Snapshot.Victims after the jobs are indexed. A victim
// stays held below the job it was stopped for while that job still waits
// (pending, or placed in part) and the hold is younger than VictimHold; it
// is released when the job places or leaves, released with
// ReasonVictimReleased when the hold runs out, and kept (ReasonVictimKept:
// keptVictim) when its replacement outlasts that job's evaluation.
func (d *Decider) keepVictims() {
	if d.cfg.VictimHold <= 0 {
		return
	}
	for _, v := range d.snap.Victims {
		vj, ok1 := d.jobIndex(v.Job)
		bj, ok2 := d.jobIndex(v.For)
		if ok1 && ok2 && vj == bj {
			d.keepRelease(vj, v)
			continue
		}
		if !ok1 || !ok2 {
			continue
		}
		vi, bi := &d.jobs[vj], &d.jobs[bj]
		if vi.state == jsUnmanaged || vi.state == jsUnallocated || vi.heldFor >= 0 || vi.released >= 0 {
			continue // gone, free work now, or already seen
		}
		if bi.state != jsPending && bi.state != jsPartial {
			continue // it placed (or left): the victim is an ordinary job again
		}
		until := v.Since.Add(d.cfg.VictimHold)
		if !d.now.Before(until) {
			vi.released, vi.releasedBy, vi.heldSince = bj, ReasonVictimReleased, v.Since
			continue
		}
		if d.keptVictim(vj, bj, &v) {
			d.plan.Victims = append(d.plan.Victims, v)
			continue
		}
		vi.heldFor, vi.heldSince = bj, v.Since
		bi.holding++
		d.wakeAt(until)
		d.plan.Victims = append(d.plan.Victims, v)
		for _, ai := range d.jobAllocs.row(vj) { // its stopping GPUs are bj's (creditHeld), not free for all
			if a := d.ap[ai]; a.holds() && !a.live() && d.allocNode[ai] >= 0 {
				d.nodes[d.allocNode[ai]].held += int32(a.GPUs)
			}
		}
	}
	d.holdLanders() // reserve.go: jobs that took nodes released for a waiting job
}

// keptVictim reports whether held victim vj (record v) is no longer held
// below bj although bj still waits: a decision at least Settle after bj's
// evaluation with vj's allocation live (v.Replaced: evaluateHeld), which an
// evaluation issued is taken to need (memory.go's settle), still finds it
// live. Nomad
// preempts a held victim's replacement for bj when bj is evaluated, if bj
// needs its GPUs; one that outlasts the evaluation runs where bj does not
// need it (Nomad often places it on other GPUs than those its stop freed),
// and held on at a pending level it would be within reach of every pending
// job a preemption gap above it, a started job killed without notice. So it
// is kept: an ordinary job again, protected in its new window. The record
// stays (Kept), so that it is not held again as a job that landed. A victim
// whose live allocations are gone again waits for its next replacement's
// evaluation (v.Replaced cleared).
func (d *Decider) keptVictim(vj, bj int32, v *Victim) bool {
	vi := &d.jobs[vj]
	switch {
	case v.Kept:
		vi.released, vi.releasedBy, vi.heldSince = bj, ReasonNone, v.Since
		return true
	case v.Replaced.IsZero():
		return false
	case d.liveCount(vj) == 0:
		v.Replaced = time.Time{}
		return false
	case d.now.Before(v.Replaced.Add(d.cfg.Settle)):
		d.wakeAt(v.Replaced.Add(d.cfg.Settle))
		return false
	}
	v.Kept = true
	vi.released, vi.releasedBy, vi.heldSince = bj, ReasonVictimKept, v.Since
	return true
}

// keepRelease keeps the hold of a release (rule 5c; a Victim naming the
// job for itself): while job j waits (pending, or placed in part again)
// and the hold is younger than VictimHold, it is not released again but,
// when placed in part, kept at releasedLevel (tier.go), where the jobs
// before it can preempt its replacements. A release repeated at every
// decision frees nothing on Nomad: each replacement takes the GPUs its
// stop freed back at once, and one preempted by a job before it is placed
// in part again as soon as GPUs free.
func (d *Decider) keepRelease(j int32, v Victim) {
	info := &d.jobs[j]
	until := v.Since.Add(d.cfg.VictimHold)
	if info.backHeld || (info.state != jsPartial && info.state != jsPending) || !d.now.Before(until) {
		return
	}
	info.backHeld = true
	d.wakeAt(until)
	d.plan.Victims = append(d.plan.Victims, v)
}

// creditHeld gives waiting job j, before it is placed in the model, the
// GPUs its held victims still hold: the victims sit a preemption gap below
// it, so Nomad preempts them (or their replacements) when it is evaluated.
// Other jobs are not credited: Nomad would not evaluate them. The held
// victims are those keepVictims and holdLanders put in plan.Victims so far.
func (d *Decider) creditHeld(j int32) {
	for _, v := range d.plan.Victims {
		vj, ok := d.jobIndex(v.Job)
		if !ok || d.jobs[vj].heldFor != j {
			continue
		}
		for _, ai := range d.jobAllocs.row(vj) {
			if a := d.ap[ai]; a.holds() && d.allocNode[ai] >= 0 {
				d.cap.change(d.allocNode[ai], int32(a.GPUs))
			}
		}
	}
}

// evaluateHeld evaluates the job a held victim made room for when the
// victim has a live allocation again: its replacement took GPUs (Nomad
// places it at once), and only an evaluation of the waiting job makes
// Nomad preempt it (blocked jobs are not retried when nothing frees up).
// The first decision that evaluates it so (or finds it evaluated already)
// records when in the victim's record (Victim.Replaced): a decision Settle
// later that still finds the victim live keeps it (keptVictim), so the
// replacement stays within Nomad's reach for one evaluation, not for the
// rest of the hold. The wake at Settle brings that decision.
func (d *Decider) evaluateHeld() {
	for j := range d.jobs {
		info := &d.jobs[j]
		if info.heldFor < 0 || d.liveCount(int32(j)) == 0 {
			continue
		}
		if !d.jobs[info.heldFor].evaluated {
			if d.evals >= d.cfg.MaxEvaluations {
				continue
			}
			code := ReasonVictimReplaced
			if info.landed {
				code = ReasonLanded
			}
			d.evaluate(info.heldFor, Reason{Code: code, Job: d.jp[j].ID})
		}
		d.markReplaced(d.jp[j].ID)
	}
}

// markReplaced records in held victim id's record that the job it is held
// below is evaluated now with it live, unless an earlier decision did.
func (d *Decider) markReplaced(id string) {
	for k := range d.plan.Victims {
		if v := &d.plan.Victims[k]; v.Job == id && v.Replaced.IsZero() {
			v.Replaced = d.now
			d.wakeAt(d.now.Add(d.cfg.Settle))
			return
		}
	}
}

func (d *Decider) liveCount(j int32) int {
	n := 0
	for _, ai := range d.jobAllocs.row(j) {
		if d.ap[ai].live() {
			n++
		}
	}
	return n
}

// victimLevel is where victim j (of beneficiary b) is written:
//
//	min(pendingLevel(its position + shift, its leaf), final(b) - PreemptionGap, ceiling)   (gapVictim)
//
// at least PreemptionGap below b, so that b's evaluation preempts the
// victim's replacement if Nomad placed it first, and below every job
// holding a reservation that sorts before it, whose released nodes the
// replacement might take (reserve.go). While b's final level is under
// Pending.Low + PreemptionGap this is below the pending band, down to
// Pending.Low - PreemptionGap (which Validate keeps at or above
// Unallocated.High): the hold is short and the gap is what lets b place.
func (d *Decider) victimLevel(j, b int32) int {
	shift, ceil := d.gapVictim(j)
	return min(d.pendingLevel(d.victimPosition(j)+shift, d.jobs[j].leaf), d.jobs[b].final-d.cfg.PreemptionGap, ceil)
}

// victimCeiling is the highest priority victim j of b may keep: a
// preemption gap below b and below every job holding a reservation before it.
func (d *Decider) victimCeiling(j, b int32) int {
	_, ceil := d.gapVictim(j)
	return min(ceil, d.jobs[b].final-d.cfg.PreemptionGap)
}

// recordVictims adds this plan's fresh victims to Plan.Victims.
func (d *Decider) recordVictims() {
	if d.cfg.VictimHold <= 0 {
		return
	}
	for j := range d.jobs {
		if b := d.jobs[j].victimFor; b >= 0 {
			d.wakeAt(d.now.Add(d.cfg.VictimHold))
			if d.jobs[j].released >= 0 { // kept from an earlier hold, a victim again: its fresh record replaces that one
				id := d.jp[j].ID
				d.plan.Victims = slices.DeleteFunc(d.plan.Victims, func(v Victim) bool { return v.Job == id })
			}
			d.plan.Victims = append(d.plan.Victims, Victim{Job: d.jp[j].ID, For: d.jp[b].ID, Since: d.now})
		}
		if d.jobs[j].givenBack { // a release, held (keepRelease)
			d.wakeAt(d.now.Add(d.cfg.VictimHold))
			d.plan.Victims = append(d.plan.Victims, Victim{Job: d.jp[j].ID, For: d.jp[j].ID, Since: d.now})
		}
	}
}
