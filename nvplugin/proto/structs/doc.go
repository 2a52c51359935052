// Package structspb is the generated Go code for Nomad's shared attribute and
// statistics messages (wire package hashicorp.nomad.plugins.shared.structs).
// Regenerate with `make proto`; never edit the .pb.go files by hand.
package structspb
