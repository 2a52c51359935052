// Package budgets owns allot's model of GPU-time budgets: the immutable budget
// Tree with its normalized and effective shares, the usage and demand Ledger,
// owed time, and the hierarchical (Fair Tree) fair-share order.
//
// It is pure: standard library only, no I/O, no clocks, no goroutines. Time
// always comes in as a value. Decoding budget files is the hcl package's job.
//
// # Formulas
//
// Shares: a node's Normalized share is its declared share over the sum of its
// siblings' (1 for the root); its Effective share is the product of
// Normalized along its path ("olmo 70 under prior 50" → 0.5 × 0.7 = 35%).
//
// Ledger windows: a bucket belongs to [from, to) when its start lies in it.
//
// Fair-share order (Slurm's fair_tree): for a node with siblings, S is its
// Normalized share, u its window usage (the sum of its leaves'), T the sum of
// u over it and its siblings, U = u/T (0 when T = 0) and the Level Fairshare
// LF = S/U (+Inf when U = 0). At every level siblings are ordered by LF,
// higher first, ties by path; the leaf order is a depth-first walk of that.
// Siblings are compared exactly, as share_a·u_b against share_b·u_a. A
// sibling over its share (U > S, LF < 1) therefore never outranks one under
// it (LF > 1), nor do any of its leaves. A leaf at Position p (0 = first) of
// N has Metric (N − p)/N, in (0, 1], higher = more owed; its UsageShare is
// its usage over all leaves' usage and ServedRatio = UsageShare / Effective.
//
// Owed time: the report window is cut at UTC hour boundaries; for each leaf
// and period h, owed_h = min(round(Effective × capacity GPUs × seconds(h)),
// demand_h), delivered_h = charged GPU-seconds. The published ratio is
// Σ_h min(delivered_h, owed_h) / Σ_h owed_h (1 when nothing is owed); internal
// nodes sum their children's owed, delivered and credited time.
package budgets
