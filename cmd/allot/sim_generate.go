package main

import (
	"context"
	"errors"
	"os"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/hcl"
	"github.com/allot-sched/allot/overlay/sim"
)

// `allot sim generate`: a seeded synthetic trace of one of two shapes.
// "published" is the example's generator (sim.Generate: the bounded
// runtimes of the published scenario); "heavy" the heavy-tailed one of the
// suite (sim.GenerateHeavy: runtimes of public GPU-cluster traces, demand
// well above capacity, gangs of whole nodes), the same trace for the same
// seed and settings as a suite scenario's "heavy" key writes (heavyTrace).

const (
	shapePublished = "published"
	shapeHeavy     = "heavy"
)

// generateFlags are the flags of one shape only: set with the other shape
// they are a usage error.
var (
	publishedOnly = []string{"demand", "debug-per-day", "train-cap", "failures"}
	heavyOnly     = []string{"filler", "resumable", "max-nodes", "large-gangs", "bursty", "burst-idle-days", "burst-factor"}
)

func simGenerateCommand() *cli.Command {
	d, h := sim.DefaultGenConfig(), sim.DefaultHeavyConfig()
	return &cli.Command{
		Name:  "generate",
		Usage: "write a seeded synthetic trace for the teams of a budget tree",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "budgets", Usage: "directory of budget HCL files, the teams being its leaves (required)", Required: true},
			&cli.StringFlag{Name: "o", Usage: "output file, .csv or .jsonl (default: CSV on stdout)"},
			&cli.StringFlag{Name: "shape", Value: shapePublished, Usage: "published: the example's generator (bounded runtimes); heavy: heavy-tailed runtimes of public GPU-cluster traces (median ~10m, p90 ~9h, p99 ~3d), demand well above capacity and gangs of whole nodes, as the suite's \"heavy\" scenarios"},
			&cli.Uint64Flag{Name: "seed", Value: d.Seed, Usage: "seed of the generator: the same seed and settings write the same trace"},
			&cli.Float64Flag{Name: "days", Value: d.Days, Usage: "days of submissions, more than 0 and at most 3650 (heavy: default 7)"},
			&cli.IntFlag{Name: "nodes", Value: 128, Usage: "GPU nodes in the cluster (one pool, \"default\"), 1 to 100000: faults are drawn from them, heavy demand is scaled to their GPUs"},
			&cli.IntFlag{Name: "gpus-per-node", Value: 8, Usage: "GPUs per node, 1 to 64: no allocation asks more"},
			&cli.StringFlag{Name: "cluster", Usage: "HCL file of the cluster's node pools, instead of -nodes and -gpus-per-node: faults then name its nodes (heavy: jobs are spread over its pools)"},
			&cli.Float64Flag{Name: "allocated", Value: d.Allocated, Usage: "allocated work submitted as a multiple of capacity; published: the rest of -demand is unallocated filler (heavy: default 3)"},
			&cli.Float64Flag{Name: "team-spread", Value: d.TeamSpread, Usage: "published: each team's training demand is drawn from [1-x, 1+x] times its share, x in [0, 1); heavy: share × exp(x × z), z standard normal, x >= 0 (default 1)"},
			&cli.Float64Flag{Name: "demand", Value: d.Demand, Usage: "published: all work submitted (allocated and unallocated) as a multiple of capacity"},
			&cli.Float64Flag{Name: "debug-per-day", Value: d.DebugPerDay, Usage: "published: debug jobs submitted a day, spread over the teams by share"},
			&cli.Float64Flag{Name: "train-cap", Value: d.TrainCap, Usage: "published: largest training job as a multiple of its team's share of the GPUs; 0: every size for every team"},
			&cli.IntFlag{Name: "failures", Value: d.Failures, Usage: "published: node faults (GPU XIDs) in the period"},
			&cli.Float64Flag{Name: "filler", Value: h.Filler, Usage: "heavy: unallocated work (min_runtime 0) submitted as a multiple of capacity, 0 or more"},
			&cli.Float64Flag{Name: "resumable", Value: h.Resumable, Usage: "heavy: fraction of training jobs that may be requeued, in [0, 1]"},
			&cli.IntFlag{Name: "max-nodes", Value: h.MaxNodes, Usage: "heavy: the most whole nodes a gang job spans, 1 or more"},
			&cli.BoolFlag{Name: "large-gangs", Usage: "heavy: most training GPU time from gangs of 8 or more nodes (the suite's large-gangs)"},
			&cli.IntFlag{Name: "bursty", Value: h.Bursty, Usage: "heavy: teams (drawn by the seed) that submit nothing for -burst-idle-days, then -burst-factor times their share"},
			&cli.Float64Flag{Name: "burst-idle-days", Value: h.BurstIdleDays, Usage: "heavy: days a bursty team submits nothing, 0 or more"},
			&cli.Float64Flag{Name: "burst-factor", Value: h.BurstFactor, Usage: "heavy: a bursty team's demand after its idle days, as a multiple of its share, more than 0"},
		},
		Action: runSimGenerate,
	}
}

func runSimGenerate(_ context.Context, c *cli.Command) error {
	if c.NArg() > 0 {
		return usagef("sim generate takes no arguments, got %q (the output file is -o FILE)", c.Args().Slice())
	}
	shape := c.String("shape")
	var wrong []string
	switch shape {
	case shapePublished:
		wrong = heavyOnly
	case shapeHeavy:
		wrong = publishedOnly
	default:
		return usagef("-shape %q: want %s (the example's generator) or %s (heavy-tailed runtimes, as the suite's heavy scenarios)",
			shape, shapePublished, shapeHeavy)
	}
	own := map[string][]string{shapePublished: publishedOnly, shapeHeavy: heavyOnly}[shape]
	for _, f := range wrong {
		if c.IsSet(f) {
			return usagef("-%s is not a setting of -shape %s (its own are -%s; and -days, -allocated, -team-spread)", f, shape,
				strings.Join(own, ", -"))
		}
	}
	if err := checkClusterFlags(c); err != nil {
		return err
	}
	path := c.String("o")
	if path != "" && !strings.HasSuffix(path, ".csv") && !strings.HasSuffix(path, ".jsonl") {
		return usagef("-o %s: name the file .csv or .jsonl (the format is chosen by the name)", path)
	}
	tree, err := hcl.LoadDir(c.String("budgets"))
	if err != nil {
		return err
	}
	spec := sim.UniformCluster(c.Int("nodes"), c.Int("gpus-per-node"))
	if c.IsSet("cluster") {
		if c.IsSet("nodes") || c.IsSet("gpus-per-node") {
			return usagef("-cluster and -nodes/-gpus-per-node both give the cluster's shape; use either a cluster file or -nodes and -gpus-per-node, not both")
		}
		if spec, err = loadCluster(c, c.String("cluster")); err != nil {
			return err
		}
	}
	var tr *sim.Trace
	if shape == shapeHeavy {
		tr, err = generateHeavyFromFlags(c, tree, spec)
	} else {
		tr, err = generatePublishedFromFlags(c, tree, spec)
	}
	if err != nil {
		return err
	}
	write := sim.WriteCSV
	if strings.HasSuffix(path, ".jsonl") {
		write = sim.WriteJSONL
	}
	if path == "" {
		return write(c.Root().Writer, tr)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f, tr); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// generatePublishedFromFlags is the published shape's trace (sim.Generate).
func generatePublishedFromFlags(c *cli.Command, tree *budgets.Tree, spec sim.ClusterSpec) (*sim.Trace, error) {
	g := sim.DefaultGenConfig()
	g.Seed, g.Days, g.Demand = c.Uint64("seed"), c.Float64("days"), c.Float64("demand")
	g.Allocated, g.DebugPerDay, g.Failures = c.Float64("allocated"), c.Float64("debug-per-day"), c.Int("failures")
	g.TeamSpread, g.TrainCap = c.Float64("team-spread"), c.Float64("train-cap")
	g.Nodes, g.GPUs, g.GPUsPerNode = clusterNodes(spec), spec.GPUs(), largestNode(spec)
	tr, err := sim.Generate(tree, g)
	if err != nil {
		return nil, usagef("%v", err)
	}
	nameFaultNodes(tr, spec)
	namePool(tr, spec)
	return tr, nil
}

// generateHeavyFromFlags is the heavy shape's trace: sim.DefaultHeavyConfig
// with the flags set, as heavyTrace makes it for a suite scenario. A value
// that is not valid is a usage error naming its flag.
func generateHeavyFromFlags(c *cli.Command, tree *budgets.Tree, spec sim.ClusterSpec) (*sim.Trace, error) {
	h := sim.DefaultHeavyConfig()
	floats := map[string]*float64{"days": &h.Days, "allocated": &h.Allocated, "team-spread": &h.TeamSpread, "filler": &h.Filler,
		"resumable": &h.Resumable, "burst-idle-days": &h.BurstIdleDays, "burst-factor": &h.BurstFactor}
	for name, v := range floats {
		if c.IsSet(name) {
			*v = c.Float64(name)
		}
	}
	ints := map[string]*int{"max-nodes": &h.MaxNodes, "bursty": &h.Bursty}
	for name, v := range ints {
		if c.IsSet(name) {
			*v = c.Int(name)
		}
	}
	h.LargeGangs = c.Bool("large-gangs")
	tr, err := heavyTrace(tree, h, spec, c.Uint64("seed"))
	var ke *sim.GenConfigKeyError
	if errors.As(err, &ke) {
		flag := strings.ReplaceAll(ke.Key, "_", "-")
		return nil, usagef("-%s %v", flag, ke.Err)
	}
	return tr, err
}

// heavyTrace is the heavy-tailed trace of h on cluster, for seed: demand
// scaled to the cluster's GPUs, gangs of its largest node, jobs spread over
// its pools (h's gpus and gpus_per_node are the cluster's). The suite's
// "heavy" scenarios and `sim generate -shape heavy` both write it.
func heavyTrace(tree *budgets.Tree, h sim.HeavyConfig, cluster sim.ClusterSpec, seed uint64) (*sim.Trace, error) {
	h.Seed, h.GPUs, h.GPUsPerNode = seed, cluster.GPUs(), largestNode(cluster)
	tr, err := sim.GenerateHeavy(tree, h)
	if err != nil {
		return nil, err
	}
	sim.SpreadOverPools(tr, cluster, seed)
	return tr, nil
}
