package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// allotCLI runs the allot CLI binary against al and returns its exit code,
// stdout and stderr.
func allotCLI(t *testing.T, al *allot, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(allotBinary(t), args...)
	cmd.Env = append(cmd.Environ(), "ALLOT_ADDR="+al.Srv.HTTPAddr(), "ALLOT_TOKEN=")
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("allot %v: %v", args, err)
	}
	return code, out.String(), errb.String()
}

// Against a real Nomad: a job naming a misspelt budget is told the leaf it
// likely meant, by `allot explain`, and one naming an inner budget the leaves
// below it; unallocated work Nomad evicted for
// allocated work is shown as evicted, not live, and no zero time is printed.
func TestExplainMisspeltBudgetAndEvictedAlloc(t *testing.T) {
	c := startGPUCluster(t)
	al := startAllot(t, c, allotOptions{})
	c.register(t, gpuJob{ID: "filler", GPUs: 8})
	c.waitPriority(t, "filler", func(p int) bool { return p >= 10 && p <= 29 }, "in the unallocated band", 20*time.Second)
	c.waitRunning(t, "filler", 1, 60*time.Second)
	c.register(t, gpuJob{ID: "typo", Budget: "lab/bb", MinRuntime: "1h", GPUs: 1})
	c.register(t, gpuJob{ID: "inner", Budget: "lab", MinRuntime: "1h", GPUs: 1})
	c.register(t, gpuJob{ID: "work", Budget: "lab/a", MinRuntime: "1h", GPUs: 8})
	c.waitRunning(t, "work", 1, 60*time.Second)
	waitFor(t, 30*time.Second, "allot to record the filler's stopped allocation", func() (bool, error) {
		for _, a := range al.Srv.FSM().Read().JobAllocs("default/filler") {
			if !a.Running() {
				return true, nil
			}
		}
		return false, nil
	})

	code, out, errOut := allotCLI(t, al, "explain", "job", "typo")
	if code != 0 || !strings.Contains(out, "Unallocated:  ") ||
		!strings.Contains(out, `no such budget (did you mean "lab/b"?); the job runs unallocated. Name a leaf of the budget tree (`+"`allot budgets list`"+` lists them)`) {
		t.Errorf("explain typo: %d %q\n%s", code, errOut, out)
	}
	if n := strings.Count(out, "no such budget"); n != 1 {
		t.Errorf("explain typo says %d times that the budget does not exist, want once:\n%s", n, out)
	}
	t.Logf("allot explain job typo:\n%s", out)
	code, out, errOut = allotCLI(t, al, "explain", "job", "inner")
	if code != 0 || !strings.Contains(out, `Unallocated:  budget "lab" has sub-budgets; the job runs unallocated. Name one of its leaves instead: lab/a, lab/b`+"\n") {
		t.Errorf("explain inner: %d %q\n%s", code, errOut, out)
	}
	code, out, errOut = allotCLI(t, al, "explain", "job", "filler")
	if code != 0 || !strings.Contains(out, "never protected (unallocated work: any allocated job may preempt it); evicted: preempted by Nomad") ||
		strings.Contains(out, "0001-01-01") {
		t.Errorf("explain filler: %d %q\n%s", code, errOut, out)
	}
	t.Logf("allot explain job filler:\n%s", out)
	code, out, errOut = allotCLI(t, al, "budgets", "list")
	if code != 0 || !strings.Contains(out, "\nlab/a  ") || !strings.Contains(out, "\nlab/b  ") {
		t.Errorf("budgets list: %d %q\n%s", code, errOut, out)
	}
}
