package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v3"

	"github.com/allot-sched/allot/overlay/contract"
	"github.com/allot-sched/allot/overlay/nomad"
	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/server"
)

// parseServer runs `allot server ARGS` up to the point where the server
// would start and returns what it would start with.
func parseServer(t *testing.T, args ...string) (server.Config, nomadSetup, error) {
	t.Helper()
	var cfg server.Config
	var ns nomadSetup
	cmd := serverCommand()
	cmd.Writer, cmd.ErrWriter = io.Discard, io.Discard
	cmd.Action = func(ctx context.Context, c *cli.Command) error {
		c2, fc, err := serverConfig(c)
		if err != nil {
			return err
		}
		cfg = c2
		ns, err = nomadSetupFrom(c, fc)
		return err
	}
	err := cmd.Run(context.Background(), append([]string{"server"}, args...))
	return cfg, ns, err
}

func TestServerExampleConfigParses(t *testing.T) {
	path := filepath.Join("..", "..", "examples", "server", "allot.hcl")
	cfg, ns, err := parseServer(t, "-config", path)
	if err != nil {
		t.Fatalf("allot server -config %s: %v", path, err)
	}
	if cfg.DataDir != "/var/lib/allot" || cfg.BootstrapExpect != 3 || len(cfg.RetryJoin) != 2 || !cfg.TLS.RPC {
		t.Fatalf("server config from the example: %+v", cfg)
	}
	want := policy.DefaultConfig()
	want.Namespaces, want.NodePools = []string{"default", "research"}, []string{"gpu"}
	switch {
	case !ns.Enabled, ns.Address != "https://nomad.service.consul:4646", ns.Token != "",
		ns.Adapter.ManageSchedulerConfig:
		t.Fatalf("nomad setup from the example: %+v", ns)
	}
	// The example shows every policy knob at its default.
	if got, _ := json.Marshal(ns.Policy); string(got) != mustJSON(t, want) {
		t.Fatalf("example policy\n got %s\nwant %s", got, mustJSON(t, want))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestServerNomadFlags(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		wantOn     bool
		wantAddr   string
		wantManage bool
	}{
		{name: "dev alone runs no reconciler", args: []string{"-dev"}},
		{name: "dev with -nomad uses NOMAD_ADDR", args: []string{"-dev", "-nomad"}, wantOn: true},
		{name: "dev with an address", args: []string{"-dev", "-nomad-address", "http://127.0.0.1:4646"},
			wantOn: true, wantAddr: "http://127.0.0.1:4646"},
		{name: "manage the scheduler config", args: []string{"-dev", "-nomad", "-manage-scheduler-config"},
			wantOn: true, wantManage: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ns, err := parseServer(t, append([]string{"-token", "x"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if ns.Enabled != tc.wantOn || ns.Address != tc.wantAddr || ns.Adapter.ManageSchedulerConfig != tc.wantManage {
				t.Fatalf("got %+v", ns)
			}
		})
	}
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "allot.hcl")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestServerPolicyBlock(t *testing.T) {
	path := writeConfig(t, `
data_dir = "/tmp/x"
nomad {}
policy {
  lookback = "3d"
  bands {
    protected = 1000
  }
  reservation {
    max_age = "30m"
  }
  drain {
    return = "manual"
  }
}
`)
	_, ns, err := parseServer(t, "-config", path, "-nomad-address", "http://nomad:4646", "-manage-scheduler-config")
	if err != nil {
		t.Fatal(err)
	}
	p := ns.Policy
	switch {
	case !ns.Enabled, ns.Address != "http://nomad:4646", !ns.Adapter.ManageSchedulerConfig:
		t.Fatalf("setup %+v", ns)
	case p.Lookback != 72*time.Hour, p.ReservationMaxAge != 30*time.Minute, p.DrainReturnAfter != 0:
		t.Fatalf("policy %+v", p)
	case p.Protected != 1000 || p.Running != 991 || p.Pending != (policy.Range{Low: 40, High: 990}):
		t.Fatalf("bands for protected = 1000 (job_max_priority 1001 or more): %+v", p)
	}

	bad := writeConfig(t, "nomad {}\npolicy {\n  margins {\n    hysteresis = 0\n  }\n}\n")
	_, _, err = parseServer(t, "-dev", "-config", bad)
	if err == nil || !strings.Contains(err.Error(), bad+":4:18: hysteresis = 0: want a whole number from 1 to 100") {
		t.Fatalf("hysteresis = 0: %v", err)
	}
}

// fakeNomad answers the few endpoints allot's start-up reads.
type fakeNomad struct {
	mu         sync.Mutex
	preemption bool
	puts       int
}

func (f *fakeNomad) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	reply := func(v any) { _ = json.NewEncoder(w).Encode(v) }
	switch {
	case r.URL.Path == "/v1/agent/self":
		reply(map[string]any{"config": map[string]any{"Version": map[string]any{"Version": "2.0.6"},
			"ACL": map[string]any{"Enabled": false}}, "member": map[string]any{}})
	case r.URL.Path == "/v1/operator/scheduler/configuration" && r.Method == http.MethodGet:
		reply(map[string]any{"SchedulerConfig": map[string]any{"ModifyIndex": 7, "PreemptionConfig": map[string]any{
			"SystemSchedulerEnabled": true, "BatchSchedulerEnabled": f.preemption, "ServiceSchedulerEnabled": f.preemption}}})
	case r.URL.Path == "/v1/operator/scheduler/configuration":
		var body struct {
			PreemptionConfig struct{ BatchSchedulerEnabled, ServiceSchedulerEnabled bool }
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.puts++
		f.preemption = body.PreemptionConfig.BatchSchedulerEnabled && body.PreemptionConfig.ServiceSchedulerEnabled
		reply(map[string]any{"Updated": r.URL.Query().Get("cas") == "7"})
	case r.URL.Path == "/v1/nodes":
		reply([]map[string]any{{"ID": "n1", "Name": "gpu-1", "Status": "ready", "SchedulingEligibility": "eligible",
			"NodeResources": map[string]any{"Devices": []any{map[string]any{"Vendor": "nvidia", "Type": "gpu", "Name": "H100",
				"Instances": []any{map[string]any{"ID": "GPU-0", "Healthy": true}}}}}}})
	case r.URL.Path == "/v1/jobs":
		reply([]map[string]any{{"ID": "logs", "Namespace": "default", "Priority": 50},
			{"ID": "train", "Namespace": "default", "Priority": 40}})
	case r.URL.Path == "/v1/allocations":
		reply([]map[string]any{
			{"ID": "alloc-logs", "JobID": "logs", "Namespace": "default", "NodeID": "n1", "DesiredStatus": "run", "ClientStatus": "running"},
			{"ID": "alloc-train", "JobID": "train", "Namespace": "default", "NodeID": "n1", "DesiredStatus": "run", "ClientStatus": "running"}})
	case strings.HasPrefix(r.URL.Path, "/v1/job/"):
		id := strings.TrimPrefix(r.URL.Path, "/v1/job/")
		job := map[string]any{"ID": id, "Name": id, "Namespace": "default", "Type": "service", "Priority": 50,
			"TaskGroups": []any{map[string]any{"Name": "g", "Count": 1, "Tasks": []any{map[string]any{"Name": "t"}}}}}
		if id == "train" {
			job["TaskGroups"] = []any{map[string]any{"Name": "g", "Count": 1, "Tasks": []any{map[string]any{"Name": "t",
				"Resources": map[string]any{"Devices": []any{map[string]any{"Name": "nvidia/gpu", "Count": 1}}}}}}}
		}
		reply(job)
	default:
		http.NotFound(w, r)
	}
}

func TestStartNomadPreflight(t *testing.T) {
	fake := &fakeNomad{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	var logs bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
	s := nomadSetup{Enabled: true, Address: srv.URL, Policy: policy.DefaultConfig()}

	_, err := startNomad(context.Background(), s, log, io.Discard)
	if !errors.Is(err, nomad.ErrPreemptionOff) || !strings.Contains(err.Error(), "manage_scheduler_config = true") ||
		!strings.Contains(err.Error(), srv.URL) {
		t.Fatalf("preemption off, not managed: %v", err)
	}
	if fake.puts != 0 {
		t.Fatalf("allot wrote Nomad's scheduler config without manage_scheduler_config")
	}

	s.Adapter.ManageSchedulerConfig = true
	var out bytes.Buffer
	rec, err := startNomad(context.Background(), s, log, &out)
	if err != nil || rec == nil {
		t.Fatalf("managed start: %v", err)
	}
	if !fake.preemption || fake.puts != 1 {
		t.Fatalf("preemption not turned on (puts %d)", fake.puts)
	}
	if !strings.Contains(out.String(), "driving Nomad 2.0.6 at "+srv.URL) {
		t.Fatalf("start-up line %q", out.String())
	}
	// logs (priority 50, no GPUs) sits on a GPU node within reach of a
	// pending job at 89; train asks for GPUs: allot manages it.
	l := logs.String()
	if !strings.Contains(l, "job=default/logs") || !strings.Contains(l, "priority=50") ||
		!strings.Contains(l, "run it at priority 80 or above") || strings.Contains(l, "default/train") {
		t.Fatalf("unmanaged-allocation warning:\n%s", l)
	}
}

// runtimeCapConfig is a server config whose policy block raises the
// runtime cap to 12h; the simulator's -config reads the same file.
const runtimeCapConfig = `
nomad {
  address = "http://127.0.0.1:4646"
}
policy {
  runtime_cap = "12h"
}
`

// TestServerRuntimeCapReachesContract goes from a server config's
// policy { runtime_cap = "12h" } to the protected window of a job declaring
// min_runtime = "10h": the reconciler's contract must protect it for all
// 10h, not clamp it to the default 8h while the policy says 12h; a 14h job
// is clamped to the 12h cap, with a warning naming the key and the setting.
func TestServerRuntimeCapReachesContract(t *testing.T) {
	path := writeConfig(t, "data_dir = \""+t.TempDir()+"\"\n"+runtimeCapConfig)
	_, ns, err := parseServer(t, "-config", path)
	if err != nil {
		t.Fatalf("allot server -config: %v", err)
	}
	rc := reconcilerConfig(ns, hclog.NewNullLogger())
	if rc.Policy.RuntimeCap != 12*time.Hour {
		t.Fatalf("runtime cap %v, want 12h", rc.Policy.RuntimeCap)
	}
	leaf := func(string) (bool, bool) { return true, true }
	for _, tc := range []struct {
		minRuntime    string
		wantProtected time.Duration
		wantWarning   string
	}{
		{"10h", 10 * time.Hour, ""},
		{"12h", 12 * time.Hour, ""},
		{"14h", 12 * time.Hour, `meta min_runtime = "14h": above the cap of 12h0m0s (the server's policy { runtime_cap }); the job is protected for 12h0m0s only`},
	} {
		meta := map[string]string{"budget": "ai2/nlp/reasoning", "min_runtime": tc.minRuntime, "resumable": "true"}
		// The reconciler parses every job with its policy's contract.Config.
		c := contract.Parse("long-train", meta, rc.Policy.Config, leaf)
		var warnings []string
		for _, w := range c.Warnings {
			warnings = append(warnings, w.String())
		}
		var want []string
		if tc.wantWarning != "" {
			want = []string{`job "long-train": ` + tc.wantWarning}
		}
		if c.Protected != tc.wantProtected || !slices.Equal(warnings, want) {
			t.Errorf("min_runtime %s under a 12h cap: protected %v, warnings %q; want %v, %q", tc.minRuntime, c.Protected, warnings, tc.wantProtected, tc.wantWarning)
		}
	}
}

// TestServerNoticeCapReachesContract goes from policy {
// max_checkpoint_notice = "20m" } to the contract and the policy: a job's
// 15m notice is kept (the default cap, 10m, would clamp it), a 30m one is
// clamped to 20m with a warning naming the setting; a cap above the
// runtime cap is refused.
func TestServerNoticeCapReachesContract(t *testing.T) {
	write := func(policy string) string {
		path := filepath.Join(t.TempDir(), "allot.hcl")
		cfg := "data_dir = \"" + t.TempDir() + "\"\nnomad {\n  address = \"http://127.0.0.1:4646\"\n}\npolicy {\n" + policy + "}\n"
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	_, ns, err := parseServer(t, "-config", write("  max_checkpoint_notice = \"20m\"\n"))
	if err != nil {
		t.Fatalf("allot server -config: %v", err)
	}
	rc := reconcilerConfig(ns, hclog.NewNullLogger())
	if rc.Policy.MaxNotice != 20*time.Minute {
		t.Fatalf("notice cap %v, want 20m", rc.Policy.MaxNotice)
	}
	leaf := func(string) (bool, bool) { return true, true }
	for _, tc := range []struct {
		notice string
		want   time.Duration
		warns  int
	}{{"15m", 15 * time.Minute, 0}, {"30m", 20 * time.Minute, 1}} {
		meta := map[string]string{"budget": "lab/a", "min_runtime": "1h", "checkpoint_signal": "SIGUSR1", "checkpoint_notice": tc.notice}
		c := contract.Parse("j", meta, rc.Policy.Config, leaf)
		if c.Notice != tc.want || len(c.Warnings) != tc.warns {
			t.Errorf("checkpoint_notice %s under a 20m cap: notice %v, warnings %v; want %v and %d warning(s)", tc.notice, c.Notice, c.Warnings, tc.want, tc.warns)
		}
	}
	if _, _, err := parseServer(t, "-config", write("  runtime_cap = \"1h\"\n  max_checkpoint_notice = \"2h\"\n")); err == nil ||
		!strings.Contains(err.Error(), "max_checkpoint_notice = 2h0m0s: want a positive duration at most runtime_cap (1h0m0s)") {
		t.Fatalf("a notice cap above the runtime cap: %v, want it refused", err)
	}
}
