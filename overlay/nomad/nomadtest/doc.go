// Package nomadtest starts a real `nomad agent -dev` for tests: a one-node
// server and client on free ports of 127.0.0.1, with a temporary data dir and
// predictable CPU and memory. It skips the test with one line when no Nomad
// binary is found through NOMAD_BIN or PATH.
package nomadtest
