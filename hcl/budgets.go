package hcl

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	hcl2 "github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/allot-sched/allot/budgets"
)

// Budget files.
//
// A directory of *.hcl files (not its subdirectories) forms one tree. Each
// file holds only budget blocks:
//
//	budget "ai2" {                      # a label without '/' at the top level: the root
//	  description = "Institute GPU time"
//	  owners      = ["program-office"]
//	  budget "prior" {                  # nested: a child, named by one segment
//	    share = 50
//	    budget "olmo" { share = 70 }
//	  }
//	}
//
//	budget "ai2/robotics" {             # a label with '/' at the top level: a subtree
//	  share = 50                        # attached to "ai2", declared in any file
//	}
//
// The root takes no share (it has no siblings, so a share would mean
// nothing) and setting one is an error. Every other budget needs a positive,
// finite share, a weight among its siblings; siblings' shares need not sum to
// 100. Names are one or more of a-z, 0-9, '_' and '-'.

// Attribute names of a budget block.
const (
	attrShare       = "share"
	attrDescription = "description"
	attrOwners      = "owners"
	blockBudget     = "budget"
)

var budgetAttrs = []string{attrShare, attrDescription, attrOwners}

// decl is one budget block as decoded, before the tree is assembled.
type decl struct {
	path     string
	def      hcl2.Range // the "budget" keyword
	label    hcl2.Range
	share    float64
	hasShare bool
	shareAt  hcl2.Range
	desc     string
	owners   []string
	topLevel bool
}

// loader accumulates declarations and problems across the files of a tree.
type loader struct {
	decls []*decl
	diags Diagnostics
	// incomplete is set when part of some file could not be read (a syntax
	// error, a block without a usable label): checks that need every
	// declaration (unknown parents, roots) are then skipped, so that one
	// typo does not also report every subtree hanging below it.
	incomplete bool
}

func (l *loader) add(d Diagnostic) { l.diags = append(l.diags, d) }

// LoadDir loads the budget tree declared by the *.hcl files directly in dir.
// Problems with the files come back as Diagnostics; a directory that cannot
// be read comes back as a plain error.
func LoadDir(dir string) (*budgets.Tree, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading budget directory: %w", err)
	}
	files := make(map[string][]byte)
	for _, e := range entries {
		if e.IsDir() || filepath.Ext(e.Name()) != ".hcl" {
			continue
		}
		name := filepath.Join(dir, e.Name())
		src, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("reading budget file: %w", err)
		}
		files[name] = src
	}
	if len(files) == 0 {
		return nil, Diagnostics{{File: dir, Message: "no budget files: the directory has no *.hcl files; " +
			`put at least one file with a root budget in it, e.g. budget "institute" { ... }`}}
	}
	return LoadFiles(files)
}

// LoadFiles loads the budget tree declared by files, keyed by the name to
// use in diagnostics (a path, or "REV:path" for a file read from git). It
// reports every problem of every file, sorted by file and position, as
// Diagnostics.
func LoadFiles(files map[string][]byte) (*budgets.Tree, error) {
	if len(files) == 0 {
		return nil, Diagnostics{{Message: "no budget files given: a budget tree needs at least one *.hcl file with a root budget"}}
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	l := &loader{}
	for _, name := range names {
		l.parseFile(name, files[name])
	}
	l.checkTree(names[0])
	if len(l.diags) > 0 {
		sortDiagnostics(l.diags)
		return nil, l.diags
	}
	specs := make([]budgets.Spec, len(l.decls))
	for i, d := range l.decls {
		specs[i] = budgets.Spec{Path: d.path, Share: d.share, Description: d.desc, Owners: d.owners, Pos: posString(d.def)}
	}
	tree, err := budgets.NewTree(specs)
	if err != nil {
		// The checks above are meant to catch everything NewTree does, with
		// better positions; if one slips through, still report it.
		var ds Diagnostics
		for _, line := range strings.Split(err.Error(), "\n") {
			ds = append(ds, Diagnostic{Message: line})
		}
		return nil, ds
	}
	return tree, nil
}

func posString(r hcl2.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

// parseFile parses one file and decodes its top-level budget blocks.
func (l *loader) parseFile(name string, src []byte) {
	f, hds := hclsyntax.ParseConfig(src, name, hcl2.InitialPos)
	if hds.HasErrors() {
		l.diags = append(l.diags, fromHCL(name, hds)...)
		l.incomplete = true
		return
	}
	body := f.Body.(*hclsyntax.Body)
	for _, a := range sortedAttrs(body) {
		l.add(at(a.NameRange, "attribute %q is not valid at the top level of a budget file; "+
			`a budget file holds only budget blocks: budget "name" { ... }`, a.Name))
	}
	for _, b := range body.Blocks {
		if b.Type != blockBudget {
			l.add(at(b.TypeRange, "block %q is not valid at the top level of a budget file; "+
				`a budget file holds only budget blocks: budget "name" { ... }`, b.Type))
			continue
		}
		l.topBlock(b)
	}
}

// topBlock decodes a top-level budget block: its label is a full path.
func (l *loader) topBlock(b *hclsyntax.Block) {
	label, ok := l.label(b)
	if !ok {
		return
	}
	valid := true
	for _, seg := range strings.Split(label, budgets.Separator) {
		if !budgets.ValidName(seg) {
			l.add(at(b.LabelRanges[0], "budget name %q in %q %s", seg, label, nameRule(seg)))
			valid = false
			break
		}
	}
	l.block(b, label, valid, true)
}

// block decodes a budget block whose full path is path. When valid is false
// (the path has a bad name), the block and its children are still checked for
// problems of their own but are left out of the tree.
func (l *loader) block(b *hclsyntax.Block, path string, valid, top bool) {
	d := &decl{path: path, def: b.TypeRange, label: b.LabelRanges[0], topLevel: top}
	isRoot := top && !strings.Contains(path, budgets.Separator)
	for _, a := range sortedAttrs(b.Body) {
		switch a.Name {
		case attrShare:
			if isRoot {
				l.add(at(a.NameRange, "the root budget %q takes no share (it has no siblings to be weighed against); remove share", path))
				continue
			}
			d.share, d.hasShare = l.shareValue(a, path)
			d.shareAt = a.Expr.Range()
		case attrDescription:
			d.desc = l.stringValue(a, path)
		case attrOwners:
			d.owners = l.ownersValue(a, path)
		default:
			l.add(at(a.NameRange, "budget %q: unknown attribute %q%s; valid attributes are share, description and owners",
				path, a.Name, suggest(a.Name, budgetAttrs)))
		}
	}
	if !isRoot && !d.hasShare && b.Body.Attributes[attrShare] == nil {
		l.add(at(b.TypeRange, "budget %q has no share; add share = N, a positive number weighed against its siblings' shares", path))
	}
	if valid {
		l.decls = append(l.decls, d)
	}
	for _, c := range b.Body.Blocks {
		if c.Type != blockBudget {
			l.add(at(c.TypeRange, "budget %q: unknown block %q%s; only nested budget blocks are valid here: budget \"name\" { ... }",
				path, c.Type, suggest(c.Type, []string{blockBudget})))
			continue
		}
		name, ok := l.label(c)
		if !ok {
			continue
		}
		childValid := valid
		switch {
		case strings.Contains(name, budgets.Separator):
			l.add(at(c.LabelRanges[0], "nested budget label %q contains '/'; inside a budget block give the child's own name "+
				"(budget %q), or declare a full path only at the top level of a file", name, name[strings.LastIndex(name, budgets.Separator)+1:]))
			childValid = false
		case !budgets.ValidName(name):
			l.add(at(c.LabelRanges[0], "budget name %q in %q %s", name, path+budgets.Separator+name, nameRule(name)))
			childValid = false
		}
		l.block(c, path+budgets.Separator+name, childValid, false)
	}
}

// label returns a budget block's single label, reporting blocks with none
// or several.
func (l *loader) label(b *hclsyntax.Block) (string, bool) {
	if len(b.Labels) == 1 {
		return b.Labels[0], true
	}
	l.add(at(b.TypeRange, "a budget block takes exactly one label, its name (budget \"name\" { ... }), got %d", len(b.Labels)))
	l.incomplete = true
	return "", false
}

// nameRule explains the naming rule, with a corrected name when one is obvious.
func nameRule(name string) string {
	msg := "is not valid: a name is one or more of a-z, 0-9, '_' and '-'"
	fixed := strings.Map(func(r rune) rune {
		switch {
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		case r == ' ' || r == '.':
			return '-'
		}
		return r
	}, name)
	if fixed != name && budgets.ValidName(fixed) {
		msg += fmt.Sprintf(" (e.g. %q)", fixed)
	}
	return msg
}

// sortedAttrs returns a body's attributes in source order (the parser keeps
// them in a map).
func sortedAttrs(b *hclsyntax.Body) []*hclsyntax.Attribute {
	attrs := make([]*hclsyntax.Attribute, 0, len(b.Attributes))
	for _, a := range b.Attributes {
		attrs = append(attrs, a)
	}
	sort.Slice(attrs, func(i, j int) bool { return attrs[i].SrcRange.Start.Byte < attrs[j].SrcRange.Start.Byte })
	return attrs
}

// value evaluates an attribute of budget path (dataValue); ok is false when
// it failed or is null (the problem is recorded).
func (l *loader) value(a *hclsyntax.Attribute, path, want string) (cty.Value, bool) {
	v, ds := dataValue(a, fmt.Sprintf("budget %q", path), want)
	l.diags = append(l.diags, ds...)
	return v, len(ds) == 0
}

const shareWant = "a positive finite number (a weight among siblings, e.g. 50)"

func (l *loader) shareValue(a *hclsyntax.Attribute, path string) (float64, bool) {
	v, ok := l.value(a, path, shareWant)
	if !ok {
		return 0, false
	}
	if !v.Type().Equals(cty.Number) {
		l.add(at(a.Expr.Range(), "budget %q: share must be %s, got %s", path, shareWant, v.Type().FriendlyName()))
		return 0, false
	}
	bf := v.AsBigFloat()
	f, _ := bf.Float64()
	if bf.Sign() <= 0 || math.IsInf(f, 0) || f == 0 {
		l.add(at(a.Expr.Range(), "budget %q: share must be %s, got %s", path, shareWant, bf.Text('g', 10)))
		return 0, false
	}
	return f, true
}

func (l *loader) stringValue(a *hclsyntax.Attribute, path string) string {
	const want = "a string"
	v, ok := l.value(a, path, want)
	if !ok {
		return ""
	}
	if !v.Type().Equals(cty.String) {
		l.add(at(a.Expr.Range(), "budget %q: %s must be %s, got %s", path, a.Name, want, v.Type().FriendlyName()))
		return ""
	}
	return v.AsString()
}

func (l *loader) ownersValue(a *hclsyntax.Attribute, path string) []string {
	const want = `a list of non-empty strings, e.g. ["program-office"]`
	v, ok := l.value(a, path, want)
	if !ok {
		return nil
	}
	t := v.Type()
	if !t.IsListType() && !t.IsTupleType() && !t.IsSetType() {
		l.add(at(a.Expr.Range(), "budget %q: owners must be %s, got %s", path, want, t.FriendlyName()))
		return nil
	}
	// Point at the offending element when the list is written out.
	elemRange := func(i int) hcl2.Range {
		if tc, ok := a.Expr.(*hclsyntax.TupleConsExpr); ok && i < len(tc.Exprs) {
			return tc.Exprs[i].Range()
		}
		return a.Expr.Range()
	}
	var owners []string
	i := 0
	for it := v.ElementIterator(); it.Next(); i++ {
		_, e := it.Element()
		if e.IsNull() || !e.Type().Equals(cty.String) || e.AsString() == "" {
			got := "an empty string"
			if e.IsNull() {
				got = "null"
			} else if !e.Type().Equals(cty.String) {
				got = e.Type().FriendlyName()
			}
			l.add(at(elemRange(i), "budget %q: owners[%d] must be a non-empty string, got %s", path, i, got))
			continue
		}
		owners = append(owners, e.AsString())
	}
	return owners
}

// checkTree runs the checks that span files: duplicate paths, subtrees
// attached to undeclared budgets, and the single root. first names the
// first file, where a missing root is reported.
func (l *loader) checkTree(first string) {
	sort.SliceStable(l.decls, func(i, j int) bool { return rangeLess(l.decls[i].def, l.decls[j].def) })
	byPath := make(map[string]*decl, len(l.decls))
	kept := l.decls[:0]
	for _, d := range l.decls {
		if prev, dup := byPath[d.path]; dup {
			l.add(at(d.label, "budget %q is declared twice (first at %s); declare each path once, in one file", d.path, posString(prev.def)))
			continue
		}
		byPath[d.path] = d
		kept = append(kept, d)
	}
	l.decls = kept
	if l.incomplete {
		return
	}
	var root *decl
	for _, d := range l.decls {
		if strings.Contains(d.path, budgets.Separator) {
			continue
		}
		if root == nil {
			root = d
			continue
		}
		l.add(at(d.label, "budget %q is a second root (the root is %q, declared at %s); a tree has one root: "+
			"nest this budget inside it or declare it as budget %q", d.path, root.path, posString(root.def), root.path+"/"+d.path))
	}
	if root == nil {
		l.add(Diagnostic{File: first, Message: `no root budget in any file: declare exactly one top-level budget whose label has no '/', e.g. budget "institute" { ... }`})
	}
	for _, d := range l.decls {
		i := strings.LastIndex(d.path, budgets.Separator)
		if i < 0 || !d.topLevel {
			continue // the root, or a nested block whose parent encloses it
		}
		parent := d.path[:i]
		if _, ok := byPath[parent]; !ok {
			l.add(at(d.label, "budget %q is attached to %q, which no file declares; %s", d.path, parent, nearestHint(parent, root, byPath)))
		}
	}
}

// nearestHint says what to do about an undeclared parent path: declare it
// below its closest declared ancestor, or attach below the actual root.
func nearestHint(path string, root *decl, byPath map[string]*decl) string {
	for p := path; ; {
		i := strings.LastIndex(p, budgets.Separator)
		if i < 0 {
			break
		}
		p = p[:i]
		if d, ok := byPath[p]; ok {
			return fmt.Sprintf("the nearest declared budget is %q (%s): declare %q or fix the path%s",
				p, posString(d.def), path, suggestSibling(path, byPath))
		}
	}
	if root == nil {
		return "no part of that path is declared either: declare the root budget first"
	}
	return fmt.Sprintf("no part of that path is declared either; paths start at the root %q, e.g. budget \"%s/...\"", root.path, root.path)
}

// suggestSibling returns ` (did you mean "a/b"?)` for the declared path
// closest to path among those with the same parent, within two edits.
func suggestSibling(path string, byPath map[string]*decl) string {
	i := strings.LastIndex(path, budgets.Separator)
	if i < 0 {
		return ""
	}
	parent := path[:i+1]
	var siblings []string
	for p := range byPath {
		if strings.HasPrefix(p, parent) && !strings.Contains(p[len(parent):], budgets.Separator) {
			siblings = append(siblings, p)
		}
	}
	sort.Strings(siblings) // the first of equally close ones wins, whatever the map order
	return suggest(path, siblings)
}

func rangeLess(a, b hcl2.Range) bool {
	if a.Filename != b.Filename {
		return a.Filename < b.Filename
	}
	return a.Start.Byte < b.Start.Byte
}

// suggest returns ` (did you mean "x"?)` for the valid name closest to got,
// when one is within two edits (budgets.Nearest).
func suggest(got string, valid []string) string {
	best := budgets.Nearest(got, valid)
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}
