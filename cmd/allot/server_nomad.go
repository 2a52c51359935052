package main

import (
	"context"
	"fmt"
	"io"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v3"

	"github.com/allot-sched/allot/hcl"
	"github.com/allot-sched/allot/overlay/nomad"
	"github.com/allot-sched/allot/overlay/policy"
)

// nomadFlags choose the Nomad an `allot server` drives. A config file's
// nomad {} block turns the adapter on; with -dev (or a file without the
// block) -nomad does, for the Nomad of Nomad's standard environment
// (NOMAD_ADDR, NOMAD_TOKEN, NOMAD_CACERT, ...), and -nomad-address ADDR for
// the Nomad at ADDR. Without either the server runs no reconcile loop: it
// keeps budgets and the ledger and serves reads only.
func nomadFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "nomad", Usage: "drive the Nomad named by NOMAD_ADDR (and Nomad's other NOMAD_* variables); a config file's nomad {} block does the same"},
		&cli.StringFlag{Name: "nomad-address", Usage: "drive the Nomad at this HTTP address, e.g. http://127.0.0.1:4646 (implies -nomad; overrides nomad { address })"},
		&cli.BoolFlag{Name: "manage-scheduler-config", Usage: "let allot turn Nomad's preemption on for batch and service jobs at start (overrides nomad { manage_scheduler_config })"},
	}
}

// nomadSetup is how the server reaches and drives Nomad.
type nomadSetup struct {
	Enabled bool
	// Address and Token replace Nomad's environment when not empty.
	Address, Token string
	Adapter        nomad.Config
	Policy         policy.Config
}

// nomadSetupFrom combines the config file (nil without one) and the flags.
func nomadSetupFrom(c *cli.Command, fc *hcl.ServerConfig) (nomadSetup, error) {
	var s nomadSetup
	var file hcl.NomadConfig
	p := policy.DefaultConfig()
	if fc != nil {
		file, p = fc.Nomad, fc.Policy
	}
	s.Enabled = file.Present || c.Bool("nomad") || c.IsSet("nomad-address")
	if file.Address != nil {
		s.Address = *file.Address
	}
	if c.IsSet("nomad-address") {
		s.Address = c.String("nomad-address")
	}
	if file.Token != nil {
		s.Token = *file.Token
	}
	s.Adapter = nomad.Config{Namespaces: file.Namespaces, NodePools: file.NodePools}
	if file.ManageSchedulerConfig != nil {
		s.Adapter.ManageSchedulerConfig = *file.ManageSchedulerConfig
	}
	if c.IsSet("manage-scheduler-config") {
		s.Adapter.ManageSchedulerConfig = c.Bool("manage-scheduler-config")
	}
	p.Namespaces, p.NodePools = file.Namespaces, file.NodePools
	s.Policy = p
	return s, nil
}

// startNomad checks Nomad before the server starts (version, token, and
// preemption for batch and service jobs, which it turns on only with
// manage_scheduler_config), warns about unmanaged allocations Nomad may
// preempt for allocated work, and returns the reconciler to hand the server.
func startNomad(ctx context.Context, s nomadSetup, log hclog.Logger, out io.Writer) (*nomad.Reconciler, error) {
	cl, err := nomad.NewClientWith(s.Address, s.Token)
	if err != nil {
		return nil, err
	}
	addr := cl.Address()
	pre, err := nomad.Preflight(ctx, cl, s.Adapter.ManageSchedulerConfig)
	if err != nil {
		return nil, fmt.Errorf("nomad at %s: %w", addr, err)
	}
	for _, w := range pre.Warnings {
		log.Warn("nomad preflight", "warning", w)
	}
	if pre.PreemptionEnabled {
		log.Info("turned on Nomad preemption for batch and service jobs (manage_scheduler_config)")
	}
	fmt.Fprintf(out, "driving Nomad %s at %s\n", pre.Version, addr)
	below := unmanagedBelow(s.Policy)
	found, err := nomad.UnmanagedOnGPUNodes(ctx, cl, &s.Adapter, below)
	warnUnmanaged(found, err, below, log)
	rc := reconcilerConfig(s, log)
	rc.Client = cl
	rec, err := nomad.NewReconciler(rc)
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// reconcilerConfig is what the reconciler runs with. Its contracts are
// parsed with the policy's own contract.Config (runtime_cap), so a
// min_runtime between the default 8h and a larger configured cap is
// protected for its whole declared window, as in the simulator.
func reconcilerConfig(s nomadSetup, log hclog.Logger) nomad.ReconcilerConfig {
	return nomad.ReconcilerConfig{Nomad: s.Adapter, Policy: s.Policy, Logger: log}
}

// warnUnmanaged logs the running allocations of jobs allot does not manage
// on GPU nodes that a pending allocated job could preempt (docs/design.md: keep
// such jobs at the pending band's top less the preemption gap plus one, or
// above, or off GPU nodes). A failure to look is itself only a warning.
func warnUnmanaged(found []nomad.UnmanagedAlloc, err error, below int, log hclog.Logger) {
	if err != nil {
		log.Warn("could not check for unmanaged allocations on GPU nodes", "error", err)
		return
	}
	for _, u := range found {
		log.Warn("unmanaged allocation on a GPU node is within reach of Nomad's preemption for allocated work",
			"job", u.Job, "alloc", u.Alloc, "node", u.Node, "priority", u.Priority,
			"advice", fmt.Sprintf("run it at priority %d or above, or off GPU nodes", below))
	}
}

// unmanagedBelow is the lowest priority a pending allocated job cannot
// preempt: the pending band's top less Nomad's preemption gap, plus one
// (80 with the default bands).
func unmanagedBelow(p policy.Config) int { return p.Pending.High - p.PreemptionGap + 1 }
