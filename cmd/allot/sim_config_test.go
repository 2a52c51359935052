package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/sim"
)

// TestSimConfigRuntimeCap runs `allot sim -config` on the server config of
// TestServerRuntimeCapReachesContract (policy { runtime_cap = "12h" }): the
// simulated allot protects a job's whole 10h min_runtime, as the server does,
// so the job that waits for its GPUs starts 10h after it (9h after its own
// submission), not at the default cap's 8h; a 14h min_runtime is clamped to
// 12h with a warning naming the key and the setting.
func TestSimConfigRuntimeCap(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, filepath.Join(dir, "allot.hcl"), runtimeCapConfig)
	// One 8-GPU node: long holds it from 0; next, of an idle budget, asks for
	// it at 1h and may only have it once long's protected window is over.
	trace := writeFile(t, filepath.Join(dir, "cap.csv"), "submit,job,budget,class,gpus,work,min_runtime,resumable\n"+
		"0,long,ai2/vision/video,train,8,30h,10h,true\n"+
		"3600,next,ai2/nlp/reasoning,debug,8,1h,30m,true\n"+
		"108000,longer,ai2/vision/video,train,8,20h,14h,true\n")
	waitOfNext := func(args ...string) (time.Duration, string) {
		t.Helper()
		args = append([]string{"sim", "-trace", trace, "-nodes", "1", "-budgets", "../../examples/budgets",
			"-policies", "allot", "-warmup", "0", "-horizon", "40h", "-json"}, args...)
		code, out, errOut := runCLI(t, args...)
		if code != exitOK {
			t.Fatalf("allot %s: code %d\n%s", strings.Join(args, " "), code, errOut)
		}
		var res struct{ Results []sim.Result }
		if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Results) != 1 {
			t.Fatalf("-json output %q: %v", out, err)
		}
		for _, w := range res.Results[0].Waits {
			if w.Class == "debug" && w.Jobs == 1 && w.Censored == 0 {
				return time.Duration(w.P50 * float64(time.Second)), errOut
			}
		}
		t.Fatalf("no started debug job in %+v", res.Results[0].Waits)
		return 0, ""
	}
	wait, stderr := waitOfNext("-config", cfg)
	t.Logf("runtime_cap 12h: next waited %v", wait)
	if wait < 9*time.Hour || wait > 9*time.Hour+5*time.Minute {
		t.Errorf("-config with runtime_cap 12h: next waited %v, want 9h (long protected for its whole 10h)", wait)
	}
	want := `1 job asks a min_runtime above the cap (first: line 4 job "longer": meta min_runtime = "14h0m0s": above the cap of 12h0m0s (the server's policy { runtime_cap }); the job is protected for 12h0m0s only)`
	if !strings.Contains(stderr, trace+": "+want) {
		t.Errorf("stderr lacks the clamp warning\n  %s\ngot\n%s", want, stderr)
	}
	// A scenario file names the config relative to itself.
	scenario := writeFile(t, filepath.Join(dir, "scenario.json"), `{"config": "allot.hcl"}`)
	if wait, _ := waitOfNext(scenario); wait != 9*time.Hour {
		t.Errorf("scenario with config: next waited %v, want 9h as with -config", wait)
	}
	// Without the file the default 8h cap applies: the same trace tells the
	// two apart.
	if wait, _ := waitOfNext(); wait < 7*time.Hour || wait > 7*time.Hour+5*time.Minute {
		t.Errorf("default runtime cap: next waited %v, want 7h (long protected for the default cap's 8h)", wait)
	}
}

// A config the server would refuse, the simulator refuses too, at the same
// file:line:col.
func TestSimConfigRefusesBadPolicy(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, filepath.Join(dir, "bad.hcl"), "policy {\n  bands {\n    protected = 90\n  }\n}\n")
	trace := writeFile(t, filepath.Join(dir, "t.csv"), "submit,job,budget,gpus,work,min_runtime\n0,a,,1,1h,0\n")
	code, _, errOut := runCLI(t, "sim", "-config", cfg, "-trace", trace, "-nodes", "1")
	if code == exitOK || !strings.Contains(errOut, cfg+":3:17: protected = 90 must be above running = 90") {
		t.Fatalf("code %d, stderr %q; want the file's position and what is wrong", code, errOut)
	}
}
