package e2e

import (
	"os"
	"os/exec"
	"testing"
)

// nomadBinary returns the Nomad binary to test against, or skips the test.
func nomadBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("NOMAD_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("skip: NOMAD_BIN=%s: %v", p, err)
		}
		return p
	}
	p, err := exec.LookPath("nomad")
	if err != nil {
		t.Skip("skip: no nomad binary on PATH and NOMAD_BIN unset")
	}
	return p
}

func TestNomadAvailable(t *testing.T) {
	bin := nomadBinary(t)
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", bin, err, out)
	}
	t.Logf("nomad: %s", out)
}
