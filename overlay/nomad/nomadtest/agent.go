package nomadtest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Options shape the agent.
type Options struct {
	CPUTotalCompute int    // MHz; default 8000
	MemoryTotalMB   int    // default 8192
	ExtraHCL        string // appended to the agent config (plugin blocks, ...)
}

// Agent is a running dev agent.
type Agent struct {
	Addr    string // http://127.0.0.1:PORT
	HTTP    int    // HTTP port; RPC and serf are the next two
	DataDir string
	cmd     *exec.Cmd
	mu      sync.Mutex
	out     bytes.Buffer
	exited  chan struct{}
}

// Binary returns the Nomad binary from NOMAD_BIN or PATH, or why there is none.
func Binary() (string, string) {
	if p := os.Getenv("NOMAD_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Sprintf("NOMAD_BIN=%s: %v", p, err)
		}
		return p, ""
	}
	p, err := exec.LookPath("nomad")
	if err != nil {
		return "", "no nomad binary on PATH and NOMAD_BIN unset"
	}
	return p, ""
}

// Start runs an agent until the test ends; it skips the test without Nomad.
// It returns once the agent leads and its client node is ready and eligible.
func Start(t testing.TB, o Options) *Agent {
	t.Helper()
	bin, why := Binary()
	if bin == "" {
		t.Skip("skip: " + why)
	}
	if o.CPUTotalCompute == 0 {
		o.CPUTotalCompute = 8000
	}
	if o.MemoryTotalMB == 0 {
		o.MemoryTotalMB = 8192
	}
	a := &Agent{DataDir: t.TempDir(), exited: make(chan struct{})}
	a.HTTP = freePorts(t)
	a.Addr = fmt.Sprintf("http://127.0.0.1:%d", a.HTTP)
	cfg := fmt.Sprintf(`
ports {
  http = %d
  rpc  = %d
  serf = %d
}
client {
  cpu_total_compute = %d
  memory_total_mb   = %d
  options {
    "fingerprint.denylist" = "env_aws,env_gce,env_azure,env_digitalocean"
  }
}
%s
`, a.HTTP, a.HTTP+1, a.HTTP+2, o.CPUTotalCompute, o.MemoryTotalMB, o.ExtraHCL)
	cfgPath := filepath.Join(a.DataDir, "agent.hcl")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	a.cmd = exec.Command(bin, "agent", "-dev", "-bind=127.0.0.1", "-data-dir="+filepath.Join(a.DataDir, "data"),
		"-config="+cfgPath)
	a.cmd.Env = withoutEnv(os.Environ(), "AWS_CA_BUNDLE", "NOMAD_ADDR", "NOMAD_TOKEN", "NOMAD_NAMESPACE")
	a.cmd.Stdout = &lockedWriter{a: a}
	a.cmd.Stderr = a.cmd.Stdout
	if err := a.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() { _ = a.cmd.Wait(); close(a.exited) }()
	t.Cleanup(func() {
		a.Stop()
		if t.Failed() {
			t.Logf("nomad agent output:\n%s", a.Output())
		}
	})
	a.waitReady(t, 90*time.Second)
	return a
}

// Client returns an API client for the agent.
func (a *Agent) Client(t testing.TB) *api.Client {
	t.Helper()
	c, err := api.NewClient(&api.Config{Address: a.Addr})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Output is what the agent printed so far.
func (a *Agent) Output() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.out.String()
}

// Stop interrupts the agent and waits for it to exit.
func (a *Agent) Stop() {
	if a.cmd.Process == nil {
		return
	}
	select {
	case <-a.exited:
		return
	default:
	}
	_ = a.cmd.Process.Signal(os.Interrupt)
	select {
	case <-a.exited:
	case <-time.After(20 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.exited
	}
}

// NodeID returns the ID of the agent's client node.
func (a *Agent) NodeID(t testing.TB) string {
	t.Helper()
	nodes, _, err := a.Client(t).Nodes().List(nil)
	if err != nil || len(nodes) != 1 {
		t.Fatalf("list nodes: %v (%d nodes)", err, len(nodes))
	}
	return nodes[0].ID
}

func (a *Agent) waitReady(t testing.TB, limit time.Duration) {
	t.Helper()
	c := a.Client(t)
	deadline := time.Now().Add(limit)
	for {
		select {
		case <-a.exited:
			t.Fatalf("nomad agent exited at start:\n%s", a.Output())
		default:
		}
		if leader, err := c.Status().Leader(); err == nil && leader != "" {
			nodes, _, err := c.Nodes().List(nil)
			if err == nil && len(nodes) == 1 && nodes[0].Status == "ready" && nodes[0].SchedulingEligibility == "eligible" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("nomad agent not ready after %s:\n%s", limit, a.Output())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// freePorts finds a port P with P, P+1 and P+2 free on 127.0.0.1.
func freePorts(t testing.TB) int {
	t.Helper()
	for try := 0; try < 50; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if p > 65000 {
			continue
		}
		ok := true
		for _, q := range []int{p + 1, p + 2} {
			l2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", q))
			if err != nil {
				ok = false
				break
			}
			_ = l2.Close()
		}
		if ok {
			return p
		}
	}
	t.Fatal("no three consecutive free ports on 127.0.0.1")
	return 0
}

func withoutEnv(env []string, names ...string) []string {
	out := env[:0:0]
outer:
	for _, kv := range env {
		for _, n := range names {
			if len(kv) > len(n) && kv[:len(n)+1] == n+"=" {
				continue outer
			}
		}
		out = append(out, kv)
	}
	return out
}

type lockedWriter struct{ a *Agent }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.a.mu.Lock()
	defer w.a.mu.Unlock()
	return w.a.out.Write(p)
}
