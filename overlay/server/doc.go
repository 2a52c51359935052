// Package server runs an allot server: the raft group that replicates
// overlay/state, the leader's reconcile loop (through the Reconciler
// interface), the HTTP API with its capability tokens (auth.go) and
// forwarding to the leader, and the Prometheus metrics. It owns all the I/O
// that the pure packages must not do, including the raft store on disk:
// checked before raft reads it (bolt_check.go, store.go), checksummed per
// entry (checked_store.go), and tied to the server by data_dir's
// identity.json (identity.go).
package server
