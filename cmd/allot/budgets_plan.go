package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path"
	"sort"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/hcl"
)

func budgetsPlanCommand() *cli.Command {
	return &cli.Command{
		Name: "plan",
		Usage: "show what a change to budget files would do: leaves added and removed, " +
			"and effective shares that moved, largest first",
		ArgsUsage: "DIR -base REV_OR_DIR",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "base", Usage: "what DIR is compared with: another budget directory, " +
				"or a git revision (HEAD, main, a commit) of the repository holding DIR, read without a checkout"},
			jsonFlag(),
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			if c.NArg() != 1 {
				return usagef("budgets plan takes one budget directory, got %d arguments", c.NArg())
			}
			base := c.String("base")
			if base == "" {
				return usagef("budgets plan needs -base REV_OR_DIR: a git revision such as HEAD or main, or another budget directory")
			}
			dir := c.Args().First()
			next, err := loadTree(c, dir)
			if err != nil {
				return err
			}
			prev, baseName, err := loadBase(ctx, c, dir, base)
			if err != nil {
				return err
			}
			p := plan{Dir: dir, Base: baseName, BaseAbsent: prev == nil, Changes: diffLeaves(prev, next)}
			p.count()
			if c.Bool("json") {
				return writeJSON(c.Root().Writer, p)
			}
			return p.writeText(c.Root().Writer)
		},
	}
}

// leafChange is one line of a plan: a leaf added, removed, or whose
// effective share of the cluster moved. Before and After are fractions;
// DeltaPoints is the move in percentage points.
type leafChange struct {
	Path        string  `json:"path"`
	Action      string  `json:"action"` // "add", "remove" or "change"
	Before      float64 `json:"before"`
	After       float64 `json:"after"`
	DeltaPoints float64 `json:"delta_points"`
}

type plan struct {
	Dir        string       `json:"dir"`
	Base       string       `json:"base"`
	BaseAbsent bool         `json:"base_absent"` // the base revision has no budget files at DIR's path
	Added      int          `json:"added"`
	Removed    int          `json:"removed"`
	Changed    int          `json:"changed"`
	Changes    []leafChange `json:"changes"`
}

// moveEpsilon is the smallest move of an effective share that a plan
// reports: below it the difference is floating-point noise, not a change.
const moveEpsilon = 1e-9

// diffLeaves compares the leaves (the budgets jobs name) of two trees. prev
// may be nil: every leaf is then added. A leaf that became an internal node
// is removed (jobs naming it would run unallocated), and its new children
// are added. Changes are sorted by the size of the move, then by path.
func diffLeaves(prev, next *budgets.Tree) []leafChange {
	changes := []leafChange{}
	if prev != nil {
		for _, l := range prev.Leaves() {
			if !next.IsLeaf(l.Path) {
				changes = append(changes, leafChange{Path: l.Path, Action: "remove", Before: round12(l.Effective)})
			}
		}
	}
	for _, l := range next.Leaves() {
		var before *budgets.Node
		if prev != nil && prev.IsLeaf(l.Path) {
			before, _ = prev.Lookup(l.Path)
		}
		switch {
		case before == nil:
			changes = append(changes, leafChange{Path: l.Path, Action: "add", After: round12(l.Effective)})
		case math.Abs(l.Effective-before.Effective) > moveEpsilon:
			changes = append(changes, leafChange{Path: l.Path, Action: "change", Before: round12(before.Effective), After: round12(l.Effective)})
		}
	}
	for i := range changes {
		changes[i].DeltaPoints = round12((changes[i].After - changes[i].Before) * 100)
	}
	sort.SliceStable(changes, func(i, j int) bool {
		a, b := math.Abs(changes[i].DeltaPoints), math.Abs(changes[j].DeltaPoints)
		if a != b {
			return a > b
		}
		return changes[i].Path < changes[j].Path
	})
	return changes
}

func (p *plan) count() {
	for _, c := range p.Changes {
		switch c.Action {
		case "add":
			p.Added++
		case "remove":
			p.Removed++
		default:
			p.Changed++
		}
	}
}

func (p *plan) writeText(w io.Writer) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "Comparing %s with %s.\n", p.Dir, p.Base)
	if p.BaseAbsent {
		sb.WriteString("The base has no budget files there: every leaf is new.\n")
	}
	if len(p.Changes) == 0 {
		sb.WriteString("\nNo changes. Every leaf keeps its effective share of the cluster.\n")
	} else {
		sb.WriteString("\nLeaves and their effective share of the cluster (+ added, - removed, ~ changed):\n\n")
		width := 0
		for _, c := range p.Changes {
			width = max(width, len(c.Path))
		}
		symbol := map[string]string{"add": "+", "remove": "-", "change": "~"}
		for _, c := range p.Changes {
			before, after := percent(c.Before), percent(c.After)
			switch c.Action {
			case "add":
				before = "-"
			case "remove":
				after = "-"
			}
			fmt.Fprintf(&sb, "  %s %-*s  %6s → %6s  (%s pp)\n", symbol[c.Action], width, c.Path, before, after, formatPoints(c.DeltaPoints))
		}
	}
	fmt.Fprintf(&sb, "\nPlan: %d added, %d removed, %d changed.\n", p.Added, p.Removed, p.Changed)
	_, err := io.WriteString(w, sb.String())
	return err
}

// formatPoints prints a signed move in percentage points, with more digits
// for moves too small to show at one decimal.
func formatPoints(d float64) string {
	if math.Abs(d) < 0.05 {
		return fmt.Sprintf("%+.3f", d)
	}
	return fmt.Sprintf("%+.1f", d)
}

// loadBase loads what DIR is compared with. An existing directory wins over
// a revision of the same name. For a revision it returns a nil tree when the
// revision has no budget files at DIR's path (a new budget directory).
func loadBase(ctx context.Context, c *cli.Command, dir, base string) (*budgets.Tree, string, error) {
	if fi, err := os.Stat(base); err == nil && fi.IsDir() {
		tree, err := loadTree(c, base)
		return tree, base, err
	}
	if strings.HasPrefix(base, "-") {
		return nil, "", usagef("-base %q is neither a directory nor a git revision", base)
	}
	files, name, err := gitBudgetFiles(ctx, dir, base)
	if err != nil {
		return nil, "", err
	}
	if len(files) == 0 {
		return nil, name, nil
	}
	tree, err := hcl.LoadFiles(files)
	if err != nil {
		n := printLoadError(c.Root().ErrWriter, err)
		return nil, "", fmt.Errorf("the base %s is not a valid budget tree (%s)", name, plural(n, "problem"))
	}
	return tree, name, nil
}

// gitBudgetFiles reads the *.hcl files of dir as they were at rev, from the
// git repository holding dir, without a checkout. Files are keyed
// "REV:path/in/repo.hcl", git's own name for them, so diagnostics point at
// the revision. name is "REV:path" of the directory.
func gitBudgetFiles(ctx context.Context, dir, rev string) (map[string][]byte, string, error) {
	top, err := git(ctx, dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, "", fmt.Errorf("-base %q is not a directory, and %s is not in a git repository to read a revision from: %v", rev, dir, err)
	}
	prefix, err := git(ctx, dir, "rev-parse", "--show-prefix")
	if err != nil {
		return nil, "", err
	}
	repo := strings.TrimSpace(string(top))
	rel := strings.TrimSuffix(strings.TrimSpace(string(prefix)), "/")
	name := rev + ":" + rel
	if _, err := git(ctx, repo, "rev-parse", "--verify", "--quiet", rev+"^{commit}"); err != nil {
		return nil, "", fmt.Errorf("-base %q is neither an existing directory nor a revision of the git repository at %s "+
			"(valid: a branch, tag or commit such as HEAD~1 or main, or a directory path)", rev, repo)
	}
	if _, err := git(ctx, repo, "cat-file", "-e", name); err != nil {
		return nil, name, nil // DIR did not exist at rev
	}
	listing, err := git(ctx, repo, "ls-tree", "-z", name)
	if err != nil {
		return nil, "", err
	}
	files := make(map[string][]byte)
	for _, entry := range bytes.Split(listing, []byte{0}) {
		// "<mode> <type> <object>\t<name>"
		meta, file, ok := strings.Cut(string(entry), "\t")
		fields := strings.Fields(meta)
		if !ok || len(fields) != 3 || fields[1] != "blob" || fields[0] == "120000" || path.Ext(file) != ".hcl" {
			continue
		}
		p := path.Join(rel, file)
		src, err := git(ctx, repo, "show", rev+":"+p)
		if err != nil {
			return nil, "", err
		}
		files[rev+":"+p] = src
	}
	return files, name, nil
}

// git runs git in dir and returns its standard output; a failure carries
// git's own message.
func git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("git %s: %s", strings.Join(args, " "), msg)
	}
	return stdout.Bytes(), nil
}
