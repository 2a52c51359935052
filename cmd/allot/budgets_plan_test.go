package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// changedFiles is publishedFiles after a pull request: molmo is added under
// prior (olmo's effective share drops from 35% to 30%; vision keeps 15%), and
// robotics, a leaf, gains a child, so it stops being a leaf.
var changedFiles = map[string]string{
	"root.hcl": `budget "ai2" {
  description = "Institute GPU time"
  owners      = ["program-office"]
  budget "robotics" {
    share = 50
    budget "manipulation" { share = 1 }
  }
}
`,
	"prior.hcl": `budget "ai2/prior" {
  share = 50
  budget "olmo" { share = 60 }
  budget "vision" { share = 30 }
  budget "molmo" { share = 10 }
}
`,
}

// wantPlanBody is the plan from publishedFiles to changedFiles, after the
// "Comparing" line: largest moves first, ties by path.
const wantPlanBody = `
Leaves and their effective share of the cluster (+ added, - removed, ~ changed):

  - ai2/robotics                50.0% →      -  (-50.0 pp)
  + ai2/robotics/manipulation       - →  50.0%  (+50.0 pp)
  + ai2/prior/molmo                 - →   5.0%  (+5.0 pp)
  ~ ai2/prior/olmo              35.0% →  30.0%  (-5.0 pp)

Plan: 2 added, 1 removed, 1 changed.
`

func TestBudgetsPlanAgainstDirectory(t *testing.T) {
	base := writeBudgetDir(t, publishedFiles)
	next := writeBudgetDir(t, changedFiles)
	for _, args := range [][]string{
		{"budgets", "plan", next, "-base", base},
		{"budgets", "plan", next, "--base", base},
		{"budgets", "plan", "-base", base, next},
		{"budgets", "plan", "--base=" + base, next},
	} {
		code, out, errOut := runCLI(t, args...)
		if code != exitOK {
			t.Fatalf("%v: code %d stderr %q", args, code, errOut)
		}
		if want := "Comparing " + next + " with " + base + ".\n" + wantPlanBody; out != want {
			t.Errorf("%v: got:\n%s\nwant:\n%s", args, out, want)
		}
	}
}

func TestBudgetsPlanJSON(t *testing.T) {
	base := writeBudgetDir(t, publishedFiles)
	next := writeBudgetDir(t, changedFiles)
	for _, flag := range []string{"-json", "--json"} {
		code, out, errOut := runCLI(t, "budgets", "plan", next, "-base", base, flag)
		if code != exitOK {
			t.Fatalf("%s: code %d stderr %q", flag, code, errOut)
		}
		var p plan
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatalf("%s: %v\n%s", flag, err, out)
		}
		if p.Dir != next || p.Base != base || p.BaseAbsent || p.Added != 2 || p.Removed != 1 || p.Changed != 1 || len(p.Changes) != 4 {
			t.Fatalf("%s: %+v", flag, p)
		}
		olmo := p.Changes[3]
		if olmo != (leafChange{Path: "ai2/prior/olmo", Action: "change", Before: 0.35, After: 0.3, DeltaPoints: -5}) {
			t.Errorf("%s: olmo change %+v", flag, olmo)
		}
		if rm := p.Changes[0]; rm != (leafChange{Path: "ai2/robotics", Action: "remove", Before: 0.5, DeltaPoints: -50}) {
			t.Errorf("%s: robotics change %+v", flag, rm)
		}
	}
}

func TestBudgetsPlanNoChanges(t *testing.T) {
	base := writeBudgetDir(t, publishedFiles)
	// Scaling every sibling's share by the same factor moves nothing.
	next := writeBudgetDir(t, map[string]string{
		"all.hcl": `budget "ai2" {
  budget "prior" {
    share = 1
    budget "olmo" { share = 7 }
    budget "vision" { share = 3 }
  }
  budget "robotics" { share = 1 }
}
`,
	})
	code, out, _ := runCLI(t, "budgets", "plan", next, "-base", base)
	want := "Comparing " + next + " with " + base + ".\n\nNo changes. Every leaf keeps its effective share of the cluster.\n\nPlan: 0 added, 0 removed, 0 changed.\n"
	if code != exitOK || out != want {
		t.Errorf("code %d, got:\n%s\nwant:\n%s", code, out, want)
	}
	code, out, _ = runCLI(t, "budgets", "plan", next, "-base", base, "-json")
	if code != exitOK || !strings.Contains(out, `"changes": []`) {
		t.Errorf("code %d, json:\n%s", code, out)
	}
}

func TestBudgetsPlanInvalid(t *testing.T) {
	good := writeBudgetDir(t, publishedFiles)
	bad := writeBudgetDir(t, map[string]string{"a.hcl": "budget \"ai2\" {\n  budget \"x\" { share = \"lots\" }\n}\n"})
	code, _, errOut := runCLI(t, "budgets", "plan", bad, "-base", good)
	if code != exitInvalid || !strings.HasPrefix(errOut, filepath.Join(bad, "a.hcl")+":2:24: ") {
		t.Errorf("invalid DIR: code %d stderr %q", code, errOut)
	}
	code, _, errOut = runCLI(t, "budgets", "plan", good, "-base", bad)
	if code != exitInvalid || !strings.HasPrefix(errOut, filepath.Join(bad, "a.hcl")+":2:24: ") {
		t.Errorf("invalid base: code %d stderr %q", code, errOut)
	}
	// Not a directory, and good is not inside a git repository.
	code, _, errOut = runCLI(t, "budgets", "plan", good, "-base", "HEAD~1")
	if code != exitInvalid || !strings.Contains(errOut, `-base "HEAD~1" is not a directory, and `+good+" is not in a git repository") {
		t.Errorf("no repo: code %d stderr %q", code, errOut)
	}
}

// gitRepo is a temporary git repository for plan's revision form.
type gitRepo struct {
	t   *testing.T
	dir string
}

func newGitRepo(t *testing.T) *gitRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not on PATH: the revision form of budgets plan needs it")
	}
	r := &gitRepo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	return r
}

func (r *gitRepo) git(args ...string) {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", r.dir, "-c", "user.name=test", "-c", "user.email=test@example.com",
		"-c", "commit.gpgsign=false"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// commit replaces the budgets/ directory of the work tree with files and commits it.
func (r *gitRepo) commit(msg string, files map[string]string) {
	r.t.Helper()
	budgetsDir := filepath.Join(r.dir, "budgets")
	if err := os.RemoveAll(budgetsDir); err != nil {
		r.t.Fatal(err)
	}
	writeFiles(r.t, budgetsDir, files)
	r.git("add", "-A", ".")
	r.git("commit", "-q", "--allow-empty", "-m", msg)
}

func TestBudgetsPlanAgainstRevision(t *testing.T) {
	r := newGitRepo(t)
	r.commit("readme only", map[string]string{"../README": "budgets come next\n"})
	r.commit("budgets", publishedFiles)
	dir := filepath.Join(r.dir, "budgets")

	// Uncommitted edits in the work tree against HEAD; an unrelated
	// non-.hcl file in the directory is ignored at both ends.
	writeFiles(t, dir, changedFiles)
	writeFiles(t, dir, map[string]string{"NOTES.md": "not a budget file"})
	for _, base := range []string{"HEAD", "main"} {
		code, out, errOut := runCLI(t, "budgets", "plan", dir, "-base", base)
		if want := "Comparing " + dir + " with " + base + ":budgets.\n" + wantPlanBody; code != exitOK || out != want {
			t.Errorf("-base %s: code %d stderr %q, got:\n%s\nwant:\n%s", base, code, errOut, out, want)
		}
	}

	// Committed: HEAD~1 is the published tree, HEAD the changed one.
	r.commit("change shares", changedFiles)
	code, out, errOut := runCLI(t, "budgets", "plan", dir, "--base", "HEAD~1")
	if want := "Comparing " + dir + " with HEAD~1:budgets.\n" + wantPlanBody; code != exitOK || out != want {
		t.Errorf("-base HEAD~1: code %d stderr %q, got:\n%s\nwant:\n%s", code, errOut, out, want)
	}
	code, out, _ = runCLI(t, "budgets", "plan", dir, "-base", "HEAD")
	if code != exitOK || !strings.Contains(out, "No changes.") {
		t.Errorf("-base HEAD: code %d\n%s", code, out)
	}

	// At HEAD~2 the directory did not exist: every leaf is added.
	code, out, errOut = runCLI(t, "budgets", "plan", dir, "-base", "HEAD~2", "-json")
	var p plan
	if err := json.Unmarshal([]byte(out), &p); code != exitOK || err != nil {
		t.Fatalf("-base HEAD~2: code %d err %v stderr %q", code, err, errOut)
	}
	if !p.BaseAbsent || p.Added != 4 || p.Removed != 0 || p.Changed != 0 || p.Base != "HEAD~2:budgets" {
		t.Errorf("-base HEAD~2: %+v", p)
	}

	code, _, errOut = runCLI(t, "budgets", "plan", dir, "-base", "no-such-branch")
	if code != exitInvalid || !strings.Contains(errOut, `-base "no-such-branch" is neither an existing directory nor a revision`) {
		t.Errorf("bad revision: code %d stderr %q", code, errOut)
	}
}

func TestBudgetsPlanInvalidRevision(t *testing.T) {
	r := newGitRepo(t)
	r.commit("broken budgets", map[string]string{"a.hcl": "budget \"ai2\" {\n  budget \"x\" { shares = 1 }\n}\n"})
	r.commit("fixed", map[string]string{"a.hcl": "budget \"ai2\" {\n  budget \"x\" { share = 1 }\n}\n"})
	code, _, errOut := runCLI(t, "budgets", "plan", filepath.Join(r.dir, "budgets"), "-base", "HEAD~1")
	if code != exitInvalid || !strings.Contains(errOut, "HEAD~1:budgets/a.hcl:2:16: budget \"ai2/x\": unknown attribute \"shares\"") ||
		!strings.Contains(errOut, "Error: the base HEAD~1:budgets is not a valid budget tree (2 problems)") {
		t.Errorf("code %d stderr %q", code, errOut)
	}
}
