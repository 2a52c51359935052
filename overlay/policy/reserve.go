package policy

import (
	"slices"
	"time"
)

// Reservations (rule 7). Nomad keeps no room for a large blocked job: small
// asks take GPUs as they free up (docs/nomad-facts.md i). So for the top pending job
// that cannot be placed even with victims, allot holds the nodes that free up
// soonest (at most ReservationNodes, for at most ReservationMaxAge), stops
// what rule 5 allows on them, and releases them with an evaluation of the
// job once its GPUs are free.
//
// Releasing is a race that Nomad may lose for the job: the capacity freed
// on the reserved nodes wakes every blocked evaluation, the job's own retry
// may run while the nodes are still ineligible, and a smaller job retried
// after the eligibility write lands takes GPUs first. Nomad preempts it for
// the job only when it sits at least PreemptionGap below (docs/nomad-facts.md b,
// i). So while a reservation is held or released and its job still waits,
// every pending job sorting after it is kept that gap below (gapPosition,
// levels), and a job that lands on the released nodes first is held below
// it like a victim (holdLanders) instead of being protected as it starts.

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
		if !r.Released.IsZero() {
			d.keepReleased(j, waiting, r, nodes)
			continue
		}
		switch {
		case !waiting || len(nodes) == 0:
			d.release(nodes, Reason{Code: ReasonReservationDone, Job: r.Job})
		case d.finish(j, r, nodes):
		case !d.now.Before(r.Since.Add(d.cfg.ReservationAge(len(r.Nodes)))):
			d.expire(j, r, nodes)
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
// every ask of the job fits on them, and keeps the reservation's record as
// released.
func (d *Decider) finish(j int32, r Reservation, nodes []int32) bool {
	d.asks = d.jobAsks(j, d.asks)
	if !d.assign(j, nodes, false) {
		return false
	}
	d.release(nodes, Reason{Code: ReasonReservationReady, Job: r.Job})
	d.ready = append(d.ready, j)
	r.Released = d.now
	d.keepRecord(r, nodes)
	return true
}

// keepReleased carries forward the record of nodes released for job j: kept
// while j waits, its asks still fit on them (counting the GPUs of the jobs
// held below j: Nomad preempts them when j is evaluated) and the release is
// younger than VictimHold; j is then placed first and evaluated again
// (placeReady). Past VictimHold the job did not place although its GPUs were
// free: the record expires, and j gets no new reservation until placed.
// When the asks no longer fit (a job sorting before j, or placed in part,
// took the GPUs) the record ends and j competes as any pending job.
func (d *Decider) keepReleased(j int32, waiting bool, r Reservation, nodes []int32) {
	if !waiting || len(nodes) == 0 || d.cfg.VictimHold <= 0 {
		return // placed, gone, or holds are off
	}
	if !d.now.Before(r.Released.Add(d.cfg.VictimHold)) {
		d.jobs[j].expired = true
		d.plan.Reservations = append(d.plan.Reservations, Reservation{Job: r.Job, Nodes: r.Nodes, Since: r.Since, Expired: true})
		return
	}
	d.asks = d.jobAsks(j, d.asks)
	if !d.assign(j, nodes, false) {
		return
	}
	for _, n := range nodes {
		if d.snap.Nodes[n].State == NodeReserved { // the caller did not apply the release
			d.release([]int32{n}, Reason{Code: ReasonReservationReady, Job: r.Job})
		}
	}
	d.ready = append(d.ready, j)
	d.keepRecord(r, nodes)
}

// keepRecord adds released reservation r, on nodes, to the plan while
// holds last (VictimHold > 0).
func (d *Decider) keepRecord(r Reservation, nodes []int32) {
	if d.cfg.VictimHold <= 0 {
		return
	}
	kept := Reservation{Job: r.Job, Since: r.Since, Released: r.Released}
	for _, n := range nodes {
		kept.Nodes = append(kept.Nodes, d.snap.Nodes[n].ID)
	}
	d.plan.Reservations = append(d.plan.Reservations, kept)
	d.wakeAt(r.Released.Add(d.cfg.VictimHold))
}

// expire releases reservation r of job j, on nodes, past its age: j gets
// no new one until placed.
func (d *Decider) expire(j int32, r Reservation, nodes []int32) {
	d.release(nodes, Reason{Code: ReasonReservationExpired, Job: r.Job, At: r.Since})
	d.jobs[j].expired = true
	d.jobs[j].wait = WaitQueue
	d.plan.Reservations = append(d.plan.Reservations, Reservation{Job: r.Job, Nodes: r.Nodes, Since: r.Since, Expired: true})
}

// hold keeps reservation r for job j (d.asks are its asks). When stopping what rule 5 allows on the nodes would free them,
// it plans those stops now; otherwise it waits for windows to end.
//
// A gathering reservation (more than ReservationNodes nodes) is RuntimeCap
// old when every window on its nodes has ended (they took no new work):
// from then on the fairness margin, there to stop thrash between budgets
// served alike, no longer protects a job on them from the gang its budget
// serves less (the margin bounded in time, not by the victim's run), and
// if even then its asks cannot all be freed, what keeps them is work of a
// budget served less than the gang's, whose end is not known: the
// reservation expires at once rather than keep the gathered nodes idle.
func (d *Decider) hold(j int32, r Reservation, nodes []int32) {
	info := &d.jobs[j]
	job := d.jp[j]
	gather := len(nodes) > d.cfg.ReservationNodes
	late := gather && !d.now.Before(r.Since.Add(d.cfg.RuntimeCap))
	d.noMargin = gather
	stopped := d.assign(j, nodes, true)
	d.noMargin = false
	if late && !stopped {
		d.expire(j, r, nodes)
		return
	}
	kept := Reservation{Job: r.Job, Since: r.Since}
	for _, n := range nodes {
		kept.Nodes = append(kept.Nodes, d.snap.Nodes[n].ID)
		d.nodes[n].reservedBy = j
	}
	info.reserved = int32(len(d.plan.Reservations))
	info.wait = WaitReserved
	d.plan.Reservations = append(d.plan.Reservations, kept)
	d.wakeAt(r.Since.Add(d.cfg.ReservationAge(len(r.Nodes))))
	if gather {
		d.wakeAt(r.Since.Add(d.cfg.RuntimeCap))
	}
	if stopped {
		for _, v := range d.scratch.added {
			vi, vj := &d.jobs[v], d.jp[v]
			d.plan.Stops = append(d.plan.Stops, StopJob{Job: vj.ID, Namespace: vj.Namespace,
				Allocs: d.liveAllocs(v, -1),
				Reason: Reason{Code: ReasonReservationStop, Job: job.ID, Node: d.snap.Nodes[vi.victimNode].ID}})
		}
	}
	d.noMargin = gather // its ETA counts what its stops may take: strict standing, as assign
	info.freeAt = d.honestFreeAt(d.freeAt(j, nodes), stopped)
	d.noMargin = false
}

// honestFreeAt is the FreeAt a waiting job is told: at, the time freeAt
// computed from the protected windows that rule 5 lets end, unless at is
// not in the future and nothing was stopped for the job: then what freeAt
// counted as free now (running jobs past their windows) was not stopped
// (the loss bound, a notice, a job already leaving), and no time is known
// (zero: "unknown"). Told "now" pass after pass, the time would only keep
// moving.
func (d *Decider) honestFreeAt(at time.Time, stopped bool) time.Time {
	if !stopped && !at.After(d.now) {
		return time.Time{}
	}
	return at
}

// assign fits d.asks of job j on the reserved nodes, largest ask first on
// the node with the most room. A node's room counts the GPUs of jobs held
// below j (victims of its reservation stops, jobs that landed there after
// the release): Nomad preempts them when j is evaluated. With stops, it
// also includes what rule 5 allows to stop there, and the victims chosen
// are marked (listed in scratch.added); a failed assignment marks none.
func (d *Decider) assign(j int32, nodes []int32, stops bool) bool {
	sc := &d.scratch
	sc.added = sc.added[:0]
	room := d.room[:0]
	for _, n := range nodes {
		room = append(room, d.nodeAvail(n)+d.heldOn(n, j))
	}
	d.room = room
	job := d.jp[j]
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
		sc.limit = d.sliceLossLimit(j) // nodeCandidates lists against it
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
					if len(nodes) > d.cfg.ReservationNodes {
						d.freeRoom(c.job, nodes, room) // gathering: its victims span its nodes
					} else {
						room[k] += c.gpus
					}
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

// freeRoom adds to room (by index in nodes) the GPUs that stopping victim
// v frees on each of nodes: a job of several allocations, stopped for one
// ask, frees its GPUs on every reserved node it holds, and is not a
// candidate again (victimOK) for the next. A gathering reservation counts
// them so (a gang as wide as the cluster is freed only by stopping jobs
// that span several of its nodes); an ordinary one (at most
// ReservationNodes nodes) counts a victim only on the ask's node, as
// before: counting them all there lowered the suite's worst leaves
// (main a4eb181: heavy-1024 95/64/81% to 92/50/80%, two-pools-heavy 90%
// to 82%, bursty 69% to 65%, heavy-256 occupancy 98.1% to 97.4%).
func (d *Decider) freeRoom(v int32, nodes []int32, room []int32) {
	for _, ai := range d.jobAllocs.row(v) {
		if al := d.ap[ai]; al.live() {
			if k := slices.Index(nodes, d.allocNode[ai]); k >= 0 {
				room[k] += int32(al.GPUs)
			}
		}
	}
}

// heldOn is the GPUs held on node n by jobs held below job j.
func (d *Decider) heldOn(n, j int32) int32 {
	if d.jobs[j].holding == 0 {
		return 0
	}
	var g int32
	for _, ai := range d.nodeAlloc.row(n) {
		if v := d.allocJob[ai]; v >= 0 && d.jobs[v].heldFor == j && d.ap[ai].holds() {
			g += int32(d.ap[ai].GPUs)
		}
	}
	return g
}

// placeReady puts each job whose reservation is released for it (in this
// plan or still waiting from an earlier one) on the placement model first,
// with the GPUs of the jobs held below it, and evaluates it: an evaluation
// already issued within Settle is not repeated.
func (d *Decider) placeReady() {
	for _, j := range d.ready {
		job := d.jp[j]
		d.asks = d.jobAsks(j, d.asks)
		mark := d.cap.mark()
		if d.jobs[j].holding > 0 {
			d.creditHeld(j)
		}
		if !d.fitAll(job, d.asks) {
			d.cap.rollback(mark)
			continue
		}
		d.jobs[j].fits, d.jobs[j].wait = true, WaitPlacement
		r := Reason{Code: ReasonReservationReady, Job: job.ID}
		if v := d.liveLander(j); v >= 0 {
			r = Reason{Code: ReasonLanded, Job: d.jp[v].ID} // a new cause: evaluated at once
		}
		d.evaluate(j, r)
	}
}

// liveLander is a job held below j for landing on its released nodes that
// still has a live allocation, -1.
func (d *Decider) liveLander(j int32) int32 {
	for _, v := range d.plan.Victims {
		if vj, ok := d.jobIndex(v.Job); ok && d.jobs[vj].heldFor == j && d.jobs[vj].landed && d.liveCount(vj) > 0 {
			return vj
		}
	}
	return -1
}

// newReservation reserves nodes for job j, the highest examined job that
// neither fits nor found victims, with a smaller job behind it in the order
// (Nomad would give that one the GPUs as they free up): when fewer than
// MaxReservations are held and the job has not had one expire. A job of at
// most ReservationNodes allocations (d.asks) gets the nodes that free up
// soonest, when they all free up within ReservationMaxAge. A larger gang
// gets a gathering reservation (gathers) when it is starved: first in the
// pending order, or waiting longer than RuntimeCap. Reserved nodes leave
// the placement model at once, so lower jobs neither fit nor find victims
// there.
func (d *Decider) newReservation(j int32) {
	info := &d.jobs[j]
	if d.active >= d.cfg.MaxReservations || info.expired || info.reserved >= 0 {
		return
	}
	gather := len(d.asks) > d.cfg.ReservationNodes
	if gather && (len(d.asks) > d.cfg.GatherNodes || !d.gathers(j)) {
		return
	}
	job := d.jp[j]
	d.noMargin = gather
	nodes, at := d.soonest(j, false)
	d.noMargin = false
	until := d.now.Add(d.cfg.ReservationAge(len(nodes)))
	if nodes == nil || !gather && at.After(until) {
		return
	}
	r := Reservation{Job: job.ID, Since: d.now}
	for _, n := range nodes {
		id := d.snap.Nodes[n].ID
		r.Nodes = append(r.Nodes, id)
		// A node just given back by yieldReservation stays out of service:
		// released and reserved again in one plan, it could take work between.
		d.plan.NodeActions = slices.DeleteFunc(d.plan.NodeActions, func(a NodeAction) bool {
			return a.Node == id && a.Kind == NodeRelease && a.Reason.Code == ReasonReservationYielded
		})
		d.nodeAction(id, NodeReserve, Reason{Code: ReasonReserved, Job: job.ID, At: until})
		d.nodes[n].reservedBy = j
		d.cap.remove(n)
	}
	info.reserved = int32(len(d.plan.Reservations))
	info.wait, info.freeAt = WaitReserved, d.honestFreeAt(at, false) // its stops come with the next pass (hold)
	d.plan.Reservations = append(d.plan.Reservations, r)
	d.active++
	d.wakeAt(until)
	if !at.IsZero() {
		d.wakeAt(at)
	}
}

// gathers reports whether gang job j, of more than ReservationNodes
// allocations (d.asks), gets a gathering reservation (issue 12: big jobs
// are not starved): it asks for more than half the nodes that could host
// its largest ask (of its pool and model, with as many GPUs), and it is
// starved: first among pending jobs (its budget is the least served, or
// first in its own order), or waiting longer than RuntimeCap, the longest
// any job is protected. Nomad gives the GPUs of a node that frees up to
// the first job that fits there, and a small job always fits first, so
// such a gang would wait until most of its pool freed at once, which on a
// full cluster never comes (heavy-256's 32-node gang on the 32-node
// cluster never starts without it). A narrower gang finds its nodes among
// the many a full cluster frees, by time slicing (rule 5) or placed whole
// when they are free; gathered, it kept its nodes idle while they
// drained. Measured on the suite with gather_nodes = 1000 (allot sim
// suite, rule 5c's far-off release in): with starvation alone as the
// trigger occupied GPU time fell by 1.0-1.8 points on heavy-1024 seeds
// 1-2, two-pools-heavy, bursty, heavy-256 and large-gangs (against
// gather_nodes = 0), with the worst leaves moving both ways (heavy-1024
// 93/34/82% to 88/85/86%, bursty 71% to 57%); with the width test only
// heavy-256 pays (-1.7: the gang's 6.1h gather of the whole cluster; its
// worst leaf 0% to 66%) and two-pools-heavy -0.2, and the rest do not
// move. The regression suite's gangs-small (16 nodes, gangs of up to 16)
// still loses 4.6 points (97.8% to 93.2%; worst leaf 0% to 11%): each of
// its gathers of 9-16 nodes idles 20-70% of them for 5-8h, and a gang
// gathered, run for its window and then stopped by fair share gathers
// again. So gathering stays off by default.
func (d *Decider) gathers(j int32) bool {
	job, a := d.jp[j], &d.asks[0]
	hosts := 0
	for c := range d.classes {
		if !d.classFits(int32(c), job, a) {
			continue
		}
		for _, n := range d.classNode.row(int32(c)) {
			if int32(d.snap.Nodes[n].GPUs) >= a.gpus {
				hosts++
			}
		}
	}
	return 2*len(d.asks) > hosts && (d.jobs[j].position == 1 || d.now.Sub(d.jp[j].SubmitTime) > d.cfg.RuntimeCap)
}

// gathering reports whether job j holds a gathering reservation (more
// nodes than ReservationNodes, not released): its gang cannot be placed
// whole until the reservation is released, and Nomad would place it in
// part on the GPUs free elsewhere, so it waits whole (rule 5d) meanwhile.
func (d *Decider) gathering(j int32) bool {
	r := d.jobs[j].reserved
	return r >= 0 && len(d.plan.Reservations[r].Nodes) > d.cfg.ReservationNodes
}

// yieldReservation ends the reservation held for a pending job x sorting
// after job j when j, examined without victims, needs one and
// MaxReservations are held: x's budget is served at least FairnessMargin
// more than j's, and this plan stops nothing on x's nodes for it. A
// reservation made when x was the first job waiting would otherwise keep
// its nodes from a less served budget's job that came later, for up to
// ReservationMaxAge (issue 12: a budget at 0% of its share waited behind
// one at 607%). x's nodes go back into service and the placement model;
// its reservation is remembered as expired (x gets no new one until
// placed), so two jobs do not trade one back and forth; j may then
// reserve (newReservation).
func (d *Decider) yieldReservation(j int32) {
	if d.active < d.cfg.MaxReservations {
		return
	}
	ji := &d.jobs[j]
	for ri := range d.plan.Reservations {
		r := &d.plan.Reservations[ri]
		if r.Expired || !r.Released.IsZero() {
			continue
		}
		x, ok := d.jobIndex(r.Job)
		if !ok || x == j {
			continue
		}
		xi := &d.jobs[x]
		if xi.state != jsPending || xi.position <= ji.position || d.served[xi.leaf] < d.served[ji.leaf]+d.cfg.FairnessMargin ||
			slices.ContainsFunc(d.plan.Stops, func(s StopJob) bool { return s.Reason.Code == ReasonReservationStop && s.Reason.Job == r.Job }) {
			continue
		}
		nodes := d.reservedNodes(r.Nodes)
		d.release(nodes, Reason{Code: ReasonReservationYielded, Job: r.Job, Detail: d.jp[j].ID})
		for _, n := range nodes {
			d.nodes[n].reservedBy = -1
			if d.nodeUsable(n) && !d.cap.usable[n] {
				d.cap.add(n, d.nodeAvail(n))
			}
		}
		r.Expired = true
		xi.reserved, xi.expired, xi.freeAt = -1, true, time.Time{}
		d.active--
		if d.tl != nil {
			d.checkTailRoom()
		}
		return
	}
}

// soonest picks, for each ask of d.asks (largest first), the usable node not
// yet picked whose GPUs free up soonest, and returns the nodes and the time
// the last of them is free; nil when some ask has no node that ever frees.
// Gathering (a gang's gathering reservation), an ask with no node that
// frees at a known time takes the usable node with the most free GPUs
// (it frees when the jobs fair share protects there end), and the time is
// zero (unknown) if any ask took one.
func (d *Decider) soonest(j int32, gather bool) ([]int32, time.Time) {
	job := d.jp[j]
	var picked []int32
	var last time.Time
	unknown := false
	for i := range d.asks {
		a := &d.asks[i]
		best, bestAt := int32(-1), time.Time{}
		any, anyFree := int32(-1), int32(-1)
		for c := range d.classes {
			if !d.classFits(int32(c), job, a) {
				continue
			}
			for _, n := range d.classNode.row(int32(c)) {
				if !d.cap.usable[n] || slices.Contains(picked, n) || d.freedForOther(n, j) {
					continue
				}
				if t, ok := d.earliest(n, a.gpus, j); ok && (best < 0 || t.Before(bestAt)) {
					best, bestAt = n, t
				}
				if f := d.nodeAvail(n); gather && int32(d.snap.Nodes[n].GPUs) >= a.gpus && f > anyFree {
					any, anyFree = n, f
				}
			}
		}
		if best < 0 && any >= 0 {
			best, unknown = any, true
		}
		if best < 0 {
			return nil, time.Time{}
		}
		picked = append(picked, best)
		if bestAt.After(last) {
			last = bestAt
		}
	}
	if unknown {
		last = time.Time{}
	}
	return picked, last
}

// freedForOther reports whether this plan stops victims on node n for a job
// other than j: reserving n would keep that job off the GPUs freed for it.
func (d *Decider) freedForOther(n, j int32) bool {
	for _, ai := range d.nodeAlloc.row(n) {
		if v := d.allocJob[ai]; v >= 0 && d.jobs[v].victimFor >= 0 && d.jobs[v].victimFor != j {
			return true
		}
	}
	return false
}

// freeAt is when job j's asks could all be free on nodes, or zero if never.
// Each ask takes the node where it is free soonest counting the GPUs the
// asks before it took there, so two asks never count the same GPUs.
func (d *Decider) freeAt(j int32, nodes []int32) time.Time {
	var last time.Time
	job := d.jp[j]
	taken := d.freeTaken[:0]
	defer func() { d.freeTaken = taken[:0] }()
	took := func(n int32) int32 {
		for _, t := range taken {
			if t.node == n {
				return t.delta
			}
		}
		return 0
	}
	for i := range d.asks {
		a := &d.asks[i]
		var best time.Time
		bestNode := int32(-1)
		for _, n := range nodes {
			if !d.classFits(d.nodes[n].class, job, a) {
				continue
			}
			if t, ok := d.earliest(n, a.gpus+took(n), j); ok && (best.IsZero() || t.Before(best)) {
				best, bestNode = t, n
			}
		}
		if best.IsZero() {
			return time.Time{}
		}
		if k := slices.IndexFunc(taken, func(t undoStep) bool { return t.node == bestNode }); k >= 0 {
			taken[k].delta += a.gpus
		} else {
			taken = append(taken, undoStep{node: bestNode, delta: a.gpus})
		}
		if best.After(last) {
			last = best
		}
	}
	return last
}

// earliest is the first time at which gpus GPUs can be free on node n for
// job j: now for what is free (stopping allocations included), held by
// unallocated work, or stopped by this plan; the window end for jobs that
// rule 5 will then allow (mayStop: a less served leaf, or j's own leaf
// after j in its order); never
// for anything else (no end is known).
func (d *Decider) earliest(n, gpus, j int32) (time.Time, bool) {
	if int32(d.snap.Nodes[n].GPUs) < gpus {
		return time.Time{}, false
	}
	have := int32(d.snap.Nodes[n].GPUs) - d.nodes[n].held
	if d.tl != nil {
		have += d.tl.outFree[n] // running free work left out of the read
	}
	ev := d.events[:0]
	for _, ai := range d.nodeAlloc.row(n) {
		al := d.ap[ai]
		v := d.allocJob[ai]
		if !al.holds() || v < 0 {
			continue
		}
		vi := &d.jobs[v]
		switch {
		case !al.live():
			if vi.heldFor >= 0 { // counted held (keepVictims); stopping
				have += int32(al.GPUs)
			}
		case vi.state == jsUnallocated || vi.victimFor == j || vi.moving:
			have += int32(al.GPUs) // a victim stopped for another job frees its GPUs for that one
		case vi.state == jsRunning || vi.state == jsProtected:
			if ok, _ := d.mayStop(v, j); ok {
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

// holdLanders holds below job X each job that landed on nodes released for
// X (a released reservation still kept) while X waits: a job sorting after
// X, allocated, whose live allocations all started at or after the release
// (or have not started) and one of them on those nodes. Nomad placed it in
// the wave of retries that the release set off, before X; held a
// preemption gap below X (victimLevel) instead of protected as it starts,
// it is preempted when X is evaluated (evaluateHeld). It becomes a held
// victim of X (Plan.Victims), so the hold ends when X places or leaves, or
// after VictimHold. A job sorting before X took what Nomad owes it first
// and is left alone; unallocated work sits far below X already.
func (d *Decider) holdLanders() {
	for _, r := range d.snap.Reservations {
		if r.Released.IsZero() || r.Expired || !d.now.Before(r.Released.Add(d.cfg.VictimHold)) {
			continue
		}
		x, ok := d.jobIndex(r.Job)
		if !ok || (d.jobs[x].state != jsPending && d.jobs[x].state != jsPartial) {
			continue
		}
		for _, id := range r.Nodes {
			n, ok := d.nodeIndex(id)
			if !ok {
				continue
			}
			for _, ai := range d.nodeAlloc.row(n) {
				if v := d.allocJob[ai]; v >= 0 && v != x && d.landed(d.ap[ai], r.Released) {
					d.holdLander(v, x, r.Released)
				}
			}
		}
	}
}

// landed reports whether allocation a was placed after a release at t: it
// is live and has not started, or started at or after t.
func (d *Decider) landed(a *Alloc, t time.Time) bool {
	return a.live() && (a.ClientStatus == ClientPending || a.StartedAt.IsZero() || !a.StartedAt.Before(t))
}

func (d *Decider) holdLander(v, x int32, released time.Time) {
	vi := &d.jobs[v]
	if vi.heldFor == x {
		vi.landed = true // held since an earlier decision (Snapshot.Victims)
		return
	}
	switch vi.state {
	case jsStarting, jsProtected, jsRunning, jsPartial:
	default:
		return
	}
	if vi.heldFor >= 0 || vi.released >= 0 || d.compareKeys(d.keyOf(v, false), d.keyOf(x, false)) < 0 {
		return
	}
	for _, ai := range d.jobAllocs.row(v) {
		if a := d.ap[ai]; a.live() && !d.landed(a, released) {
			return // it ran before the release: not a job that slipped in
		}
	}
	vi.heldFor, vi.heldSince, vi.landed = x, d.now, true
	d.jobs[x].holding++
	d.wakeAt(d.now.Add(d.cfg.VictimHold))
	d.plan.Victims = append(d.plan.Victims, Victim{Job: d.jp[v].ID, For: d.jp[x].ID, Since: d.now})
}

// gapHolders lists the jobs holding a reservation, held or released, that
// still wait (plan.Reservations not expired), in pending order; a job
// placed in part comes first (it sorts before every pending job).
func (d *Decider) gapHolders() {
	d.gaps = d.gaps[:0]
	for _, r := range d.plan.Reservations {
		if r.Expired {
			continue
		}
		if x, ok := d.jobIndex(r.Job); ok && (d.jobs[x].state == jsPending || d.jobs[x].state == jsPartial) {
			d.gaps = append(d.gaps, x)
		}
	}
	slices.SortFunc(d.gaps, func(a, b int32) int { return int(d.jobs[a].position - d.jobs[b].position) })
}

// gapPosition is the position whose pending level a job at position p
// takes: p moved PreemptionGap - 1 places down for each job holding a
// reservation before it, so that it sits at least the gap below each.
func (d *Decider) gapPosition(p int32) int32 {
	q := p
	for _, x := range d.gaps {
		if d.jobs[x].position < p {
			q += int32(d.cfg.PreemptionGap - 1)
		}
	}
	return q
}

// gapAbove is the job holding a reservation nearest above position p, -1.
func (d *Decider) gapAbove(p int32) int32 {
	above := int32(-1)
	for _, x := range d.gaps {
		if d.jobs[x].position < p {
			above = x
		}
	}
	return above
}

// gapVictim gives victim v, which has no position of its own: the places
// its pending level moves down (as gapPosition), and the highest priority
// it may have, a preemption gap below the final priority of every job
// holding a reservation that sorts before it (no bound: Protected). Jobs
// are compared by their keys in the pending order.
func (d *Decider) gapVictim(v int32) (shift int32, ceil int) {
	ceil = d.cfg.Protected
	if len(d.gaps) == 0 {
		return 0, ceil
	}
	kv := d.keyOf(v, false)
	for _, x := range d.gaps {
		if d.compareKeys(d.keyOf(x, d.jobs[x].state == jsPartial), kv) < 0 {
			shift += int32(d.cfg.PreemptionGap - 1)
			ceil = min(ceil, d.jobs[x].final-d.cfg.PreemptionGap)
		}
	}
	return shift, ceil
}

// gapAfter reports whether pending job j holds a reservation: the job after
// it in the order keeps the preemption gap below it (levels).
func (d *Decider) gapAfter(j int32) bool {
	return slices.Contains(d.gaps, j)
}

// gapBand is the pending band levels may use: at most Running -
// PreemptionGap while a job placed in part (written at Running) holds a
// reservation.
func (d *Decider) gapBand() Range {
	band := d.cfg.Pending
	for _, x := range d.gaps {
		if d.jobs[x].state == jsPartial {
			band.High = max(band.Low, min(band.High, d.cfg.Running-d.cfg.PreemptionGap))
		}
	}
	return band
}
