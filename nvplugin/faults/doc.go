// Package faults is the fault-injection state directory of allot-nvml's fake
// mode: one JSON file per fake GPU, written by `allot-nvml inject` and read by
// the fake NVML machine. It holds files only; it never touches NVML.
package faults
