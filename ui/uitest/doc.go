// Package uitest seeds an allot server with a small, fixed cluster for the
// web UI's browser tests and screenshots: the example budget tree, 14 days
// of ledger, a queue with fair-share standings, nodes in a drain and a
// reservation, and a job preempted for time slicing and requeued. Every
// figure follows from the formulas here, so tests can assert numbers.
package uitest
