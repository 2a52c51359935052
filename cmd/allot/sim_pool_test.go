package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// On a cluster whose nodes are in pool "gpu" (examples/nomad/client.hcl),
// a hand-written trace's jobs name no pool: Nomad sends them to
// "default", which no node is in, so none is ever placed, and allot sim
// says so before the run and in the summary. Naming the pool places them.
func TestSimNodePoolNoNode(t *testing.T) {
	dir := t.TempDir()
	cluster := writeFile(t, filepath.Join(dir, "gpu.hcl"), "pool \"gpu\" {\n  nodes = 4\n  gpus_per_node = 8\n}\n")
	trace := writeFile(t, filepath.Join(dir, "t.csv"), "submit,job,budget,class,count,gpus,work,min_runtime\n"+
		"0,pretrain-1,ai2/prior/olmo/pretrain,train,2,8,6h,2h\n"+
		"60,video-1,ai2/vision/video,train,1,8,4h,1h\n"+
		"300,dbg-1,ai2/nlp/reasoning,debug,1,2,10m,10m\n")
	args := []string{"sim", "-budgets", "../../examples/budgets", "-trace", trace, "-cluster", cluster,
		"-horizon", "12h", "-policies", "allot"}
	code, out, errOut := runCLI(t, args...)
	if code != exitOK {
		t.Fatalf("code %d stderr %q", code, errOut)
	}
	want := `t.csv: 3 jobs ask a pool and model no node has and will never be placed (first: line 2 job "pretrain-1" names no pool, so Nomad's "default", and no node is in it`
	if !strings.Contains(errOut, want) || !strings.Contains(errOut, `The cluster's node pools (model): "gpu" (h100); give the job a pool column naming one`) {
		t.Errorf("stderr:\n%s\nwant it to contain\n%s", errOut, want)
	}
	if !strings.Contains(out, "jobs no node of their pool/model can place") {
		t.Errorf("summary lacks the never-placeable row:\n%s", out)
	}
	// The same cluster with node_pool = "default" places them.
	def := writeFile(t, filepath.Join(dir, "def.hcl"), "pool \"gpu\" {\n  nodes = 4\n  gpus_per_node = 8\n  node_pool = \"default\"\n}\n")
	code, out, errOut = runCLI(t, append(args[:len(args)-6:len(args)-6], "-cluster", def, "-horizon", "12h", "-policies", "allot")...)
	if code != exitOK || strings.Contains(errOut, "never be placed") || strings.Contains(out, "jobs no node of their pool/model") {
		t.Errorf("node_pool default: code %d stderr %q\n%s", code, errOut, out)
	}
}
