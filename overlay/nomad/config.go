package nomad

import (
	"fmt"
	"slices"

	"github.com/hashicorp/nomad/api"
)

// Config is the adapter's part of the allot server configuration.
type Config struct {
	// Namespaces and NodePools bound what allot manages; empty means all.
	Namespaces []string
	NodePools  []string
	// ManageSchedulerConfig lets allot turn on Nomad's preemption for batch
	// and service jobs at start; without it allot refuses to start when
	// preemption is off (see Preflight).
	ManageSchedulerConfig bool
	Watch                 WatchConfig
	Apply                 ApplyConfig
}

// Manages reports whether a job is allot's to manage: it asks for NVIDIA GPUs
// and lives in a configured namespace and node pool (policy rule 11).
func (c *Config) Manages(j *Job) bool {
	if j.GPUs() == 0 {
		return false
	}
	if len(c.Namespaces) > 0 && !slices.Contains(c.Namespaces, j.Key.Namespace) {
		return false
	}
	if len(c.NodePools) > 0 && !slices.Contains(c.NodePools, j.NodePool) {
		return false
	}
	return true
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
