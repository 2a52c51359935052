// Package health decides whether a GPU is healthy from what NVML reported about
// it: critical XID events, uncorrectable ECC errors, row remapping and page
// retirement state, a lost GPU, NVML errors. It is pure: observations and the time
// come in as values; no I/O, no clock, no goroutines.
package health
