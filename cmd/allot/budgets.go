package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/hcl"
)

func init() { extraCommands = append(extraCommands, budgetsCommand) }

func budgetsCommand() *cli.Command {
	return &cli.Command{
		Name:  "budgets",
		Usage: "validate, show, plan and apply budget trees kept as HCL files in git; list the leaves jobs may name",
		Commands: []*cli.Command{
			budgetsValidateCommand(),
			budgetsShowCommand(),
			budgetsListCommand(),
			budgetsPlanCommand(),
			budgetsApplyCommand(),
		},
		Action: needSubcommand,
	}
}

func jsonFlag() cli.Flag {
	return &cli.BoolFlag{Name: "json", Usage: "print machine-readable JSON instead of text"}
}

func budgetsValidateCommand() *cli.Command {
	return &cli.Command{
		Name:      "validate",
		Usage:     "check budget directories and print every problem with its file:line:col",
		ArgsUsage: "DIR...",
		Action: func(_ context.Context, c *cli.Command) error {
			dirs := c.Args().Slice()
			if len(dirs) == 0 {
				return usagef("budgets validate needs at least one budget directory, e.g. allot budgets validate examples/budgets")
			}
			stdout, stderr := c.Root().Writer, c.Root().ErrWriter
			problems, bad := 0, 0
			for _, dir := range dirs {
				tree, err := hcl.LoadDir(dir)
				if err != nil {
					problems += printLoadError(stderr, err)
					bad++
					continue
				}
				fmt.Fprintf(stdout, "%s: %s, %s: ok\n", dir, plural(tree.Len(), "budget"), plural(len(tree.Leaves()), "leaf"))
			}
			if bad > 0 {
				return fmt.Errorf("%s in %d of %d budget directories", plural(problems, "problem"), bad, len(dirs))
			}
			return nil
		},
	}
}

// printLoadError prints a loader error one problem per line and returns how
// many problems it held.
func printLoadError(w io.Writer, err error) int {
	var ds hcl.Diagnostics
	if errors.As(err, &ds) {
		for _, d := range ds {
			fmt.Fprintln(w, d.String())
		}
		return len(ds)
	}
	fmt.Fprintln(w, err)
	return 1
}

// plural returns "1 budget", "2 budgets"; leaf becomes leaves.
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	if word == "leaf" {
		return strconv.Itoa(n) + " leaves"
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// loadTree loads one budget directory for show and plan, printing its
// problems to stderr.
func loadTree(c *cli.Command, dir string) (*budgets.Tree, error) {
	tree, err := hcl.LoadDir(dir)
	if err != nil {
		n := printLoadError(c.Root().ErrWriter, err)
		return nil, fmt.Errorf("%s is not a valid budget tree (%s; run allot budgets validate %s)", dir, plural(n, "problem"), dir)
	}
	return tree, nil
}

func budgetsShowCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "print a budget tree with each budget's share, normalized share and effective share of the cluster",
		ArgsUsage: "DIR",
		Flags:     []cli.Flag{jsonFlag()},
		Action: func(_ context.Context, c *cli.Command) error {
			if c.NArg() != 1 {
				return usagef("budgets show takes one budget directory, got %d arguments", c.NArg())
			}
			tree, err := loadTree(c, c.Args().First())
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return writeJSON(c.Root().Writer, treeToJSON(tree))
			}
			return writeTreeText(c.Root().Writer, tree)
		},
	}
}

// writeTreeText draws the tree with each budget's declared share, its share
// of its parent and, after the arrow, its effective share of the cluster:
// "olmo   70   70.0% →  35.0%".
func writeTreeText(w io.Writer, tree *budgets.Tree) error {
	nodes := tree.Nodes()
	labels := make([]string, len(nodes))
	width := len("BUDGET")
	for i, n := range nodes {
		labels[i] = treePrefix(n) + n.Name
		width = max(width, len([]rune(labels[i])))
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-*s  %7s  %9s    %10s\n", width, "BUDGET", "SHARE", "OF PARENT", "OF CLUSTER")
	for i, n := range nodes {
		share, norm := "-", "-"
		if n.Parent != nil {
			share, norm = formatShare(n.Share), percent(n.Normalized)
		}
		fmt.Fprintf(&sb, "%-*s  %7s  %9s  → %10s\n", width, labels[i], share, norm, percent(n.Effective))
	}
	fmt.Fprintf(&sb, "\n%s, %s\n", plural(tree.Len(), "budget"), plural(len(tree.Leaves()), "leaf"))
	_, err := io.WriteString(w, sb.String())
	return err
}

// treePrefix returns the box-drawing prefix of n: a continuation column for
// each ancestor below the root, then n's own branch.
func treePrefix(n *budgets.Node) string {
	if n.Parent == nil {
		return ""
	}
	prefix := "├── "
	if isLastChild(n) {
		prefix = "└── "
	}
	for a := n.Parent; a.Parent != nil; a = a.Parent {
		if isLastChild(a) {
			prefix = "    " + prefix
		} else {
			prefix = "│   " + prefix
		}
	}
	return prefix
}

func isLastChild(n *budgets.Node) bool {
	sib := n.Parent.Children
	return sib[len(sib)-1] == n
}

func formatShare(s float64) string { return strconv.FormatFloat(s, 'g', 6, 64) }

// percent prints a fraction as a percentage with one decimal, and says so
// when a non-zero share would otherwise print as 0.0%.
func percent(f float64) string {
	if f > 0 && f < 0.0005 {
		return "<0.1%"
	}
	return strconv.FormatFloat(f*100, 'f', 1, 64) + "%"
}

// budgetJSON is the stable JSON form of a budget for `budgets show -json`.
// Shares of parent and cluster are fractions (0.35 for 35%).
type budgetJSON struct {
	Path        string        `json:"path"`
	Name        string        `json:"name"`
	Share       *float64      `json:"share"` // null for the root, which takes none
	Normalized  float64       `json:"normalized"`
	Effective   float64       `json:"effective"`
	Description string        `json:"description"`
	Owners      []string      `json:"owners"`
	Leaf        bool          `json:"leaf"`
	DeclaredAt  string        `json:"declared_at"`
	Children    []*budgetJSON `json:"children"`
}

type treeJSON struct {
	Budgets int         `json:"budgets"`
	Leaves  int         `json:"leaves"`
	Root    *budgetJSON `json:"root"`
}

func treeToJSON(tree *budgets.Tree) treeJSON {
	return treeJSON{Budgets: tree.Len(), Leaves: len(tree.Leaves()), Root: nodeToJSON(tree.Root())}
}

func nodeToJSON(n *budgets.Node) *budgetJSON {
	j := &budgetJSON{
		Path: n.Path, Name: n.Name, Normalized: round12(n.Normalized), Effective: round12(n.Effective),
		Description: n.Description, Owners: append([]string{}, n.Owners...), Leaf: n.IsLeaf(),
		DeclaredAt: n.Pos, Children: []*budgetJSON{},
	}
	if n.Parent != nil {
		share := n.Share
		j.Share = &share
	}
	for _, c := range n.Children {
		j.Children = append(j.Children, nodeToJSON(c))
	}
	return j
}

// round12 drops floating-point noise (0.15000000000000002) so that the JSON
// of equal trees is equal text.
func round12(f float64) float64 { return math.Round(f*1e12) / 1e12 }

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
