// Package server runs an allot server: the raft group that replicates
// overlay/state, the leader's reconcile loop (through the Reconciler
// interface), the HTTP API with its token checks and forwarding to the
// leader, and the Prometheus metrics. It owns all the I/O that the pure
// packages must not do.
package server
