package e2e

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// drainFingerprint is the plugin's fingerprint period in the drain tests.
const drainFingerprint = time.Second

// nomadCluster is one Nomad server and GPU clients on 127.0.0.1, each with
// its own ports, data dir and allot-nvml in fake mode with its own seed.
type nomadCluster struct {
	Server  *agent
	Clients []*gpuClient
	nvml    string // the allot-nvml binary, for inject
}

// gpuClient is a Nomad client agent with 8 fake H100s.
type gpuClient struct {
	*agent
	Name     string
	Node     string // Nomad node ID
	StateDir string // the plugin's fake_state_dir (fault injection)
}

// startNomadCluster starts `nomad agent -server -bootstrap-expect=1` and n
// `nomad agent -client` pointed at it, and waits for every client's 8
// healthy GPUs.
func startNomadCluster(t *testing.T, n int) *nomadCluster {
	t.Helper()
	return startNomadClusterWith(t, n, "")
}

// startNomadClusterWith is startNomadCluster with more settings in the
// server's server block (HCL lines).
func startNomadClusterWith(t *testing.T, n int, serverHCL string) *nomadCluster {
	t.Helper()
	nomadBinary(t)
	c := &nomadCluster{nvml: allotNVML(t)}
	p := freePorts(t, 3)
	c.Server = runAgent(t, "-server", dataDir(t), p[0], `name = "server"`+listenHCL(p)+`
server {
  enabled          = true
  bootstrap_expect = 1
`+serverHCL+`}
`)
	waitFor(t, 60*time.Second, "a Nomad leader", func() (bool, error) {
		var leader string
		return c.Server.Get("/v1/status/leader", &leader) == nil && leader != "" && leader != `""`, nil
	})
	pluginDir := installPlugin(t, c.nvml)
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("gpu-client-%d", i)
		stateDir := t.TempDir()
		cp := freePorts(t, 3)
		hcl := fmt.Sprintf("name       = %q\nplugin_dir = %q\n", name, pluginDir) + listenHCL(cp) + fmt.Sprintf(`
client {
  enabled           = true
  servers           = ["127.0.0.1:%d"]
  cpu_total_compute = 8000
  memory_total_mb   = 16384
  options {
    "fingerprint.denylist" = "env_aws,env_gce,env_azure,env_digitalocean"
  }
}
plugin "raw_exec" {
  config {
    enabled = true
  }
}
plugin "allot-nvml" {
  config {
    fake               = "dgxh100"
    fake_seed          = %q
    fake_state_dir     = %q
    fingerprint_period = %q
  }
}
`, p[1], name, stateDir, drainFingerprint)
		a := runAgent(t, "-client", dataDir(t), cp[0], hcl)
		c.Clients = append(c.Clients, &gpuClient{agent: a, Name: name, StateDir: stateDir})
	}
	for _, cl := range c.Clients {
		cl.Node = c.nodeByName(t, cl.Name)
		waitFor(t, 60*time.Second, cl.Name+": 8 healthy GPUs", func() (bool, error) {
			healthy, _, err := gpuInstances(c.Server, cl.Node)
			n := 0
			for _, h := range healthy {
				if h {
					n++
				}
			}
			return err == nil && n == 8, nil
		})
	}
	return c
}

// nodeByName waits for a ready client node of that name and returns its ID.
func (c *nomadCluster) nodeByName(t *testing.T, name string) string {
	t.Helper()
	var id string
	waitFor(t, 60*time.Second, "node "+name+" ready", func() (bool, error) {
		var nodes []struct{ ID, Name, Status string }
		if err := c.Server.Get("/v1/nodes", &nodes); err != nil {
			return false, nil
		}
		for _, n := range nodes {
			if n.Name == name && n.Status == "ready" {
				id = n.ID
				return true, nil
			}
		}
		return false, nil
	})
	return id
}

// eligibility is the node's SchedulingEligibility in Nomad.
func (c *nomadCluster) eligibility(t *testing.T, node string) string {
	t.Helper()
	var n struct{ SchedulingEligibility string }
	if err := c.Server.Get("/v1/node/"+node, &n); err != nil {
		t.Fatal(err)
	}
	return n.SchedulingEligibility
}

func (c *nomadCluster) setEligible(t *testing.T, node string, eligible bool) {
	t.Helper()
	e := "ineligible"
	if eligible {
		e = "eligible"
	}
	if err := c.Server.Put("/v1/node/"+node+"/eligibility", map[string]any{"NodeID": node, "Eligibility": e}, nil); err != nil {
		t.Fatal(err)
	}
}

// inject runs `allot-nvml inject -state DIR args...` for a client.
func (c *nomadCluster) inject(t *testing.T, cl *gpuClient, args ...string) {
	t.Helper()
	out, err := exec.Command(c.nvml, append([]string{"inject", "-state", cl.StateDir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("allot-nvml inject %v: %v\n%s", args, err, out)
	}
}

// allocDevices returns the GPU instance IDs assigned to an allocation.
func (c *nomadCluster) allocDevices(t *testing.T, alloc string) []string {
	t.Helper()
	var a struct {
		AllocatedResources struct {
			Tasks map[string]struct {
				Devices []struct{ DeviceIDs []string }
			}
		}
	}
	if err := c.Server.Get("/v1/allocation/"+url.PathEscape(alloc), &a); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, task := range a.AllocatedResources.Tasks {
		for _, d := range task.Devices {
			ids = append(ids, d.DeviceIDs...)
		}
	}
	return ids
}

// dataDir is an agent's data dir, removed after the agent stops. A client
// leaves its allocations' secrets directories mounted (tmpfs, when it runs
// as root), which t.TempDir's cleanup cannot remove: unmount them first.
func dataDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "allot-e2e-nomad-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // registered before the agent's Stop, so it runs after it
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() && (d.Name() == "secrets" || d.Name() == "private") {
				syscall.Unmount(p, syscall.MNT_DETACH)
			}
			return nil
		})
		if err := os.RemoveAll(dir); err != nil {
			t.Logf("leaving %s: %v", dir, err)
		}
	})
	return dir
}
