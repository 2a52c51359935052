// Package contract turns a Nomad job's meta (budget, min_runtime, resumable,
// priority) into its scheduling Contract: allocated or unallocated, the budget
// leaf it is charged to, how long it is protected, and the warnings a user sees
// through `allot explain`.
//
// It is pure: standard library only, no I/O, no clocks. It imports nothing of
// allot's; the caller says which budget paths exist through a LeafCheck
// (and, through Budgets, which leaf a misspelt budget meant).
package contract
