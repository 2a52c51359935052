package hcl

import (
	"fmt"
	"sort"
	"strings"

	hcl2 "github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// Diagnostic is one problem found in an HCL file. Line and Column are
// 1-based; both are 0 for a problem with a whole file or directory (such as
// a directory without budget files).
type Diagnostic struct {
	File    string
	Line    int
	Column  int
	Message string
}

// Pos returns "file:line:col", or just the file when the problem has no line.
func (d Diagnostic) Pos() string {
	if d.Line == 0 {
		return d.File
	}
	return fmt.Sprintf("%s:%d:%d", d.File, d.Line, d.Column)
}

// String returns "file:line:col: message".
func (d Diagnostic) String() string {
	if d.File == "" {
		return d.Message
	}
	return d.Pos() + ": " + d.Message
}

// Diagnostics is every problem found in one load, sorted by file and then
// position. Loaders return it as their error; use errors.As to get at it.
type Diagnostics []Diagnostic

// Error prints one line per problem: "file:line:col: message".
func (ds Diagnostics) Error() string {
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

// sortDiagnostics orders by file, line and column, keeping the order in
// which problems were found among those at the same position.
func sortDiagnostics(ds Diagnostics) {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i], ds[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
}

// at builds a Diagnostic at the start of r.
func at(r hcl2.Range, format string, args ...any) Diagnostic {
	return Diagnostic{File: r.Filename, Line: r.Start.Line, Column: r.Start.Column, Message: fmt.Sprintf(format, args...)}
}

// fromHCL converts the library's diagnostics (syntax errors, expressions that
// cannot be evaluated) into ours, one line each. Warnings are dropped: the
// budget syntax has none worth failing or printing for.
func fromHCL(file string, hds hcl2.Diagnostics) Diagnostics {
	var out Diagnostics
	for _, hd := range hds {
		if hd.Severity != hcl2.DiagError {
			continue
		}
		msg := hd.Summary
		if hd.Detail != "" {
			msg += ": " + hd.Detail
		}
		msg = strings.Join(strings.Fields(msg), " ")
		d := Diagnostic{File: file, Message: msg}
		if hd.Subject != nil {
			d.File = hd.Subject.Filename
			d.Line, d.Column = hd.Subject.Start.Line, hd.Subject.Start.Column
		}
		out = append(out, d)
	}
	return out
}

// dataValue evaluates attribute a of a data file (budgets, cluster)
// without variables or functions. When that fails, or the value is null,
// it returns the problems instead: a null one says that subject's (e.g.
// `pool "a"`) attribute must be want.
func dataValue(a *hclsyntax.Attribute, subject, want string) (cty.Value, Diagnostics) {
	v, hds := a.Expr.Value(nil)
	if hds.HasErrors() {
		return cty.NilVal, fromHCL(a.SrcRange.Filename, hds)
	}
	if v.IsNull() || !v.IsWhollyKnown() {
		return cty.NilVal, Diagnostics{at(a.Expr.Range(), "%s: %s must be %s, got null", subject, a.Name, want)}
	}
	return v, nil
}
