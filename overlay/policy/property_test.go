package policy

import (
	"math/rand"
	"testing"
	"time"
)

// TestProperties checks the invariants of every plan on random clusters:
// rules 1, 2, 4 and 8 hold once the plan is applied; no plan stops a
// protected job (a Nomad drain's deadline aside: Nomad would kill it); every
// victim set frees enough GPUs on one node for the job it was chosen for.
func TestProperties(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FairnessMargin = 0.05
	for seed := int64(0); seed < 300; seed++ {
		r := rand.New(rand.NewSource(seed))
		g := genSpec{nodes: 4 + r.Intn(12), gpusPerNode: 8, programs: 2, projects: 2, people: 1 + r.Intn(3),
			running: r.Intn(40), pending: r.Intn(30), free: r.Intn(10), unhealthy: r.Intn(2), drains: r.Intn(2)}
		tree, fs, snap, now := genCluster(r, g)
		p := Decide(snap, tree, fs, now, cfg)
		checkPlan(t, seed, snap, p, now, cfg, fs.Position)
		if t.Failed() {
			return
		}
		// Same inputs, same plan.
		if q := Decide(snap, tree, fs, now, cfg); len(q.SetPriorities) != len(p.SetPriorities) || len(q.Stops) != len(p.Stops) ||
			len(q.Evaluations) != len(p.Evaluations) || !q.NextWake.Equal(p.NextWake) {
			t.Fatalf("seed %d: two decisions on the same inputs differ", seed)
		}
	}
}

func checkPlan(t *testing.T, seed int64, snap *Snapshot, p *Plan, now time.Time, cfg Config, leafPos func(int) int) {
	t.Helper()
	final := map[string]int{}
	for _, j := range snap.Jobs {
		final[j.ID] = j.Priority
	}
	for _, s := range p.SetPriorities {
		final[s.Job] = s.To
	}
	stopped := map[string]bool{}
	for _, s := range p.Stops {
		for _, a := range s.Allocs {
			stopped[a] = true
		}
	}
	nodes := map[string]*Node{}
	for i := range snap.Nodes {
		nodes[snap.Nodes[i].ID] = &snap.Nodes[i]
	}
	byJob := map[string][]Alloc{}
	for _, a := range snap.Allocs {
		byJob[a.Job] = append(byJob[a.Job], a)
	}
	minPending := 1 << 30
	victims := map[string]bool{}
	for _, s := range p.Stops {
		if s.Reason.Code == ReasonVictim || s.Reason.Code == ReasonReservationStop {
			victims[s.Job] = true
		}
	}
	for _, e := range p.Explanations {
		if e.Band == BandPending {
			minPending = min(minPending, final[e.Job])
		}
	}
	for _, j := range snap.Jobs {
		e, ok := p.Explain(j.ID)
		if !ok {
			continue
		}
		allocs := byJob[j.ID]
		// The reference: is the job protected, per DESIGN.md's definition?
		var last time.Time
		running := len(allocs) == j.Groups[0].Count && len(allocs) > 0
		for _, a := range allocs {
			if a.StartedAt.After(last) {
				last = a.StartedAt
			}
		}
		protected := j.Contract.Allocated && running && now.Before(last.Add(j.Contract.Protected))
		past := j.Contract.Allocated && running && !protected
		switch {
		case protected:
			if final[j.ID] != cfg.Protected {
				t.Errorf("seed %d: rule 1: %s is inside its window but at %d", seed, j.ID, final[j.ID])
			}
			for _, a := range allocs {
				if stopped[a.ID] && nodes[a.Node].Drain == nil {
					t.Errorf("seed %d: protected %s is stopped on %s (%v)", seed, j.ID, a.Node, p.Stops)
				}
			}
		case past && !victims[j.ID]:
			if final[j.ID] != cfg.Running {
				t.Errorf("seed %d: rule 2: %s is past its window but at %d", seed, j.ID, final[j.ID])
			}
		case !j.Contract.Allocated:
			if !cfg.Unallocated.contains(final[j.ID]) || final[j.ID] > minPending-cfg.PreemptionGap {
				t.Errorf("seed %d: rule 4: unallocated %s at %d, lowest pending %d", seed, j.ID, final[j.ID], minPending)
			}
		}
		if e.Band == BandPending && !victims[j.ID] && !cfg.Pending.contains(final[j.ID]) {
			t.Errorf("seed %d: pending %s at %d, outside the pending band", seed, j.ID, final[j.ID])
		}
	}
	// Rule 8: the pending order compares leaves first; meta priority only
	// within a leaf.
	var pend []*Explanation
	for i := range p.Explanations {
		if p.Explanations[i].Position > 0 {
			pend = append(pend, &p.Explanations[i])
		}
	}
	prio := map[string]int{}
	for _, j := range snap.Jobs {
		prio[j.ID] = j.Contract.Priority
	}
	for _, a := range pend {
		for _, b := range pend {
			la, lb := leafPos(a.Rank.Leaf.LeafIndex), leafPos(b.Rank.Leaf.LeafIndex)
			if la < lb && a.Position > b.Position {
				t.Errorf("seed %d: rule 8: %s (leaf #%d) after %s (leaf #%d)", seed, a.Job, la, b.Job, lb)
			}
			if la == lb && prio[a.Job] > prio[b.Job] && a.Position > b.Position {
				t.Errorf("seed %d: within leaf, %s (priority %d) after %s (priority %d)", seed, a.Job, prio[a.Job], b.Job, prio[b.Job])
			}
		}
	}
	// Every victim set frees enough GPUs on one node for its job's ask: on
	// each node, what is available plus what all victims there free covers
	// every ask the victims were chosen for there.
	freed := map[string]int{}
	asks := map[string]int{}
	askOf := map[[2]string]int{}
	for _, s := range p.Stops {
		if s.Reason.Code != ReasonVictim {
			continue
		}
		askOf[[2]string{s.Reason.Job, s.Reason.Node}] = s.Reason.N
		for _, a := range byJob[s.Job] {
			if a.holds() { // a victim frees all its allocations
				freed[a.Node] += a.GPUs
			}
		}
	}
	for k, n := range askOf {
		asks[k[1]] += n
	}
	for n, ask := range asks {
		node := nodes[n]
		held, free := 0, 0
		for _, a := range snap.Allocs {
			if a.Node == n && a.holds() {
				held += a.GPUs
				if j, _ := findJob(snap, a.Job); j != nil && !j.Contract.Allocated && !victims[j.ID] {
					free += a.GPUs
				}
			}
		}
		if avail := node.GPUs - held + free + freed[n]; avail < ask || !node.Healthy || !node.Eligible {
			t.Errorf("seed %d: victims free %d on %s (healthy=%v eligible=%v), their jobs ask %d",
				seed, avail, n, node.Healthy, node.Eligible, ask)
		}
	}
	// Victims are past their window, and from a leaf served at least the
	// margin more than the job they make room for.
	for _, s := range p.Stops {
		if s.Reason.Code != ReasonVictim {
			continue
		}
		v, _ := p.Explain(s.Job)
		j, _ := p.Explain(s.Reason.Job)
		if v.Rank == nil || j.Rank == nil || v.Rank.ServedRatio() < j.Rank.ServedRatio()+cfg.FairnessMargin {
			t.Errorf("seed %d: victim %s is not served more than %s by the margin", seed, s.Job, s.Reason.Job)
		}
	}
}

func findJob(s *Snapshot, id string) (*Job, bool) {
	for i := range s.Jobs {
		if s.Jobs[i].ID == id {
			return &s.Jobs[i], true
		}
	}
	return nil, false
}
