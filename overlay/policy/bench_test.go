package policy

import (
	"math/rand"
	"testing"
)

// BenchmarkDecide is the size of issue 3: 1,250 nodes of 8 GPUs (10,000
// GPUs), about 8,000 running allocations, 50,000 pending jobs and 1,000
// budget leaves, decided by a Decider that keeps its scratch memory.
func BenchmarkDecide(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	g := genSpec{nodes: 1250, gpusPerNode: 8, programs: 10, projects: 10, people: 10,
		running: 8000, pending: 50000, free: 500, unhealthy: 5, drains: 5,
		asks: []int{1, 1, 1, 1, 2}, maxCount: 1}
	tree, fs, snap, now := genCluster(r, g)
	cfg := DefaultConfig()
	var d Decider
	p := d.Decide(snap, tree, fs, now, cfg)
	// Steady state: the adapter applied the first plan's priorities.
	idx := map[string]int{}
	for i := range snap.Jobs {
		idx[snap.Jobs[i].ID] = i
	}
	for _, s := range p.SetPriorities {
		j := &snap.Jobs[idx[s.Job]]
		j.Priority, j.LastWrittenPriority = s.To, s.To
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p = d.Decide(snap, tree, fs, now, cfg)
	}
	b.ReportMetric(float64(len(snap.Allocs)), "allocations")
	b.ReportMetric(float64(len(snap.Jobs)), "jobs")
	b.ReportMetric(float64(len(p.SetPriorities)), "writes/op")
}

// BenchmarkIncremental is BenchmarkDecide's cluster held by an Incremental
// in steady state: each op is one delta (a job submitted deep in the
// backlog at Nomad's default priority, or the previous one leaving) and one
// decision, explanations off.
func BenchmarkIncremental(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	g := genSpec{nodes: 1250, gpusPerNode: 8, programs: 10, projects: 10, people: 10,
		running: 8000, pending: 50000, free: 500, unhealthy: 5, drains: 5,
		asks: []int{1, 1, 1, 1, 2}, maxCount: 1}
	tree, fs, snap, now := genCluster(r, g)
	cfg := DefaultConfig()
	var x Incremental
	for _, n := range snap.Nodes {
		x.PutNode(n)
	}
	for _, j := range snap.Jobs {
		x.PutJob(j)
	}
	for _, a := range snap.Allocs {
		x.PutAlloc(a)
	}
	byID := map[string]Job{}
	for _, j := range snap.Jobs {
		byID[j.ID] = j
	}
	settle := func(p *Plan) {
		for _, s := range p.SetPriorities {
			j := byID[s.Job]
			j.Priority, j.LastWrittenPriority = s.To, s.To
			byID[s.Job] = j
			x.PutJob(j)
		}
	}
	settle(x.Decide(tree, fs, now, cfg))
	extra := byID[snap.Jobs[0].ID]
	extra.ID, extra.Priority, extra.LastWrittenPriority = "extra", 50, 0
	b.ReportAllocs()
	b.ResetTimer()
	var p *Plan
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			x.PutJob(extra)
		} else {
			x.RemoveJob(extra.ID)
		}
		p = x.Decide(tree, fs, now, cfg)
	}
	b.ReportMetric(float64(len(x.tl.jp)), "jobs-read")
	b.ReportMetric(float64(len(snap.Jobs)), "jobs")
	b.ReportMetric(float64(len(p.SetPriorities)), "writes/op")
}
