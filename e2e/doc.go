// Package e2e holds end-to-end tests that run allot against a real
// `nomad agent -dev` bound to 127.0.0.1. The Nomad binary comes from NOMAD_BIN
// or PATH; without one every test skips with a one-line reason.
package e2e
