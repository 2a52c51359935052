package policy

import (
	"slices"
	"time"
)

// Reservations (rule 7). Nomad keeps no room for a large blocked job: small
// asks take GPUs as they free up (nomad-facts i). So for the top pending job
// that cannot be placed even with victims, allot holds the nodes that free up
// soonest (at most ReservationNodes, for at most ReservationMaxAge), stops
// what rule 5 allows on them, and releases them with an evaluation of the
// job once its GPUs are free.

// keepReservations carries the previous decision's reservations forward:
// released when the job no longer waits or the reservation expired, released
// with an evaluation when the job's GPUs are free on its nodes, held
// otherwise. It runs before the placement model is built.
func (d *Decider) keepReservations() {
	d.ready = d.ready[:0]
	for _, r := range d.snap.Reservations {
		j, ok := d.jobIndex(r.Job)
		waiting := ok && (d.jobs[j].state == jsPending || d.jobs[j].state == jsPartial)
		if r.Expired {
			if waiting {
				d.jobs[j].expired = true
				d.plan.Reservations = append(d.plan.Reservations, r)
			}
			continue
		}
		nodes := d.reservedNodes(r.Nodes)
		switch {
		case !waiting || len(nodes) == 0:
			d.release(nodes, Reason{Code: ReasonReservationDone, Job: r.Job})
		case d.finish(j, nodes):
		case !d.now.Before(r.Since.Add(d.cfg.ReservationMaxAge)):
			d.release(nodes, Reason{Code: ReasonReservationExpired, Job: r.Job, At: r.Since})
			d.jobs[j].expired = true
			d.jobs[j].wait = WaitQueue
			d.plan.Reservations = append(d.plan.Reservations, Reservation{Job: r.Job, Nodes: r.Nodes, Since: r.Since, Expired: true})
		default:
			d.hold(j, r, nodes)
		}
	}
	// A node still marked reserved that no reservation holds (the caller
	// lost the record) is released rather than kept out of service.
	for i := range d.snap.Nodes {
		ni := &d.nodes[i]
		if d.snap.Nodes[i].State == NodeReserved && ni.reservedBy < 0 && !ni.released && !ni.draining {
			d.release([]int32{int32(i)}, Reason{Code: ReasonReservationDone, Job: "(unknown)"})
		}
	}
}

// reservedNodes maps a reservation's node IDs to indexes, leaving out nodes
// that are gone or draining (the drain owns those now).
func (d *Decider) reservedNodes(ids []string) []int32 {
	var nodes []int32
	for _, id := range ids {
		if n, ok := d.nodeIndex(id); ok && !d.nodes[n].draining {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

func (d *Decider) release(nodes []int32, r Reason) {
	for _, n := range nodes {
		d.nodeAction(d.snap.Nodes[n].ID, NodeRelease, r)
		d.nodes[n].eligible, d.nodes[n].released = true, true
	}
}

// finish releases the nodes reserved for job j, to be placed there, when
// every ask of the job fits on them.
func (d *Decider) finish(j int32, nodes []int32) bool {
	d.asks = d.jobAsks(j, d.asks)
	if !d.assign(j, nodes, false) {
		return false
	}
	d.release(nodes, Reason{Code: ReasonReservationReady, Job: d.snap.Jobs[j].ID})
	d.ready = append(d.ready, j)
	return true
}

// hold keeps reservation r for job j (d.asks are its asks). When stopping what rule 5 allows on the nodes would free them,
// it plans those stops now; otherwise it waits for windows to end.
func (d *Decider) hold(j int32, r Reservation, nodes []int32) {
	info := &d.jobs[j]
	job := &d.snap.Jobs[j]
	kept := Reservation{Job: r.Job, Since: r.Since}
	for _, n := range nodes {
		kept.Nodes = append(kept.Nodes, d.snap.Nodes[n].ID)
		d.nodes[n].reservedBy = j
	}
	info.reserved = int32(len(d.plan.Reservations))
	info.wait = WaitReserved
	d.plan.Reservations = append(d.plan.Reservations, kept)
	d.wakeAt(r.Since.Add(d.cfg.ReservationMaxAge))
	if d.assign(j, nodes, true) {
		for _, v := range d.scratch.added {
			vi, vj := &d.jobs[v], &d.snap.Jobs[v]
			d.plan.Stops = append(d.plan.Stops, StopJob{Job: vj.ID, Namespace: vj.Namespace,
				Allocs: d.liveAllocs(v, -1),
				Reason: Reason{Code: ReasonReservationStop, Job: job.ID, Node: d.snap.Nodes[vi.victimNode].ID}})
		}
	}
	info.freeAt = d.freeAt(j, nodes)
}

// assign fits d.asks of job j on the reserved nodes, largest ask first on
// the node with the most room. With stops, a node's room includes what
// rule 5 allows to stop there, and the victims chosen are marked (listed in
// scratch.added); a failed assignment marks none.
func (d *Decider) assign(j int32, nodes []int32, stops bool) bool {
	sc := &d.scratch
	sc.added = sc.added[:0]
	room := d.room[:0]
	for _, n := range nodes {
		room = append(room, d.nodeAvail(n))
	}
	d.room = room
	job := &d.snap.Jobs[j]
	for i := range d.asks {
		a := &d.asks[i]
		best := -1
		for k, n := range nodes {
			if d.classFits(d.nodes[n].class, job, a) && room[k] >= a.gpus && (best < 0 || room[k] > room[best]) {
				best = k
			}
		}
		if best >= 0 {
			room[best] -= a.gpus
			continue
		}
		if !stops {
			return false
		}
		for k, n := range nodes {
			if !d.classFits(d.nodes[n].class, job, a) {
				continue
			}
			d.nodeCandidates(n, j)
			if d.pickOnNode(a.gpus - room[k]) {
				for _, c := range sc.chosen {
					vi := &d.jobs[c.job]
					vi.victimFor, vi.victimNode, vi.victimGPUs = j, n, a.gpus
					sc.added = append(sc.added, c.job)
					room[k] += c.gpus
				}
				room[k] -= a.gpus
				best = k
				break
			}
		}
		if best < 0 {
			for _, v := range sc.added {
				d.jobs[v].victimFor = -1
			}
			sc.added = sc.added[:0]
			return false
		}
	}
	return true
}

// placeReady puts each job whose reservation was just released on the
// placement model first: the plan evaluates it and it holds the top level.
func (d *Decider) placeReady() {
	for _, j := range d.ready {
		job := &d.snap.Jobs[j]
		d.asks = d.jobAsks(j, d.asks)
		mark := d.cap.mark()
		if !d.fitAll(job, d.asks) {
			d.cap.rollback(mark)
			continue
		}
		d.jobs[j].fits, d.jobs[j].wait = true, WaitPlacement
		d.evaluate(j, Reason{Code: ReasonReservationReady, Job: job.ID})
	}
}

// newReservation reserves nodes for job j, the highest examined job that
// neither fits nor found victims, with a smaller job behind it in the order
// (Nomad would give that one the GPUs as they free up): when fewer than
// MaxReservations are held, the job has not had one expire, it needs at most
// ReservationNodes allocations (d.asks), and the nodes free up within
// ReservationMaxAge. Reserved nodes leave the placement model at once, so
// lower jobs neither fit nor find victims there.
func (d *Decider) newReservation(j int32) {
	info := &d.jobs[j]
	if d.active >= d.cfg.MaxReservations || info.expired || info.reserved >= 0 ||
		len(d.asks) > d.cfg.ReservationNodes {
		return
	}
	job := &d.snap.Jobs[j]
	nodes, at := d.soonest(j)
	until := d.now.Add(d.cfg.ReservationMaxAge)
	if nodes == nil || at.After(until) {
		return
	}
	r := Reservation{Job: job.ID, Since: d.now}
	for _, n := range nodes {
		id := d.snap.Nodes[n].ID
		r.Nodes = append(r.Nodes, id)
		d.nodeAction(id, NodeReserve, Reason{Code: ReasonReserved, Job: job.ID, At: until})
		d.nodes[n].reservedBy = j
		d.cap.remove(n)
	}
	info.reserved = int32(len(d.plan.Reservations))
	info.wait, info.freeAt = WaitReserved, at
	d.plan.Reservations = append(d.plan.Reservations, r)
	d.active++
	d.wakeAt(until)
	d.wakeAt(at)
}

// soonest picks, for each ask of d.asks (largest first), the usable node not
// yet picked whose GPUs free up soonest, and returns the nodes and the time
// the last of them is free; nil when some ask has no node that ever frees.
func (d *Decider) soonest(j int32) ([]int32, time.Time) {
	job := &d.snap.Jobs[j]
	var picked []int32
	var last time.Time
	for i := range d.asks {
		a := &d.asks[i]
		best, bestAt := int32(-1), time.Time{}
		for c := range d.classes {
			if !d.classFits(int32(c), job, a) {
				continue
			}
			for _, n := range d.classNode.row(int32(c)) {
				if !d.cap.usable[n] || slices.Contains(picked, n) {
					continue
				}
				if t, ok := d.earliest(n, a.gpus, j); ok && (best < 0 || t.Before(bestAt)) {
					best, bestAt = n, t
				}
			}
		}
		if best < 0 {
			return nil, time.Time{}
		}
		picked = append(picked, best)
		if bestAt.After(last) {
			last = bestAt
		}
	}
	return picked, last
}

// freeAt is when job j's asks could all be free on nodes, or zero if never.
func (d *Decider) freeAt(j int32, nodes []int32) time.Time {
	var last time.Time
	job := &d.snap.Jobs[j]
	for i := range d.asks {
		a := &d.asks[i]
		var best time.Time
		for _, n := range nodes {
			if !d.classFits(d.nodes[n].class, job, a) {
				continue
			}
			if t, ok := d.earliest(n, a.gpus, j); ok && (best.IsZero() || t.Before(best)) {
				best = t
			}
		}
		if best.IsZero() {
			return time.Time{}
		}
		if best.After(last) {
			last = best
		}
	}
	return last
}

// earliest is the first time at which gpus GPUs can be free on node n for
// job j: now for what is free, held by unallocated work, or stopped by this
// plan; the window end for protected jobs that rule 5 will then allow; never
// for anything else (no end is known).
func (d *Decider) earliest(n, gpus, j int32) (time.Time, bool) {
	if int32(d.snap.Nodes[n].GPUs) < gpus {
		return time.Time{}, false
	}
	have := int32(d.snap.Nodes[n].GPUs) - d.nodes[n].held
	ev := d.events[:0]
	for _, ai := range d.nodeAlloc.row(n) {
		al := &d.snap.Allocs[ai]
		v := d.allocJob[ai]
		if !al.holds() || v < 0 {
			continue
		}
		vi := &d.jobs[v]
		switch {
		case !al.live() || vi.state == jsUnallocated || vi.victimFor >= 0 || vi.moving:
			have += int32(al.GPUs)
		case vi.state == jsRunning || vi.state == jsProtected:
			if vi.leaf != d.jobs[j].leaf && d.served[vi.leaf] >= d.served[d.jobs[j].leaf]+d.cfg.FairnessMargin {
				ev = append(ev, event{maxTime(vi.windowEnd, d.now), int32(al.GPUs)})
			}
		}
	}
	d.events = ev
	if have >= gpus {
		return d.now, true
	}
	slices.SortFunc(ev, func(x, y event) int { return x.at.Compare(y.at) })
	for _, e := range ev {
		have += e.gpus
		if have >= gpus {
			return e.at, true
		}
	}
	return time.Time{}, false
}

// orderRef is a job and its index in the pending order.
type orderRef struct {
	job int32
	at  int
}

type event struct {
	at   time.Time
	gpus int32
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
