package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/allot-sched/allot/budgets"
)

// GenConfig shapes a generated trace. DefaultGenConfig is the published
// scenario of examples/sim.
type GenConfig struct {
	Seed uint64
	Days float64
	GPUs int // cluster capacity the demand is scaled to
	// GPUsPerNode is the GPUs of the cluster's largest node: no allocation
	// asks more, so every job can be placed (a training job larger than it
	// is split into allocations of at most this many). 0 means 8, the
	// nodes of examples/sim. Scenario files do not set it: allot sim takes
	// it from the cluster, as it does GPUs and Nodes.
	GPUsPerNode int
	// Demand is all the work submitted over the period, allocated and
	// unallocated together, as a multiple of capacity (GPU-hours submitted /
	// GPU-hours the cluster has). It is what "demand 2-3x capacity" counts.
	Demand float64
	// Allocated is the allocated work submitted (debug, interactive and
	// training jobs with a budget and a min_runtime), as a multiple of
	// capacity; the rest of Demand is unallocated filler (min_runtime 0).
	// Allocated arrivals above 1 can never all run, so the cluster fills
	// with protected and running allocated work and leaves no room for the
	// unallocated share the published deployment reports: with occupancy
	// o and an unallocated share u of it, allocated load is o(1-u).
	Allocated float64
	// TeamSpread scatters each team's training demand around its share: a
	// factor drawn uniformly from [1-TeamSpread, 1+TeamSpread], then
	// normalized so that the share-weighted mean factor is 1 (the total
	// stays Allocated).
	TeamSpread float64
	// DebugPerDay is the number of debug jobs a day, spread over teams by share.
	DebugPerDay float64
	// InteractivePerDay is the number of interactive jobs a day.
	InteractivePerDay float64
	// Resumable is the fraction of training jobs that may be requeued.
	Resumable float64
	// TrainNotice and InteractiveNotice are the checkpoint notices (with
	// SIGUSR1) the resumable training jobs and the interactive sessions
	// declare; filler and debug jobs declare none. 0: none.
	TrainNotice, InteractiveNotice time.Duration
	// HighInflation is the fraction of jobs that say HIGH under the baseline
	// (the rest split between NORMAL and LOW).
	HighInflation float64
	// TrainSizes are the GPU counts of training jobs (multiples of 8 use
	// allocations of 8 GPUs) with their weights.
	TrainSizes   []int
	TrainWeights []float64
	// DebugPriority and TrainPriority are the inclusive ranges the
	// within-budget meta priority is drawn from (uniformly) for debug and
	// interactive jobs, and for training jobs. A researcher waiting at a
	// terminal for a debug run ranks it above the team's own training
	// backlog, so the default ranges do not overlap; the priority only orders
	// jobs of the same budget leaf and is never compared across leaves.
	DebugPriority, TrainPriority [2]int
	// TrainWork bounds the work of a training job (log-uniform).
	TrainWorkMin, TrainWorkMax time.Duration
	// TrainCap bounds a team's training jobs by its concurrent share of the
	// cluster: no job asks for more than TrainCap × effective share × GPUs
	// (rounded down to whole 8-GPU nodes, at least the smallest size). A
	// team does not submit work it could never run within its own share.
	// Zero: every team submits every size.
	TrainCap float64
	// Failures is the number of node faults; each node is repaired after a
	// time drawn from [RepairMin, RepairMax].
	Failures             int
	Nodes                int // nodes the faults are drawn from (named default-<n>)
	RepairMin, RepairMax time.Duration
}

// DefaultGenConfig is the scenario of examples/sim: 1,024 GPUs, 30 days.
func DefaultGenConfig() GenConfig {
	return GenConfig{Seed: 1, Days: 30, GPUs: 1024, Demand: 2.5, Allocated: 0.78, TeamSpread: 0.9, DebugPerDay: 2000,
		InteractivePerDay: 40, Resumable: 0.85, HighInflation: 0.7, TrainNotice: 5 * time.Minute, InteractiveNotice: 2 * time.Minute,
		DebugPriority: [2]int{80, 100}, TrainPriority: [2]int{20, 79},
		TrainSizes: []int{8, 16, 32, 64, 128, 256}, TrainWeights: []float64{30, 22, 20, 14, 9, 5},
		TrainWorkMin: 2 * time.Hour, TrainWorkMax: 72 * time.Hour, TrainCap: 1,
		Failures: 12, Nodes: 128, RepairMin: 4 * time.Hour, RepairMax: 48 * time.Hour}
}

// Validate says what is wrong with the configuration.
func (g GenConfig) Validate() error {
	switch {
	case g.Days <= 0 || g.Days > 3650:
		return fmt.Errorf("days %v must be in (0, 3650]", g.Days)
	case g.GPUs < 1:
		return fmt.Errorf("gpus %d must be positive", g.GPUs)
	case g.GPUsPerNode < 0 || g.GPUsPerNode > 64:
		return fmt.Errorf("gpus per node %d must be between 1 and 64 (0: 8)", g.GPUsPerNode)
	case g.Allocated < 0 || g.Demand < g.Allocated || g.DebugPerDay < 0 || g.InteractivePerDay < 0:
		return fmt.Errorf("allocated %v must be >= 0 and demand %v >= allocated (demand counts allocated and unallocated work), debug and interactive rates >= 0",
			g.Allocated, g.Demand)
	case g.TrainCap < 0 || math.IsNaN(g.TrainCap):
		return fmt.Errorf("train cap %v must be >= 0 (0: no cap)", g.TrainCap)
	case g.TeamSpread < 0 || g.TeamSpread >= 1:
		return fmt.Errorf("team spread %v must be in [0, 1)", g.TeamSpread)
	case len(g.TrainSizes) == 0 || len(g.TrainSizes) != len(g.TrainWeights):
		return fmt.Errorf("train sizes and weights must be non-empty and of equal length")
	case slices.Min(g.TrainSizes) < 1 || slices.Min(g.TrainWeights) < 0:
		return fmt.Errorf("train sizes %v must be GPU counts of 1 or more, and train weights %v 0 or more", g.TrainSizes, g.TrainWeights)
	case !validPriorityRange(g.DebugPriority) || !validPriorityRange(g.TrainPriority):
		return fmt.Errorf("debug priority %v and train priority %v must be ranges [lo, hi] with 0 <= lo <= hi <= 100",
			g.DebugPriority, g.TrainPriority)
	case g.TrainWorkMin <= 0 || g.TrainWorkMax < g.TrainWorkMin:
		return fmt.Errorf("train work bounds must satisfy 0 < min <= max")
	case g.Failures > 0 && (g.Nodes < 1 || g.RepairMin <= 0 || g.RepairMax < g.RepairMin):
		return fmt.Errorf("faults need nodes >= 1 and 0 < repair min <= repair max")
	}
	return nil
}

func validPriorityRange(r [2]int) bool { return 0 <= r[0] && r[0] <= r[1] && r[1] <= 100 }

// priority draws a within-budget priority from the inclusive range r.
func (g *generator) priority(r [2]int) int { return r[0] + g.rng.IntN(r[1]-r[0]+1) }

type generator struct {
	cfg    GenConfig
	rng    *rand.Rand
	period float64 // seconds
	tr     *Trace
	n      int
}

// Generate writes a seeded trace for the teams (leaves) of tree.
func Generate(tree *budgets.Tree, cfg GenConfig) (*Trace, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if tree == nil || len(tree.Leaves()) == 0 {
		return nil, fmt.Errorf("the generator needs a budget tree with at least one leaf")
	}
	g := &generator{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x5eed)), period: cfg.Days * 86400, tr: &Trace{}}
	capHours := float64(cfg.GPUs) * g.period / 3600
	leaves := tree.Leaves()
	spread := make([]float64, len(leaves))
	var mean float64
	for k, leaf := range leaves {
		spread[k] = 1 + cfg.TeamSpread*(2*g.rng.Float64()-1)
		mean += leaf.Effective * spread[k]
	}
	// Training is what the allocated volume leaves after the expected debug
	// and interactive work.
	train := max(cfg.Allocated*capHours-cfg.Days*(cfg.DebugPerDay*debugGPUHours()+cfg.InteractivePerDay*interactiveGPUHours()), 0)
	// Room for the jobs expected (training counted generously), so that
	// appending does not copy the records again and again.
	filler := (cfg.Demand - cfg.Allocated) * capHours / (logUniformMean(fillerWorkMin, fillerWorkMax) * (1 + 2 + 4 + 8) / 4)
	g.tr.Jobs = slices.Grow(g.tr.Jobs, int(1.05*(cfg.Days*(cfg.DebugPerDay+cfg.InteractivePerDay)+filler))+len(leaves)*64)
	for k, leaf := range leaves {
		g.debug(leaf, cfg.DebugPerDay*cfg.Days*leaf.Effective)
		g.interactive(leaf, cfg.InteractivePerDay*cfg.Days*leaf.Effective)
		g.train(leaf, train*leaf.Effective*spread[k]/mean)
	}
	g.filler(tree, (cfg.Demand-cfg.Allocated)*capHours)
	g.faults()
	g.tr.sort()
	return g.tr, nil
}

func (g *generator) at() time.Duration {
	return time.Duration(int64(g.rng.Float64()*g.period)) * time.Second
}

func (g *generator) level() Level {
	x := g.rng.Float64()
	switch {
	case x < g.cfg.HighInflation:
		return LevelHigh
	case x < g.cfg.HighInflation+(1-g.cfg.HighInflation)*0.6:
		return LevelNormal
	}
	return LevelLow
}

func (g *generator) id(leaf *budgets.Node, kind string) string {
	g.n++
	return fmt.Sprintf("%s-%s-%d", strings.ReplaceAll(leaf.Path, budgets.Separator, "."), kind, g.n)
}

// logUniform draws from [lo, hi] with a log-uniform density.
func (g *generator) logUniform(lo, hi time.Duration) time.Duration {
	l, h := math.Log(float64(lo)), math.Log(float64(hi))
	return time.Duration(math.Exp(l + g.rng.Float64()*(h-l))).Round(time.Second)
}

// Debug and interactive jobs: sizes (drawn uniformly) and work bounds
// (log-uniform).
const (
	debugWorkMin, debugWorkMax             = 2 * time.Minute, 45 * time.Minute
	interactiveWorkMin, interactiveWorkMax = 30 * time.Minute, 4 * time.Hour
	fillerWorkMin, fillerWorkMax           = 2 * time.Hour, 24 * time.Hour
)

var debugSizes = [...]int{1, 1, 2, 4, 8}

// debugGPUHours and interactiveGPUHours are the mean GPU-hours of one job:
// the log-uniform mean work (hi-lo)/ln(hi/lo) times the mean size.
func debugGPUHours() float64 {
	return logUniformMean(debugWorkMin, debugWorkMax) * (1 + 1 + 2 + 4 + 8) / 5.0
}

func interactiveGPUHours() float64 {
	return logUniformMean(interactiveWorkMin, interactiveWorkMax) * 1.5 // 1 or 2 GPUs
}

func logUniformMean(lo, hi time.Duration) float64 {
	return (hi - lo).Hours() / math.Log(float64(hi)/float64(lo))
}

func (g *generator) debug(leaf *budgets.Node, n float64) {
	for k := 0; k < int(n+g.rng.Float64()); k++ {
		work := g.logUniform(debugWorkMin, debugWorkMax)
		g.tr.Jobs = append(g.tr.Jobs, JobSpec{ID: g.id(leaf, "debug"), Submit: g.at(), Budget: leaf.Path,
			Class: ClassDebug, Count: 1, GPUs: g.fit(debugSizes[g.rng.IntN(len(debugSizes))]), Work: work,
			MinRuntime: min(15*time.Minute, work.Round(time.Minute)+time.Minute), Priority: g.priority(g.cfg.DebugPriority),
			Baseline: g.level()})
	}
}

func (g *generator) interactive(leaf *budgets.Node, n float64) {
	for k := 0; k < int(n+g.rng.Float64()); k++ {
		g.tr.Jobs = append(g.tr.Jobs, JobSpec{ID: g.id(leaf, "interactive"), Submit: g.at(), Budget: leaf.Path,
			Class: ClassInteractive, Count: 1, GPUs: g.fit(1 + g.rng.IntN(2)),
			Work: g.logUniform(interactiveWorkMin, interactiveWorkMax), MinRuntime: time.Hour, Priority: g.priority(g.cfg.DebugPriority),
			Baseline: g.level()})
		g.notice(&g.tr.Jobs[len(g.tr.Jobs)-1], g.cfg.InteractiveNotice)
	}
}

// notice gives job j a checkpoint notice of d with SIGUSR1 (none for 0).
// It draws nothing: the rest of the trace is the same with or without.
func (g *generator) notice(j *JobSpec, d time.Duration) {
	if d > 0 {
		j.Signal, j.Notice = "SIGUSR1", d
	}
}

// keepLast decides whether a job of h GPU-hours is added when left remain:
// always when it fits, else with probability left/h, so that the expected
// volume is the target (a heavy-tailed last job would otherwise overshoot).
func (g *generator) keepLast(left, h float64) bool {
	return h <= left || g.rng.Float64()*h < left
}

// train adds training jobs until the leaf's demand reaches gpuHours.
func (g *generator) train(leaf *budgets.Node, gpuHours float64) {
	sizes, weights := g.trainSizes(leaf)
	var total float64
	for _, w := range weights {
		total += w
	}
	for left := gpuHours; left > 0; {
		x := g.rng.Float64() * total
		size := sizes[len(sizes)-1]
		for k, w := range weights {
			if x < w {
				size = sizes[k]
				break
			}
			x -= w
		}
		count, per := g.split(size)
		work := g.logUniform(g.cfg.TrainWorkMin, g.cfg.TrainWorkMax)
		if !g.keepLast(left, float64(size)*work.Hours()) {
			break
		}
		g.tr.Jobs = append(g.tr.Jobs, JobSpec{ID: g.id(leaf, "train"), Submit: g.at(), Budget: leaf.Path,
			Class: ClassTrain, Count: count, GPUs: per, Work: work,
			MinRuntime: time.Duration(1+g.rng.IntN(8)) * time.Hour, Resumable: g.rng.Float64() < g.cfg.Resumable,
			Priority: g.priority(g.cfg.TrainPriority), Baseline: g.level()})
		if j := &g.tr.Jobs[len(g.tr.Jobs)-1]; j.Resumable {
			g.notice(j, g.cfg.TrainNotice)
		}
		left -= float64(size) * work.Hours()
	}
}

// nodeGPUs is the most GPUs one allocation may ask.
func (g *generator) nodeGPUs() int {
	if g.cfg.GPUsPerNode == 0 {
		return 8
	}
	return g.cfg.GPUsPerNode
}

// fit is a one-allocation job's size drawn for 8-GPU nodes, cut to the
// cluster's largest node.
func (g *generator) fit(gpus int) int { return min(gpus, g.nodeGPUs()) }

// split cuts a training job of size GPUs into allocations of whole nodes:
// count allocations of per GPUs, per the largest divisor of size that a
// node holds (on 8-GPU nodes, 32 GPUs are 4 allocations of 8).
func (g *generator) split(size int) (count, per int) {
	per = min(size, g.nodeGPUs())
	for size%per != 0 {
		per--
	}
	return size / per, per
}

// trainSizes are the training sizes and weights a leaf submits: those
// within TrainCap of its share (and within the cluster), or the smallest
// size (cut to the cluster) when none is.
func (g *generator) trainSizes(leaf *budgets.Node) ([]int, []float64) {
	limit := g.cfg.GPUs
	if g.cfg.TrainCap > 0 {
		limit = min(limit, int(g.cfg.TrainCap*leaf.Effective*float64(g.cfg.GPUs))/8*8)
	}
	var sizes []int
	var weights []float64
	small := 0
	for k, s := range g.cfg.TrainSizes {
		if s <= limit {
			sizes, weights = append(sizes, s), append(weights, g.cfg.TrainWeights[k])
		}
		if s < g.cfg.TrainSizes[small] {
			small = k
		}
	}
	if len(sizes) == 0 {
		return []int{min(g.cfg.TrainSizes[small], g.cfg.GPUs)}, []float64{1}
	}
	return sizes, weights
}

// leafByShare draws a leaf with probability its effective share (the last
// leaf takes what rounding leaves over).
func (g *generator) leafByShare(leaves []*budgets.Node) *budgets.Node {
	x := g.rng.Float64()
	for _, l := range leaves {
		if x < l.Effective {
			return l
		}
		x -= l.Effective
	}
	return leaves[len(leaves)-1]
}

// filler adds unallocated work (min_runtime 0) of the teams, each team's
// part in proportion to its share. The team is named (meta budget) because
// in the world before allot the same evaluation sweeps and data jobs were
// submitted under a team like any other work and counted against its limit;
// under allot a min_runtime of 0 makes them free whatever the budget says.
func (g *generator) filler(tree *budgets.Tree, gpuHours float64) {
	leaves := tree.Leaves()
	for left := gpuHours; left > 0; {
		leaf := g.leafByShare(leaves)
		gpus := g.fit([]int{1, 2, 4, 8}[g.rng.IntN(4)])
		work := g.logUniform(fillerWorkMin, fillerWorkMax)
		if !g.keepLast(left, float64(gpus)*work.Hours()) {
			break
		}
		g.tr.Jobs = append(g.tr.Jobs, JobSpec{ID: g.id(leaf, "free"), Submit: g.at(), Budget: leaf.Path,
			Class: ClassOther, Count: 1, GPUs: gpus, Work: work, Resumable: true,
			Priority: g.priority(g.cfg.TrainPriority), Baseline: g.level()})
		left -= float64(gpus) * work.Hours()
	}
}

// gpusPerNode is the GPUs of a node the faults are drawn from: the
// cluster's GPUs spread over Nodes (1 to 64).
func (g *generator) gpusPerNode() int {
	return min(max(g.cfg.GPUs/max(g.cfg.Nodes, 1), 1), 64)
}

func (g *generator) faults() {
	for k := 0; k < g.cfg.Failures; k++ {
		node := fmt.Sprintf("default-%d", g.rng.IntN(g.cfg.Nodes))
		at := g.at()
		gpu := g.rng.IntN(g.gpusPerNode())
		xid := []int{48, 63, 64, 74, 79, 94, 95}[g.rng.IntN(7)]
		repair := g.cfg.RepairMin + time.Duration(g.rng.Int64N(int64(g.cfg.RepairMax-g.cfg.RepairMin)+1))
		repair = repair.Round(time.Second)
		g.tr.Health = append(g.tr.Health,
			HealthEvent{At: at, Node: node, GPU: gpu, Reason: fmt.Sprintf("XID %d on GPU %d", xid, gpu)},
			HealthEvent{At: at + repair, Node: node, GPU: gpu, Healthy: true, Reason: "repaired"})
	}
	slices.SortStableFunc(g.tr.Health, func(a, b HealthEvent) int { return compareDur(a.At, b.At) })
}
