package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// runCLI runs the allot CLI in-process and returns exit code, stdout, stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"allot"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestVersion(t *testing.T) {
	code, out, _ := runCLI(t, "version")
	if code != exitOK || !strings.HasPrefix(out, "allot ") {
		t.Fatalf("code %d out %q", code, out)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"version", "extra"}, {"-no-such-flag"}, {"version", "--bogus"}} {
		if code, _, errOut := runCLI(t, args...); code != exitUsage {
			t.Errorf("%v: code %d, want %d (stderr %q)", args, code, exitUsage, errOut)
		}
	}
}
