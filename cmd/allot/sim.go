package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/hcl"
	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/sim"
)

func init() { extraCommands = append(extraCommands, simCommand) }

// defaultWarmup is left out of the measurements of `allot sim`: a generated
// trace starts on an empty cluster, which takes most of a day to fill.
const defaultWarmup = 24 * time.Hour

// simFlags are the flags of `allot sim`. They are Local: `allot sim
// generate` has flags of its own, and must neither accept nor list these.
func simFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "budgets", Local: true, Usage: "directory of budget HCL files"},
		&cli.StringFlag{Name: "trace", Local: true, Usage: "trace file: .csv or .jsonl (optionally .gz); without one, a trace is generated"},
		&cli.StringFlag{Name: "config", Local: true, Usage: "an `allot server` config file: the allot policy runs with its policy {} block (runtime_cap, bands, margins, ...), as the server would; without one, the defaults"},
		&cli.StringFlag{Name: "cluster", Local: true, Usage: "HCL file of the cluster's node pools, instead of -nodes and -gpus-per-node (e.g. examples/sim/cluster.hcl)"},
		&cli.IntFlag{Name: "nodes", Local: true, Value: 128, Usage: "GPU nodes in the cluster (one pool, \"default\"), 1 to 100000"},
		&cli.IntFlag{Name: "gpus-per-node", Local: true, Value: 8, Usage: "GPUs per node, 1 to 64"},
		&cli.StringFlag{Name: "policies", Local: true, Value: "allot,baseline", Usage: "comma-separated policies to compare: allot, baseline"},
		&cli.Uint64Flag{Name: "seed", Local: true, Value: 1, Usage: "seed of the model's random choices and of a generated trace"},
		&cli.DurationFlag{Name: "reaction-delay", Local: true, Value: sim.DefaultOptions().ReactionDelay, Usage: "time from a change to the policy's reconcile (0 or more)"},
		&cli.DurationFlag{Name: "start-latency", Local: true, Usage: "time from a placement to the task running (the GPUs are held, the work clock waits); 0: at once"},
		evalOrderFlag(),
		killTimeoutFlag(),
		exitHoldsFlag(),
		&cli.DurationFlag{Name: "start-spacing", Local: true, Usage: "time the clients take per task start when starts come together: a start waits this long after the one before it began; 0: starts never queue"},
		&cli.DurationFlag{Name: "stop-latency", Local: true, Usage: "time from a stop to the client signalling the task, which then exits after its kill_timeout; a task placed on its GPUs starts after that; 0: at once"},
		&cli.DurationFlag{Name: "finish-latency", Local: true, Usage: "time from a task finishing to Nomad hearing of it (the client reports it done): its GPUs are placed on only then; 0: at once"},
		&cli.BoolFlag{Name: "pass-on-report", Local: true, Usage: "the policy also runs when Nomad hears a task ended (-finish-latency, -exit-holds), on the view before Nomad's placements on its GPUs, and its writes land after them, as a real allot's event-driven pass does"},
		&cli.DurationFlag{Name: "reconcile-interval", Local: true, Usage: "the policy also runs at most this long after its last pass, as allot's leader does every reconcile interval (the server's default 5s); 0: only on events and when its plan asks"},
		&cli.DurationFlag{Name: "health-latency", Local: true, Usage: "time from a trace's health row to Nomad's servers and allot hearing of it (a client re-registers a changed fingerprint 5-10 s later); 0: at once"},
		&cli.DurationFlag{Name: "pending-stop-latency", Local: true, Usage: "with -kill-timeout: time from Nomad preempting an allocation whose task had not started to its client reporting it done; the preemptor starts, and waits for its victims in allot's view, until then; 0: it exits as a running task does"},
		&cli.DurationFlag{Name: "checkpoint-loss", Local: true, Value: sim.DefaultOptions().CheckpointLoss, Usage: "most work a resumable job loses when preempted: its run since it last started, up to this (0 or more)"},
		&cli.DurationFlag{Name: "horizon", Local: true, DefaultText: "the trace's end", Usage: "simulated time to run"},
		&cli.DurationFlag{Name: "warmup", Local: true, Value: defaultWarmup, Usage: "start of the run left out of the measurements (the cluster starts empty); the default is dropped for runs not longer than twice it"},
		&cli.BoolFlag{Name: "best-fit", Local: true, Usage: "score every feasible node instead of Nomad's two"},
		&cli.BoolFlag{Name: "skip-invalid", Local: true, Usage: "drop invalid trace rows, jobs no node can hold and health rows for nodes or GPUs the cluster lacks (counted) instead of failing"},
		&cli.StringFlag{Name: "html", Local: true, Usage: "write an HTML report to this file"},
		&cli.StringFlag{Name: "events", Local: true, Usage: "write the run's event log (JSON lines, sim.Event) to this file; with several policies, one file each (FILE.allot.jsonl, ...)"},
		localFlag(jsonFlag()),
	}
}

// evalOrderFlag and killTimeoutFlag turn on Options.EvalOrder and
// Options.KillTimeout, for allot sim and allot sim suite alike.
func evalOrderFlag() cli.Flag {
	return &cli.BoolFlag{Name: "eval-order", Local: true, Usage: "process the eval each of the policy's calls creates before its next call, as Nomad's broker does (a stopped victim's replacement takes its GPUs back and the job it was stopped for preempts it); off: by priority at the end of the instant"}
}

func killTimeoutFlag() cli.Flag {
	return &cli.BoolFlag{Name: "kill-timeout", Local: true, Usage: "model stopped tasks' exit: a task exits -stop-latency plus its kill_timeout (the trace's column, Nomad's default 5s) after its stop, and one placed on its GPUs starts then"}
}

// exitHoldsFlag turns on Options.ExitHolds (with -kill-timeout), for allot
// sim and allot sim suite alike.
func exitHoldsFlag() cli.Flag {
	return &cli.BoolFlag{Name: "exit-holds", Local: true, Usage: "with -kill-timeout: a stopped task's GPUs stay held for every other job until it exits (Nomad counts them until the client reports the task done), so the job the stop was for cannot preempt the victim's replacement before then; the blocked evals are retried at the exit, by priority"}
}

// errExitHolds is the usage error of -exit-holds without -kill-timeout.
var errExitHolds = usagef("-exit-holds needs -kill-timeout (the time a stopped task exits)")

// localFlag is f, not inherited by subcommands.
func localFlag(f cli.Flag) cli.Flag {
	if b, ok := f.(*cli.BoolFlag); ok {
		b.Local = true
	}
	return f
}

func simCommand() *cli.Command {
	return &cli.Command{
		Name:      "sim",
		Usage:     "replay a workload through allot and the baseline on a model of Nomad, and compare",
		ArgsUsage: "[SCENARIO.json]",
		Flags:     simFlags(),
		Commands:  []*cli.Command{simGenerateCommand(), simSuiteCommand(), simCompareCommand()},
		Action:    runSim,
	}
}

// simInputs are the resolved inputs of a run.
type simInputs struct {
	policy  policy.Config // the allot policy's, from -config or the defaults
	tree    *budgets.Tree
	trace   *sim.Trace
	cluster sim.ClusterSpec
	opts    sim.Options
}

// scenarioOf reads the optional SCENARIO argument; without one, every
// input comes from the flags.
func scenarioOf(c *cli.Command) (*scenarioFile, string, error) {
	if c.NArg() > 1 {
		return nil, "", usagef("sim takes at most one scenario file, got %q", c.Args().Slice())
	}
	if c.NArg() == 0 {
		return &scenarioFile{}, ".", nil
	}
	path := c.Args().First()
	sc, err := loadScenario(c.Root().ErrWriter, path)
	if err != nil {
		return nil, "", err
	}
	return sc, filepath.Dir(path), nil
}

// checkClusterFlags refuses -nodes and -gpus-per-node out of the model's
// range, as a usage error naming the flag.
func checkClusterFlags(c *cli.Command) error {
	if n := c.Int("nodes"); n < 1 || n > 100000 {
		return usagef("-nodes %d: want the number of GPU nodes, 1 to 100000", n)
	}
	if n := c.Int("gpus-per-node"); n < 1 || n > 64 {
		return usagef("-gpus-per-node %d: want the GPUs of each node, 1 to 64", n)
	}
	return nil
}

// checkSimFlags refuses flag values no run can use.
func checkSimFlags(c *cli.Command) error {
	if err := checkClusterFlags(c); err != nil {
		return err
	}
	for _, f := range []struct{ name, zero string }{
		{"reaction-delay", "0: the policy reacts at once"},
		{"checkpoint-loss", "0: a preempted job loses nothing"},
		{"start-latency", "0: a placed task runs at once"},
		{"stop-latency", "0: a stopped task is signalled at once"},
		{"finish-latency", "0: Nomad hears of a finished task at once"},
		{"health-latency", "0: a health change is heard at once"},
		{"reconcile-interval", "0: no periodic pass"},
		{"pending-stop-latency", "0: a victim that had not started exits as a running one does"},
		{"start-spacing", "0: starts never queue"},
		{"horizon", "0: to the trace's end"},
		{"warmup", "0: measure from the start"},
	} {
		if d := c.Duration(f.name); d < 0 {
			return usagef("-%s %v: want a duration of 0 or more (%s)", f.name, d, f.zero)
		}
	}
	return nil
}

func rel(base, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(base, p)
}

func simInputsFrom(c *cli.Command) (*simInputs, error) {
	if err := checkSimFlags(c); err != nil {
		return nil, err
	}
	sc, base, err := scenarioOf(c)
	if err != nil {
		return nil, err
	}
	in := &simInputs{opts: sim.DefaultOptions()}
	configPath := rel(base, sc.Config)
	if c.IsSet("config") {
		configPath = c.String("config")
	}
	if in.policy, err = simPolicy(configPath); err != nil {
		if !c.IsSet("config") {
			err = sc.missing("config", err)
		}
		return nil, err
	}
	budgetsDir := rel(base, sc.Budgets)
	if c.IsSet("budgets") || budgetsDir == "" {
		budgetsDir = c.String("budgets")
	}
	if budgetsDir != "" {
		if in.tree, err = hcl.LoadDir(budgetsDir); err != nil {
			if e, ok := sc.missingAt("budgets", err); ok && !c.IsSet("budgets") {
				return nil, e
			}
			return nil, fmt.Errorf("budgets %s: %w", budgetsDir, err)
		}
	}
	if in.cluster, err = simCluster(c, sc, base); err != nil {
		return nil, err
	}
	in.opts.Seed = c.Uint64("seed")
	in.opts.ReactionDelay = c.Duration("reaction-delay")
	in.opts.CheckpointLoss = c.Duration("checkpoint-loss")
	in.opts.StartLatency = c.Duration("start-latency")
	in.opts.StopLatency = c.Duration("stop-latency")
	in.opts.FinishLatency = c.Duration("finish-latency")
	in.opts.HealthLatency = c.Duration("health-latency")
	in.opts.PendingStopLatency = c.Duration("pending-stop-latency")
	in.opts.StartSpacing = c.Duration("start-spacing")
	in.opts.EvalOrder = c.Bool("eval-order")
	in.opts.KillTimeout = c.Bool("kill-timeout")
	in.opts.ExitHolds = c.Bool("exit-holds")
	in.opts.PassOnReport = c.Bool("pass-on-report")
	in.opts.ReconcileInterval = c.Duration("reconcile-interval")
	if in.opts.ExitHolds && !in.opts.KillTimeout {
		return nil, errExitHolds
	}
	if in.opts.PassOnReport && in.opts.FinishLatency <= 0 && !in.opts.ExitHolds {
		return nil, usagef("-pass-on-report needs -finish-latency or -exit-holds (the reports of a task's end it runs on)")
	}
	in.opts.Horizon = c.Duration("horizon")
	in.opts.Warmup = c.Duration("warmup")
	if c.Bool("best-fit") {
		in.opts.Placement = sim.PlacementBestFit
	}
	tracePath := rel(base, sc.Trace)
	if c.IsSet("trace") {
		tracePath = c.String("trace")
	}
	traceName := tracePath
	switch {
	case tracePath != "":
		if in.trace, err = readTrace(tracePath, c.Bool("skip-invalid")); err != nil && !c.IsSet("trace") {
			err = sc.missing("trace", err)
		}
	case in.tree == nil:
		return nil, usagef("sim needs -trace, or -budgets to generate a trace from (e.g. allot sim examples/sim/scenario.json)")
	default:
		traceName = "the generated trace"
		in.trace, err = generateFor(sc, c, in)
	}
	if err != nil {
		return nil, err
	}
	warnings, err := in.trace.Check(in.cluster, in.tree, sim.CheckOptions{SkipInvalid: c.Bool("skip-invalid"),
		Contract: in.policy.Config})
	if err != nil {
		return nil, traceFileErr(traceName, err)
	}
	stderr := c.Root().ErrWriter
	for _, w := range warnings {
		fmt.Fprintf(stderr, "%s: %s\n", traceName, w)
	}
	run := in.opts.Horizon
	if run <= 0 {
		run = in.trace.End()
	}
	if c.IsSet("warmup") && in.opts.Warmup > 0 && in.opts.Warmup >= run {
		return nil, usagef("-warmup %v: want less than the run (%v); 0 measures from the start", in.opts.Warmup, run)
	}
	if !c.IsSet("warmup") && run <= 2*in.opts.Warmup {
		fmt.Fprintf(stderr, "measuring from the start: a %v run is too short for the default %v warm-up (-warmup)\n",
			run, in.opts.Warmup)
		in.opts.Warmup = 0
	}
	if in.trace.Skipped > 0 {
		fmt.Fprintf(stderr, "%s: skipped %s (-skip-invalid)\n", traceName, plural(in.trace.Skipped, "invalid row"))
	}
	return in, nil
}

// generateFor generates the run's trace from the scenario's generator
// settings; their problems are the scenario file's, at its "generate" key.
func generateFor(sc *scenarioFile, c *cli.Command, in *simInputs) (*sim.Trace, error) {
	g := sim.DefaultGenConfig()
	if sc.Generate != nil {
		if err := json.Unmarshal(sc.Generate, &g); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field != "" {
				return nil, fmt.Errorf("%s: generate.%s: want %s, not %s %s", sc.scenarioAt("generate."+te.Field), te.Field,
					jsonKind(te.Type.Kind()), articleFor(te.Value), te.Value)
			}
			var ke *sim.GenConfigKeyError
			if errors.As(err, &ke) {
				return nil, fmt.Errorf("%s: generate.%s: %v", sc.scenarioAt("generate."+ke.Key), ke.Key, ke.Err)
			}
			return nil, fmt.Errorf("%s: %v", sc.scenarioAt("generate"), err)
		}
	}
	if c.IsSet("seed") || sc.Generate == nil {
		g.Seed = in.opts.Seed
	}
	g.GPUs, g.Nodes, g.GPUsPerNode = in.cluster.GPUs(), clusterNodes(in.cluster), largestNode(in.cluster)
	tr, err := sim.Generate(in.tree, g)
	if err != nil {
		if sc.Generate != nil {
			return nil, fmt.Errorf("%s: generate: %v", sc.scenarioAt("generate"), err)
		}
		return nil, err
	}
	nameFaultNodes(tr, in.cluster)
	namePool(tr, in.cluster)
	return tr, nil
}

// namePool gives a generated trace's jobs the cluster's node pool when all
// its nodes are in one Nomad node pool other than "default": Nomad places a job without a
// node_pool in "default" only, so the jobs of such a cluster name its pool
// (as a job for examples/nomad/client.hcl's nodes says node_pool = "gpu").
// Jobs for a cluster of several node pools name none: without a "default"
// pool they are counted before the run as never placed.
func namePool(tr *sim.Trace, spec sim.ClusterSpec) {
	pool := spec.Pools[0].Nomad()
	for _, p := range spec.Pools {
		if p.Nomad() != pool {
			return
		}
	}
	if pool == "default" {
		return
	}
	for i := range tr.Jobs {
		tr.Jobs[i].Pool = pool
	}
}

// jsonKind names what a Go kind is in JSON.
func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64, reflect.Uint64:
		return "a whole number"
	}
	return "a number"
}

// traceFileErr puts the trace file's name before the place of a trace error:
// trace.csv:7:12: what is wrong.
func traceFileErr(name string, err error) error {
	var te *sim.TraceError
	if errors.As(err, &te) {
		return fmt.Errorf("%s%s: %w", name, te.Pos(), te.Err)
	}
	return fmt.Errorf("%s: %w", name, err)
}

// simCluster resolves the cluster's shape. The -cluster flag comes first;
// -nodes and -gpus-per-node, when set, win over the scenario file; in the
// scenario, "cluster" (a file) comes before "pools", and "pools" before
// "nodes" and "gpus_per_node".
func simCluster(c *cli.Command, sc *scenarioFile, base string) (sim.ClusterSpec, error) {
	flagNodes := c.IsSet("nodes") || c.IsSet("gpus-per-node")
	path := rel(base, sc.Cluster)
	switch {
	case c.IsSet("cluster") && flagNodes:
		return sim.ClusterSpec{}, usagef("-cluster and -nodes/-gpus-per-node both give the cluster's shape; " +
			"use either a cluster file or -nodes and -gpus-per-node, not both")
	case c.IsSet("cluster"):
		path = c.String("cluster")
	case flagNodes:
		path = ""
	}
	if path != "" {
		spec, err := loadCluster(c, path)
		if err != nil && !c.IsSet("cluster") {
			err = sc.missing("cluster", err)
		}
		return spec, err
	}
	nodes, gpus := c.Int("nodes"), c.Int("gpus-per-node")
	if sc.Nodes > 0 && !c.IsSet("nodes") {
		nodes = sc.Nodes
	}
	if sc.GPUsPerNode > 0 && !c.IsSet("gpus-per-node") {
		gpus = sc.GPUsPerNode
	}
	spec := sim.UniformCluster(nodes, gpus)
	if len(sc.Pools) > 0 && !flagNodes {
		spec = sim.ClusterSpec{Pools: sc.Pools}
	}
	// The flags and the scenario's keys were checked with their names; this
	// catches a drift between those checks and the model's.
	if err := spec.Validate(); err != nil {
		return sim.ClusterSpec{}, err
	}
	return spec, nil
}

// loadCluster reads a cluster HCL file, printing its problems to stderr one
// per line, as allot budgets validate does.
func loadCluster(c *cli.Command, path string) (sim.ClusterSpec, error) {
	file, err := hcl.LoadCluster(path)
	var ds hcl.Diagnostics
	if errors.As(err, &ds) {
		n := printLoadError(c.Root().ErrWriter, err)
		return sim.ClusterSpec{}, fmt.Errorf("%s is not a valid cluster file (%s)", path, plural(n, "problem"))
	}
	if err != nil {
		return sim.ClusterSpec{}, err
	}
	spec := sim.ClusterSpec{Pools: make([]sim.Pool, len(file.Pools))}
	for i, p := range file.Pools {
		spec.Pools[i] = sim.Pool{Name: p.Name, Nodes: p.Nodes, GPUsPerNode: p.GPUsPerNode, Model: p.Model,
			NodePool: p.NodePool}
	}
	// The file's checks include the model's; this catches a drift between them.
	if err := spec.Validate(); err != nil {
		return sim.ClusterSpec{}, fmt.Errorf("%s: %w", path, err)
	}
	return spec, nil
}

// clusterNodes is the cluster's node count over all its pools.
func clusterNodes(spec sim.ClusterSpec) int {
	n := 0
	for _, p := range spec.Pools {
		n += p.Nodes
	}
	return n
}

// largestNode is the GPUs of the cluster's largest node.
func largestNode(spec sim.ClusterSpec) int {
	n := 0
	for _, p := range spec.Pools {
		n = max(n, p.GPUsPerNode)
	}
	return n
}

// generatedFaultPrefix is how sim.Generate names the node of a fault:
// default-<k>, k drawn below GenConfig.Nodes.
const generatedFaultPrefix = "default-"

// nameFaultNodes points the generator's faults at the cluster's nodes. The
// generator draws default-<k> for k below every node of the cluster; the
// model names nodes <pool>-<i> pool by pool, so k becomes the k-th node in
// pool order. For one pool named "default" (the flags' cluster) nothing
// changes.
func nameFaultNodes(tr *sim.Trace, spec sim.ClusterSpec) {
	if len(spec.Pools) == 1 && spec.Pools[0].Name == "default" {
		return
	}
	for i := range tr.Health {
		h := &tr.Health[i]
		k, err := strconv.Atoi(strings.TrimPrefix(h.Node, generatedFaultPrefix))
		if err != nil || !strings.HasPrefix(h.Node, generatedFaultPrefix) || k < 0 {
			continue
		}
		for _, p := range spec.Pools {
			if k < p.Nodes {
				h.Node = p.Name + "-" + strconv.Itoa(k)
				if p.GPUsPerNode > 0 && h.GPU >= p.GPUsPerNode { // drawn for the cluster's mean node: fold it onto this one's GPUs
					old := " on GPU " + strconv.Itoa(h.GPU)
					h.GPU %= p.GPUsPerNode
					h.Reason = strings.TrimSuffix(h.Reason, old) + " on GPU " + strconv.Itoa(h.GPU)
				}
				break
			}
			k -= p.Nodes
		}
	}
}

func readTrace(path string, skip bool) (*sim.Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = bufio.NewReader(f)
	name := path
	if strings.HasSuffix(name, ".gz") {
		gz, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer gz.Close()
		r, name = gz, strings.TrimSuffix(name, ".gz")
	}
	var tr *sim.Trace
	switch {
	case strings.HasSuffix(name, ".csv"):
		tr, err = sim.ReadCSV(r, sim.ReadOptions{SkipInvalid: skip})
	case strings.HasSuffix(name, ".jsonl") || strings.HasSuffix(name, ".ndjson"):
		tr, err = sim.ReadJSONL(r, sim.ReadOptions{SkipInvalid: skip})
	default:
		return nil, usagef("trace %s: name it .csv or .jsonl (optionally .gz)", path)
	}
	if err != nil {
		return nil, traceFileErr(path, err)
	}
	return tr, nil
}

// simPolicy is the allot policy's configuration: the policy {} block of
// the server config file at path (decoded and validated as `allot server
// -config` does), or the defaults when path is "".
func simPolicy(path string) (policy.Config, error) {
	if path == "" {
		return policy.DefaultConfig(), nil
	}
	fc, err := hcl.LoadServerConfig(path)
	if err != nil {
		return policy.Config{}, err
	}
	return fc.Policy, nil
}

// newPolicy is the policy named name; allot runs with cfg.
func newPolicy(name string, cfg policy.Config) (sim.Policy, error) {
	switch strings.TrimSpace(name) {
	case "allot":
		return sim.NewAllot(cfg)
	case "baseline":
		return sim.NewBaseline(sim.DefaultBaselineConfig()), nil
	}
	return nil, usagef("unknown policy %q; valid: allot, baseline", name)
}

func runSim(_ context.Context, c *cli.Command) error {
	seen := map[string]bool{}
	for _, name := range strings.Split(c.String("policies"), ",") {
		if _, err := newPolicy(name, policy.DefaultConfig()); err != nil {
			return err
		}
		if name = strings.TrimSpace(name); seen[name] {
			return usagef("-policies %s: %s is named twice; name each policy once", c.String("policies"), name)
		}
		seen[name] = true
	}
	for _, f := range []struct{ flag, what string }{{"html", "the report"}, {"events", "the event log"}} {
		if path := c.String(f.flag); path != "" {
			// Say so before the run, not after it.
			if st, err := os.Stat(filepath.Dir(path)); err != nil || !st.IsDir() {
				return fmt.Errorf("-%s %s: no directory %s to write %s in", f.flag, path, filepath.Dir(path), f.what)
			}
		}
	}
	in, err := simInputsFrom(c)
	if err != nil {
		return err
	}
	var results []*sim.Result
	stderr := c.Root().ErrWriter
	names := strings.Split(c.String("policies"), ",")
	for _, name := range names {
		p, err := newPolicy(name, in.policy)
		if err != nil {
			return err
		}
		opts := in.opts
		closeEvents := func() error { return nil }
		if path := c.String("events"); path != "" {
			if opts.Events, closeEvents, err = openEvents(eventsPath(path, p.Name(), len(names) > 1)); err != nil {
				return err
			}
		}
		bar := newProgressBar(stderr, p.Name())
		opts.Progress = bar.update
		r, err := sim.Run(in.trace, in.cluster, in.tree, p, opts)
		bar.done()
		if cerr := closeEvents(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	out := c.Root().Writer
	if path := c.String("html"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := sim.WriteHTML(f, results); err != nil {
			f.Close()
			return fmt.Errorf("html report: %w", err)
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	if c.Bool("json") {
		return sim.WriteJSON(out, in.opts.Seed, results)
	}
	return sim.WriteSummary(out, results)
}

// progressBar draws on stderr when it is a terminal and the run has taken
// more than a second.
type progressBar struct {
	w     io.Writer
	name  string
	start time.Time
	tty   bool
	drawn bool
}

func newProgressBar(w io.Writer, name string) *progressBar {
	b := &progressBar{w: w, name: name, start: time.Now()}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			b.tty = true
		}
	}
	return b
}

func (b *progressBar) update(frac float64) {
	if !b.tty || time.Since(b.start) < time.Second {
		return
	}
	const width = 40
	n := int(frac * width)
	fmt.Fprintf(b.w, "\r%-9s [%s%s] %3.0f%% %s", b.name, strings.Repeat("=", n), strings.Repeat(" ", width-n),
		100*frac, time.Since(b.start).Round(time.Second))
	b.drawn = true
}

func (b *progressBar) done() {
	if b.drawn {
		fmt.Fprint(b.w, "\r\033[K")
	}
}
