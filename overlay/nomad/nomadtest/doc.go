// Package nomadtest is Nomad for tests: Start runs a real `nomad agent -dev`
// (a one-node server and client on free ports of 127.0.0.1, with a
// temporary data dir and predictable CPU and memory; it skips the test with
// one line when no Nomad binary is found through NOMAD_BIN or PATH), and
// NewNodes serves a fake Nomad's node endpoints for eligibility writes.
package nomadtest
