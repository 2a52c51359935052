// Package state holds allot's replicated state: go-memdb tables for budgets,
// managed jobs, allocation lifecycles, node drain states, the decision log and
// the priorities last written, plus the usage and demand ledger kept beside
// memdb as a compact budgets.Ledger. Its FSM is the only writer; it is
// deterministic (every timestamp arrives inside the log entry, and a
// reconcile pass arrives as one PassRequest with its drain transitions
// already worked out by the leader) and does no network I/O.
package state
