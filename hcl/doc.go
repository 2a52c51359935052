// Package hcl decodes allot's HCL files: budget trees kept in git (a
// directory of *.hcl files forms one budgets.Tree), the server's
// configuration, and the simulator's cluster files (node pools). It is the
// only package that imports github.com/hashicorp/hcl/v2; every problem it
// finds comes back as a Diagnostic naming file:line:col and saying what
// would be valid.
//
// The server configuration decodes by the `hcl` tags of the types that use
// it (decodeTagged): its policy {} block straight into policy.Config, so
// the pure core declares its own keys and checks them (Validate), and this
// package only places each problem at its key. It must not keep a copy of
// a setting or of a check that belongs to the type it fills.
package hcl
