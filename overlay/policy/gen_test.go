package policy

import (
	"fmt"
	"math/rand"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/contract"
)

// genSpec shapes a random cluster.
type genSpec struct {
	nodes, gpusPerNode         int
	programs, projects, people int // the budget tree: root/program/project/person
	running, pending, free     int // allocated running jobs, allocated pending jobs, unallocated jobs
	unhealthy, drains          int
	asks                       []int // GPUs per allocation to draw from (default 1,1,1,2,2,4,8)
	maxCount                   int   // allocations per job, 1..maxCount (default 2)
}

// genCluster builds a random but consistent cluster: allocations never
// exceed a node's GPUs, usage is random per leaf.
func genCluster(r *rand.Rand, g genSpec) (*budgets.Tree, *budgets.FairShare, *Snapshot, time.Time) {
	specs := []budgets.Spec{{Path: "lab"}}
	var leaves []string
	for p := 0; p < g.programs; p++ {
		pp := fmt.Sprintf("lab/p%d", p)
		specs = append(specs, budgets.Spec{Path: pp, Share: float64(1 + r.Intn(4))})
		for q := 0; q < g.projects; q++ {
			qq := fmt.Sprintf("%s/q%d", pp, q)
			specs = append(specs, budgets.Spec{Path: qq, Share: float64(1 + r.Intn(4))})
			for u := 0; u < g.people; u++ {
				uu := fmt.Sprintf("%s/u%d", qq, u)
				specs = append(specs, budgets.Spec{Path: uu, Share: float64(1 + r.Intn(4))})
				leaves = append(leaves, uu)
			}
		}
	}
	tree, err := budgets.NewTree(specs)
	if err != nil {
		panic(err)
	}
	usage := make([]int64, len(tree.Leaves()))
	for i := range usage {
		usage[i] = int64(r.Intn(1000)) * 3600
	}
	fs := budgets.ComputeFairShare(tree, usage)
	now := epoch.Add(30 * 24 * time.Hour)
	snap := &Snapshot{LastDecision: now.Add(-time.Minute)}
	models := []string{"h100", "b200"}
	free := make([]int, g.nodes)
	for i := 0; i < g.nodes; i++ {
		n := Node{ID: fmt.Sprintf("n%d", i), Model: models[i%len(models)], GPUs: g.gpusPerNode, Eligible: true, Healthy: true}
		if i < g.unhealthy {
			n.Healthy, n.HealthReason, n.GPUs = false, "XID 79", g.gpusPerNode-1
		} else if i < g.unhealthy+g.drains {
			n.Eligible, n.Drain = false, &Drain{Deadline: now.Add(time.Duration(r.Intn(120)) * time.Minute)}
		}
		free[i] = g.gpusPerNode
		snap.Nodes = append(snap.Nodes, n)
	}
	leaf := func(p string) (bool, bool) { n, ok := tree.Lookup(p); return ok, ok && n.IsLeaf() }
	newJob := func(id string, allocated bool, gpus, count int) Job {
		meta := map[string]string{}
		if allocated {
			meta["budget"] = leaves[r.Intn(len(leaves))]
			meta["min_runtime"] = fmt.Sprintf("%dm", 30+r.Intn(600))
			if r.Intn(2) == 0 {
				meta["resumable"] = "true"
			}
			meta["priority"] = fmt.Sprint(r.Intn(101))
		}
		prio := 50
		if r.Intn(3) == 0 {
			prio = 1 + r.Intn(100)
		}
		model := ""
		if r.Intn(4) == 0 {
			model = models[r.Intn(len(models))]
		}
		j := Job{ID: id, Namespace: "default", Type: "batch", Contract: contract.Parse(id, meta, contract.Config{}, leaf),
			SubmitTime: now.Add(-time.Duration(r.Intn(100000)) * time.Second), Priority: prio, ModifyIndex: uint64(r.Intn(1000)),
			Groups: []TaskGroup{{Name: "g", Count: count, GPUs: gpus, Model: model}}}
		if r.Intn(3) == 0 { // requeued: waiting again since a stop, minutes or hours ago
			ago := time.Duration(r.Intn(7200)) * time.Second
			j.QueuedSince = now.Add(-ago)
			j.LastRun = 2 * ago // the run that stop ended (rule 5e (c) holds some for up to that long)
		}
		return j
	}
	asks := g.asks
	if asks == nil {
		asks = []int{1, 1, 1, 2, 2, 4, 8}
	}
	if g.maxCount == 0 {
		g.maxCount = 2
	}
	place := func(j *Job) {
		for a := 0; a < j.Groups[0].Count; a++ {
			for tries := 0; tries < 20; tries++ {
				n := r.Intn(g.nodes)
				nd := &snap.Nodes[n]
				if free[n] < j.Groups[0].GPUs || (j.Groups[0].Model != "" && nd.Model != j.Groups[0].Model) {
					continue
				}
				free[n] -= j.Groups[0].GPUs
				al := Alloc{ID: fmt.Sprintf("%s.%d", j.ID, a), Job: j.ID, Node: nd.ID, Group: "g", GPUs: j.Groups[0].GPUs,
					ClientStatus: ClientRunning, DesiredStatus: DesiredRun,
					StartedAt: now.Add(-time.Duration(r.Intn(12*3600)) * time.Second)}
				snap.Allocs = append(snap.Allocs, al)
				break
			}
		}
	}
	for i := 0; i < g.running; i++ {
		j := newJob(fmt.Sprintf("r%d", i), true, asks[r.Intn(len(asks))], 1+r.Intn(g.maxCount))
		place(&j)
		snap.Jobs = append(snap.Jobs, j)
	}
	for i := 0; i < g.free; i++ {
		j := newJob(fmt.Sprintf("f%d", i), false, asks[r.Intn(len(asks))], 1)
		if r.Intn(2) == 0 {
			place(&j)
		}
		snap.Jobs = append(snap.Jobs, j)
	}
	for i := 0; i < g.pending; i++ {
		snap.Jobs = append(snap.Jobs, newJob(fmt.Sprintf("p%d", i), true, asks[r.Intn(len(asks))], 1+r.Intn(g.maxCount)))
	}
	r.Shuffle(len(snap.Jobs), func(a, b int) { snap.Jobs[a], snap.Jobs[b] = snap.Jobs[b], snap.Jobs[a] })
	return tree, fs, snap, now
}
