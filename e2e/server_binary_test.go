package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/policy"
)

// allotBinary returns the allot CLI (see allotCommand).
func allotBinary(t *testing.T) string { return allotCommand(t, "allot") }

// The example Nomad client configuration is one Nomad accepts.
func TestExampleNomadClientConfigValid(t *testing.T) {
	bin := nomadBinary(t)
	_, here, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(here), "..", "examples", "nomad", "client.hcl")
	out, err := exec.Command(bin, "config", "validate", path).CombinedOutput()
	if err != nil {
		t.Fatalf("nomad config validate %s: %v\n%s", path, err, out)
	}
}

// `allot server -config FILE` with a nomad {} block, as an operator runs it:
// preflight turns preemption on (manage_scheduler_config), the reconciler
// drives Nomad, and state lives in data_dir.
func TestServerBinaryDrivesNomad(t *testing.T) {
	c := startGPUCluster(t)
	// The dev agent starts with preemption off for batch jobs: switch it
	// off again explicitly so the test shows allot turning it on.
	if err := c.Put("/v1/operator/scheduler/configuration", map[string]any{"PreemptionConfig": map[string]any{
		"SystemSchedulerEnabled": true, "BatchSchedulerEnabled": false, "ServiceSchedulerEnabled": false}}, nil); err != nil {
		t.Fatal(err)
	}
	cfg, _ := nomadServerConfig(t, c.Addr, "")
	out := startAllotProcess(t, nil, "server", "-config", cfg, "-log-level", "warn")
	if !strings.Contains(out.String(), "driving Nomad") {
		t.Fatalf("no start-up line naming Nomad:\n%s", out.String())
	}
	var sc struct {
		SchedulerConfig struct {
			PreemptionConfig struct{ BatchSchedulerEnabled, ServiceSchedulerEnabled bool }
		}
	}
	if err := c.Get("/v1/operator/scheduler/configuration", &sc); err != nil {
		t.Fatal(err)
	}
	if pc := sc.SchedulerConfig.PreemptionConfig; !pc.BatchSchedulerEnabled || !pc.ServiceSchedulerEnabled {
		t.Fatalf("preemption after allot's start: %+v", pc)
	}
	c.register(t, gpuJob{ID: "free", GPUs: 1})     // no budget: unallocated
	low := policy.DefaultConfig().FreeLevels().Low // a free job that has not run 5m yet
	c.waitPriority(t, "free", func(p int) bool { return p == low }, fmt.Sprintf("= %d (free work's lowest level)", low), 30*time.Second)
}

// nomadServerConfig writes the config of a one-server allot (write token
// "e2e") driving the Nomad at nomadAddr, with manage_scheduler_config on and
// extra appended, and returns its path and allot's HTTP address.
func nomadServerConfig(t *testing.T, nomadAddr, extra string) (cfg, addr string) {
	t.Helper()
	ports := freePorts(t, 2)
	cfg = filepath.Join(t.TempDir(), "allot.hcl")
	body := oneServerHCL(t.TempDir(), ports, "e2e") + fmt.Sprintf(`nomad {
  address                 = %q
  manage_scheduler_config = true
}
`, nomadAddr) + extra
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg, fmt.Sprintf("http://127.0.0.1:%d", ports[0])
}

// oneServerHCL is the config of a one-server raft group on dataDir with the
// write token token: HTTP on ports[0], raft on ports[1].
func oneServerHCL(dataDir string, ports []int, token string) string {
	return fmt.Sprintf(`data_dir = %q
bootstrap_expect = 1
ports {
  http = %d
  raft = %d
}
server {
  token = %q
}
`, dataDir, ports[0], ports[1], token)
}
