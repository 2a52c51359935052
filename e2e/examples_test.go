package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/client"
)

// repoFile is the absolute path of a file of this repository.
func repoFile(parts ...string) string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(append([]string{filepath.Dir(here), ".."}, parts...)...)
}

// exampleJob is a jobspec of examples/jobs and the band allot must give it
// when they run together, in this order, on one node of 8 GPUs (the
// README's walk): the sweep takes 4 GPUs for free, the debug job, the
// notebook and the restorable session one each inside their windows, and
// the two-node training job cannot place and waits.
type exampleJob struct {
	File, ID, Band string
	Lo, Hi         int // the band's Nomad priorities
	Running        int // allocations that must run
}

var exampleJobs = []exampleJob{
	{"sweep.nomad.hcl", "lr-sweep", "unallocated", 10, 29, 4},
	{"debug.nomad.hcl", "debug-tokenizer", "protected", bands.Protected, bands.Protected, 1},
	{"interactive.nomad.hcl", "notebook-alice", "protected", bands.Protected, bands.Protected, 1},
	{"session.nomad.hcl", "session-bob", "protected", bands.Protected, bands.Protected, 1},
	{"train.nomad.hcl", "olmo-7b-pretrain", "pending", 40, 89, 0},
}

// nomadCLI runs the nomad CLI against the agent and returns its output.
func (a *agent) nomadCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(nomadBinary(t), args...)
	cmd.Env = append(envWithout("AWS_CA_BUNDLE", "NOMAD_"), "NOMAD_ADDR="+a.Addr)
	if a.Token != "" {
		cmd.Env = append(cmd.Env, "NOMAD_TOKEN="+a.Token)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// envWithout is the process environment less the variables starting with
// any of the prefixes.
func envWithout(prefixes ...string) []string {
	var env []string
next:
	for _, kv := range os.Environ() {
		for _, p := range prefixes {
			if strings.HasPrefix(kv, p) {
				continue next
			}
		}
		env = append(env, kv)
	}
	return env
}

// runAllotCLI runs the allot CLI against the server at addr with the token and
// fails the test when it exits non-zero.
func runAllotCLI(t *testing.T, addr, token string, args ...string) string {
	t.Helper()
	cmd := exec.Command(allotBinary(t), args...)
	cmd.Env = append(envWithout("ALLOT_"), "ALLOT_ADDR="+addr, "ALLOT_TOKEN="+token)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("allot %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// startAllotProcess runs the allot binary with args (an `allot server`) and
// env added to an environment without ALLOT_ and NOMAD_ variables, until the
// test ends, and waits for it to serve its HTTP API.
func startAllotProcess(t *testing.T, env []string, args ...string) *lockedBuffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, allotBinary(t), args...)
	cmd.Env = append(envWithout("ALLOT_", "NOMAD_"), env...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// exited closes when the process has ended, with its error in waitErr:
	// both the start-up wait and the cleanup read it.
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("allot output:\n%s", out.String())
		}
	})
	waitFor(t, 30*time.Second, "allot server to start", func() (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("allot exited: %v\n%s", waitErr, out.String())
		default:
		}
		return strings.Contains(out.String(), "HTTP API on"), nil
	})
	return out
}

// The README's walk: a dev agent from examples/nomad/dev.hcl (node pool gpu,
// allot-nvml's fake DGX H100), `allot server -dev`, the example budgets, and
// the example jobs, each validated by Nomad and managed by allot.
func TestExampleJobsUnderAllot(t *testing.T) {
	nomadBinary(t)
	dev, err := os.ReadFile(repoFile("examples", "nomad", "dev.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	c := startGPUClusterHCL(t, string(dev))

	// Every example jobspec, and the deployment job, passes `nomad job
	// validate` against a live agent (so the driver config is checked too)
	// without a warning.
	files := []string{repoFile("examples", "deploy", "allot.nomad.hcl")}
	for _, j := range exampleJobs {
		files = append(files, repoFile("examples", "jobs", j.File))
	}
	for _, f := range files {
		t.Run("validate/"+filepath.Base(f), func(t *testing.T) {
			out, err := c.nomadCLI(t, "job", "validate", f)
			if err != nil || !strings.Contains(out, "Job validation successful") {
				t.Fatalf("nomad job validate %s: %v\n%s", f, err, out)
			}
			if strings.Contains(strings.ToLower(out), "warning") || strings.Contains(out, "not validated") {
				t.Fatalf("nomad job validate %s warns:\n%s", f, out)
			}
		})
	}

	port := freePorts(t, 1)[0]
	out := startAllotProcess(t, nil, "server", "-dev", "-http-port", strconv.Itoa(port),
		"-nomad-address", c.Addr, "-manage-scheduler-config", "-log-level", "warn")
	m := regexp.MustCompile(`export ALLOT_TOKEN=([0-9a-f]+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("allot server -dev printed no write token:\n%s", out.String())
	}
	addr, token := fmt.Sprintf("http://127.0.0.1:%d", port), m[1]
	waitAllotLeader(t, addr, 30*time.Second)
	if o := runAllotCLI(t, addr, token, "budgets", "apply", repoFile("examples", "budgets")); !strings.Contains(o, "21 budgets, 15 leaves") {
		t.Fatalf("budgets apply: %s", o)
	}

	for _, j := range exampleJobs {
		if o, err := c.nomadCLI(t, "job", "run", "-detach", repoFile("examples", "jobs", j.File)); err != nil {
			t.Fatalf("nomad job run %s: %v\n%s", j.File, err, o)
		}
	}
	for _, j := range exampleJobs {
		var got nomadJob
		waitFor(t, 60*time.Second, fmt.Sprintf("%s in the %s band (%d-%d), written by allot", j.ID, j.Band, j.Lo, j.Hi), func() (bool, error) {
			got = c.job(t, j.ID)
			return got.Version >= 1 && got.Priority >= j.Lo && got.Priority <= j.Hi, nil
		})
		if j.Running > 0 {
			c.waitRunning(t, j.ID, j.Running, 60*time.Second)
		}
		t.Logf("%s: priority %d (version %d)", j.ID, got.Priority, got.Version)
	}

	var q client.Queue
	if err := json.Unmarshal([]byte(runAllotCLI(t, addr, token, "queue", "-json")), &q); err != nil {
		t.Fatal(err)
	}
	bands := map[string]string{}
	for _, row := range q.Jobs {
		bands[row.JobID] = row.Band
	}
	for _, j := range exampleJobs {
		if bands["default/"+j.ID] != j.Band {
			t.Errorf("allot queue: %s in band %q, want %q (queue %+v)", j.ID, bands["default/"+j.ID], j.Band, bands)
		}
	}
	if o := runAllotCLI(t, addr, token, "explain", "job", "default/olmo-7b-pretrain"); !strings.Contains(o, "ai2/prior/olmo/pretrain") ||
		!strings.Contains(o, "pending") || !strings.Contains(o, "GPUs:         16") {
		t.Errorf("allot explain job default/olmo-7b-pretrain:\n%s", o)
	}
	// Protected work is charged to its budget as it runs; the waiting
	// training job is demand.
	waitFor(t, 60*time.Second, "usage charged to ai2/nlp/reasoning and demand of ai2/prior/olmo/pretrain", func() (bool, error) {
		var u client.Usage
		if err := json.Unmarshal([]byte(runAllotCLI(t, addr, token, "usage", "-json")), &u); err != nil {
			return false, err
		}
		var charged, demand float64
		for _, r := range u.Budgets {
			switch r.Path {
			case "ai2/nlp/reasoning":
				charged = r.Charged
			case "ai2/prior/olmo/pretrain":
				demand = r.Demand
			}
		}
		return charged > 0 && demand > 0 && u.CapacityGPUs == 8, nil
	})

	// Without node_pool = "gpu" the same job never places, and Nomad says why.
	spec, err := os.ReadFile(repoFile("examples", "jobs", "debug.nomad.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	poolLine := regexp.MustCompile(`(?m)^\s*node_pool\s*=\s*"gpu"\s*$`)
	if n := len(poolLine.FindAllString(string(spec), -1)); n != 1 {
		t.Fatalf("debug.nomad.hcl has %d node_pool = \"gpu\" lines, want 1", n)
	}
	nopool := poolLine.ReplaceAllString(strings.Replace(string(spec), `job "debug-tokenizer"`, `job "debug-nopool"`, 1), "")
	f := filepath.Join(t.TempDir(), "nopool.nomad.hcl")
	if err := os.WriteFile(f, []byte(nopool), 0o644); err != nil {
		t.Fatal(err)
	}
	if o, err := c.nomadCLI(t, "job", "run", "-detach", f); err != nil {
		t.Fatalf("nomad job run %s: %v\n%s", f, err, o)
	}
	waitFor(t, 30*time.Second, "Nomad's placement failure for a job outside node pool gpu", func() (bool, error) {
		o, _ := c.nomadCLI(t, "job", "status", "debug-nopool")
		return strings.Contains(o, "No nodes were eligible for evaluation"), nil
	})
}

// examples/deploy/allot.nomad.hcl with one replica, as raw_exec of the built
// binary: it comes up under Nomad with its raft log on the host volume, reads
// its tokens from the Nomad variable, registers its service, and drives the
// Nomad it runs on.
func TestDeployJobDrivesNomad(t *testing.T) {
	nomadBinary(t)
	data := t.TempDir()
	c := startGPUClusterHCL(t, fmt.Sprintf(`
client {
  node_pool = "gpu"
  host_volume "allot-data" {
    path      = %q
    read_only = false
  }
}
plugin "allot-nvml" {
  config {
    fake               = "dgxh100"
    fake_state_dir     = %q
    fingerprint_period = "1s"
  }
}
`, data, t.TempDir()))
	// What the job file asks of an operator: preemption on, and the tokens
	// in the job's Nomad variable (ACLs are off here: no Nomad token).
	c.preemptionOn(t)
	const token = "e2e-deploy-token"
	if err := c.Put("/v1/var/nomad/jobs/allot", map[string]any{"Namespace": "default", "Path": "nomad/jobs/allot",
		"Items": map[string]string{"allot_token": token, "operator_token": "e2e-operator-token", "nomad_token": "none"}}, nil); err != nil {
		t.Fatal(err)
	}
	bin, err := filepath.Abs(allotBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 2)
	addr := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	if o, err := c.nomadCLI(t, "job", "run", "-detach",
		"-var", `servers=["127.0.0.1"]`, "-var", "driver=raw_exec", "-var", "data_dir="+data,
		"-var", "allot_binary="+bin, "-var", "nomad_address="+c.Addr, "-var", "node_pool=gpu",
		"-var", "http_port="+strconv.Itoa(ports[0]), "-var", "raft_port="+strconv.Itoa(ports[1]),
		repoFile("examples", "deploy", "allot.nomad.hcl")); err != nil {
		t.Fatalf("nomad job run allot.nomad.hcl: %v\n%s", err, o)
	}
	waitAllotLeader(t, addr, 90*time.Second)
	if _, err := os.Stat(filepath.Join(data, "raft", "raft.db")); err != nil {
		t.Fatalf("raft log not on the host volume: %v", err)
	}
	var svc []struct {
		Address string
		Port    int
	}
	waitFor(t, 30*time.Second, "service allot in Nomad's catalog", func() (bool, error) {
		if err := c.Get("/v1/service/allot", &svc); err != nil {
			return false, nil
		}
		return len(svc) == 1 && svc[0].Port == ports[0], nil
	})
	waitFor(t, 90*time.Second, "the allot job's deployment to be healthy (its HTTP check passing)", func() (bool, error) {
		var d struct{ Status string }
		if err := c.Get("/v1/job/allot/deployment", &d); err != nil {
			return false, nil
		}
		if d.Status == "failed" {
			return false, fmt.Errorf("deployment failed")
		}
		return d.Status == "successful", nil
	})
	// The write token came from the Nomad variable: budgets apply works.
	runAllotCLI(t, addr, token, "budgets", "apply", repoFile("examples", "budgets"))

	b := jobBody(gpuJob{ID: "debug", Budget: "ai2/nlp/reasoning", MinRuntime: "10m", GPUs: 1})
	b["Job"].(map[string]any)["NodePool"] = "gpu"
	if err := c.Put("/v1/jobs", b, nil); err != nil {
		t.Fatal(err)
	}
	c.waitRunning(t, "debug", 1, 60*time.Second)
	c.waitLevel(t, "debug", bands.Protected, "protected, written by allot under Nomad", 30*time.Second)
	if p := c.job(t, "allot").Priority; p != 95 {
		t.Fatalf("allot's own job at priority %d, want 95", p)
	}
}

// waitAllotLeader waits until the allot server at addr knows a raft leader:
// it prints "HTTP API on" before its first election, and writes before then
// get 503.
func waitAllotLeader(t *testing.T, addr string, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, "the allot server at "+addr+" to know its leader", func() (bool, error) {
		var self client.Self
		return getJSON(addr+"/v1/agent/self", &self) == nil && self.Leader != "", nil
	})
}

// getJSON decodes the answer of GET url into out.
func getJSON(url string, out any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// examples/deploy/nomad-acl-policy.hcl is all allot needs: with ACLs on and
// a token carrying only that policy, allot passes its start-up checks,
// watches Nomad, writes a job's priority (submit-job), cordons the node
// whose GPUs fail (node write) and stops the job's allocation as a
// migration when its window ends (alloc-lifecycle).
func TestDeployACLPolicySuffices(t *testing.T) {
	nomadBinary(t)
	state := t.TempDir()
	a := startAgent(t, agentConfig{PluginDir: installPlugin(t, allotNVML(t)), HCL: fmt.Sprintf(`
acl {
  enabled = true
}
plugin "allot-nvml" {
  config {
    fake               = "dgxh100"
    fake_state_dir     = %q
    fingerprint_period = "1s"
  }
}
`, state)})
	var boot struct{ SecretID string }
	waitFor(t, 30*time.Second, "ACL bootstrap", func() (bool, error) {
		return a.do("POST", "/v1/acl/bootstrap", nil, &boot) == nil, nil
	})
	a.Token = boot.SecretID // management, for the test's own calls
	c := &gpuCluster{agent: a, Node: a.WaitNode()}
	var gpus []string
	waitFor(t, 60*time.Second, "8 healthy GPUs", func() (bool, error) {
		healthy, _, err := gpuInstances(a, c.Node)
		gpus = gpus[:0]
		for id, h := range healthy {
			if h {
				gpus = append(gpus, id)
			}
		}
		return err == nil && len(gpus) == 8, nil
	})
	c.preemptionOn(t)
	if o, err := c.nomadCLI(t, "acl", "policy", "apply", "-description", "allot scheduling overlay", "allot",
		repoFile("examples", "deploy", "nomad-acl-policy.hcl")); err != nil {
		t.Fatalf("nomad acl policy apply: %v\n%s", err, o)
	}
	o, err := c.nomadCLI(t, "acl", "token", "create", "-name", "allot", "-policy", "allot", "-json")
	if err != nil {
		t.Fatalf("nomad acl token create: %v\n%s", err, o)
	}
	var tok struct{ SecretID string }
	if err := json.Unmarshal([]byte(o), &tok); err != nil || tok.SecretID == "" {
		t.Fatalf("nomad acl token create -json: %v\n%s", err, o)
	}

	port := freePorts(t, 1)[0]
	out := startAllotProcess(t, []string{"NOMAD_TOKEN=" + tok.SecretID}, "server", "-dev",
		"-http-port", strconv.Itoa(port), "-nomad-address", c.Addr, "-log-level", "warn")
	m := regexp.MustCompile(`export ALLOT_TOKEN=([0-9a-f]+)`).FindStringSubmatch(out.String())
	if m == nil || !strings.Contains(out.String(), "driving Nomad") {
		t.Fatalf("allot server did not start driving Nomad:\n%s", out.String())
	}
	addr := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitAllotLeader(t, addr, 30*time.Second)
	runAllotCLI(t, addr, m[1], "budgets", "apply", repoFile("examples", "budgets"))

	c.register(t, gpuJob{ID: "debug", Budget: "ai2/nlp/reasoning", MinRuntime: "10s", GPUs: 1})
	first := c.waitRunning(t, "debug", 1, 60*time.Second)[0]
	c.waitLevel(t, "debug", bands.Protected, "protected", 30*time.Second)
	for _, g := range gpus {
		if o, err := exec.Command(allotNVML(t), "inject", "-state", state, "xid", "79", g).CombinedOutput(); err != nil {
			t.Fatalf("allot-nvml inject: %v\n%s", err, o)
		}
	}
	waitFor(t, 60*time.Second, "allot to cordon the node", func() (bool, error) {
		var n struct{ SchedulingEligibility string }
		err := c.Get("/v1/node/"+c.Node, &n)
		return err == nil && n.SchedulingEligibility == "ineligible", err
	})
	waitFor(t, 60*time.Second, "allot to stop the allocation as a migration at its window end", func() (bool, error) {
		got := c.alloc(t, "debug", first.ID)
		return got.DesiredStatus == "stop" && strings.Contains(got.DesiredDescription, "migrat"), nil
	})
	if strings.Contains(out.String(), "response code: 403") || strings.Contains(out.String(), "Permission denied") {
		t.Fatalf("allot was refused by Nomad:\n%s", out.String())
	}
}

// examples/deploy/allot.service is a unit systemd accepts, running the
// built binary (systemd-analyze verify checks ExecStart's file exists, so
// the path is pointed at it).
func TestDeploySystemdUnitVerifies(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("skip: no systemd-analyze on PATH")
	}
	b, err := os.ReadFile(repoFile("examples", "deploy", "allot.service"))
	if err != nil {
		t.Fatal(err)
	}
	bin, err := filepath.Abs(allotBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	if !strings.Contains(unit, "ExecStart=/usr/local/bin/allot server -config /etc/allot/allot.hcl") {
		t.Fatalf("allot.service does not start /usr/local/bin/allot server -config /etc/allot/allot.hcl")
	}
	f := filepath.Join(t.TempDir(), "allot.service")
	if err := os.WriteFile(f, []byte(strings.ReplaceAll(unit, "/usr/local/bin/allot", bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(sa, "verify", f).CombinedOutput(); err != nil || len(out) > 0 {
		t.Fatalf("systemd-analyze verify allot.service: %v\n%s", err, out)
	}
}
