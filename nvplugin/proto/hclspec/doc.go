// Package hclspecpb is the generated Go code for Nomad's config-schema messages
// (wire package hashicorp.nomad.plugins.shared.hclspec).
// Regenerate with `make proto`; never edit the .pb.go files by hand.
package hclspecpb
