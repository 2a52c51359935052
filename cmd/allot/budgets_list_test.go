package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// `allot budgets list` lists the leaves a job may name: of the tree applied
// on the server (the contract's warning about an unknown budget points here),
// or of a directory; -json carries the same.
func TestBudgetsList(t *testing.T) {
	t.Setenv("ALLOT_ADDR", devAPI(t))
	code, out, errOut := runCLI(t, "budgets", "list")
	if code != exitOK || out != "No budget tree applied yet (allot budgets apply DIR); every job runs unallocated.\n" {
		t.Fatalf("list before any apply: %d %q %q", code, out, errOut)
	}
	examples := filepath.Join("..", "..", "examples", "budgets")
	if code, out, errOut := runCLI(t, "budgets", "apply", "-token", cliToken, "-revision", "r7", examples); code != exitOK {
		t.Fatalf("apply: %d %q %q", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "budgets", "list")
	if code != exitOK || !strings.HasPrefix(out, "Budget tree r7, applied ") || !strings.Contains(out, ": 15 leaves\n\nLEAF ") ||
		!strings.Contains(out, "\nai2/prior/olmo/pretrain    13.2%       Base model pretraining runs\n") ||
		!strings.Contains(out, "\nai2/vision/video           6.0%        -\n") || strings.Contains(out, "ai2/prior/olmo ") {
		t.Errorf("list from the server: %d %q\n%s", code, errOut, out)
	}
	code, out, _ = runCLI(t, "budgets", "list", "-json")
	var got leavesJSON
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil || got.From != "server" || got.Revision != "r7" ||
		len(got.Leaves) != 15 || got.Leaves[0].Path != "ai2/infra" || got.Leaves[0].Effective != 0.1 || got.AppliedAt.IsZero() {
		t.Errorf("list -json: %d %s", code, out)
	}

	// A directory, read without a server; a one-leaf tree says "1 leaf".
	dir := writeBudgetDir(t, map[string]string{"root.hcl": "budget \"lab\" {\n  budget \"only\" {\n    share = 1\n    description = \"the one\"\n  }\n}\n"})
	code, out, errOut = runCLI(t, "budgets", "list", "-address", "127.0.0.1:1", dir)
	if code != exitOK || out != dir+": 1 leaf\n\nLEAF      OF CLUSTER  DESCRIPTION\nlab/only  100.0%      the one\n" {
		t.Errorf("list DIR: %d %q %q", code, out, errOut)
	}
	code, out, _ = runCLI(t, "budgets", "list", "--json", dir)
	if code != exitOK || !strings.Contains(out, `"from": "`+dir+`"`) || !strings.Contains(out, `"path": "lab/only"`) || strings.Contains(out, "revision") {
		t.Errorf("list -json DIR: %d %s", code, out)
	}
	if code, _, errOut := runCLI(t, "budgets", "list", dir, dir); code != exitUsage || !strings.Contains(errOut, "at most one budget directory") {
		t.Errorf("list DIR DIR: %d %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "budgets", "list", t.TempDir()); code != exitInvalid || !strings.Contains(errOut, "is not a valid budget tree") {
		t.Errorf("list of an empty directory: %d %q", code, errOut)
	}
}

// validate, show and apply count budgets and leaves in good English.
func TestBudgetCountsPluralise(t *testing.T) {
	dir := writeBudgetDir(t, map[string]string{"root.hcl": "budget \"lab\" {\n  budget \"only\" { share = 1 }\n}\n"})
	code, out, errOut := runCLI(t, "budgets", "validate", dir)
	if code != exitOK || out != dir+": 2 budgets, 1 leaf: ok\n" {
		t.Errorf("validate: %d %q %q", code, out, errOut)
	}
	alone := writeBudgetDir(t, map[string]string{"root.hcl": "budget \"lab\" {}\n"})
	code, out, _ = runCLI(t, "budgets", "validate", alone)
	if code != exitOK || out != alone+": 1 budget, 1 leaf: ok\n" {
		t.Errorf("validate a lone root: %d %q", code, out)
	}
	code, out, _ = runCLI(t, "budgets", "show", dir)
	if code != exitOK || !strings.HasSuffix(out, "\n2 budgets, 1 leaf\n") {
		t.Errorf("show: %d %q", code, out)
	}
}
