// Package hcl decodes allot's HCL files: budget trees kept in git (a
// directory of *.hcl files forms one budgets.Tree), the server's
// configuration, and the simulator's cluster files (node pools). It is the
// only package that imports github.com/hashicorp/hcl/v2; every problem it
// finds comes back as a Diagnostic naming file:line:col and saying what
// would be valid.
package hcl
