package policy

import "time"

// evaluateRecovered asks Nomad to evaluate the highest pending jobs that
// now fit when a node recovered or returned to service since the last
// decision (rule 6): Nomad does not wake a job it found "class ineligible"
// when devices come back (docs/nomad-facts.md i).
func (d *Decider) evaluateRecovered() {
	if d.recovered < 0 {
		return
	}
	node := d.snap.Nodes[d.recovered].ID
	for _, k := range d.order {
		if d.evals >= d.cfg.MaxEvaluations {
			return
		}
		info := &d.jobs[k.job]
		if !info.fits || info.evaluated {
			continue
		}
		d.evaluate(k.job, Reason{Code: ReasonNodeRecovered, Node: node})
	}
}

// explain writes one Explanation per managed job (rule 12).
func (d *Decider) explain() {
	for _, ref := range d.reserveFor {
		j := ref.job
		if info := &d.jobs[j]; info.reserved < 0 && info.freeAt.IsZero() {
			d.asks = d.jobAsks(j, d.asks)
			info.freeAt = d.honestFreeAt(d.freeAt(j, d.usableNodes()), false)
		}
	}
	n := 0
	for j := range d.jobs {
		if d.jobs[j].state != jsUnmanaged {
			n++
		}
	}
	ex := d.explBuf[:0]
	if cap(ex) < n {
		ex = make([]Explanation, 0, n)
	}
	for j := range d.jobs {
		info, job := &d.jobs[j], d.jp[j]
		if info.state == jsUnmanaged {
			continue
		}
		e := Explanation{Job: job.ID, Namespace: job.Namespace, Priority: info.final, Target: info.target,
			Position: int(info.position), Wait: info.wait, FreeAt: info.shownFreeAt(), Reason: info.reason,
			Warnings: job.Contract.Warnings}
		switch info.state {
		case jsProtected, jsStarting:
			e.Band, e.ProtectedUntil, e.Wait = BandProtected, info.windowEnd, WaitNone
		case jsRunning, jsPartial:
			e.Band = BandRunning
			if info.givenBack || info.keptBack {
				e.Band = BandPending // its allocations stop in this plan, or were stopped and are held (rule 5c)
			}
			if info.state == jsRunning {
				e.Wait = WaitNone
			}
		case jsPending:
			e.Band = BandPending
		case jsUnallocated:
			e.Band = BandUnallocated
		}
		if b := info.victimOf(); b >= 0 {
			e.Band, e.ProtectedUntil, e.VictimOf = BandPending, time.Time{}, d.jp[b].ID
			if info.heldFor >= 0 {
				e.Wait = WaitHeld
			}
		}
		if info.leaf >= 0 {
			e.Budget = job.Contract.Budget
			e.Rank = d.fs.Rank(int(info.leaf))
		}
		if info.reserved >= 0 {
			e.ReservedNodes = d.plan.Reservations[info.reserved].Nodes
		}
		if info.waitFor >= 0 && e.Wait != WaitNone {
			e.WaitsFor = d.jp[info.waitFor].ID
		}
		ex = append(ex, e)
	}
	d.explBuf = ex
	d.plan.Explanations = ex
}

// usableNodes lists every node in the placement model.
func (d *Decider) usableNodes() []int32 {
	d.usable = d.usable[:0]
	for n := range d.nodes {
		if d.cap.usable[n] {
			d.usable = append(d.usable, int32(n))
		}
	}
	return d.usable
}

// shownFreeAt is the time a job's wait ends as it is told (explanations,
// rule 5c's release reason): freeAt, except that the window end a cheaper
// stop waits for is a guess, which protected work starting on that node
// meanwhile moves (on heavy-1024 of the suite it moved at almost every
// decision for 15 hours), so it is told as unknown (zero). The policy
// still wakes then (wakeAt).
func (info *jobInfo) shownFreeAt() time.Time {
	if info.wait == WaitWork && info.freeGuess {
		return time.Time{}
	}
	return info.freeAt
}
