// Package budgets owns allot's model of GPU-time budgets: the immutable budget
// Tree with its normalized and effective shares, the usage and demand Ledger,
// owed time, and the hierarchical (Fair Tree) fair-share order.
//
// It is pure: standard library only, no I/O, no clocks, no goroutines. Time
// always comes in as a value. Decoding budget files is the hcl package's job.
package budgets
