package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/allot-sched/allot/hcl"
	"github.com/allot-sched/allot/overlay/client"
)

// budgetsApplyCommand sends a validated budget tree to the server, with the
// git revision and file digests it came from.
func budgetsApplyCommand() *cli.Command {
	return &cli.Command{
		Name:      "apply",
		Usage:     "validate a budget directory and make it the tree in force on the server",
		ArgsUsage: "DIR",
		Flags: append(apiFlags(false), jsonFlag(),
			&cli.StringFlag{Name: "revision", Usage: "revision to record (default: git HEAD of DIR, else a digest of the files)"}),
		Action: func(ctx context.Context, c *cli.Command) error {
			if c.NArg() != 1 {
				return usagef("budgets apply needs exactly one budget directory, e.g. allot budgets apply examples/budgets")
			}
			dir := c.Args().First()
			tree, err := hcl.LoadDir(dir)
			if err != nil {
				printLoadError(c.Root().ErrWriter, err)
				return fmt.Errorf("budget tree in %s is invalid; nothing was applied", dir)
			}
			req := &client.BudgetsApply{Revision: c.String("revision")}
			if req.Digests, err = fileDigests(dir); err != nil {
				return err
			}
			if req.Revision == "" {
				req.Revision = revisionOf(ctx, dir, req.Digests)
			}
			for _, n := range tree.Nodes() {
				req.Budgets = append(req.Budgets, client.BudgetSpec{Path: n.Path, Share: n.Share,
					Description: n.Description, Owners: n.Owners})
			}
			cl, err := apiClient(c)
			if err != nil {
				return err
			}
			res, err := cl.ApplyBudgets(ctx, req)
			if err != nil {
				return apiError(err)
			}
			w := c.Root().Writer
			if c.Bool("json") {
				return printJSON(w, map[string]any{"revision": req.Revision, "budgets": len(req.Budgets), "index": res.Index})
			}
			fmt.Fprintf(w, "Applied budget tree %s: %s, %s (raft index %d)\n",
				req.Revision, plural(tree.Len(), "budget"), plural(len(tree.Leaves()), "leaf"), res.Index)
			return nil
		},
	}
}

// fileDigests returns the sha256 of each *.hcl file of dir, by file name.
func fileDigests(dir string) (map[string]string, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.hcl"))
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(names))
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("reading budget file: %w", err)
		}
		sum := sha256.Sum256(b)
		out[filepath.Base(name)] = "sha256:" + hex.EncodeToString(sum[:])
	}
	return out, nil
}

// revisionOf returns DIR's git HEAD (with "-dirty" when the files differ
// from it), or, outside git, a digest over the files' digests.
func revisionOf(ctx context.Context, dir string, digests map[string]string) string {
	if out, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "HEAD").Output(); err == nil {
		rev := strings.TrimSpace(string(out))
		if st, err := exec.CommandContext(ctx, "git", "-C", dir, "status", "--porcelain", "--", ".").Output(); err == nil && len(st) > 0 {
			rev += "-dirty"
		}
		return rev
	}
	names := make([]string, 0, len(digests))
	for n := range digests {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s %s\n", n, digests[n])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:16]
}
