package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/allot-sched/allot/budgets"
)

// HeavyConfig shapes a heavy-tailed trace (GenerateHeavy): the runtimes of
// public GPU-cluster traces instead of the published scenario's bounded
// ones, allocated demand well above capacity, little unallocated filler and
// teams far from their shares.
type HeavyConfig struct {
	Seed uint64  `json:"seed"`
	Days float64 `json:"days"`
	GPUs int     `json:"gpus"` // cluster capacity the demand is scaled to
	// GPUsPerNode sizes gang jobs: a job larger than a node asks whole
	// nodes (allocations of GPUsPerNode GPUs).
	GPUsPerNode int `json:"gpus_per_node"`
	// Allocated is the allocated work submitted, as a multiple of the
	// capacity over the period; a job's work counts up to the period's end
	// (a 40-day job submitted on day 6 of 7 adds one day).
	Allocated float64 `json:"allocated"`
	// Filler is the unallocated work submitted (min_runtime 0), the same way.
	Filler float64 `json:"filler"`
	// TeamSpread is the spread of the teams' demand around their shares: a
	// team's demand is share × exp(TeamSpread × z), z standard normal,
	// normalized so that the total stays Allocated.
	TeamSpread float64 `json:"team_spread"`
	// Resumable is the fraction of training jobs that may be requeued.
	Resumable float64 `json:"resumable"`
	// MaxNodes bounds a gang job (whole nodes).
	MaxNodes int `json:"max_nodes"`
	// LargeGangs makes most training GPU-time come from gang jobs of 8 or
	// more nodes (the "mostly large gang jobs" shape).
	LargeGangs bool `json:"large_gangs"`
	// Bursty is the number of teams (drawn by the seed) that submit nothing
	// for BurstIdleDays and then BurstFactor times their share of the
	// capacity.
	Bursty        int     `json:"bursty"`
	BurstIdleDays float64 `json:"burst_idle_days"`
	BurstFactor   float64 `json:"burst_factor"`
}

// DefaultHeavyConfig is the heavy-tailed shape of issue 12: 1,024 GPUs,
// 7 days, allocated demand 3x capacity, 5% filler.
func DefaultHeavyConfig() HeavyConfig {
	return HeavyConfig{Seed: 1, Days: 7, GPUs: 1024, GPUsPerNode: 8, Allocated: 3, Filler: 0.05, TeamSpread: 1,
		Resumable: 0.7, MaxNodes: 32, BurstIdleDays: 7, BurstFactor: 5}
}

// Validate says what is wrong with the configuration: a
// *GenConfigKeyError naming the first key (as in JSON) whose value is not
// valid, and what would be.
func (h HeavyConfig) Validate() error {
	bad := func(key string, v any, want string) error {
		return &GenConfigKeyError{Key: key, Err: fmt.Errorf("%v: want %s", v, want)}
	}
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case !(h.Days > 0 && h.Days <= 3650):
		return bad("days", h.Days, "days of submissions, more than 0 and at most 3650")
	case h.GPUs < 1:
		return bad("gpus", h.GPUs, "the cluster's GPUs, 1 or more")
	case h.GPUsPerNode < 1 || h.GPUsPerNode > 64:
		return bad("gpus_per_node", h.GPUsPerNode, "the GPUs of a node, 1 to 64")
	case !(h.Allocated >= 0) || !finite(h.Allocated):
		return bad("allocated", h.Allocated, "allocated work as a multiple of capacity, 0 or more (e.g. 3)")
	case !(h.Filler >= 0) || !finite(h.Filler):
		return bad("filler", h.Filler, "unallocated work as a multiple of capacity, 0 or more (e.g. 0.05)")
	case !(h.TeamSpread >= 0) || !finite(h.TeamSpread):
		return bad("team_spread", h.TeamSpread, "the spread of the teams' demand around their shares, 0 or more (0: every team at its share)")
	case !(h.Resumable >= 0 && h.Resumable <= 1):
		return bad("resumable", h.Resumable, "the fraction of training jobs that may be requeued, in [0, 1]")
	case h.MaxNodes < 1:
		return bad("max_nodes", h.MaxNodes, "the most nodes a gang job spans, 1 or more")
	case h.Bursty < 0:
		return bad("bursty", h.Bursty, "the number of bursty teams, 0 or more")
	case h.Bursty > 0 && !(h.BurstIdleDays >= 0 && finite(h.BurstIdleDays)):
		return bad("burst_idle_days", h.BurstIdleDays, "the days a bursty team submits nothing, 0 or more")
	case h.Bursty > 0 && !(h.BurstFactor > 0 && finite(h.BurstFactor)):
		return bad("burst_factor", h.BurstFactor, "a bursty team's demand after its idle days, as a multiple of its share, more than 0")
	}
	return nil
}

// runtimeKnots is the runtime distribution of Microsoft's Philly trace
// (Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN
// Training Workloads", USENIX ATC 2019: median about 10 minutes, 90th
// percentile about 9 hours, 99th about 3 days, a few jobs over a month), as
// points of its quantile function; a draw interpolates log-runtime
// linearly between them.
var runtimeKnots = [...]struct {
	q float64
	d time.Duration
}{{0, time.Minute}, {0.5, 10 * time.Minute}, {0.9, 9 * time.Hour}, {0.99, 72 * time.Hour}, {1, 40 * 24 * time.Hour}}

// heavyRuntime draws a runtime from runtimeKnots.
func heavyRuntime(rng *rand.Rand) time.Duration {
	u := rng.Float64()
	for k := 1; k < len(runtimeKnots); k++ {
		a, b := runtimeKnots[k-1], runtimeKnots[k]
		if u <= b.q {
			f := (u - a.q) / (b.q - a.q)
			l := math.Log(float64(a.d)) + f*(math.Log(float64(b.d))-math.Log(float64(a.d)))
			return time.Duration(math.Exp(l)).Round(time.Second)
		}
	}
	return runtimeKnots[len(runtimeKnots)-1].d
}

// Training sizes in nodes' worth of GPUs, with their weights: most jobs are
// small, a few span up to MaxNodes nodes; LargeGangs turns the weights
// towards 8 nodes and more.
var (
	heavyGPUSizes    = [...]int{1, 2, 4, 1, 2, 4, 8, 16, 32}        // × 1 for the first three, × GPUsPerNode after
	heavyWeights     = [...]float64{30, 10, 10, 20, 10, 8, 6, 4, 2} // by entry
	heavyLargeWeight = [...]float64{2, 1, 1, 4, 4, 8, 30, 30, 20}
)

// GenerateHeavy writes a seeded heavy-tailed trace for the teams (leaves)
// of tree. Jobs with runtimes of at most 15 minutes are debug jobs (1-8
// GPUs, a 5-15 minute window, the debug meta priorities); the others are
// training (gangs of whole nodes past one node, windows of 1-8 hours).
func GenerateHeavy(tree *budgets.Tree, h HeavyConfig) (*Trace, error) {
	if err := h.Validate(); err != nil {
		return nil, err
	}
	if tree == nil || len(tree.Leaves()) == 0 {
		return nil, fmt.Errorf("the generator needs a budget tree with at least one leaf")
	}
	rng := rand.New(rand.NewPCG(h.Seed, 0x4ea7))
	g := &generator{cfg: DefaultGenConfig(), rng: rng, period: h.Days * 86400, tr: &Trace{}}
	capHours := float64(h.GPUs) * g.period / 3600
	leaves := tree.Leaves()
	weight := make([]float64, len(leaves))
	var total float64
	for k, l := range leaves {
		weight[k] = l.Effective * math.Exp(h.TeamSpread*rng.NormFloat64())
		total += weight[k]
	}
	order := rng.Perm(len(leaves))
	bursty := make([]bool, len(leaves))
	for _, k := range order[:min(h.Bursty, len(leaves))] {
		bursty[k] = true
	}
	for k, l := range leaves {
		from := 0.0
		demand := h.Allocated * capHours * weight[k] / total
		if bursty[k] {
			from = min(h.BurstIdleDays*86400, g.period)
			demand = h.BurstFactor * l.Effective * float64(h.GPUs) * (g.period - from) / 3600
		}
		g.heavyTeam(l, h, from, demand)
	}
	g.heavyFiller(tree, h, h.Filler*capHours)
	g.tr.sort()
	return g.tr, nil
}

// heavyTeam adds one team's allocated jobs, submitted uniformly in [from,
// period), until their work clipped to the period reaches gpuHours.
func (g *generator) heavyTeam(leaf *budgets.Node, h HeavyConfig, from, gpuHours float64) {
	weights := heavyWeights
	if h.LargeGangs {
		weights = heavyLargeWeight
	}
	var wsum float64
	for _, w := range weights {
		wsum += w
	}
	for left := gpuHours; left > 0 && from < g.period; {
		submit := time.Duration(int64(from+g.rng.Float64()*(g.period-from))) * time.Second
		work := heavyRuntime(g.rng)
		clip := min(work.Hours(), (g.period-submit.Seconds())/3600)
		var j JobSpec
		if work <= 15*time.Minute {
			j = JobSpec{ID: g.id(leaf, "debug"), Class: ClassDebug, Count: 1,
				GPUs: debugSizes[g.rng.IntN(len(debugSizes))], Work: work,
				MinRuntime: time.Duration(5+g.rng.IntN(11)) * time.Minute, Priority: g.priority(g.cfg.DebugPriority)}
		} else {
			x := g.rng.Float64() * wsum
			k := len(weights) - 1
			for i, w := range weights {
				if x < w {
					k = i
					break
				}
				x -= w
			}
			count, per := 1, heavyGPUSizes[k]
			if k >= 3 {
				count, per = min(heavyGPUSizes[k], h.MaxNodes), h.GPUsPerNode
			}
			j = JobSpec{ID: g.id(leaf, "train"), Class: ClassTrain, Count: count, GPUs: per, Work: work,
				MinRuntime: time.Duration(1+g.rng.IntN(8)) * time.Hour, Resumable: g.rng.Float64() < h.Resumable,
				Priority: g.priority(g.cfg.TrainPriority)}
		}
		hours := float64(j.TotalGPUs()) * clip
		if !g.keepLast(left, hours) {
			break
		}
		j.Submit, j.Budget, j.Baseline = submit, leaf.Path, g.level()
		g.tr.Jobs = append(g.tr.Jobs, j)
		left -= hours
	}
}

// heavyFiller adds unallocated work (min_runtime 0) of the teams by share.
func (g *generator) heavyFiller(tree *budgets.Tree, h HeavyConfig, gpuHours float64) {
	leaves := tree.Leaves()
	for left := gpuHours; left > 0; {
		leaf := g.leafByShare(leaves)
		gpus := []int{1, 2, 4, 8}[g.rng.IntN(4)]
		work := g.logUniform(time.Hour, 12*time.Hour)
		submit := g.at()
		hours := float64(gpus) * min(work.Hours(), (g.period-submit.Seconds())/3600)
		if !g.keepLast(left, hours) {
			break
		}
		g.tr.Jobs = append(g.tr.Jobs, JobSpec{ID: g.id(leaf, "free"), Submit: submit, Budget: leaf.Path,
			Class: ClassOther, Count: 1, GPUs: min(gpus, h.GPUsPerNode), Work: work, Resumable: true,
			Priority: g.priority(g.cfg.TrainPriority), Baseline: g.level()})
		left -= hours
	}
}

// heavyQuantiles reports the trace's runtime quantiles (for tests and the
// suite's notes): p50, p90, p99 of the jobs' work.
func heavyQuantiles(tr *Trace) (p50, p90, p99 time.Duration) {
	ws := make([]int64, 0, len(tr.Jobs))
	for i := range tr.Jobs {
		if tr.Jobs[i].MinRuntime > 0 {
			ws = append(ws, int64(tr.Jobs[i].Work))
		}
	}
	slices.Sort(ws)
	return time.Duration(percentile(ws, .5)), time.Duration(percentile(ws, .9)), time.Duration(percentile(ws, .99))
}
