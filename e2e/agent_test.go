package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuffer collects an agent's output while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// agentConfig describes a `nomad agent -dev` to start.
type agentConfig struct {
	// DataDir is the agent's data_dir; "" means a fresh t.TempDir().
	DataDir string
	// PluginDir is the agent's plugin_dir; "" leaves it unset.
	PluginDir string
	// HCL is appended to the generated agent config (plugin blocks, client options).
	HCL string
}

// agent is a running Nomad dev agent on non-default ports of 127.0.0.1, so
// tests of several packages can run at once.
type agent struct {
	t    testing.TB
	Addr string // http://127.0.0.1:<port>
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
	// left are the agent's descendants (logmon, task executors and the tasks
	// they run) seen when it was stopped. Nomad leaves tasks running when a
	// client stops, by design (they survive an agent restart), so they are
	// killed when the test ends, not when the agent stops.
	left []int
	// Token, when set, is sent as X-Nomad-Token (an agent with ACLs on).
	Token string
}

// freePorts returns n TCP ports free on 127.0.0.1 at the time of the call.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// listenHCL is the advertise and ports blocks of an agent on 127.0.0.1
// with HTTP on p[0], RPC on p[1] and serf on p[2].
func listenHCL(p []int) string {
	return fmt.Sprintf(`
advertise {
  http = "127.0.0.1"
  rpc  = "127.0.0.1"
  serf = "127.0.0.1"
}
ports {
  http = %d
  rpc  = %d
  serf = %d
}
`, p[0], p[1], p[2])
}

// startAgent starts `nomad agent -dev` with cfg and waits until its HTTP API
// answers. The agent is stopped when the test ends.
func startAgent(t testing.TB, cfg agentConfig) *agent {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	p := freePorts(t, 3)
	hcl := listenHCL(p) + `
client {
  cpu_total_compute = 8000
  memory_total_mb   = 16384
  options {
    "fingerprint.denylist" = "env_aws,env_gce,env_azure,env_digitalocean"
  }
}
`
	if cfg.PluginDir != "" {
		hcl += fmt.Sprintf("plugin_dir = %q\n", cfg.PluginDir)
	}
	return runAgent(t, "-dev", cfg.DataDir, p[0], hcl+cfg.HCL)
}

// runAgent starts `nomad agent MODE` (-dev, -server or -client) bound to
// 127.0.0.1 with that data dir and config, without AWS_CA_BUNDLE (which makes
// the env_aws fingerprinter abort), and waits until its HTTP API on httpPort
// answers. The agent is stopped when the test ends.
func runAgent(t testing.TB, mode, dataDir string, httpPort int, hcl string) *agent {
	t.Helper()
	bin := nomadBinary(t)
	cfgFile := filepath.Join(t.TempDir(), "agent.hcl")
	if err := os.WriteFile(cfgFile, []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	a := &agent{t: t, Addr: fmt.Sprintf("http://127.0.0.1:%d", httpPort), out: &lockedBuffer{}, done: make(chan struct{})}
	a.cmd = exec.Command(bin, "agent", mode, "-bind=127.0.0.1", "-data-dir="+dataDir, "-config="+cfgFile)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_CA_BUNDLE=") {
			a.cmd.Env = append(a.cmd.Env, kv)
		}
	}
	a.cmd.Stdout, a.cmd.Stderr = a.out, a.out
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := a.cmd.Start(); err != nil {
		t.Fatalf("start nomad agent %s: %v", mode, err)
	}
	go func() { a.cmd.Wait(); close(a.done) }()
	t.Cleanup(func() { // runs after Stop (cleanups run last registered first)
		for _, pid := range a.left {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	t.Cleanup(a.Stop)
	waitFor(t, 60*time.Second, "nomad agent "+mode+" HTTP API", func() (bool, error) {
		select {
		case <-a.done:
			return false, fmt.Errorf("nomad agent %s exited:\n%s", mode, a.out.String())
		default:
		}
		// With ACLs on (and no token yet) the API answers 403: it is up.
		var self map[string]any
		err := a.Get("/v1/agent/self", &self)
		return err == nil || strings.Contains(err.Error(), "403 Forbidden"), nil
	})
	return a
}

// Stop interrupts the agent and waits for it (killing it after 20 s). It may
// be called more than once.
func (a *agent) Stop() {
	select {
	case <-a.done:
		return
	default:
	}
	a.left = append(a.left, descendants(a.cmd.Process.Pid)...)
	a.cmd.Process.Signal(os.Interrupt)
	select {
	case <-a.done:
	case <-time.After(20 * time.Second):
		syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
		<-a.done
	}
	if a.t.Failed() {
		a.t.Logf("nomad agent output:\n%s", a.out.String())
	}
}

// Output is what the agent has logged so far.
func (a *agent) Output() string { return a.out.String() }

// Get decodes the JSON answer of GET path into out.
// preemptionOn turns Nomad's preemption on for every scheduler.
func (a *agent) preemptionOn(t testing.TB) {
	t.Helper()
	if err := a.Put("/v1/operator/scheduler/configuration", map[string]any{"PreemptionConfig": map[string]any{
		"SystemSchedulerEnabled": true, "BatchSchedulerEnabled": true, "ServiceSchedulerEnabled": true}}, nil); err != nil {
		t.Fatal(err)
	}
}

func (a *agent) Get(path string, out any) error {
	return a.do(http.MethodGet, path, nil, out)
}

// Put sends body as JSON with PUT and decodes the answer into out (if not nil).
func (a *agent) Put(path string, body, out any) error {
	return a.do(http.MethodPut, path, body, out)
}

func (a *agent) do(method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.Addr+path, r)
	if err != nil {
		return err
	}
	if a.Token != "" {
		req.Header.Set("X-Nomad-Token", a.Token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	if out == nil {
		return nil
	}
	if s, ok := out.(*string); ok {
		*s = string(b)
		return nil
	}
	return json.Unmarshal(b, out)
}

// WaitNode waits for the dev agent's client node to be ready and returns its ID.
func (a *agent) WaitNode() string {
	a.t.Helper()
	var id string
	waitFor(a.t, 60*time.Second, "a ready client node", func() (bool, error) {
		var nodes []struct{ ID, Status string }
		if err := a.Get("/v1/nodes", &nodes); err != nil {
			return false, nil
		}
		for _, n := range nodes {
			if n.Status == "ready" {
				id = n.ID
				return true, nil
			}
		}
		return false, nil
	})
	return id
}

// waitFor polls cond every 200 ms until it is true, fails, or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	waitForEvery(t, timeout, 200*time.Millisecond, what, cond)
}

// waitForEvery is waitFor checking every interval, for races Nomad settles
// within a few hundred milliseconds.
func waitForEvery(t testing.TB, timeout, every time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(every)
	}
}

// descendants lists every process below pid, read from /proc (Linux).
func descendants(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name may hold spaces; the parent PID is the second
		// field after its closing parenthesis.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}
