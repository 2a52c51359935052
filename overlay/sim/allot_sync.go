package sim

import (
	"time"

	"github.com/allot-sched/allot/overlay/policy"
)

// syncState is how far the allot adapter has fed the model's changes into
// its policy.Incremental.
type syncState struct {
	nodes     []policy.Node // as last put
	nextJob   int           // jobs before it were seen submitted (the trace is in submit order)
	nextAlloc int           // allocations before it were seen placed (the model only appends)
	nextEnded int           // State.ended before it were seen
	nodeGen   uint64        // State.nodeGen when the nodes were last put
	nodesDue  bool          // apply changed a node's state since
	requeued  []int64       // by job: 1 + the requeuedAt last put (putJob)
	starting  []int32       // allocations put as pending, to put again once running (Options.StartLatency)
}

// syncModel feeds what changed in the model since the last decision into
// the Incremental: node health and eligibility, jobs submitted, allocations
// placed and ended, jobs done. Priorities change only through apply, which
// puts the job at once.
func (a *Allot) syncModel(s *State, now time.Time) {
	y := &a.sync
	if y.nodes == nil {
		y.nodes = make([]policy.Node, len(s.nodes))
		y.nodesDue = true
		y.requeued = make([]int64, len(s.jobs))
	}
	if y.nodesDue || y.nodeGen != s.nodeGen {
		a.syncNodes(s, now)
		y.nodesDue, y.nodeGen = false, s.nodeGen
	}
	for ; y.nextJob < len(s.jobs) && s.jobs[y.nextJob].status != StatusFuture; y.nextJob++ {
		if s.jobs[y.nextJob].status < StatusDone {
			a.putJob(s, int32(y.nextJob))
		}
	}
	for ; y.nextEnded < len(s.ended); y.nextEnded++ {
		al := s.ended[y.nextEnded]
		r := &s.allocs[al]
		if int(al) >= y.nextAlloc {
			continue // placed since the last decision and ended: never put
		}
		a.inc.RemoveAlloc(a.allocID(al))
		if j := &s.jobs[r.job]; j.status >= StatusDone {
			a.inc.RemoveJob(j.spec.ID)
		} else if j.requeuedAt >= 0 && y.requeued[r.job] != j.requeuedAt+1 {
			y.requeued[r.job] = j.requeuedAt + 1 // once per requeue, not per allocation
			a.putJob(s, r.job)                   // waiting again since requeuedAt
		}
	}
	for ; y.nextAlloc < len(s.allocs); y.nextAlloc++ {
		al := int32(y.nextAlloc)
		r := &s.allocs[al]
		if s.jobs[r.job].status >= StatusDone {
			a.inc.RemoveJob(s.jobs[r.job].spec.ID) // placed and done between two decisions
			continue
		}
		if r.end >= 0 {
			continue
		}
		if a.putAlloc(s, al) {
			y.starting = append(y.starting, al)
		}
	}
	starting := y.starting[:0]
	for _, al := range y.starting {
		if r := &s.allocs[al]; r.end < 0 && a.putAlloc(s, al) {
			starting = append(starting, al)
		}
	}
	y.starting = starting
}

// putAlloc puts allocation al as Nomad shows it now: pending (not started)
// within Options.StartLatency of its placement, running since then after
// it. It reports whether the allocation is still pending.
func (a *Allot) putAlloc(s *State, al int32) bool {
	r := &s.allocs[al]
	runs := r.runsAt
	pa := policy.Alloc{ID: a.allocID(al), Job: s.jobs[r.job].spec.ID, Node: s.nodes[r.node].id,
		Group: "main", GPUs: int(r.gpus), StartedAt: at(runs), PlacedAt: at(r.start), ClientStatus: policy.ClientRunning,
		DesiredStatus: policy.DesiredRun}
	pending := s.now < runs
	if pending {
		pa.StartedAt, pa.ClientStatus = time.Time{}, policy.ClientPending
		pa.WaitsForVictims = s.waitsForVictims(al)
	}
	a.inc.PutAlloc(pa)
	return pending
}

// putJob puts job i as Nomad shows it now.
func (a *Allot) putJob(s *State, i int32) {
	j := &s.jobs[i]
	if j.status >= StatusDone || j.status == StatusFuture {
		return
	}
	sp := j.spec
	pj := policy.Job{ID: sp.ID, Namespace: "default", Pool: sp.Pool, Type: "batch", Contract: a.contracts[i],
		SubmitTime: at(int64(sp.Submit / time.Second)), Priority: j.prio, LastWrittenPriority: j.lastWritten,
		ModifyIndex: j.modifyIndex, Groups: a.groups[i : i+1 : i+1]}
	if j.requeuedAt >= 0 {
		pj.QueuedSince = at(j.requeuedAt)
		pj.LastRun = time.Duration(j.lastRun) * time.Second
	}
	a.inc.PutJob(pj)
}

// syncNodes puts every node whose health, eligibility or state changed
// since it was last put.
func (a *Allot) syncNodes(s *State, now time.Time) {
	y := &a.sync
	for n := range s.nodes {
		nd := &s.nodes[n]
		h := nd.healthy()
		pn := policy.Node{ID: nd.id, Pool: nd.pool, Model: nd.model, GPUs: nd.healthyTotal(),
			Eligible: nd.eligible, Healthy: h, HealthReason: nd.reason,
			HealthySince: a.inc.Health(nd.id, h, a.nodeState[n], now), State: a.nodeState[n]}
		if pn != y.nodes[n] {
			y.nodes[n] = pn
			a.inc.PutNode(pn)
		}
	}
}
