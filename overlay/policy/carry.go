package policy

import (
	"slices"
	"time"
)

// Carry is the policy's memory between decisions, which its caller (the
// server's reconcile pass, the simulator) keeps and hands back in each
// Snapshot: the reservations in force, the victims held below the job they
// made room for, the stops and evaluations issued and still settling, the
// time of the last decision (all from the previous Plan), and when each node
// last turned healthy. Remember takes a Plan's memory, less what the caller
// did not carry out; Fill puts it in the next Snapshot; Health tracks a
// node's health from one decision to the next.
//
// It is a plain value with no clock: time comes in as the Plan's Now and
// Health's now. Its zero value is ready. A caller that loses it (a new
// leader) starts again from its zero value, or from the Reservations,
// Notices and Victims it recorded (the server replicates them): the rest
// only saves work and time, so losing it loses no charge and no protection.
type Carry struct {
	// Reservations: Plan.Reservations of the previous decision.
	Reservations []Reservation
	// Victims and Issued: Plan.Victims and Plan.Issued of the previous
	// decision, less what the caller did not carry out (Remember). A
	// caller should not lose the Victims (a victim forgotten whose
	// replacement Nomad placed first is raised over the job it was stopped
	// for): the server replicates them.
	Victims []Victim
	Issued  []Issued
	// Notices: Plan.Notices of the previous decision, the checkpoint
	// notices running (notice.go). A notice is kept even where its signal
	// failed, so a failed signal never keeps a job running past its stop.
	// A caller must not lose them (a notice forgotten is sent again and its
	// stop comes a whole notice late): the server replicates them.
	Notices []Notice
	// LastDecision: the Now of the previous decision.
	LastDecision time.Time

	health map[string]nodeHealth
}

// nodeHealth is a node's health at the last Health call.
type nodeHealth struct {
	healthy bool
	since   time.Time // when it turned healthy, zero if it has always been
}

// Failed names the actions of a Plan its caller did not carry out: Nomad
// refused them, or the caller skipped or never tried them. Stops and
// Evaluations are indexes into Plan.Stops and Plan.Evaluations. The zero
// value says every action went through.
type Failed struct {
	Stops       []int
	Evaluations []int
}

// Remember keeps p's memory for the next decision: its reservations, held
// victims and issued actions, and its time. A victim p stopped whose stop
// failed is not held, and nothing settles for a stop that failed: the next
// decision chooses again. A victim p holds without stopping it (a job that
// landed on nodes released for the job it is held below: lowered, for
// Nomad to preempt) is held whatever failed. An evaluation that failed is
// not remembered, so it is issued again at once, and a victim's Replaced
// set for it is cleared (it stays held until an evaluation goes through).
// Entries carried from an earlier plan went through then and are kept. It
// copies the lists it keeps.
func (c *Carry) Remember(p *Plan, failed Failed) {
	c.LastDecision = p.Now
	c.Reservations = append(c.Reservations[:0], p.Reservations...)
	c.Notices = c.Notices[:0]
	for _, n := range p.Notices { // the plan's allocation lists are the decider's, reused by its next decision
		n.Allocs = slices.Clone(n.Allocs)
		c.Notices = append(c.Notices, n)
	}
	if len(failed.Stops) == 0 && len(failed.Evaluations) == 0 {
		c.Victims = append(c.Victims[:0], p.Victims...)
		c.Issued = append(c.Issued[:0], p.Issued...)
		return
	}
	failedStop := make([]bool, len(p.Stops))
	for _, i := range failed.Stops {
		if i >= 0 && i < len(failedStop) {
			failedStop[i] = true
		}
	}
	failedEval := make([]bool, len(p.Evaluations))
	for _, i := range failed.Evaluations {
		if i >= 0 && i < len(failedEval) {
			failedEval[i] = true
		}
	}
	stopped := map[string]bool{} // job + first allocation of each stop that went through, and its job
	planned := map[string]bool{} // jobs this plan stops
	for i, s := range p.Stops {
		planned[s.Job] = true
		if !failedStop[i] && len(s.Allocs) > 0 {
			stopped[s.Job] = true
			stopped[s.Job+"\x00"+s.Allocs[0]] = true
		}
	}
	evaluated := map[string]bool{}
	for i, e := range p.Evaluations {
		if !failedEval[i] {
			evaluated[e.Job] = true
		}
	}
	c.Victims = c.Victims[:0]
	for _, v := range p.Victims {
		if v.Replaced.Equal(p.Now) && !evaluated[v.For] {
			v.Replaced = time.Time{} // its job's evaluation failed: the next decision evaluates it again
		}
		if !v.Since.Equal(p.Now) || !planned[v.Job] || stopped[v.Job] {
			c.Victims = append(c.Victims, v)
		}
	}
	c.Issued = c.Issued[:0]
	for _, is := range p.Issued {
		ok := !is.At.Equal(p.Now) // carried from an earlier plan: it went through then
		switch {
		case ok:
		case is.Kind == IssuedStop && len(is.Allocs) > 0:
			ok = stopped[is.Job+"\x00"+is.Allocs[0]]
		case is.Kind == IssuedEvaluate:
			ok = evaluated[is.Job]
		}
		if ok {
			c.Issued = append(c.Issued, is)
		}
	}
}

// Fill puts the memory in s (its Reservations, Victims, Issued, Notices
// and LastDecision), shared: Decide never modifies a Snapshot, and the next
// Remember replaces the lists' contents, so s is for one decision.
func (c *Carry) Fill(s *Snapshot) {
	s.Reservations, s.Victims, s.Issued, s.Notices, s.LastDecision = c.Reservations, c.Victims, c.Issued, c.Notices, c.LastDecision
}

// Health records whether node is healthy now (every GPU healthy) and
// returns Node.HealthySince for it: when it last turned healthy, zero while
// it is unhealthy or when it has been healthy since it was first seen. A
// node first seen healthy while allot holds it draining or drained (state)
// counts as healthy since now, so a caller that starts afresh (a new
// leader) makes it wait its whole DrainReturnAfter.
func (c *Carry) Health(node string, healthy bool, state NodeState, now time.Time) time.Time {
	if c.health == nil {
		c.health = make(map[string]nodeHealth)
	}
	h, seen := c.health[node]
	switch {
	case !healthy:
		h.since = time.Time{}
	case seen && !h.healthy:
		h.since = now
	case !seen && (state == NodeDraining || state == NodeDrained):
		h.since = now
	}
	h.healthy = healthy
	c.health[node] = h
	return h.since
}
