// Package devicepb is the generated Go code for Nomad's device plugin service
// (wire package hashicorp.nomad.plugins.device), declared in device.proto.
// Regenerate with `make proto`; never edit the .pb.go files by hand.
package devicepb
