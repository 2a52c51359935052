// Package hcl decodes allot's HCL files: budget trees kept in git (a
// directory of *.hcl files forms one budgets.Tree) and, later, server
// configuration. It is the only package that imports
// github.com/hashicorp/hcl/v2; every problem it finds comes back as a
// Diagnostic naming file:line:col and saying what would be valid.
package hcl
