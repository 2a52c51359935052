// Package basepb is the generated Go code for Nomad's base plugin service
// (wire package hashicorp.nomad.plugins.base.proto), declared in base.proto.
// Regenerate with `make proto`; never edit the .pb.go files by hand.
package basepb
