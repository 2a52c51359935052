package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/client"
)

// TestServerRuntimeCapAgainstNomad starts `allot server -config` with
// policy { runtime_cap = "12h" } against a real Nomad: a job declaring
// min_runtime = "10h" is protected for its whole 10h (allot once clamped
// it to the default 8h here while the policy said 12h), and one declaring
// 14h is protected for the 12h cap, with the clamp warning in `allot
// explain`.
func TestServerRuntimeCapAgainstNomad(t *testing.T) {
	c := startGPUCluster(t)
	cfg, addr := nomadServerConfig(t, c.Addr, "policy {\n  runtime_cap = \"12h\"\n}\n")
	startAllotProcess(t, nil, "server", "-config", cfg, "-log-level", "warn")
	waitAllotLeader(t, addr, 30*time.Second)
	runAllotCLI(t, addr, "e2e", "budgets", "apply", repoFile("examples", "budgets"))

	for _, tc := range []struct {
		job, minRuntime string
		wantWindow      time.Duration
		wantWarning     string
	}{
		{"cap-10h", "10h", 10 * time.Hour, ""},
		{"cap-14h", "14h", 12 * time.Hour, `meta min_runtime = "14h": above the cap of 12h0m0s (the server's policy { runtime_cap }); the job is protected for 12h0m0s only`},
	} {
		c.register(t, gpuJob{ID: tc.job, Budget: "ai2/nlp/reasoning", MinRuntime: tc.minRuntime, GPUs: 1})
		c.waitLevel(t, tc.job, bands.Protected, "protected band", 60*time.Second)
		var ex client.Explain
		var raw string
		waitFor(t, 30*time.Second, tc.job+"'s allocation recorded with its protected window", func() (bool, error) {
			raw = runAllotCLI(t, addr, "e2e", "explain", "job", "-json", "default/"+tc.job)
			if err := json.Unmarshal([]byte(raw), &ex); err != nil {
				return false, fmt.Errorf("allot explain job -json: %v\n%s", err, raw)
			}
			return len(ex.Allocs) == 1 && !ex.Allocs[0].ProtectedUntil.IsZero(), nil
		})
		if got := ex.Allocs[0].ProtectedUntil.Sub(ex.Allocs[0].StartedAt); got != tc.wantWindow {
			t.Errorf("%s (min_runtime %s, cap 12h): protected for %v, want %v", tc.job, tc.minRuntime, got, tc.wantWindow)
		}
		if ex.MinRuntime != mustDuration(t, tc.minRuntime) {
			t.Errorf("%s: explain says min_runtime %v, want %s", tc.job, ex.MinRuntime, tc.minRuntime)
		}
		why := ""
		if ex.Queue != nil {
			why = ex.Queue.Explanation
		}
		// The policy's own view of the window (what decides preemption),
		// as `allot explain` prints it.
		m := protectedUntilRE.FindStringSubmatch(why)
		if m == nil {
			t.Fatalf("%s: explanation %q names no protected window", tc.job, why)
		}
		until, err := time.Parse(time.RFC3339, m[1])
		if err != nil {
			t.Fatal(err)
		}
		if d := until.Sub(ex.Allocs[0].StartedAt) - tc.wantWindow; d < -2*time.Second || d > 2*time.Second {
			t.Errorf("%s: the policy protects it until %v, %v after its start; want %v", tc.job, until, until.Sub(ex.Allocs[0].StartedAt), tc.wantWindow)
		}
		if tc.wantWarning != "" && !strings.Contains(why, tc.wantWarning) {
			t.Errorf("%s: allot explain lacks the clamp warning %q:\n%s", tc.job, tc.wantWarning, raw)
		}
		if tc.wantWarning == "" && strings.Contains(raw, "above the cap") {
			t.Errorf("%s: allot explain warns of a cap it is under:\n%s", tc.job, raw)
		}
		t.Logf("%s: min_runtime %s protected %v: %s", tc.job, tc.minRuntime, ex.Allocs[0].ProtectedUntil.Sub(ex.Allocs[0].StartedAt), why)
	}
}

var protectedUntilRE = regexp.MustCompile(`inside its protected window until (\S+?);`)

func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
