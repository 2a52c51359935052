package nomad

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
)

// Config is the adapter's part of the allot server configuration. Which
// jobs and nodes allot manages (namespaces, node pools) is the policy's
// setting (policy.Config), read where the Nomad view is turned into the
// policy's snapshot (overlay/reconcile).
type Config struct {
	// ManageSchedulerConfig lets allot turn on Nomad's preemption for batch
	// and service jobs at start; without it allot refuses to start when
	// preemption is off (see Preflight).
	ManageSchedulerConfig bool
	Watch                 WatchConfig
	Apply                 ApplyConfig
}

// Adapter is one Nomad as allot drives it: a Watcher keeps a View in step
// with Nomad's event stream, and an Applier writes ops to it.
type Adapter struct {
	View    *View
	Watcher *Watcher
	Applier *Applier
}

// NewAdapter returns the adapter for the Nomad client talks to; start its
// Watcher with Run.
func NewAdapter(client *api.Client, cfg Config, log hclog.Logger) (*Adapter, error) {
	if client == nil {
		return nil, errors.New("nomad adapter: a Nomad API client is required")
	}
	v := NewView()
	return &Adapter{View: v, Watcher: NewWatcher(client, v, cfg.Watch, log), Applier: NewApplier(client, cfg.Apply, log)}, nil
}

// NewClient returns a Nomad client configured from Nomad's standard
// environment (NOMAD_ADDR, NOMAD_TOKEN, NOMAD_CACERT, NOMAD_CLIENT_CERT,
// NOMAD_CLIENT_KEY, NOMAD_NAMESPACE, NOMAD_REGION, ...), then adjusted by
// override when it is not nil (the server config file's values).
func NewClient(override func(*api.Config)) (*api.Client, error) {
	cfg := api.DefaultConfig()
	if override != nil {
		override(cfg)
	}
	c, err := api.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("nomad client for %s: %w (check NOMAD_ADDR and the NOMAD_CACERT/NOMAD_CLIENT_CERT/NOMAD_CLIENT_KEY files)", cfg.Address, err)
	}
	return c, nil
}

// Run runs the Watcher and calls changed after each change of the View
// until ctx ends. Calls coalesce: one may stand for many changes, so the
// caller reads a fresh State after each.
func (a *Adapter) Run(ctx context.Context, changed func()) error {
	done := make(chan error, 1)
	go func() { done <- a.Watcher.Run(ctx) }()
	for {
		select {
		case <-ctx.Done():
			<-done
			return ctx.Err()
		case <-a.View.Changed():
			changed()
		}
	}
}
