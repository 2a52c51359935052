package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/hcl"
	"github.com/allot-sched/allot/overlay/sim"
)

// suiteFile is DIR/suite.json of `allot sim suite DIR`: scenarios, each
// run with every seed under allot and the baseline. Paths are relative to
// the suite file.
type suiteFile struct {
	Scenarios []suiteScenario `json:"scenarios"`
}

// suiteScenario is one scenario of a suite: a scenario file (the form of
// `allot sim SCENARIO.json`) or the same keys inline, plus a generator
// override, the seeds, the horizon and the warm-up.
type suiteScenario struct {
	Name     string `json:"name"`
	Scenario string `json:"scenario"` // a scenario file; its keys are the defaults of the ones below
	scenarioFile
	// Heavy generates a heavy-tailed trace (sim.GenerateHeavy) instead of
	// the published generator: keys of sim.HeavyConfig.
	Heavy   json.RawMessage `json:"heavy"`
	Seeds   []uint64        `json:"seeds"`
	Horizon string          `json:"horizon"` // default: the trace's end
	Warmup  string          `json:"warmup"`  // default 24h
}

func simSuiteCommand() *cli.Command {
	return &cli.Command{
		Name:      "suite",
		Usage:     "run every scenario of DIR/suite.json under allot and the baseline and print one table",
		ArgsUsage: "DIR",
		Flags:     []cli.Flag{jsonFlag(), evalOrderFlag(), killTimeoutFlag(), exitHoldsFlag()},
		Action: func(_ context.Context, c *cli.Command) error {
			if c.NArg() != 1 {
				return usagef("sim suite takes one directory holding suite.json, e.g. allot sim suite examples/sim/suite")
			}
			model := suiteModel{evalOrder: c.Bool("eval-order"), killTimeout: c.Bool("kill-timeout"), exitHolds: c.Bool("exit-holds")}
			if model.exitHolds && !model.killTimeout {
				return errExitHolds
			}
			rows, err := runSuite(c.Args().First(), model, c.Root().ErrWriter)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				enc := json.NewEncoder(c.Root().Writer)
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			return sim.WriteSuiteTable(c.Root().Writer, rows)
		},
	}
}

// suiteModel is what of the Nomad model a suite run turns on (allot sim
// suite -eval-order, -kill-timeout, -exit-holds), for every scenario alike.
type suiteModel struct{ evalOrder, killTimeout, exitHolds bool }

// runSuite runs the suite in dir; progress goes to log, one line a run.
func runSuite(dir string, model suiteModel, log io.Writer) ([]sim.SuiteRow, error) {
	path := filepath.Join(dir, "suite.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var sf suiteFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sf); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	var rows []sim.SuiteRow
	for k, s := range sf.Scenarios {
		if s.Name == "" {
			return nil, fmt.Errorf("%s: scenario %d has no name", path, k+1)
		}
		seeds := s.Seeds
		if len(seeds) == 0 {
			seeds = []uint64{1}
		}
		for _, seed := range seeds {
			start := time.Now()
			row, err := runSuiteScenario(dir, s, seed, model)
			if err != nil {
				return nil, fmt.Errorf("%s: scenario %s, seed %d: %w", path, s.Name, seed, err)
			}
			fmt.Fprintf(log, "suite: %s seed %d: %.1fs\n", s.Name, seed, time.Since(start).Seconds())
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// runSuiteScenario resolves one scenario for one seed and runs both policies.
func runSuiteScenario(dir string, s suiteScenario, seed uint64, model suiteModel) (sim.SuiteRow, error) {
	sc, base := s.scenarioFile, dir
	if s.Scenario != "" {
		file := rel(dir, s.Scenario)
		b, err := os.ReadFile(file)
		if err != nil {
			return sim.SuiteRow{}, err
		}
		var from scenarioFile
		if err := json.Unmarshal(b, &from); err != nil {
			return sim.SuiteRow{}, fmt.Errorf("%s: %v", file, err)
		}
		// The inline keys win; paths of the file stay relative to it.
		fbase, err := filepath.Abs(filepath.Dir(file))
		if err != nil {
			return sim.SuiteRow{}, err
		}
		if sc.Budgets == "" {
			sc.Budgets = rel(fbase, from.Budgets)
		}
		if sc.Trace == "" && from.Trace != "" {
			sc.Trace = rel(fbase, from.Trace)
		}
		if sc.Cluster == "" && from.Cluster != "" {
			sc.Cluster = rel(fbase, from.Cluster)
		}
		if sc.Config == "" && from.Config != "" {
			sc.Config = rel(fbase, from.Config)
		}
		if sc.Nodes == 0 && len(sc.Pools) == 0 {
			sc.Nodes, sc.GPUsPerNode, sc.Pools = from.Nodes, from.GPUsPerNode, from.Pools
		}
		if from.Generate != nil {
			if sc.Generate == nil {
				sc.Generate = from.Generate
			} else {
				sc.Generate = mergeJSON(from.Generate, sc.Generate)
			}
		}
	}
	var tree *budgets.Tree
	if sc.Budgets != "" {
		t, err := hcl.LoadDir(rel(base, sc.Budgets))
		if err != nil {
			return sim.SuiteRow{}, fmt.Errorf("budgets %s: %w", sc.Budgets, err)
		}
		tree = t
	}
	cluster, err := suiteCluster(sc, base)
	if err != nil {
		return sim.SuiteRow{}, err
	}
	pc, err := simPolicy(rel(base, sc.Config))
	if err != nil {
		return sim.SuiteRow{}, err
	}
	opts := sim.DefaultOptions()
	opts.Seed = seed
	opts.Warmup = defaultWarmup
	opts.EvalOrder, opts.KillTimeout, opts.ExitHolds = model.evalOrder, model.killTimeout, model.exitHolds
	if s.Warmup != "" {
		if opts.Warmup, err = time.ParseDuration(s.Warmup); err != nil {
			return sim.SuiteRow{}, fmt.Errorf("warmup: %v", err)
		}
	}
	if s.Horizon != "" {
		if opts.Horizon, err = time.ParseDuration(s.Horizon); err != nil {
			return sim.SuiteRow{}, fmt.Errorf("horizon: %v", err)
		}
	}
	tr, err := suiteTrace(s, sc, base, tree, cluster, seed)
	if err != nil {
		return sim.SuiteRow{}, err
	}
	row := sim.SuiteRow{Scenario: s.Name, Seed: seed, GPUs: cluster.GPUs()}
	for _, name := range []string{"allot", "baseline"} {
		p, err := newPolicy(name, pc)
		if err != nil {
			return sim.SuiteRow{}, err
		}
		r, err := sim.Run(tr, cluster, tree, p, opts)
		if err != nil {
			return sim.SuiteRow{}, err
		}
		row.Days = r.Days
		row.Figures = append(row.Figures, sim.FiguresOf(r))
	}
	return row, nil
}

// suiteCluster is the scenario's cluster: a cluster file, pools, or nodes
// × GPUs per node (default 8).
func suiteCluster(sc scenarioFile, base string) (sim.ClusterSpec, error) {
	var spec sim.ClusterSpec
	switch {
	case sc.Cluster != "":
		file, err := hcl.LoadCluster(rel(base, sc.Cluster))
		if err != nil {
			return sim.ClusterSpec{}, err
		}
		for _, p := range file.Pools {
			spec.Pools = append(spec.Pools, sim.Pool{Name: p.Name, Nodes: p.Nodes, GPUsPerNode: p.GPUsPerNode, Model: p.Model})
		}
	case len(sc.Pools) > 0:
		spec.Pools = sc.Pools
	default:
		gpus := sc.GPUsPerNode
		if gpus == 0 {
			gpus = 8
		}
		spec = sim.UniformCluster(sc.Nodes, gpus)
	}
	return spec, spec.Validate()
}

// mergeJSON returns object a with the keys of object b set over it.
func mergeJSON(a, b json.RawMessage) json.RawMessage {
	var ma, mb map[string]json.RawMessage
	if json.Unmarshal(a, &ma) != nil || json.Unmarshal(b, &mb) != nil {
		return b
	}
	for k, v := range mb {
		ma[k] = v
	}
	out, err := json.Marshal(ma)
	if err != nil {
		return b
	}
	return out
}

// suiteTrace is scenario s's trace for seed: its trace file, or the trace
// its "heavy" or "generate" settings generate on cluster.
func suiteTrace(s suiteScenario, sc scenarioFile, base string, tree *budgets.Tree, cluster sim.ClusterSpec, seed uint64) (*sim.Trace, error) {
	var tr *sim.Trace
	var err error
	switch {
	case sc.Trace != "":
		tr, err = readTrace(rel(base, sc.Trace), false)
	case tree == nil:
		return nil, fmt.Errorf("a scenario needs a trace or budgets to generate one from")
	case s.Heavy != nil:
		h := sim.DefaultHeavyConfig()
		dec := json.NewDecoder(bytes.NewReader(s.Heavy))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&h); err != nil {
			return nil, fmt.Errorf("heavy: %v", err)
		}
		tr, err = heavyTrace(tree, h, cluster, seed)
	default:
		g := sim.DefaultGenConfig()
		if sc.Generate != nil {
			if err := json.Unmarshal(sc.Generate, &g); err != nil {
				return nil, err
			}
		}
		g.Seed, g.GPUs, g.Nodes = seed, cluster.GPUs(), clusterNodes(cluster)
		if tr, err = sim.Generate(tree, g); err == nil {
			nameFaultNodes(tr, cluster)
		}
	}
	if err != nil {
		return nil, err
	}
	if sc.Trace == "" && s.Heavy == nil {
		sim.SpreadOverPools(tr, cluster, seed) // a generated trace on several pools (heavyTrace spreads its own)
	}
	return tr, nil
}
