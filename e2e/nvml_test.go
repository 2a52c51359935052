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
)

// allotNVML returns an allot-nvml binary (see allotCommand).
func allotNVML(t testing.TB) string { return allotCommand(t, "allot-nvml") }

// allotCommand returns the binary of ./cmd/NAME: $ALLOT_BIN_DIR/NAME (set by
// `make e2e`) or a fresh build.
func allotCommand(t testing.TB, name string) string {
	t.Helper()
	if d := os.Getenv("ALLOT_BIN_DIR"); d != "" {
		if p := filepath.Join(d, name); fileExists(p) {
			return p
		}
	}
	_, here, _, _ := runtime.Caller(0)
	out := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-o", out, "./cmd/"+name)
	cmd.Dir = filepath.Join(filepath.Dir(here), "..")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", name, err, b)
	}
	return out
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// installPlugin copies the plugin binary into a fresh plugin_dir under the
// name the plugin block uses.
func installPlugin(t testing.TB, bin string) string {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "allot-nvml"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

type nodeDevices struct {
	NodeResources struct {
		Devices []struct {
			Vendor, Type, Name string
			Instances          []struct {
				ID                string
				Healthy           bool
				HealthDescription string
			}
		}
	}
}

// gpuInstances returns the node's nvidia/gpu instances.
func gpuInstances(a *agent, node string) (map[string]bool, map[string]string, error) {
	var n nodeDevices
	if err := a.Get("/v1/node/"+node, &n); err != nil {
		return nil, nil, err
	}
	healthy, desc := map[string]bool{}, map[string]string{}
	for _, d := range n.NodeResources.Devices {
		if d.Vendor != "nvidia" || d.Type != "gpu" {
			continue
		}
		for _, i := range d.Instances {
			healthy[i.ID], desc[i.ID] = i.Healthy, i.HealthDescription
		}
	}
	return healthy, desc, nil
}

const fingerprintPeriod = 2 * time.Second

func TestAllotNVMLUnderNomad(t *testing.T) {
	nomadBinary(t)
	bin := allotNVML(t)
	pluginDir := installPlugin(t, bin)
	state := t.TempDir()
	hcl := fmt.Sprintf(`
plugin "allot-nvml" {
  config {
    fake               = "dgxh100"
    fake_state_dir     = %q
    fingerprint_period = %q
  }
}
`, state, fingerprintPeriod)
	a := startAgent(t, agentConfig{PluginDir: pluginDir, HCL: hcl})
	node := a.WaitNode()

	// 1. Eight healthy nvidia/gpu instances.
	var ids []string
	waitFor(t, 60*time.Second, "8 healthy nvidia/gpu instances", func() (bool, error) {
		healthy, _, err := gpuInstances(a, node)
		if err != nil {
			return false, err
		}
		ids = ids[:0]
		for id, h := range healthy {
			if !h {
				return false, nil
			}
			ids = append(ids, id)
		}
		return len(ids) == 8, nil
	})
	t.Logf("node %s: 8 healthy nvidia/gpu instances", node)
	if !strings.Contains(a.Output(), "FAKE GPUs") {
		t.Errorf("agent log lacks the plugin's fake-mode line")
	}

	// 2. A raw_exec job asking for two GPUs sees their UUIDs.
	visible := runGPUJob(t, a)
	got := strings.Split(visible, ",")
	if len(got) != 2 || got[0] == got[1] {
		t.Fatalf("NVIDIA_VISIBLE_DEVICES = %q, want two distinct UUIDs", visible)
	}
	for _, g := range got {
		if !contains(ids, g) {
			t.Fatalf("NVIDIA_VISIBLE_DEVICES has %s, not one of the node's instances %v", g, ids)
		}
	}
	t.Logf("job saw NVIDIA_VISIBLE_DEVICES=%s", visible)

	// 3. An injected XID 79 turns that instance unhealthy within one period.
	victim := got[0]
	injected := time.Now()
	if out, err := exec.Command(bin, "inject", "-state", state, "xid", "79", victim).CombinedOutput(); err != nil {
		t.Fatalf("inject: %v\n%s", err, out)
	}
	var desc string
	waitFor(t, fingerprintPeriod+5*time.Second, "the XID to reach the node", func() (bool, error) {
		healthy, d, err := gpuInstances(a, node)
		if err != nil {
			return false, err
		}
		desc = d[victim]
		return !healthy[victim], nil
	})
	t.Logf("instance %s unhealthy after %s: %q", victim, time.Since(injected).Round(100*time.Millisecond), desc)
	if !strings.HasPrefix(desc, "XID 79 (GPU has fallen off the bus) at 20") {
		t.Fatalf("HealthDescription = %q", desc)
	}

	// 4. Restarting the agent keeps the instance IDs (the seed is the host name).
	a.Stop()
	b := startAgent(t, agentConfig{PluginDir: pluginDir, HCL: hcl})
	node2 := b.WaitNode()
	var ids2 []string
	waitFor(t, 60*time.Second, "8 healthy instances after restart", func() (bool, error) {
		healthy, _, err := gpuInstances(b, node2)
		if err != nil {
			return false, err
		}
		ids2 = ids2[:0]
		for id, h := range healthy {
			if !h { // a plugin restart is a documented recovery: NVML never replays old XIDs
				return false, nil
			}
			ids2 = append(ids2, id)
		}
		return len(ids2) == 8, nil
	})
	for _, id := range ids {
		if !contains(ids2, id) {
			t.Fatalf("after restart instance %s is gone; now %v", id, ids2)
		}
	}
	t.Logf("after restart (node %s) the same 8 instance IDs", node2)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// runGPUJob runs a batch raw_exec job asking device "nvidia/gpu" {count = 2}
// and returns the NVIDIA_VISIBLE_DEVICES its task printed.
func runGPUJob(t *testing.T, a *agent) string {
	t.Helper()
	job := map[string]any{"Job": map[string]any{
		"ID": "gpu-env", "Name": "gpu-env", "Type": "batch", "Datacenters": []string{"dc1"},
		"TaskGroups": []any{map[string]any{
			"Name": "g", "Count": 1,
			"RestartPolicy":    map[string]any{"Attempts": 0, "Mode": "fail"},
			"ReschedulePolicy": map[string]any{"Attempts": 0, "Unlimited": false},
			"Tasks": []any{map[string]any{
				"Name": "t", "Driver": "raw_exec",
				"Config": map[string]any{"command": "/bin/sh", "args": []string{"-c", "echo VISIBLE=$NVIDIA_VISIBLE_DEVICES"}},
				"Resources": map[string]any{"CPU": 100, "MemoryMB": 64,
					"Devices": []any{map[string]any{"Name": "nvidia/gpu", "Count": 2}}},
			}},
		}},
	}}
	if err := a.Put("/v1/jobs", job, nil); err != nil {
		t.Fatal(err)
	}
	var alloc string
	waitFor(t, 60*time.Second, "the GPU job to complete", func() (bool, error) {
		var allocs []struct{ ID, ClientStatus string }
		if err := a.Get("/v1/job/gpu-env/allocations", &allocs); err != nil {
			return false, err
		}
		for _, al := range allocs {
			switch al.ClientStatus {
			case "complete":
				alloc = al.ID
				return true, nil
			case "failed", "lost":
				return false, fmt.Errorf("allocation %s %s", al.ID, al.ClientStatus)
			}
		}
		return false, nil
	})
	var logs string
	if err := a.Get("/v1/client/fs/logs/"+alloc+"?task=t&type=stdout&plain=true&origin=start", &logs); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(logs, "\n") {
		if v, ok := strings.CutPrefix(line, "VISIBLE="); ok {
			return v
		}
	}
	t.Fatalf("task output has no VISIBLE= line: %q", logs)
	return ""
}
