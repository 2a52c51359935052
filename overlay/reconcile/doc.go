// Package reconcile is allot's reconcile pass: the controller between
// Nomad and the policy. Given the Nomad adapter's view (overlay/nomad) and
// the replicated state (overlay/state) it builds the policy's Snapshot,
// decides with the policy's memory between passes (policy.Carry), hands the
// plan to the adapter as Ops, learns which writes landed, and returns the
// record of the pass for the server to replicate (server.Outcome): managed
// jobs, allocation lifecycles the ledger is charged from, node states and
// drain observations, priorities written, decisions and the queue.
//
// It is where Nomad's plain types meet the policy's and the state's: it
// converts both ways, and decides nothing itself (every choice is the
// policy's). Reconciler implements server.Reconciler and server.Waker.
package reconcile
